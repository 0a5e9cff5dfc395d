// quant-q8_0: ggml Q8_0 blocks (32 x int8, fp16 scale)
#include "quant_plugin_common.hpp"

MEMRA_DEFINE_QUANT_PLUGIN("q8_0", "ggml Q8_0 blocks (32 x int8, fp16 scale)", "q8_0")
