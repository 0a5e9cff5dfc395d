// Matmul module for Q4_0 weights: dequant-on-the-fly GEMV, tiled over tokens.
#include "kernels/matmul/gemv.cuh"
#include "plugins/quant-common/block_units.cuh"

MEMRA_DEFINE_GEMV(q4_0, memra::cuda::SchemeQ4_0)

// The prompt GEMM's dequantiser and the embedding gather.
#include "plugins/quant-q4_0/q4_0_entries.cuh"
