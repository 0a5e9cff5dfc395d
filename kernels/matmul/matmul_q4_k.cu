// Matmul module for Q4_K weights: dequant-on-the-fly GEMV, tiled over tokens.
#include "kernels/matmul/gemv.cuh"

MEMRA_DEFINE_GEMV(q4_k, memra::cuda::SchemeQ4_K)
