// Reads the entry table of an NVIDIA fatbin (what nvcc --fatbin writes) without the
// driver: which SASS (ELF) architectures and which PTX it carries. The CUDA backend
// uses it to refuse, or run loudly degraded, when only PTX would serve the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace memra::backend {

struct FatbinEntry {
  bool ptx = false;   // false: an ELF cubin (SASS)
  uint32_t arch = 0;  // e.g. 90 for sm_90 / sm_90a / compute_90, 120 for sm_120a
};

// False (with a reason) when the data is not a well-formed fatbin.
bool parse_fatbin(const void* data, size_t size, std::vector<FatbinEntry>& out, std::string& error);

bool fatbin_has_sass(const std::vector<FatbinEntry>& entries, uint32_t arch);
bool fatbin_has_ptx_for(const std::vector<FatbinEntry>& entries, uint32_t arch);  // PTX of arch <= device's
// "sm_90 sm_120 compute_90" for messages.
std::string fatbin_describe(const std::vector<FatbinEntry>& entries);

}  // namespace memra::backend
