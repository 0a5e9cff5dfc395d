#include "kernels/matmul/fp8_act_ref.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "repack/quant/fp_convert.hpp"

namespace memra::ref {
namespace {

// 2^e as a float, e in [-126, 127] (every E and 120 - E here).
float pow2(int e) {
  const uint32_t bits = static_cast<uint32_t>(e + 127) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

int fp8_group_exponent(float amax) {
  uint32_t bits;
  std::memcpy(&bits, &amax, 4);
  const int be = static_cast<int>((bits >> 23) & 0xffu);
  return std::max(-7, std::min(190 - be, 127));
}

bool prepare_act_fp8(const float* x, int64_t m, int64_t cols, uint16_t* plane, float* back) {
  if (cols % kFp8ActGroup != 0) return false;
  const int64_t groups = cols / kFp8ActGroup;
  for (int64_t t = 0; t < m; ++t)
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + t * cols + g * kFp8ActGroup;
      uint16_t* pg = plane + t * cols + g * kFp8ActGroup;
      float amax = 0.0f;
      for (int i = 0; i < kFp8ActGroup; ++i) amax = std::fmax(amax, std::fabs(xg[i]));
      const int e = fp8_group_exponent(amax);
      const float up = pow2(e);
      for (int i = 0; i < kFp8ActGroup; ++i) {
        static constexpr int kSlot[4] = {0, 2, 1, 3};  // the quad's pair order
        pg[(i & ~3) + kSlot[i & 3]] = quant::f32_to_bf16(xg[i] * up);
      }
      back[t * groups + g] = pow2(120 - e);
    }
  return true;
}

}  // namespace memra::ref
