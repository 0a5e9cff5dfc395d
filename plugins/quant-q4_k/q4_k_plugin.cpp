// quant-q4_k: ggml k-quants Q4_K (and the low-bit Q2_K, Q3_K)
#include "quant_plugin_common.hpp"

MEMRA_DEFINE_QUANT_PLUGIN("q4_k", "ggml k-quants Q4_K (and the low-bit Q2_K, Q3_K)", "q4_k", "q2_k", "q3_k")
