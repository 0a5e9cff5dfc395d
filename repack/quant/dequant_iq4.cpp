// IQ4_NL and IQ4_XS: 4-bit codes into a fixed non-linear codebook.
#include "repack/quant/block_read.hpp"
#include "repack/quant/dequant.hpp"

namespace memra::quant {
using detail::load_f16;
using detail::load_u16;

const int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};

// IQ4_NL block (18 bytes): f16 d, nibbles laid out as Q4_0. y = d * kvalues[q].
void dequantize_iq4_nl(const void* src, float* dst, int64_t nb) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < nb; ++i, b += 18, dst += 32) {
    const float d = load_f16(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(kIq4nlValues[qs[j] & 0x0f]);
      dst[j + 16] = d * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
    }
  }
}

// IQ4_XS block (136 bytes): f16 d, u16 scales_h (2 high bits per sub-block),
// scales_l[4] (4 low bits per sub-block), qs[128]. Sub-block g (32 elements) has
// scale ls = (low | high<<4) - 32 and takes its codes from qs[16g..16g+15] the way
// IQ4_NL does. y = (d*ls) * kvalues[q].
void dequantize_iq4_xs(const void* src, float* dst, int64_t nb) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < nb; ++i, b += 136, dst += 256) {
    const float d = load_f16(b);
    const uint16_t scales_h = load_u16(b + 2);
    const uint8_t* scales_l = b + 4;
    const uint8_t* qs = b + 8;
    for (int g = 0; g < 8; ++g) {
      const int lo = (scales_l[g / 2] >> (4 * (g % 2))) & 0x0f;
      const int hi = (scales_h >> (2 * g)) & 3;
      const float dl = d * static_cast<float>((lo | (hi << 4)) - 32);
      const uint8_t* q = qs + 16 * g;
      float* y = dst + 32 * g;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4nlValues[q[j] & 0x0f]);
        y[j + 16] = dl * static_cast<float>(kIq4nlValues[q[j] >> 4]);
      }
    }
  }
}

}  // namespace memra::quant
