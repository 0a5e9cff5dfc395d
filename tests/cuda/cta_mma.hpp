// The 16-bit tensor-core mma and ldmatrix on a fiber CTA (cta_fibers.hpp), for the kernel emulators
// (cta_emulator.hpp's users and prefill_attention_emulator.hpp).
#pragma once

#include <cstdint>
#include <cstring>

#include "repack/quant/fp_convert.hpp"
#include "tests/cuda/cta_fibers.hpp"

namespace memra::cuda_emu {

// mma.m16n8k16.row.col.f32 with 16-bit operands (bf16, or f16 when `f16`), as the running
// thread of `cta` issues it, from the PTX ISA's fragment layout: lane L = 4g + t holds A
// (g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..) in a[0..3]; B (k 2t..2t+1, n g) in
// b0, (k 2t+8.., n g) in b1; C/D (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1); the low half
// holds the lower k / column. d = c, then the 16 exact products added in k order: the tensor
// cores' own order is unspecified, so emulated results are held to bounds and to each other,
// never to the device bit for bit.
inline void mma_m16n8k16(Cta& cta, float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool f16) {
  const auto value = [f16](uint32_t h) {
    if (f16) return memra::quant::fp16_to_f32(static_cast<uint16_t>(h & 0xffffu));
    const uint32_t bits = (h & 0xffffu) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  };
  struct Frag {
    uint32_t a[4], b[2];
  } all[32];
  cta.warp_gather(Frag{{a[0], a[1], a[2], a[3]}, {b0, b1}}, all);
  const int l = cta.tid() & 31;
  const int g = l >> 2, t = l & 3;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    float acc = d[e];
    for (int k = 0; k < 16; ++k) {
      const uint32_t aw = all[(row & 7) * 4 + (k & 7) / 2].a[(row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)];
      const uint32_t bw = all[col * 4 + (k & 7) / 2].b[k >= 8 ? 1 : 0];
      acc = acc + value((k & 1) ? aw >> 16 : aw) * value((k & 1) ? bw >> 16 : bw);
    }
    d[e] = acc;
  }
}

// ldmatrix.sync.aligned.m8n8.x4(.trans).b16 as the running thread of `cta` issues it with
// `row` its row's address: lane l names row l % 8 of matrix l / 8 and receives, per matrix
// k, row l / 4's elements 2 (l % 4) and + 1 (.trans: rows 2 (l % 4) and + 1 of column l / 4).
inline void ldmatrix_x4(Cta& cta, uint32_t (&r)[4], const void* row, bool trans) {
  const void* rows[32];
  cta.warp_gather(row, rows);
  const int l = cta.tid() & 31;
  const auto half_at = [](const void* p, int col) {
    uint16_t h;
    std::memcpy(&h, static_cast<const unsigned char*>(p) + 2 * col, 2);
    return static_cast<uint32_t>(h);
  };
  for (int k = 0; k < 4; ++k) {
    uint32_t e0, e1;
    if (trans) {
      e0 = half_at(rows[8 * k + 2 * (l % 4)], l / 4);
      e1 = half_at(rows[8 * k + 2 * (l % 4) + 1], l / 4);
    } else {
      e0 = half_at(rows[8 * k + l / 4], 2 * (l % 4));
      e1 = half_at(rows[8 * k + l / 4], 2 * (l % 4) + 1);
    }
    r[k] = e0 | (e1 << 16);
  }
}

}  // namespace memra::cuda_emu
