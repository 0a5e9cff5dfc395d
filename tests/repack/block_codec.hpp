// Test-side, spec-level codecs for GGUF quant blocks: unpack the codes and scales
// of a block into plain arrays and pack them back, written bit by bit from the
// layout descriptions (independently of memra_quant_ref). The transcode tests use
// them to move gguf-py-verified blocks into other layouts whose dequantization
// must then come out bit-identical.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

namespace memra::testing {

inline uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline void wr16(uint8_t* p, uint16_t v) { p[0] = static_cast<uint8_t>(v); p[1] = static_cast<uint8_t>(v >> 8); }
inline int get_bit(const uint8_t* bytes, int bit) { return (bytes[bit / 8] >> (bit % 8)) & 1; }
inline void set_bit(uint8_t* bytes, int bit, int v) {
  if (v) bytes[bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
  else bytes[bit / 8] &= static_cast<uint8_t>(~(1u << (bit % 8)));
}

// Q4_K: 144 bytes = d, dmin, 12 scale bytes, 128 code bytes.
struct Q4K {
  uint16_t d = 0, dmin = 0;
  std::array<int, 8> sc{}, m{};
  std::array<int, 256> q{};  // 0..15

  static Q4K unpack(const uint8_t* b) {
    Q4K k;
    k.d = rd16(b);
    k.dmin = rd16(b + 2);
    const uint8_t* s = b + 4;
    for (int j = 0; j < 8; ++j) {
      if (j < 4) {
        k.sc[j] = s[j] & 0x3f;
        k.m[j] = s[j + 4] & 0x3f;
      } else {
        k.sc[j] = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        k.m[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
      }
    }
    for (int e = 0; e < 256; ++e) {
      const int sub = e / 32, l = e % 32;
      const uint8_t byte = b[16 + 32 * (sub / 2) + l];
      k.q[e] = sub % 2 == 0 ? (byte & 0x0f) : (byte >> 4);
    }
    return k;
  }
  void pack(uint8_t* b) const {
    std::memset(b, 0, 144);
    wr16(b, d);
    wr16(b + 2, dmin);
    uint8_t* s = b + 4;
    for (int j = 0; j < 4; ++j) {
      s[j] = static_cast<uint8_t>((sc[j] & 0x3f) | ((sc[j + 4] >> 4) << 6));
      s[j + 4] = static_cast<uint8_t>((m[j] & 0x3f) | ((m[j + 4] >> 4) << 6));
      s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
    }
    for (int e = 0; e < 256; ++e) {
      const int sub = e / 32, l = e % 32;
      uint8_t& byte = b[16 + 32 * (sub / 2) + l];
      byte |= static_cast<uint8_t>(sub % 2 == 0 ? q[e] : q[e] << 4);
    }
  }
};

// Q6_K: 210 bytes = ql[128], qh[64], int8 scales[16], d.
struct Q6K {
  uint16_t d = 0;
  std::array<int, 16> sc{};
  std::array<int, 256> q{};  // 0..63 (value uses q - 32)

  static Q6K unpack(const uint8_t* b) {
    Q6K k;
    k.d = rd16(b + 208);
    for (int g = 0; g < 16; ++g) k.sc[g] = static_cast<int8_t>(b[192 + g]);
    for (int e = 0; e < 256; ++e) {
      const int half = e / 128, r = e % 128;
      const int low = (b[64 * half + r % 64] >> (4 * (r / 64))) & 0x0f;
      const int high = (b[128 + 32 * half + r % 32] >> (2 * (r / 32))) & 3;
      k.q[e] = low | (high << 4);
    }
    return k;
  }
  void pack(uint8_t* b) const {
    std::memset(b, 0, 210);
    for (int e = 0; e < 256; ++e) {
      const int half = e / 128, r = e % 128;
      b[64 * half + r % 64] |= static_cast<uint8_t>((q[e] & 0x0f) << (4 * (r / 64)));
      b[128 + 32 * half + r % 32] |= static_cast<uint8_t>((q[e] >> 4) << (2 * (r / 32)));
    }
    for (int g = 0; g < 16; ++g) b[192 + g] = static_cast<uint8_t>(static_cast<int8_t>(sc[g]));
    wr16(b + 208, d);
  }
};

// Q5_K: 176 bytes = d, dmin, scales (as Q4_K), qh[32], qs[128].
inline void pack_q5k(const Q4K& low, const std::array<int, 256>& high_bit, uint8_t* b) {
  uint8_t tmp[144];
  low.pack(tmp);
  std::memset(b, 0, 176);
  std::memcpy(b, tmp, 16);                // d, dmin, scales
  std::memcpy(b + 48, tmp + 16, 128);     // low nibbles
  for (int e = 0; e < 256; ++e) set_bit(b + 16, 8 * (e % 32) + e / 32, high_bit[e]);  // bit e/32 of qh[e%32]
}

// 32-element blocks: element j < 16 in the low nibble of byte j, j >= 16 in the high nibble of byte j-16.
inline void pack_nibbles32(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
}
inline void pack_q4_0(uint16_t d, const int* q, uint8_t* b) { wr16(b, d); pack_nibbles32(q, b + 2); }
inline void pack_q4_1(uint16_t d, uint16_t m, const int* q, uint8_t* b) { wr16(b, d); wr16(b + 2, m); pack_nibbles32(q, b + 4); }
inline void pack_q5_0(uint16_t d, const int* q, uint8_t* b) {
  wr16(b, d);
  std::memset(b + 2, 0, 4);
  for (int j = 0; j < 32; ++j) set_bit(b + 2, j, (q[j] >> 4) & 1);
  pack_nibbles32(q, b + 6);
}
inline void pack_q5_1(uint16_t d, uint16_t m, const int* q, uint8_t* b) {
  wr16(b, d);
  wr16(b + 2, m);
  std::memset(b + 4, 0, 4);
  for (int j = 0; j < 32; ++j) set_bit(b + 4, j, (q[j] >> 4) & 1);
  pack_nibbles32(q, b + 8);
}
inline void pack_q8_0(uint16_t d, const int* q, uint8_t* b) {
  wr16(b, d);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(q[j]));
}
inline void pack_iq4_nl(uint16_t d, const int* q, uint8_t* b) { pack_q4_0(d, q, b); }

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin.
inline void pack_q2k(uint16_t d, uint16_t dmin, const int* scale, const int* min, const int* q, uint8_t* b) {
  std::memset(b, 0, 84);
  for (int g = 0; g < 16; ++g) b[g] = static_cast<uint8_t>((scale[g] & 0x0f) | ((min[g] & 0x0f) << 4));
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, shift = (e / 32) % 4, l = e % 32;
    b[16 + 32 * half + l] |= static_cast<uint8_t>((q[e] & 3) << (2 * shift));
  }
  wr16(b + 80, d);
  wr16(b + 82, dmin);
}

// Q3_K: hmask[32], qs[64], scales[12] (6-bit, stored +32), d. q in -4..3.
inline void pack_q3k(uint16_t d, const int* scale /* -32..31 */, const int* q, uint8_t* b) {
  std::memset(b, 0, 110);
  for (int e = 0; e < 256; ++e) {
    const int low = q[e] & 3;           // q = low - 4 * (1 - hbit)
    const int hbit = q[e] >= 0 ? 1 : 0;
    set_bit(b, 8 * (e % 32) + e / 32, hbit);
    const int half = e / 128, shift = (e / 32) % 4, l = e % 32;
    b[32 + 32 * half + l] |= static_cast<uint8_t>(low << (2 * shift));
  }
  for (int g = 0; g < 16; ++g) {
    const int s = scale[g] + 32;  // 0..63
    if (g < 8) b[96 + g] |= static_cast<uint8_t>(s & 0x0f);
    else b[96 + g - 8] |= static_cast<uint8_t>((s & 0x0f) << 4);
    b[96 + 8 + g % 4] |= static_cast<uint8_t>((s >> 4) << (2 * (g / 4)));
  }
  wr16(b + 108, d);
}

// IQ4_XS: d, scales_h (u16), scales_l[4], qs[128].
struct IQ4XS {
  uint16_t d = 0;
  std::array<int, 8> ls{};    // -32..31
  std::array<int, 256> q{};   // 0..15 (codebook index)
  static IQ4XS unpack(const uint8_t* b) {
    IQ4XS x;
    x.d = rd16(b);
    const uint16_t sh = rd16(b + 2);
    for (int g = 0; g < 8; ++g) x.ls[g] = (((b[4 + g / 2] >> (4 * (g % 2))) & 0x0f) | (((sh >> (2 * g)) & 3) << 4)) - 32;
    for (int e = 0; e < 256; ++e) {
      const int g = e / 32, j = e % 32;
      const uint8_t byte = b[8 + 16 * g + j % 16];
      x.q[e] = j < 16 ? (byte & 0x0f) : (byte >> 4);
    }
    return x;
  }
  void pack(uint8_t* b) const {
    std::memset(b, 0, 136);
    wr16(b, d);
    uint16_t sh = 0;
    for (int g = 0; g < 8; ++g) {
      const int s = ls[g] + 32;
      b[4 + g / 2] |= static_cast<uint8_t>((s & 0x0f) << (4 * (g % 2)));
      sh |= static_cast<uint16_t>((s >> 4) << (2 * g));
    }
    wr16(b + 2, sh);
    for (int g = 0; g < 8; ++g) pack_nibbles32(&q[32 * g], b + 8 + 16 * g);
  }
};

}  // namespace memra::testing
