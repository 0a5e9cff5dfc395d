// quant-iq4_xs: ggml non-linear 4-bit IQ4_XS and IQ4_NL
#include "quant_plugin_common.hpp"

MEMRA_DEFINE_QUANT_PLUGIN("iq4_xs", "ggml non-linear 4-bit IQ4_XS and IQ4_NL", "iq4_xs", "iq4_nl")
