#include "repack/format/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace memra::format {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // reflected Castagnoli polynomial

// Slicing-by-8 tables for the portable path.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? kPoly : 0u);
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xffu];
  }
};

uint32_t update_table(uint32_t crc, const uint8_t* p, size_t n) {
  static const Tables tables;
  const auto& t = tables.t;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);  // little-endian hosts only, like the rest of the format code
    w ^= crc;
    crc = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^ t[4][(w >> 24) & 0xff] ^
          t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^ t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xffu];
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t update_hw(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

bool have_hw() {
  static const bool v = __builtin_cpu_supports("sse4.2");
  return v;
}
#endif

}  // namespace

void Crc32c::update(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
#if defined(__x86_64__)
  if (have_hw()) {
    state_ = update_hw(state_, p, n);
    return;
  }
#endif
  state_ = update_table(state_, p, n);
}

std::string Crc32c::hex() const {
  static const char kHex[] = "0123456789abcdef";
  const uint32_t v = value();
  std::string s(8, '0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = kHex[(v >> (28 - 4 * i)) & 15u];
  return s;
}

uint32_t crc32c(const void* data, size_t n) {
  Crc32c c;
  c.update(data, n);
  return c.value();
}

uint32_t crc32c_table(const void* data, size_t n) { return ~update_table(0xffffffffu, static_cast<const uint8_t*>(data), n); }

std::string crc32c_hex(const void* data, size_t n) {
  Crc32c c;
  c.update(data, n);
  return c.hex();
}

}  // namespace memra::format
