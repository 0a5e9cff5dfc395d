// quant-iq4_xs's prompt-GEMM dequantiser and embedding gather (kernels/matmul/
// scheme_entries.cuh), in both of its modules (matmul_iq4_xs, matmul8_iq4_xs); tests/cuda's
// emulators include this file too.
#pragma once
#include "kernels/matmul/scheme_entries.cuh"
#include "plugins/quant-common/block_units.cuh"

MEMRA_DEFINE_GEMM_DEQUANT(iq4_xs, memra::cuda::Octets<memra::cuda::SchemeIQ4_XS>)
MEMRA_DEFINE_EMBEDDING(iq4_xs, memra::cuda::SchemeIQ4_XS)
