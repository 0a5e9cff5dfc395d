// Matmul module for Q5_K weights: dequant-on-the-fly GEMV, tiled over tokens.
#include "kernels/matmul/gemv.cuh"

MEMRA_DEFINE_GEMV(q5_k, memra::cuda::SchemeQ5_K)
