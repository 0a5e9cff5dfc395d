// Matmul module for IQ4_XS weights: dequant-on-the-fly GEMV, tiled over tokens.
#include "kernels/matmul/gemv.cuh"
#include "plugins/quant-common/block_units.cuh"

MEMRA_DEFINE_GEMV(iq4_xs, memra::cuda::SchemeIQ4_XS)

// The prompt GEMM's dequantiser and the embedding gather.
#include "plugins/quant-iq4_xs/iq4_xs_entries.cuh"
