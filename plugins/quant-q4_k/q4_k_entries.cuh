// quant-q4_k's prompt-GEMM dequantiser and embedding gather (kernels/matmul/
// scheme_entries.cuh), in both of its modules (matmul_q4_k, matmul8_q4_k); tests/cuda's
// emulators include this file too.
#pragma once
#include "kernels/matmul/scheme_entries.cuh"
#include "plugins/quant-common/block_units.cuh"

MEMRA_DEFINE_GEMM_DEQUANT(q4_k, memra::cuda::Octets<memra::cuda::SchemeQ4_K>)
MEMRA_DEFINE_EMBEDDING(q4_k, memra::cuda::SchemeQ4_K)
