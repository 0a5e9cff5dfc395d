// quant-nvfp4's prompt-GEMM dequantiser and embedding gather (kernels/matmul/scheme_entries.cuh).
#pragma once
#include "kernels/matmul/scheme_entries.cuh"
#include "plugins/quant-nvfp4/nvfp4_units.cuh"

MEMRA_DEFINE_GEMM_DEQUANT(nvfp4, memra::cuda::Octets<memra::cuda::SchemeNVFP4>)
MEMRA_DEFINE_EMBEDDING(nvfp4, memra::cuda::SchemeNVFP4)
