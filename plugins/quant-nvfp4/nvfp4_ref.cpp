#include "nvfp4_ref.hpp"

#include <cmath>
#include <cstring>

#include "repack/quant/fp_convert.hpp"

namespace memra::nvfp4 {

uint64_t row_bytes(int64_t cols) {
  if (cols <= 0 || cols % kBlockElems != 0) return 0;
  return static_cast<uint64_t>(cols / kBlockElems) * static_cast<uint64_t>(kBlockBytes);
}

void dequantize_row(const uint8_t* row, int64_t cols, float* dst) {
  for (int64_t b = 0; b < cols / kBlockElems; ++b) {
    const uint8_t* blk = row + b * kBlockBytes;
    float g;
    std::memcpy(&g, blk, 4);
    for (int64_t e = 0; e < kBlockElems; ++e) {
      const float s = quant::f8_e4m3_to_f32(blk[kScalesAt + e / kSubBlock]);
      const int code = (blk[kCodesAt + e / 2] >> (4 * (e & 1))) & 0x0f;
      const float v = (code & 8) ? -kE2M1[code & 7] : kE2M1[code & 7];
      const float m = v * s;  // exact
      dst[b * kBlockElems + e] = m * g;
    }
  }
}

uint8_t e2m1_code(float v) {
  const float a = std::fabs(v);
  const uint8_t i = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3 : a <= 2.5f ? 4 : a < 3.5f ? 5 : a <= 5.0f ? 6 : 7;
  return static_cast<uint8_t>(i | (v < 0.0f && i != 0 ? 8 : 0));
}

void quantize_rows(const float* src, int64_t rows, int64_t cols, uint8_t* dst) {
  const uint64_t rb = row_bytes(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = src + r * cols;
    uint8_t* out = dst + r * rb;
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) amax = std::fmax(amax, std::fabs(x[c]));
    float g = amax / (6.0f * 448.0f);
    if (!(g > 0.0f) || !std::isfinite(g)) g = 1.0f;
    for (int64_t b = 0; b < cols / kBlockElems; ++b) {
      uint8_t* blk = out + b * kBlockBytes;
      std::memcpy(blk, &g, 4);
      std::memset(blk + kCodesAt, 0, kBlockBytes - kCodesAt);
      for (int64_t j = 0; j < kBlockElems / kSubBlock; ++j) {
        const float* xs = x + b * kBlockElems + j * kSubBlock;
        float bmax = 0.0f;
        for (int64_t i = 0; i < kSubBlock; ++i) bmax = std::fmax(bmax, std::fabs(xs[i]));
        const uint8_t s8 = quant::f32_to_f8_e4m3(bmax / 6.0f / g);
        blk[kScalesAt + j] = s8;
        const float sf = quant::f8_e4m3_to_f32(s8) * g;
        for (int64_t i = 0; i < kSubBlock; ++i) {
          const uint8_t code = sf > 0.0f ? e2m1_code(xs[i] / sf) : 0;
          const int64_t e = j * kSubBlock + i;
          blk[kCodesAt + e / 2] = static_cast<uint8_t>(blk[kCodesAt + e / 2] | (code << (4 * (e & 1))));
        }
      }
    }
  }
}

}  // namespace memra::nvfp4
