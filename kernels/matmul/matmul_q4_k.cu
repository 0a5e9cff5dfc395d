// Matmul module for Q4_K weights: whole super-blocks per lane group (gemv_kquant.cuh).
#include "kernels/matmul/gemv_kquant.cuh"

MEMRA_DEFINE_GEMV_KQUANT(q4_k, false)
