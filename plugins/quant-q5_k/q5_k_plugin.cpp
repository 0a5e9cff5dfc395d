// quant-q5_k: ggml k-quant Q5_K
#include "quant_plugin_common.hpp"

MEMRA_DEFINE_QUANT_PLUGIN("q5_k", "ggml k-quant Q5_K", "q5_k")
