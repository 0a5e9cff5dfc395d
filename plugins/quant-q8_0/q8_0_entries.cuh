// quant-q8_0's prompt-GEMM dequantiser and embedding gather (kernels/matmul/
// scheme_entries.cuh), in both of its modules (matmul_q8_0, matmul8_q8_0); tests/cuda's
// emulators include this file too.
#pragma once
#include "kernels/matmul/scheme_entries.cuh"
#include "plugins/quant-common/block_units.cuh"

MEMRA_DEFINE_GEMM_DEQUANT(q8_0, memra::cuda::Octets<memra::cuda::SchemeQ8_0>)
MEMRA_DEFINE_EMBEDDING(q8_0, memra::cuda::SchemeQ8_0)
