// quant-fp8: float8 e4m3fn with float32 scales per 128-column group (memra fp8 layout v1:
// per row, cols/128 f32 scales then the codes). CUDA kernels: matmul_fp8.fatbin beside the
// plugin (matmul_fp8.cu): bf16s128 activations on the tensor-core GEMV, prompt rows on the
// GEMM over the weights dequantised and rounded to bf16.
#include "quant_plugin_common.hpp"

namespace {
using memra::quant_plugin::Kernels;
using memra::quant_plugin::SchemeDef;
const SchemeDef kSchemes[] = {
    // fp8 checkpoints keep the embeddings and the head in 16-bit (as published ones do).
    {"fp8", 128, 132, MEMRA_PROMPT_ROUNDED_WEIGHTS, Kernels::fp8, false, true, MEMRA_REPACK_QUANT, nullptr, nullptr,
     MEMRA_KEEP_TOKEN_EMBD | MEMRA_KEEP_HEAD},
};
}  // namespace

MEMRA_DEFINE_QUANT_PLUGIN("fp8", "float8 e4m3fn with float32 scales per 128-column group (memra fp8 layout v1)", kSchemes, "fp8")
