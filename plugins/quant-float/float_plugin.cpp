// quant-float: float32, float16 and bfloat16 weights (carried as is). CUDA kernels:
// matmul_float.fatbin beside the plugin (matmul_float.cu).
#include "quant_plugin_common.hpp"

namespace {
using memra::quant_plugin::Kernels;
using memra::quant_plugin::SchemeDef;
// f32 and f16 weights keep f32 activations on every row (prompt rows: the split GEMM);
// bf16 weights take bf16 activations on every row.
const SchemeDef kSchemes[] = {
    {"f32", 1, 4, MEMRA_PROMPT_EXACT, Kernels::float_rows, false, true, MEMRA_REPACK_TENSOR},
    {"f16", 1, 2, MEMRA_PROMPT_EXACT, Kernels::float_rows, false, true, MEMRA_REPACK_QUANT},
    {"bf16", 1, 2, MEMRA_PROMPT_BF16, Kernels::bf16, false, true, MEMRA_REPACK_QUANT},
};
}  // namespace

MEMRA_DEFINE_QUANT_PLUGIN("float", "float32, float16 and bfloat16 weights (carried as is)", kSchemes, "f32", "f16", "bf16")
