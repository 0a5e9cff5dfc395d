// quant-iq4_xs: ggml non-linear 4-bit IQ4_XS (CUDA kernels: matmul_iq4_xs.fatbin and
// matmul8_iq4_xs.fatbin beside the plugin) and IQ4_NL (CPU).
#include "quant_plugin_common.hpp"

namespace {
using memra::quant_plugin::Kernels;
using memra::quant_plugin::SchemeDef;
const SchemeDef kSchemes[] = {
    // A 4-bit target: the head and attn_v in q6_k, rows that break the block in q8_0 (llama.cpp's _M mix).
    {"iq4_xs", 256, 136, MEMRA_PROMPT_ROUNDED_WEIGHTS, Kernels::block, true, true, MEMRA_REPACK_QUANT, "q6_k", "q8_0"},
    {"iq4_nl", 32, 18, MEMRA_PROMPT_EXACT, Kernels::none},
};
}  // namespace

MEMRA_DEFINE_QUANT_PLUGIN("iq4_xs", "ggml non-linear 4-bit IQ4_XS and IQ4_NL", kSchemes, "iq4_xs", "iq4_nl")
