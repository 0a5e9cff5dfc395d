// quant-q8_0: ggml Q8_0 blocks, 32 int8 codes and an f16 scale (CUDA kernels:
// matmul_q8_0.fatbin, matmul8_q8_0.fatbin beside the plugin).
#include "quant_plugin_common.hpp"

namespace {
using memra::quant_plugin::Kernels;
using memra::quant_plugin::SchemeDef;
const SchemeDef kSchemes[] = {
    {"q8_0", 32, 34, MEMRA_PROMPT_ROUNDED_WEIGHTS, Kernels::block, true, false, MEMRA_REPACK_QUANT},
};
}  // namespace

MEMRA_DEFINE_QUANT_PLUGIN("q8_0", "ggml Q8_0 blocks (32 x int8, fp16 scale)", kSchemes, "q8_0")
