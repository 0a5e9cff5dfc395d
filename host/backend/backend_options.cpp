// BackendOptions::apply_environment: the debugging switches of docs/FLAGS.md, read
// once when a backend opens (never per step or per op).
#include <cstdlib>
#include <cstring>

#include "host/backend/backend.hpp"

namespace memra::backend {
namespace {
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}
}  // namespace

void BackendOptions::apply_environment() {
  if (const char* p = env("MEMRA_CUDA_BACKEND"); p && module_path.empty()) module_path = p;
  if (const char* v = env("MEMRA_CUDA_GRAPH")) step_graphs = std::strcmp(v, "0") != 0;
  if (const char* v = env("MEMRA_CUDA_SYNC")) sync_each_op = std::strcmp(v, "0") != 0;
  if (const char* v = env("MEMRA_DEVICE_SAMPLING")) device_sampling = std::strcmp(v, "0") != 0;
  if (const char* v = env("MEMRA_CUBLASLT"); v && cublaslt.empty()) cublaslt = v;
  if (const char* v = env("MEMRA_CUDA_PDL")) programmatic_launch = std::strcmp(v, "0") != 0;
  if (const char* v = env("MEMRA_CUDA_FUSE")) fuse_decode = std::strcmp(v, "0") != 0;
  if (const char* v = env("MEMRA_CUDA_EARLY_KV")) early_kv_reads = std::strcmp(v, "0") != 0;
  if (const char* v = env("MEMRA_CUDA_DEQUANT_OVERLAP")) overlap_dequant = std::strcmp(v, "0") != 0;  // (off by default)
}

}  // namespace memra::backend
