// Matmul module for Q5_K weights: whole super-blocks per lane group (gemv_kquant.cuh).
#include "plugins/quant-common/gemv_kquant.cuh"

MEMRA_DEFINE_GEMV_KQUANT(q5_k, true)

// The prompt GEMM's dequantiser and the embedding gather.
#include "plugins/quant-q5_k/q5_k_entries.cuh"
