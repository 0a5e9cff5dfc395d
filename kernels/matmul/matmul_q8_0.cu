// Matmul module for Q8_0 weights: dequant-on-the-fly GEMV, tiled over tokens.
#include "kernels/matmul/gemv.cuh"

MEMRA_DEFINE_GEMV(q8_0, memra::cuda::SchemeQ8_0)
