// Matmul module for Q5_K weights: whole super-blocks per lane group (gemv_kquant.cuh).
#include "kernels/matmul/gemv_kquant.cuh"

MEMRA_DEFINE_GEMV_KQUANT(q5_k, true)
