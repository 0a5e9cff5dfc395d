// Matmul module for Q6_K weights: dequant-on-the-fly GEMV, tiled over tokens.
#include "kernels/matmul/gemv.cuh"
#include "plugins/quant-common/block_units.cuh"

MEMRA_DEFINE_GEMV(q6_k, memra::cuda::SchemeQ6_K)

// The prompt GEMM's dequantiser and the embedding gather.
#include "plugins/quant-q6_k/q6_k_entries.cuh"
