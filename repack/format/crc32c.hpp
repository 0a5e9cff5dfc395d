// CRC-32C (Castagnoli; iSCSI, ext4, Btrfs): the per-tensor checksum of the .memra format.
// Uses the CPU's crc32 instruction where present (SSE4.2; ~8 GB/s per core, against ~1.4
// GB/s for SHA-256 with SHA extensions), else a table. See docs/FORMAT.md for why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace memra::format {

class Crc32c {
 public:
  void update(const void* data, size_t n);
  uint32_t value() const { return ~state_; }
  std::string hex() const;  // 8 lower-case hex digits, most significant first

 private:
  uint32_t state_ = 0xffffffffu;
};

uint32_t crc32c(const void* data, size_t n);
std::string crc32c_hex(const void* data, size_t n);
// The portable table path alone (the oracle tests compare both paths).
uint32_t crc32c_table(const void* data, size_t n);

}  // namespace memra::format
