// NVRTC compile-and-cache. libnvrtc is opened with dlopen on first use, so the
// backend module loads on machines that have the driver but no toolkit (then only
// NVRTC features are unavailable). CUBINs are cached under the cache directory,
// keyed by (source hash, options, architecture, NVRTC version); the cache file holds
// the full key and is checked on read. Internal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common/result.hpp"

namespace memra::backend::cuda {

struct NvrtcRequest {
  std::string name;                  // for logs and the cache file name
  std::string source;
  std::vector<std::string> options;  // the architecture is added by the compiler
};

class NvrtcCompiler {
 public:
  NvrtcCompiler(std::string cache_dir, std::string arch) : cache_dir_(std::move(cache_dir)), arch_(std::move(arch)) {}

  // True when libnvrtc could be opened (opens it on first call).
  bool available();
  std::string unavailable_reason() const { return unavailable_reason_; }
  // CUBIN for the request; from the cache when present.
  Result<std::vector<char>> compile(const NvrtcRequest& request);
  bool last_cache_hit() const { return last_cache_hit_; }
  const std::string& cache_dir() const { return cache_dir_; }
  std::string version() const;

 private:
  std::string cache_dir_;
  std::string arch_;
  std::string unavailable_reason_;
  bool tried_ = false;
  bool last_cache_hit_ = false;
};

// 64-bit FNV-1a (cache keys; collisions are caught by the key stored in the file).
uint64_t fnv1a64(const std::string& s, uint64_t h = 1469598103934665603ull);

}  // namespace memra::backend::cuda
