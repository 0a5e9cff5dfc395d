// The kernel services behind memra_host_api's kernel slots: a fatbin module by
// name, NVRTC compile-and-cache (miss then hit, bitwise result), and the
// architecture gate (a PTX-only module is refused, or runs loudly degraded).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "kernels/gather/gather_rows_ref.hpp"
#include "kernels/norm/rms_norm_ref.hpp"

namespace fs = std::filesystem;

namespace memra::kcheck {
namespace {

// A backend of its own (other kernel/cache directory), destroyed at scope exit.
struct Extra {
  std::unique_ptr<Device> d;
  std::string log;
  std::string error;
  Extra(const Device& base, const std::string& kernel_dir, const std::string& cache_dir, bool allow_ptx) {
    backend::BackendOptions o = base.options();
    o.allow_ptx_jit = allow_ptx;
    o.use_nvrtc = true;
    o.kernel_dir = kernel_dir;
    o.cache_dir = cache_dir;
    o.log = [](void* user, memra_log_level, const char* m) { static_cast<Extra*>(user)->log += std::string(m) + "\n"; };
    o.log_user = this;
    auto b = backend::open_backend(o);
    if (b) d = std::make_unique<Device>(std::move(*b), o);
    else error = b.error().message;
  }
  bool ok() const { return d != nullptr; }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Failure("cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The fatbin with its ELF (SASS) entries removed: what a build without this
// device's architecture would ship.
std::string ptx_only(const std::string& fb) {
  std::string out;
  size_t pos = 0;
  while (pos + 16 <= fb.size()) {
    uint32_t magic;
    uint16_t hs;
    uint64_t body;
    std::memcpy(&magic, fb.data() + pos, 4);
    if (magic != 0xBA55ED50u) break;
    std::memcpy(&hs, fb.data() + pos + 6, 2);
    std::memcpy(&body, fb.data() + pos + 8, 8);
    std::string kept;
    for (size_t e = pos + hs; e + 32 <= pos + hs + body;) {
      uint16_t kind;
      uint32_t es;
      uint64_t payload;
      std::memcpy(&kind, fb.data() + e, 2);
      std::memcpy(&es, fb.data() + e + 4, 4);
      std::memcpy(&payload, fb.data() + e + 8, 8);
      if (kind == 1) kept += fb.substr(e, es + payload);
      e += es + payload;
    }
    std::string header = fb.substr(pos, hs);
    const uint64_t n = kept.size();
    std::memcpy(header.data() + 8, &n, 8);
    out += header + kept;
    pos += hs + body;
  }
  return out;
}

void launch1d(Device& d, memra_kernel* k, unsigned grid, unsigned block, void** args, const char* what) {
  memra_launch_config c{};
  c.struct_size = MEMRA_LAUNCH_CONFIG_STRUCT_SIZE;
  c.grid[0] = grid;
  c.grid[1] = c.grid[2] = 1;
  c.block[0] = block;
  c.block[1] = c.block[2] = 1;
  d.check(d.kernel_launch(k, &c, args), what);
  d.check(d.synchronize(), what);
}

constexpr const char* kProbe = R"(
extern "C" __global__ void memra_nvrtc_probe(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * MEMRA_FACTOR + 1.0f;
}
)";

}  // namespace

void check_services(Device& d, Report& r, const CheckOptions& o) {
  Rng rng(o.seed ^ 0x73657276);

  r.guard("kernel services: fatbin module gather by name", [&] {
    d.begin_step();
    memra_kernel_module* m = nullptr;
    memra_kernel* k = nullptr;
    d.check(d.kernel_module_load("gather", &m), "kernel_module_load(gather)");
    d.check(d.kernel_get(m, "memra_gather_rows", &k), "kernel_get");
    const int64_t dim = 300;
    const std::vector<float> x = rng.floats(10 * dim);
    std::vector<int32_t> rows = {9, 3, 3};
    std::vector<float> ref(rows.size() * dim);
    ref::gather_rows(x.data(), dim, rows.data(), 3, ref.data());
    memra_tensor xt = d.upload(x, {10, dim}), out = d.tensor({3, dim});
    memra_buffer rb{};
    d.check(d.memory_alloc(MEMRA_MEMORY_DEVICE, 12, &rb), "memory_alloc");
    d.check(d.copy_to_device(rb.ptr, rows.data(), 12), "copy_to_device");
    int64_t dim_arg = dim;
    void* args[] = {&xt.data, &dim_arg, &rb.ptr, &out.data};
    launch1d(d, k, 3, 128, args, "kernel_launch");
    const Comparison c = compare(d.download(out), ref);
    d.memory_free(&rb);
    r.bitwise("kernel services: fatbin module gather by name", c);
  });

  r.guard("nvrtc compile-and-cache", [&] {
    const fs::path cache = fs::path(o.temp_dir) / "nvrtc-cache";
    fs::remove_all(cache);
    Extra extra(d, o.kernel_dir, cache.string(), false);
    if (!extra.ok()) throw Failure("backend with a fresh cache: " + extra.error);
    Device& e = *extra.d;
    const std::vector<float> x = rng.floats(1000);
    std::vector<float> ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = x[i] * 3.0f + 1.0f;
    bool hits[2] = {true, false};
    std::vector<float> ys[2];
    for (int round = 0; round < 2; ++round) {
      const char* opts[] = {"-DMEMRA_FACTOR=3.0f"};
      memra_nvrtc_request req{MEMRA_NVRTC_REQUEST_STRUCT_SIZE, "probe", kProbe, opts, 1};
      memra_kernel_module* m = nullptr;
      memra_kernel* k = nullptr;
      const int64_t hits_before = e.backend().stats().nvrtc_cache_hits;
      e.check(e.kernel_module_compile(&req, &m), "kernel_module_compile");
      hits[round] = e.backend().stats().nvrtc_cache_hits > hits_before;
      e.check(e.kernel_get(m, "memra_nvrtc_probe", &k), "kernel_get");
      memra_buffer xb{}, yb{};
      e.check(e.memory_alloc(MEMRA_MEMORY_DEVICE, x.size() * 4, &xb), "memory_alloc");
      e.check(e.memory_alloc(MEMRA_MEMORY_DEVICE, x.size() * 4, &yb), "memory_alloc");
      e.check(e.copy_to_device(xb.ptr, x.data(), x.size() * 4), "copy_to_device");
      int n = static_cast<int>(x.size());
      void* args[] = {&xb.ptr, &yb.ptr, &n};
      launch1d(e, k, 8, 128, args, "launch probe");
      ys[round].resize(x.size());
      e.check(e.copy_to_host(ys[round].data(), yb.ptr, x.size() * 4), "copy_to_host");
      e.memory_free(&xb);
      e.memory_free(&yb);
    }
    size_t files = 0;
    for (const auto& f : fs::directory_iterator(cache)) files += f.path().extension() == ".cubin";
    const bool ok = !hits[0] && hits[1] && files == 1 && compare(ys[0], ref).bitwise && compare(ys[1], ref).bitwise;
    r.add("nvrtc compile-and-cache", ok,
          std::string("first compile ") + (hits[0] ? "HIT (expected miss)" : "miss") + ", second " + (hits[1] ? "hit" : "MISS (expected hit)") +
              ", " + std::to_string(files) + " cache file(s), results " + (compare(ys[1], ref).bitwise ? "bitwise equal" : "DIFFER"));
  });

  r.guard("arch gate: PTX-only module refused, runs degraded when allowed", [&] {
    const fs::path dir = fs::path(o.temp_dir) / "ptx-only-kernels";
    fs::create_directories(dir);
    const std::string fb = ptx_only(read_file(fs::path(o.kernel_dir) / "norm.fatbin"));
    std::ofstream(dir / "norm.fatbin", std::ios::binary) << fb;
    Extra refused(d, dir.string(), "", false);
    const bool refused_ok = !refused.ok() && refused.error.find("no SASS") != std::string::npos;
    Extra degraded(d, dir.string(), "", true);
    bool degraded_ok = degraded.ok() && degraded.log.find("DEGRADED") != std::string::npos;
    Comparison c;
    if (degraded_ok) {
      // The JIT-compiled PTX still computes RMSNorm within its bound.
      const int64_t rows = 4, dim = 1000;
      const std::vector<float> x = rng.floats(rows * dim), w = rng.floats(dim);
      std::vector<float> ref(x.size());
      ref::rms_norm(x.data(), w.data(), rows, dim, 1e-6f, 0.0f, ref.data());
      memra_kernel_module* m = nullptr;
      memra_kernel* k = nullptr;
      Device& g = *degraded.d;
      g.check(g.kernel_module_load("norm", &m), "kernel_module_load(norm)");
      g.check(g.kernel_get(m, "memra_rms_norm", &k), "kernel_get");
      memra_buffer xb{}, wb{}, yb{};
      g.check(g.memory_alloc(MEMRA_MEMORY_DEVICE, x.size() * 4, &xb), "memory_alloc");
      g.check(g.memory_alloc(MEMRA_MEMORY_DEVICE, w.size() * 4, &wb), "memory_alloc");
      g.check(g.memory_alloc(MEMRA_MEMORY_DEVICE, x.size() * 4, &yb), "memory_alloc");
      g.check(g.copy_to_device(xb.ptr, x.data(), x.size() * 4), "copy_to_device");
      g.check(g.copy_to_device(wb.ptr, w.data(), w.size() * 4), "copy_to_device");
      int64_t dim_arg = dim;
      float eps = 1e-6f, off = 0.0f;
      void* args[] = {&xb.ptr, &wb.ptr, &dim_arg, &eps, &off, &yb.ptr};
      launch1d(g, k, rows, 256, args, "launch degraded rms_norm");
      std::vector<float> y(x.size());
      g.check(g.copy_to_host(y.data(), yb.ptr, y.size() * 4), "copy_to_host");
      for (memra_buffer* bb : {&xb, &wb, &yb}) g.memory_free(bb);
      c = compare(y, ref);
      degraded_ok = c.nmse <= kNormBound;
    }
    r.add("arch gate: PTX-only module refused, runs degraded when allowed", refused_ok && degraded_ok,
          std::string(refused_ok ? "refused" : "NOT refused (" + refused.error + ")") + "; " +
              (degraded_ok ? "allowed: logged DEGRADED, rms_norm nmse " + fmt(c.nmse) : "allowed run failed: " + degraded.error + degraded.log));
  });
}

}  // namespace memra::kcheck
