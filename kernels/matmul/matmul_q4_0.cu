// Matmul module for Q4_0 weights: dequant-on-the-fly GEMV, tiled over tokens.
#include "kernels/matmul/gemv.cuh"

MEMRA_DEFINE_GEMV(q4_0, memra::cuda::SchemeQ4_0)
