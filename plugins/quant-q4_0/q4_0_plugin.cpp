// quant-q4_0: ggml legacy 4/5-bit blocks. Q4_0 has CUDA kernels (matmul_q4_0.fatbin,
// matmul8_q4_0.fatbin beside the plugin); Q4_1, Q5_0 and Q5_1 run on the CPU.
#include "quant_plugin_common.hpp"

namespace {
using memra::quant_plugin::Kernels;
using memra::quant_plugin::SchemeDef;
const SchemeDef kSchemes[] = {
    // A 4-bit target: the head and attn_v in q6_k, rows that break the block in q8_0.
    {"q4_0", 32, 18, MEMRA_PROMPT_ROUNDED_WEIGHTS, Kernels::block, true, true, MEMRA_REPACK_QUANT, "q6_k", "q8_0"},
    {"q4_1", 32, 20, MEMRA_PROMPT_EXACT, Kernels::none},
    {"q5_0", 32, 22, MEMRA_PROMPT_EXACT, Kernels::none},
    {"q5_1", 32, 24, MEMRA_PROMPT_EXACT, Kernels::none},
};
}  // namespace

MEMRA_DEFINE_QUANT_PLUGIN("q4_0", "ggml legacy 4/5-bit blocks: Q4_0, Q4_1, Q5_0, Q5_1", kSchemes, "q4_0", "q4_1", "q5_0", "q5_1")
