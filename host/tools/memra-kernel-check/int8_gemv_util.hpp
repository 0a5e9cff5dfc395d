// Shared by check_int8_gemv.cpp and bench_int8_gemv.cpp: device buffers and kernel
// launches through the CUDA backend's kernel services (no libcuda link; also used by
// the fp8 GEMV's checks, fp8_gemv_util.hpp), the launch shape of the integer-activation
// GEMVs, and their weights.
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "host/tools/memra-kernel-check/harness.hpp"
#include "plugins/quant-common/gemv_int8_launch.hpp"
#include "plugins/quant-common/gemv_int8_ref.hpp"

namespace memra::kcheck::i8 {

// Device memory, freed at scope exit.
class DevBuf {
 public:
  DevBuf(Device& d, uint64_t bytes) : d_(&d) {
    d.check(d.memory_alloc(MEMRA_MEMORY_DEVICE, bytes ? bytes : 16, &b_), "memory_alloc");
  }
  ~DevBuf() {
    if (b_.ptr) d_->memory_free(&b_);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void* ptr() const { return b_.ptr; }
  char* at(uint64_t off) const { return static_cast<char*>(b_.ptr) + off; }
  uint64_t bytes() const { return b_.bytes; }
  void put(const void* src, uint64_t n, uint64_t off = 0) {
    d_->check(d_->copy_to_device(at(off), src, n), "copy_to_device");
  }
  template <class T>
  std::vector<T> get(size_t n, uint64_t off = 0) const {
    std::vector<T> v(n);
    d_->check(d_->copy_to_host(v.data(), at(off), n * sizeof(T)), "copy_to_host (or an earlier kernel)");
    return v;
  }

 private:
  Device* d_;
  memra_buffer b_{};
};

// Kernels by (module, name), modules loaded once.
class Kernels {
 public:
  explicit Kernels(Device& d) : d_(d) {}
  Device& device() { return d_; }
  memra_kernel* get(const std::string& module, const std::string& name) {
    auto& m = modules_[module];
    if (!m) d_.check(d_.kernel_module_load(module.c_str(), &m), "kernel_module_load(" + module + ")");
    memra_kernel* k = nullptr;
    d_.check(d_.kernel_get(m, name.c_str(), &k), "kernel_get(" + name + ")");
    return k;
  }
  void launch(memra_kernel* k, unsigned gx, unsigned gy, unsigned block, void** args, void* stream = nullptr,
              uint32_t shared_bytes = 0) {
    memra_launch_config c{};
    c.shared_bytes = shared_bytes;
    c.struct_size = MEMRA_LAUNCH_CONFIG_STRUCT_SIZE;
    c.grid[0] = gx;
    c.grid[1] = gy;
    c.grid[2] = 1;
    c.block[0] = block;
    c.block[1] = c.block[2] = 1;
    c.stream = stream;
    d_.check(d_.kernel_launch(k, &c, args), "kernel_launch");
  }

