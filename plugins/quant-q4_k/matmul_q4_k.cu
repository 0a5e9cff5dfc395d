// Matmul module for Q4_K weights: whole super-blocks per lane group (gemv_kquant.cuh).
#include "plugins/quant-common/gemv_kquant.cuh"

MEMRA_DEFINE_GEMV_KQUANT(q4_k, false)

// The prompt GEMM's dequantiser and the embedding gather.
#include "plugins/quant-q4_k/q4_k_entries.cuh"
