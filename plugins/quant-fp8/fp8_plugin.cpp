// quant-fp8: float8 e4m3fn with float32 scales per 128-column group (memra fp8 layout v1:
// per row, cols/128 f32 scales then the codes). CUDA kernels: matmul_fp8.fatbin beside the
// plugin (matmul_fp8.cu): bf16s128 activations on the tensor-core GEMV, prompt rows on the
// GEMM over the weights dequantised and rounded to bf16. Published FP8 checkpoints (128x128
// block scales, per-channel or per-tensor scales) are read as they are (fp8_import.cpp).
#include "quant_plugin_common.hpp"

namespace memra::quant_plugin {
memra_status fp8_import_tensor(memra_plugin_ctx* ctx, memra_import_args* args);
}

namespace {
using memra::quant_plugin::Kernels;
using memra::quant_plugin::SchemeDef;
const SchemeDef kSchemes[] = {
    // fp8 checkpoints keep the embeddings and the head in 16-bit (as published ones do).
    {"fp8", 128, 132, MEMRA_PROMPT_ROUNDED_WEIGHTS, Kernels::fp8, false, true, MEMRA_REPACK_QUANT, nullptr, nullptr,
     MEMRA_KEEP_TOKEN_EMBD | MEMRA_KEEP_HEAD},
};
namespace q = memra::quant_plugin;
const memra_quant_api kFp8Api = {MEMRA_QUANT_API_STRUCT_SIZE, q::weight_bytes, q::quantize,         q::dequantize, q::matmul,
                                 q::register_kernels,         q::scheme_info,  q::fp8_import_tensor};
}  // namespace

MEMRA_DEFINE_QUANT_PLUGIN_API("fp8", "float8 e4m3fn with float32 scales per 128-column group (memra fp8 layout v1)", kSchemes,
                              kFp8Api, "fp8")
