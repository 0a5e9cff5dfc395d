// quant-q4_k: ggml k-quants Q4_K (CUDA kernels: matmul_q4_k.fatbin, matmul8_q4_k.fatbin
// beside the plugin) and the low-bit Q2_K, Q3_K (CPU).
#include "quant_plugin_common.hpp"

namespace {
using memra::quant_plugin::Kernels;
using memra::quant_plugin::SchemeDef;
const SchemeDef kSchemes[] = {
    // A 4-bit target: the head and attn_v in q6_k, rows that break the block in q8_0 (Q4_K_M).
    {"q4_k", 256, 144, MEMRA_PROMPT_ROUNDED_WEIGHTS, Kernels::block, true, false, MEMRA_REPACK_QUANT, "q6_k", "q8_0"},
    {"q2_k", 256, 84, MEMRA_PROMPT_EXACT, Kernels::none},
    {"q3_k", 256, 110, MEMRA_PROMPT_EXACT, Kernels::none},
};
}  // namespace

MEMRA_DEFINE_QUANT_PLUGIN("q4_k", "ggml k-quants Q4_K (and the low-bit Q2_K, Q3_K)", kSchemes, "q4_k", "q2_k", "q3_k")
