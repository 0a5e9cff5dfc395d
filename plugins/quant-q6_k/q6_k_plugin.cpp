// quant-q6_k: ggml k-quant Q6_K (CUDA kernels: matmul_q6_k.fatbin, matmul8_q6_k.fatbin
// beside the plugin).
#include "quant_plugin_common.hpp"

namespace {
using memra::quant_plugin::Kernels;
using memra::quant_plugin::SchemeDef;
const SchemeDef kSchemes[] = {
    {"q6_k", 256, 210, MEMRA_PROMPT_ROUNDED_WEIGHTS, Kernels::block, true, true, MEMRA_REPACK_QUANT, nullptr, "q8_0"},
};
}  // namespace

MEMRA_DEFINE_QUANT_PLUGIN("q6_k", "ggml k-quant Q6_K", kSchemes, "q6_k")
