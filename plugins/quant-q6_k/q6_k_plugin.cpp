// quant-q6_k: ggml k-quant Q6_K
#include "quant_plugin_common.hpp"

MEMRA_DEFINE_QUANT_PLUGIN("q6_k", "ggml k-quant Q6_K", "q6_k")
