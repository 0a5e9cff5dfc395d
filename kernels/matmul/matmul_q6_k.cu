// Matmul module for Q6_K weights: dequant-on-the-fly GEMV, tiled over tokens.
#include "kernels/matmul/gemv.cuh"

MEMRA_DEFINE_GEMV(q6_k, memra::cuda::SchemeQ6_K)