 private:
  Device& d_;
  std::map<std::string, memra_kernel_module*> modules_;
};

inline const char* scheme_name(ref::Int8Scheme s) {
  switch (s) {
    case ref::Int8Scheme::q8_0: return "q8_0";
    case ref::Int8Scheme::q4_0: return "q4_0";
    case ref::Int8Scheme::q4_k: return "q4_k";
    case ref::Int8Scheme::q5_k: return "q5_k";
    case ref::Int8Scheme::q6_k: return "q6_k";
    case ref::Int8Scheme::iq4_xs: return "iq4_xs";
  }
  return "?";
}

// Tokens per block: the smallest of 1, 2, 4, 8, 16 holding min(m, 16) (as the f32 GEMVs).
inline int tile_tokens(int64_t m) {
  int nt = 1;
  while (nt < 16 && nt < m) nt *= 2;
  return nt;
}

// Every integer scheme, in the order the checks and the bench walk them.
inline const std::vector<ref::Int8Scheme>& int8_schemes() {
  using S = ref::Int8Scheme;
  static const std::vector<S> s = {S::q8_0, S::q4_0, S::q4_k, S::q5_k, S::q6_k, S::iq4_xs};
  return s;
}

// The dp4a kernels of a scheme's module: its own and, for q4_k / q5_k, the variant
// holding both code vectors per lane ("q4_k2", "q5_k2").
inline std::vector<std::string> dp4a_kernels(ref::Int8Scheme s) {
  const std::string n = scheme_name(s);
  if (s == ref::Int8Scheme::q4_k || s == ref::Int8Scheme::q5_k) return {n, n + "2"};
  return {n};
}

// The q4_k tensor-core kernels (gemv_int8_mma.cuh: 16 rows per block, 128 * W threads).
inline const std::vector<std::string>& q4_k_mma_kernels() {
  static const std::vector<std::string> k = {"q4_km1", "q4_km2", "q4_km4"};
  return k;
}
inline bool is_mma_kernel(const std::string& kernel) { return kernel.rfind("q4_km", 0) == 0; }
// Entries a kernel has: q4_km4 has no 16-token tile.
inline bool has_tile(const std::string& kernel, int64_t m) { return !(kernel == "q4_km4" && m > 8); }

// One integer-activation GEMV launch: R rows and tile_tokens(m) tokens per block.
struct Gemv8Args {
  const void* w;
  int64_t row_bytes, rows, cols;
  const void* xq;
  const void* xm;
  int64_t m;
  void* y;
  const void* bias;
};
// kernel: the entry's scheme part, "q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "iq4_xs",
// "q4_k2" / "q5_k2" (the variants without the per-token shuffle) or "q4_km1" / "q4_km2" / "q4_km4" (the tensor-core
// kernel, r = 16). blocks: grid.x (persistent blocks), 0 = one per group.
inline void launch_gemv8(Kernels& k, ref::Int8Scheme s, int r, Gemv8Args a, void* stream = nullptr,
                         const std::string& kernel = "", int64_t blocks = 0) {
  const int nt = tile_tokens(a.m);
  const std::string sch = scheme_name(s), name = kernel.empty() ? sch : kernel;
  memra_kernel* kern = k.get("matmul8_" + sch, "memra_gemv8_" + name + "_r" + std::to_string(r) + "_t" + std::to_string(nt));
  ref::GemvMats ms{};
  ms.w[0] = reinterpret_cast<uint64_t>(a.w);
  ms.y[0] = reinterpret_cast<uint64_t>(a.y);
  ms.bias[0] = reinterpret_cast<uint64_t>(a.bias);
  ms.rows[0] = a.rows;
  const int64_t groups = (a.rows + r - 1) / r;
  for (int64_t& e : ms.group_end) e = groups;
  void* args[] = {&ms, &a.row_bytes, &a.cols, &a.xq, &a.xm, &a.m};
  const int64_t gx = blocks > 0 && blocks < groups ? blocks : groups;
  k.launch(kern, static_cast<unsigned>(gx), static_cast<unsigned>((a.m + nt - 1) / nt),
           static_cast<unsigned>(ref::int8_gemv_block_threads(name.c_str())), args, stream);
}

// Up to 3 matrices over the same activation rows in one launch (GemvMats, as the CUDA
// backend merges q/k/v and gate/up): matrix i has rows[i] rows, weights w[i], output y[i].
inline void launch_gemv8_mats(Kernels& k, const std::string& scheme, const std::string& kernel, int r, int nmats,
                              const void* const* w, const int64_t* rows, void* const* y, const void* const* bias,
                              int64_t row_bytes, int64_t cols, const void* xq, const void* xm, int64_t m, int64_t blocks = 0) {
  const int nt = tile_tokens(m);
  memra_kernel* kern = k.get("matmul8_" + scheme, "memra_gemv8_" + kernel + "_r" + std::to_string(r) + "_t" + std::to_string(nt));
  ref::GemvMats ms{};
  int64_t end = 0;
  for (int i = 0; i < ref::GemvMats::kMax; ++i) {
    if (i < nmats) {
      ms.w[i] = reinterpret_cast<uint64_t>(w[i]);
      ms.y[i] = reinterpret_cast<uint64_t>(y[i]);
      ms.bias[i] = reinterpret_cast<uint64_t>(bias[i]);
      ms.rows[i] = rows[i];
      end += (rows[i] + r - 1) / r;
    }
    ms.group_end[i] = end;
  }
  void* args[] = {&ms, &row_bytes, &cols, &xq, &xm, &m};
  const int64_t gx = blocks > 0 && blocks < end ? blocks : end;
  k.launch(kern, static_cast<unsigned>(gx), static_cast<unsigned>((m + nt - 1) / nt),
           static_cast<unsigned>(ref::int8_gemv_block_threads(kernel.c_str())), args);
}

// Activations x [m][cols] (device f32) -> q [m][cols] int8, meta [m][cols/32] {d, s}.
inline void launch_quantize(Kernels& k, const void* x, int64_t m, int64_t cols, void* q, void* meta, void* stream = nullptr) {
  memra_kernel* kern = k.get("matmul8_act", "memra_quantize_act_q8");
  void* args[] = {&x, &m, &cols, &q, &meta};
  const int64_t groups = m * cols / 8;
  k.launch(kern, static_cast<unsigned>((groups + 255) / 256), 1, 256, args, stream);
}

}  // namespace memra::kcheck::i8
