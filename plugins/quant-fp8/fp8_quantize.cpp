// memra fp8 layout v1: per row, cols/128 float32 scales, then cols e4m3fn bytes.
// A group's scale is amax/448, so its largest magnitude lands on e4m3's largest finite
// value and nothing saturates; each value is x/scale rounded to nearest even.
#include <cfloat>
#include <cmath>
#include <cstring>

#include "repack/quant/fp_convert.hpp"
#include "plugins/quant-common/quantize.hpp"
#include "plugins/quant-common/quantize_internal.hpp"

namespace memra::quant {

void quantize_fp8_row(const float* x, void* dst, int64_t cols) {
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t groups = cols / kFp8Group;
  uint8_t* q = out + groups * 4;
  for (int64_t g = 0; g < groups; ++g) {
    const float* v = x + g * kFp8Group;
    float amax = 0.0f;
    for (int64_t i = 0; i < kFp8Group; ++i) amax = std::fmax(amax, std::fabs(v[i]));
    float scale = amax / 448.0f;
    // A scale in float32's subnormal range loses precision (and 1/scale overflows): such
    // groups are ~1e-36 and are stored as zero.
    if (!(scale >= FLT_MIN)) scale = 0.0f;
    std::memcpy(out + g * 4, &scale, 4);
    for (int64_t i = 0; i < kFp8Group; ++i) q[g * kFp8Group + i] = scale == 0.0f ? 0 : f32_to_f8_e4m3(v[i] / scale);
  }
}

}  // namespace memra::quant
