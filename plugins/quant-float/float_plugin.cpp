// quant-float: float32, float16 and bfloat16 weights (carried as is)
#include "quant_plugin_common.hpp"

MEMRA_DEFINE_QUANT_PLUGIN("float", "float32, float16 and bfloat16 weights (carried as is)", "f32", "f16", "bf16")
