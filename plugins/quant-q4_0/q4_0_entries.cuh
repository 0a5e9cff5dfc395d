// quant-q4_0's prompt-GEMM dequantiser and embedding gather (kernels/matmul/
// scheme_entries.cuh), in both of its modules (matmul_q4_0, matmul8_q4_0); tests/cuda's
// emulators include this file too.
#pragma once
#include "kernels/matmul/scheme_entries.cuh"
#include "plugins/quant-common/block_units.cuh"

MEMRA_DEFINE_GEMM_DEQUANT(q4_0, memra::cuda::Octets<memra::cuda::SchemeQ4_0>)
MEMRA_DEFINE_EMBEDDING(q4_0, memra::cuda::SchemeQ4_0)
