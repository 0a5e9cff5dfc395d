// quant-q5_k: ggml k-quant Q5_K (CUDA kernels: matmul_q5_k.fatbin, matmul8_q5_k.fatbin
// beside the plugin).
#include "quant_plugin_common.hpp"

namespace {
using memra::quant_plugin::Kernels;
using memra::quant_plugin::SchemeDef;
const SchemeDef kSchemes[] = {
    // A 5-bit target: the head and attn_v in q6_k, rows that break the block in q8_0 (Q5_K_M).
    {"q5_k", 256, 176, MEMRA_PROMPT_ROUNDED_WEIGHTS, Kernels::block, true, false, MEMRA_REPACK_QUANT, "q6_k", "q8_0"},
};
}  // namespace

MEMRA_DEFINE_QUANT_PLUGIN("q5_k", "ggml k-quant Q5_K", kSchemes, "q5_k")
