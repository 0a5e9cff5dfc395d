// quant-fp8: float8 e4m3fn with float32 scales per 128-column group (memra fp8 layout v1)
#include "quant_plugin_common.hpp"

MEMRA_DEFINE_QUANT_PLUGIN("fp8", "float8 e4m3fn with float32 scales per 128-column group (memra fp8 layout v1)", "fp8")
