#include "host/backend/cuda/fatbin_info.hpp"

#include <cstring>

namespace memra::backend {
namespace {

// Container header: u32 magic, u16 version, u16 header size, u64 size of what follows.
// Entry header: u16 kind (1 PTX, 2 ELF), u16, u32 entry header size, u64 padded
// payload size, ..., u32 arch at offset 28. Layout as cuobjdump reads it.
constexpr uint32_t kMagic = 0xBA55ED50u;

template <class T>
T read(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

bool parse_fatbin(const void* data, size_t size, std::vector<FatbinEntry>& out, std::string& error) {
  out.clear();
  const auto* base = static_cast<const uint8_t*>(data);
  size_t pos = 0;
  while (pos + 16 <= size) {
    if (read<uint32_t>(base + pos) != kMagic) {
      if (out.empty()) {
        error = "not a fatbin (bad magic)";
        return false;
      }
      break;  // trailing padding
    }
    const uint16_t header_size = read<uint16_t>(base + pos + 6);
    const uint64_t body = read<uint64_t>(base + pos + 8);
    const size_t end = pos + header_size + body;
    if (header_size < 16 || end > size) {
      error = "truncated fatbin container";
      return false;
    }
    size_t e = pos + header_size;
    while (e + 32 <= end) {
      const uint16_t kind = read<uint16_t>(base + e);
      const uint32_t entry_size = read<uint32_t>(base + e + 4);
      const uint64_t payload = read<uint64_t>(base + e + 8);
      if (entry_size < 32 || e + entry_size + payload > end) {
        error = "malformed fatbin entry";
        return false;
      }
      FatbinEntry fe;
      fe.ptx = kind == 1;
      fe.arch = read<uint32_t>(base + e + 28);
      if (kind == 1 || kind == 2) out.push_back(fe);
      e += entry_size + payload;
    }
    pos = end;
  }
  if (out.empty()) {
    error = "fatbin holds no code entries";
    return false;
  }
  return true;
}

bool fatbin_has_sass(const std::vector<FatbinEntry>& entries, uint32_t arch) {
  for (const FatbinEntry& e : entries)
    if (!e.ptx && e.arch == arch) return true;
  return false;
}

bool fatbin_has_ptx_for(const std::vector<FatbinEntry>& entries, uint32_t arch) {
  for (const FatbinEntry& e : entries)
    if (e.ptx && e.arch <= arch) return true;
  return false;
}

std::string fatbin_describe(const std::vector<FatbinEntry>& entries) {
  std::string s;
  for (const FatbinEntry& e : entries) {
    if (!s.empty()) s += ' ';
    s += (e.ptx ? "compute_" : "sm_") + std::to_string(e.arch);
  }
  return s;
}

}  // namespace memra::backend
