// Matmul module for IQ4_XS weights: dequant-on-the-fly GEMV, tiled over tokens.
#include "kernels/matmul/gemv.cuh"

MEMRA_DEFINE_GEMV(iq4_xs, memra::cuda::SchemeIQ4_XS)
