// quant-q5_k's prompt-GEMM dequantiser and embedding gather (kernels/matmul/
// scheme_entries.cuh), in both of its modules (matmul_q5_k, matmul8_q5_k); tests/cuda's
// emulators include this file too.
#pragma once
#include "kernels/matmul/scheme_entries.cuh"
#include "plugins/quant-common/block_units.cuh"

MEMRA_DEFINE_GEMM_DEQUANT(q5_k, memra::cuda::Octets<memra::cuda::SchemeQ5_K>)
MEMRA_DEFINE_EMBEDDING(q5_k, memra::cuda::SchemeQ5_K)
