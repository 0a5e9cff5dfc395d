// quant-q4_0: ggml legacy 4/5-bit blocks: Q4_0, Q4_1, Q5_0, Q5_1
#include "quant_plugin_common.hpp"

MEMRA_DEFINE_QUANT_PLUGIN("q4_0", "ggml legacy 4/5-bit blocks: Q4_0, Q4_1, Q5_0, Q5_1", "q4_0", "q4_1", "q5_0", "q5_1")
