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
  const memra_cuda_backend_api* api = nullptr;
  memra_cuda_backend* b = nullptr;
  std::string log;
  std::string error;
  memra_status st = MEMRA_OK;
  Extra(const memra_cuda_backend_api* a, const std::string& kernel_dir, const std::string& cache_dir, bool allow_ptx) : api(a) {
    memra_cuda_backend_options o{};
    o.struct_size = MEMRA_CUDA_BACKEND_OPTIONS_STRUCT_SIZE;
    o.allow_ptx_jit = allow_ptx ? 1 : 0;
    o.use_nvrtc = 1;
    o.kernel_dir = kernel_dir.c_str();
    o.cache_dir = cache_dir.c_str();
    o.log = [](void* user, memra_log_level, const char* m) { static_cast<Extra*>(user)->log += std::string(m) + "\n"; };
    o.log_user = this;
    char err[2048] = {};
    st = api->create(&o, &b, err, sizeof err);
    error = err;
  }
  ~Extra() {
    if (b) api->destroy(b);
  }
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

void launch1d(const memra_cuda_backend_api* api, memra_cuda_backend* b, memra_kernel* k, unsigned grid, unsigned block,
              void** args, const char* what) {
  memra_launch_config c{};
  c.struct_size = MEMRA_LAUNCH_CONFIG_STRUCT_SIZE;
  c.grid[0] = grid;
  c.grid[1] = c.grid[2] = 1;
  c.block[0] = block;
  c.block[1] = c.block[2] = 1;
  if (api->kernel_launch(b, k, &c, args) != MEMRA_OK || api->synchronize(b) != MEMRA_OK)
    throw Failure(std::string(what) + ": " + api->last_error(b));
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
  const memra_cuda_backend_api* api = &d.api();

  r.guard("kernel services: fatbin module gather by name", [&] {
    d.begin_step();
    memra_kernel_module* m = nullptr;
    memra_kernel* k = nullptr;
    d.check(api->kernel_module_load(d.backend(), "gather", &m), "kernel_module_load(gather)");
    d.check(api->kernel_get(d.backend(), m, "memra_gather_rows", &k), "kernel_get");
    const int64_t dim = 300;
    const std::vector<float> x = rng.floats(10 * dim);
    std::vector<int32_t> rows = {9, 3, 3};
    std::vector<float> ref(rows.size() * dim);
    ref::gather_rows(x.data(), dim, rows.data(), 3, ref.data());
    memra_tensor xt = d.upload(x, {10, dim}), out = d.tensor({3, dim});
    memra_buffer rb{};
    d.check(api->memory_alloc(d.backend(), MEMRA_MEMORY_DEVICE, 12, &rb), "memory_alloc");
    d.check(api->copy_to_device(d.backend(), rb.ptr, rows.data(), 12), "copy_to_device");
    int64_t dim_arg = dim;
    void* args[] = {&xt.data, &dim_arg, &rb.ptr, &out.data};
    launch1d(api, d.backend(), k, 3, 128, args, "kernel_launch");
    const Comparison c = compare(d.download(out), ref);
    api->memory_free(d.backend(), &rb);
    r.bitwise("kernel services: fatbin module gather by name", c);
  });

  r.guard("nvrtc compile-and-cache", [&] {
    const fs::path cache = fs::path(o.temp_dir) / "nvrtc-cache";
    fs::remove_all(cache);
    Extra e(api, o.kernel_dir, cache.string(), false);
    if (e.st != MEMRA_OK) throw Failure("backend with a fresh cache: " + e.error);
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
      if (api->kernel_module_compile(e.b, &req, &m) != MEMRA_OK) throw Failure("kernel_module_compile: " + std::string(api->last_error(e.b)));
      hits[round] = api->nvrtc_last_cache_hit(e.b) != 0;
      if (api->kernel_get(e.b, m, "memra_nvrtc_probe", &k) != MEMRA_OK) throw Failure(api->last_error(e.b));
      memra_buffer xb{}, yb{};
      api->memory_alloc(e.b, MEMRA_MEMORY_DEVICE, x.size() * 4, &xb);
      api->memory_alloc(e.b, MEMRA_MEMORY_DEVICE, x.size() * 4, &yb);
      api->copy_to_device(e.b, xb.ptr, x.data(), x.size() * 4);
      int n = static_cast<int>(x.size());
      void* args[] = {&xb.ptr, &yb.ptr, &n};
      launch1d(api, e.b, k, 8, 128, args, "launch probe");
      ys[round].resize(x.size());
      api->copy_to_host(e.b, ys[round].data(), yb.ptr, x.size() * 4);
      api->memory_free(e.b, &xb);
      api->memory_free(e.b, &yb);
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
    Extra refused(api, dir.string(), "", false);
    const bool refused_ok = refused.st != MEMRA_OK && refused.error.find("no SASS") != std::string::npos;
    Extra degraded(api, dir.string(), "", true);
    bool degraded_ok = degraded.st == MEMRA_OK && degraded.log.find("DEGRADED") != std::string::npos;
    Comparison c;
    if (degraded_ok) {
      // The JIT-compiled PTX still computes RMSNorm within its bound.
      const int64_t rows = 4, dim = 1000;
      const std::vector<float> x = rng.floats(rows * dim), w = rng.floats(dim);
      std::vector<float> ref(x.size());
      ref::rms_norm(x.data(), w.data(), rows, dim, 1e-6f, 0.0f, ref.data());
      memra_kernel_module* m = nullptr;
      memra_kernel* k = nullptr;
      api->kernel_module_load(degraded.b, "norm", &m);
      if (!m || api->kernel_get(degraded.b, m, "memra_rms_norm", &k) != MEMRA_OK) throw Failure(api->last_error(degraded.b));
      memra_buffer xb{}, wb{}, yb{};
      api->memory_alloc(degraded.b, MEMRA_MEMORY_DEVICE, x.size() * 4, &xb);
      api->memory_alloc(degraded.b, MEMRA_MEMORY_DEVICE, w.size() * 4, &wb);
      api->memory_alloc(degraded.b, MEMRA_MEMORY_DEVICE, x.size() * 4, &yb);
      api->copy_to_device(degraded.b, xb.ptr, x.data(), x.size() * 4);
      api->copy_to_device(degraded.b, wb.ptr, w.data(), w.size() * 4);
      int64_t dim_arg = dim;
      float eps = 1e-6f, off = 0.0f;
      void* args[] = {&xb.ptr, &wb.ptr, &dim_arg, &eps, &off, &yb.ptr};
      launch1d(api, degraded.b, k, rows, 256, args, "launch degraded rms_norm");
      std::vector<float> y(x.size());
      api->copy_to_host(degraded.b, y.data(), yb.ptr, y.size() * 4);
      for (memra_buffer* bb : {&xb, &wb, &yb}) api->memory_free(degraded.b, bb);
      c = compare(y, ref);
      degraded_ok = c.nmse <= kNormBound;
    }
    r.add("arch gate: PTX-only module refused, runs degraded when allowed", refused_ok && degraded_ok,
          std::string(refused_ok ? "refused" : "NOT refused (" + refused.error + ")") + "; " +
              (degraded_ok ? "allowed: logged DEGRADED, rms_norm nmse " + fmt(c.nmse) : "allowed run failed: " + degraded.error + degraded.log));
  });
}

}  // namespace memra::kcheck
