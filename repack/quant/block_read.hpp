// Little-endian field reads from (possibly unaligned) quant blocks. Internal.
#pragma once

#include <cstdint>
#include <cstring>

#include "repack/quant/fp_convert.hpp"

namespace memra::quant::detail {

inline uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
inline float load_f16(const uint8_t* p) { return fp16_to_f32(load_u16(p)); }

}  // namespace memra::quant::detail
