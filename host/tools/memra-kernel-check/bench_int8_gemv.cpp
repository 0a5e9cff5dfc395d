// memra-kernel-check --bench: times the integer-activation GEMVs (matmul8_*) and
// today's f32-activation GEMVs (matmul_<scheme>, launched as ops_matmul.cpp does) on the
// Qwen3-8B decode shapes, M = 1, 2, 4, 8, 16, against the measured device-to-device copy
// bandwidth. Method (docs/PERFORMANCE.md): weights rotate over slots of a 1 GiB pool
// (> 16x the 60 MB L2), 20 warm-up launches, then 15 batches of 10 back-to-back launches
// in one stream, each batch queued behind a 150 us spin kernel so the GPU, not the
// host's launch rate, is timed; a config's time is the median batch mean (CUDA events).
//
// The events need the driver: this file alone dlopens libcuda.so.1 (the tool links no
// CUDA) and uses only stream and event calls on the backend's primary context; kernels
// still launch through the backend's kernel services, on this file's stream.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "host/tools/memra-kernel-check/fp8_gemv_util.hpp"
#include "host/tools/memra-kernel-check/int8_gemv_util.hpp"
#include "kernels/matmul/gemv_mma_layout.hpp"

namespace memra::kcheck {
namespace {

using ref::Int8Scheme;
using namespace i8;

// The few driver entry points the timing needs (CUresult is an int; handles are pointers).
struct Driver {
  void* lib = nullptr;
  int (*DeviceGet)(int*, int) = nullptr;
  int (*PrimaryCtxRetain)(void**, int) = nullptr;
  int (*CtxSetCurrent)(void*) = nullptr;
  int (*StreamCreate)(void**, unsigned) = nullptr;
  int (*StreamDestroy)(void*) = nullptr;
  int (*StreamSynchronize)(void*) = nullptr;
  int (*EventCreate)(void**, unsigned) = nullptr;
  int (*EventDestroy)(void*) = nullptr;
  int (*EventRecord)(void*, void*) = nullptr;
  int (*EventSynchronize)(void*) = nullptr;
  int (*EventElapsedTime)(float*, void*, void*) = nullptr;

  template <class F>
  void sym(F& f, const char* name, const char* alt = nullptr) {
    void* p = dlsym(lib, name);
    if (!p && alt) p = dlsym(lib, alt);
    if (!p) throw Failure(std::string("libcuda.so.1 lacks ") + name);
    f = reinterpret_cast<F>(p);
  }
  Driver() {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw Failure("dlopen libcuda.so.1 failed");
    sym(DeviceGet, "cuDeviceGet");
    sym(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    sym(CtxSetCurrent, "cuCtxSetCurrent");
    sym(StreamCreate, "cuStreamCreate");
    sym(StreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy");
    sym(StreamSynchronize, "cuStreamSynchronize");
    sym(EventCreate, "cuEventCreate");
    sym(EventDestroy, "cuEventDestroy_v2", "cuEventDestroy");
    sym(EventRecord, "cuEventRecord");
    sym(EventSynchronize, "cuEventSynchronize");
    sym(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
  }
  static void ok(int r, const char* what) {
    if (r != 0) throw Failure(std::string(what) + " failed with CUresult " + std::to_string(r));
  }
};

class Timer {
 public:
  Timer(Driver& cu, Kernels& k, int device) : cu_(cu), k_(k) {
    int dev = 0;
    Driver::ok(cu.DeviceGet(&dev, device), "cuDeviceGet");
    void* ctx = nullptr;
    Driver::ok(cu.PrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");  // the backend's context
    Driver::ok(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
    Driver::ok(cu.StreamCreate(&stream_, 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
    Driver::ok(cu.EventCreate(&e0_, 0), "cuEventCreate");
    Driver::ok(cu.EventCreate(&e1_, 0), "cuEventCreate");
    spin_ = k.get("matmul8_act", "memra_bench_spin");
  }
  ~Timer() {
    cu_.EventDestroy(e0_);
    cu_.EventDestroy(e1_);
    cu_.StreamDestroy(stream_);
  }
  void* stream() const { return stream_; }
  // Median over batches of the mean time of one launch(i), in microseconds.
  double us(const std::function<void(int)>& launch, int batches = 15, int per_batch = 10) {
    for (int i = 0; i < 20; ++i) launch(i);
    Driver::ok(cu_.StreamSynchronize(stream_), "cuStreamSynchronize (warm-up)");
    std::vector<double> t;
    int i = 20;
    for (int b = 0; b < batches; ++b) {
      int64_t ns = 150000;
      void* args[] = {&ns};
      k_.launch(spin_, 1, 1, 1, args, stream_);
      Driver::ok(cu_.EventRecord(e0_, stream_), "cuEventRecord");
      for (int j = 0; j < per_batch; ++j) launch(i++);
      Driver::ok(cu_.EventRecord(e1_, stream_), "cuEventRecord");
      Driver::ok(cu_.EventSynchronize(e1_), "cuEventSynchronize (a timed kernel failed?)");
      float ms = 0;
      Driver::ok(cu_.EventElapsedTime(&ms, e0_, e1_), "cuEventElapsedTime");
      t.push_back(1000.0 * ms / per_batch);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }

 private:
  Driver& cu_;
  Kernels& k_;
  void* stream_ = nullptr;
  void* e0_ = nullptr;
  void* e1_ = nullptr;
  memra_kernel* spin_ = nullptr;
};

struct Shape {
  const char* name;
  int64_t rows, cols;
  int per_layer;  // how many such matrices a Qwen3-8B layer has
};
constexpr Shape kShapes[] = {
    {"q/o", 4096, 4096, 2}, {"k/v", 1024, 4096, 2}, {"gate/up", 12288, 4096, 2}, {"down", 4096, 12288, 1}};
constexpr int kMs[] = {1, 2, 4, 8, 16};
constexpr int kRs[] = {1, 2, 4};
constexpr uint64_t kPool = 1ull << 30;

uint64_t align256(uint64_t v) { return (v + 255) & ~uint64_t{255}; }

// The bf16 GEMVs on the same shapes (the pool's random bits as bf16 weights: no kernel
// branches on values): the tensor-core kernel (gemv_mma_bf16.cuh) in the production
// unroll/warp shape and others, and the warp-per-row f32-FMA kernel it replaced.
void bench_bf16_gemv(Kernels& k, Timer& timer, DevBuf& pool, memra_kernel* read, DevBuf& sink, double copy_gbs, int64_t sms,
                     Rng& rng) {
  void* st = timer.stream();
  const int64_t max_cols = 12288, max_m = 16;
  std::vector<float> x = rng.floats(static_cast<size_t>(max_m * max_cols));
  DevBuf xf(k.device(), x.size() * 4), y(k.device(), static_cast<uint64_t>(max_m) * 12288 * 4);
  xf.put(x.data(), x.size() * 4);
  struct Variant {
    int unroll, warps;  // warps 0: the warp-per-row kernel
    bool n2;            // also has a 16-token (two n-tile) entry
  };
  // Entry 0: the production kernel (kUnroll x kWarps).
  const std::vector<Variant> variants = {{memra::gemv_mma::kUnroll, memra::gemv_mma::kWarps, true}, {4, 8, false}, {1, 16, false},
                                         {2, 32, false}, {4, 16, false}, {1, 32, false}, {0, 0, true}};
  std::printf("\n| shape (rows x cols) | M | kernel | us | GB/s | %% of copy | read of the weight bytes us |\n| --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Shape& sh : kShapes) {
    const uint64_t wbytes = static_cast<uint64_t>(sh.rows * sh.cols * 2), slot = align256(wbytes);
    const int slots = static_cast<int>(pool.bytes() / slot);
    const double t_read = timer.us([&](int i) {
      const void* src = pool.at(static_cast<uint64_t>(i % slots) * slot);
      int64_t n = static_cast<int64_t>(wbytes / 16);
      void* sp = sink.ptr();
      void* args[] = {&src, &n, &sp};
      k.launch(read, static_cast<unsigned>(sms * 8), 1, 256, args, st);
    });
    for (int64_t m : {int64_t{1}, int64_t{8}, int64_t{16}})
      for (size_t vi = 0; vi < variants.size(); ++vi) {
        const Variant& v = variants[vi];
        const int nt = v.warps ? (m > 8 ? 2 : 1) : tile_tokens(m);
        if (v.warps && nt == 2 && !v.n2) continue;
        std::string kname, label;
        unsigned gx = 0, gy = 0, block = 0;
        if (!v.warps) {
          kname = "memra_gemv_bench_bf16_u8_t" + std::to_string(nt);
          label = "warp/row";
          gx = static_cast<unsigned>((sh.rows + 3) / 4), gy = static_cast<unsigned>((m + nt - 1) / nt), block = 128;
        } else {
          const std::string shape = "u" + std::to_string(v.unroll) + "w" + std::to_string(v.warps);
          kname = vi == 0 ? "memra_gemv_bf16_mma_n" + std::to_string(nt) : "memra_bench_gemv_bf16_" + shape + "_n1";
          label = "mma " + shape + (vi == 0 ? " (production)" : "");
          gx = static_cast<unsigned>((sh.rows + 15) / 16), gy = static_cast<unsigned>((m + 8 * nt - 1) / (8 * nt));
          block = static_cast<unsigned>(32 * v.warps);
        }
        memra_kernel* kern = k.get("matmul_float", kname);
        const double t = timer.us([&](int i) {
          const void* w = pool.at(static_cast<uint64_t>(i % slots) * slot);
          const void* xp = xf.ptr();
          void* yp = y.ptr();
          const void* bias = nullptr;
          int64_t rb = sh.cols * 2, rows = sh.rows, cols = sh.cols, mm = m;
          if (!v.warps) {
            void* args[] = {&w, &rb, &rows, &cols, &xp, &mm, &yp, &bias};
            k.launch(kern, gx, gy, block, args, st);
          } else if (vi == 0) {  // the production entry: a GemvMats of one matrix
            ref::GemvMats ms{};
            ms.w[0] = reinterpret_cast<uint64_t>(w), ms.y[0] = reinterpret_cast<uint64_t>(yp), ms.rows[0] = rows;
            for (int64_t& e : ms.group_end) e = static_cast<int64_t>(gx);
            void* args[] = {&ms, &cols, &xp, &mm};
            k.launch(kern, gx, gy, block, args, st);
          } else {
            void* args[] = {&w, &rows, &cols, &xp, &mm, &yp, &bias};
            k.launch(kern, gx, gy, block, args, st);
          }
        });
        const double gbs = static_cast<double>(wbytes) / (t * 1e3);
        std::printf("| %s %lldx%lld | %lld | %s | %.2f | %.0f | %.1f | %.2f |\n", sh.name, static_cast<long long>(sh.rows),
                    static_cast<long long>(sh.cols), static_cast<long long>(m), label.c_str(), t, gbs, 100.0 * gbs / copy_gbs, t_read);
      }
  }
}

// The fp8 tensor-core GEMV (gemv_mma_fp8.cuh) on the same shapes, the pool's random bits as
// scales and codes (no kernel branches on values), over x prepared once
// (memra_prepare_act_fp8_rows, timed on its own: a producer writes it in the decode step):
// the production shape (kUnroll 2, kFp8Warps per block), other unroll / warp counts, and
// memra_gemv_fp8_scaled_n1 (x f32, scaled per group in every block: the path the prepared
// x replaced). Bytes counted: codes + scales.
void bench_fp8_gemv(Kernels& k, Timer& timer, DevBuf& pool, memra_kernel* read, DevBuf& sink, double copy_gbs, int64_t sms,
                    Rng& rng) {
  void* st = timer.stream();
  const int64_t max_cols = 12288, max_m = 16;
  std::vector<float> x = rng.floats(static_cast<size_t>(max_m * max_cols));
  DevBuf xf(k.device(), x.size() * 4), plane(k.device(), x.size() * 2), back(k.device(), x.size() / 128 * 4),
      y(k.device(), static_cast<uint64_t>(max_m) * 12288 * 4);
  xf.put(x.data(), x.size() * 4);
  for (int64_t cols : {int64_t{4096}, int64_t{12288}})
    for (int64_t m : {int64_t{1}, int64_t{8}, int64_t{16}}) {
      const double t = timer.us([&](int) { fp8::launch_prepare(k, xf.ptr(), cols, nullptr, m, plane.ptr(), back.ptr(), st); });
      std::printf("bench: fp8 act prepare M=%lld cols=%lld: %.2f us\n", static_cast<long long>(m), static_cast<long long>(cols), t);
    }
  struct Variant {
    int unroll, warps;
    bool scaled;  // memra_gemv_fp8_scaled_n1 on f32 x instead of the prepared plane
  };
  // Entry 0: the production kernel; entry 1 the same kernel on 4 warps.
  const std::vector<Variant> variants = {{2, memra::gemv_mma::kFp8Warps, false}, {2, 4, false}, {1, 8, false}, {4, 8, false}, {2, 8, true}};
  std::printf("\n| shape (rows x cols) | M | kernel | us | GB/s | %% of copy | read of the weight bytes us |\n| --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Shape& sh : kShapes) {
    const uint64_t wbytes = static_cast<uint64_t>(sh.rows * (sh.cols / 128 * 4 + sh.cols)), slot = align256(wbytes);
    const int slots = static_cast<int>(pool.bytes() / slot);
    const double t_read = timer.us([&](int i) {
      const void* src = pool.at(static_cast<uint64_t>(i % slots) * slot);
      int64_t n = static_cast<int64_t>(wbytes / 16);
      void* sp = sink.ptr();
      void* args[] = {&src, &n, &sp};
      k.launch(read, static_cast<unsigned>(sms * 8), 1, 256, args, st);
    });
    for (int64_t m : {int64_t{1}, int64_t{8}, int64_t{16}}) {
      // Real prepared rows of this shape's x (row stride sh.cols).
      fp8::launch_prepare(k, xf.ptr(), sh.cols, nullptr, m, plane.ptr(), back.ptr(), st);
      for (size_t vi = 0; vi < variants.size(); ++vi) {
        const Variant& v = variants[vi];
        const int nt = m > 8 ? 2 : 1;
        if (vi != 0 && nt == 2) continue;
        const std::string shape = "u" + std::to_string(v.unroll) + "w" + std::to_string(v.warps);
        const std::string kname = v.scaled          ? "memra_gemv_fp8_scaled_n1"
                                  : v.unroll == 2 ? "memra_gemv_fp8_mma_n" + std::to_string(nt)
                                                  : "memra_bench_gemv_fp8_u" + std::to_string(v.unroll) + "_n1";
        const std::string label = "mma " + shape + (vi == 0 ? " (production)" : v.scaled ? " x scaled per block (before)" : "");
        memra_kernel* kern = k.get("matmul_fp8", kname);
        const void* xp = v.scaled ? xf.ptr() : plane.ptr();
        const void* bp = v.scaled ? nullptr : back.ptr();
        const double t = timer.us([&](int i) {
          const void* w = pool.at(static_cast<uint64_t>(i % slots) * slot);
          fp8::launch_gemv(k, kern, nt, v.warps, w, sh.rows, sh.cols, xp, bp, m, y.ptr(), nullptr, st);
        });
        const double gbs = static_cast<double>(wbytes) / (t * 1e3);
        std::printf("| %s %lldx%lld | %lld | %s | %.2f | %.0f | %.1f | %.2f |\n", sh.name, static_cast<long long>(sh.rows),
                    static_cast<long long>(sh.cols), static_cast<long long>(m), label.c_str(), t, gbs, 100.0 * gbs / copy_gbs, t_read);
      }
    }
  }
}

}  // namespace

void bench_int8_gemv(Device& d, const BenchOptions& o) {
  Driver cu;
  Kernels k(d);
  Timer timer(cu, k, o.device);
  Rng rng(o.seed);
  const memra_device_info info = d.device_info();
  void* st = timer.stream();

  // Copy ceiling: 512 MiB -> 512 MiB, bytes read + written.
  DevBuf pool(d, kPool), dst(d, kPool / 2);
  {
    std::vector<uint8_t> junk(1 << 20);
    for (auto& b : junk) b = static_cast<uint8_t>(rng.bits());
    for (uint64_t off = 0; off < kPool; off += junk.size()) pool.put(junk.data(), junk.size(), off);
  }
  memra_kernel* copy = k.get("matmul8_act", "memra_bench_copy");
  int copy_blocks_per_sm = 16;
  auto launch_copy = [&](const void* src, void* to, uint64_t bytes) {
    int64_t n = static_cast<int64_t>(bytes / 16);
    void* args[] = {&src, &to, &n};
    k.launch(copy, static_cast<unsigned>(info.multiprocessor_count * copy_blocks_per_sm), 1, 256, args, st);
  };
  double copy_gbs = 0;
  int best_bps = 0;
  for (int bps : {4, 8, 16, 32}) {
    copy_blocks_per_sm = bps;
    const double us = timer.us([&](int i) { launch_copy(pool.at((i & 1) * (kPool / 2)), dst.ptr(), kPool / 2); }, 7, 3);
    const double gbs = static_cast<double>(kPool) / (us * 1e3);
    std::printf("cfg copy blocks/SM=%d: %.1f us, %.1f GB/s\n", bps, us, gbs);
    if (gbs > copy_gbs) copy_gbs = gbs, best_bps = bps;
  }
  copy_blocks_per_sm = 16;
  std::printf("bench: %s, %d SMs; copy ceiling %.1f GB/s (512 MiB -> 512 MiB, read + written, median of 7, best of "
              "4-32 blocks/SM: %d)\n",
              info.name, info.multiprocessor_count, copy_gbs, best_bps);
  memra_kernel* read = k.get("matmul8_act", "memra_bench_read");
  DevBuf sink(d, 256);
  if (o.bf16) {
    bench_bf16_gemv(k, timer, pool, read, sink, copy_gbs, info.multiprocessor_count, rng);
    return;
  }
  if (o.fp8) {
    bench_fp8_gemv(k, timer, pool, read, sink, copy_gbs, info.multiprocessor_count, rng);
    return;
  }

  // Activations (largest shape, M = 16), for both paths.
  const int64_t max_cols = 12288, max_m = 16;
  std::vector<float> x = rng.floats(static_cast<size_t>(max_m * max_cols));
  DevBuf xf(d, x.size() * 4), xq(d, x.size()), xm(d, x.size() / 32 * 8), y(d, static_cast<uint64_t>(max_m) * 12288 * 4);
  xf.put(x.data(), x.size() * 4);

  for (int64_t cols : {int64_t{4096}, int64_t{12288}})
    for (int m : {1, 16}) {
      const double t = timer.us([&](int) { launch_quantize(k, xf.ptr(), m, cols, xq.ptr(), xm.ptr(), st); });
      std::printf("bench: int8 act quantise M=%d cols=%lld: %.2f us\n", m, static_cast<long long>(cols), t);
    }
  // Quantised once for the GEMVs: real codes and scales for every shape's M x cols prefix.
  launch_quantize(k, xf.ptr(), max_m, max_cols, xq.ptr(), xm.ptr(), st);

  std::printf("\n| scheme | shape (rows x cols) | M | f32-act GEMV us | int8 GEMV us (kernel R blocks) | GB/s | %% of copy "
              "| read of the weight bytes us (%% of copy) | f32-act GB/s |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  const int64_t sms = info.multiprocessor_count;
  for (Int8Scheme s : int8_schemes()) {
    const std::string sch = scheme_name(s);
    if (sch.find(o.filter) == std::string::npos) continue;
    std::vector<std::string> kernels = dp4a_kernels(s);
    if (s == Int8Scheme::q4_k) {
      for (const std::string& km : q4_k_mma_kernels()) kernels.push_back(km);
    }
    // Per configuration and M: the layer's summed time (one configuration for all 7
    // matrices, as the launch table picks); the best dp4a and tensor-core ones are printed.
    std::map<std::string, double> layer_cfg[5];
    double layer_dp4a[5] = {}, layer_mma[5] = {};
    // Fill the pool with this scheme's blocks (one 64 MiB draw, replicated on the device; a
    // slot need not start on a copy's block boundary, which timing does not notice: no
    // kernel branches on weight values).
    {
      const int64_t cols = 4096, row_bytes = ref::int8_scheme_row_bytes(s, cols);
      const int64_t rows = (64ll << 20) / row_bytes;
      const std::vector<uint8_t> w = random_weight(rng, sch, rows, cols, "random");
      pool.put(w.data(), w.size());
      const uint64_t chunk = align256(w.size()) - 256;
      for (uint64_t off = chunk; off + chunk <= kPool; off += chunk) launch_copy(pool.ptr(), pool.at(off), chunk & ~uint64_t{15});
      Driver::ok(cu.StreamSynchronize(st), "cuStreamSynchronize (pool fill)");
    }
    double layer_bytes = 0, layer_new[5] = {}, layer_old[5] = {}, layer_read = 0;
    for (const Shape& sh : kShapes) {
      const int64_t row_bytes = ref::int8_scheme_row_bytes(s, sh.cols);
      const uint64_t wbytes = static_cast<uint64_t>(row_bytes * sh.rows), slot = align256(wbytes);
      const int slots = static_cast<int>(kPool / slot);
      const double t_read = timer.us([&](int i) {
        const void* src = pool.at(static_cast<uint64_t>(i % slots) * slot);
        int64_t n = static_cast<int64_t>(wbytes / 16);
        void* sp = sink.ptr();
        void* args[] = {&src, &n, &sp};
        k.launch(read, static_cast<unsigned>(sms * 8), 1, 256, args, st);
      });
      layer_bytes += sh.per_layer * static_cast<double>(wbytes);
      layer_read += sh.per_layer * t_read;
      for (int mi = 0; mi < 5; ++mi) {
        const int64_t m = kMs[mi];
        const int nt = tile_tokens(m);
        // Today's kernel, as ops_matmul.cpp launches it (4 rows per 128-thread block).
        memra_kernel* old = k.get("matmul_" + sch, "memra_gemv_" + sch + "_t" + std::to_string(nt));
        const double t_old = timer.us([&](int i) {
          const void* w = pool.at(static_cast<uint64_t>(i % slots) * slot);
          const void* xp = xf.ptr();
          void* yp = y.ptr();
          const void* bias = nullptr;
          int64_t rb = row_bytes, rows = sh.rows, cols = sh.cols, mm = m;
          void* args[] = {&w, &rb, &rows, &cols, &xp, &mm, &yp, &bias};
          k.launch(old, static_cast<unsigned>((rows + 3) / 4), static_cast<unsigned>((m + nt - 1) / nt), 128, args, st);
        });
        double best = 1e30, best_dp4a = 1e30, best_mma = 1e30;
        std::string best_cfg, best_dp4a_cfg, best_mma_cfg;
        for (const std::string& kern : kernels)
          for (int r : is_mma_kernel(kern) ? std::vector<int>{16} : std::vector<int>(std::begin(kRs), std::end(kRs)))
            for (int64_t bps : is_mma_kernel(kern) ? std::vector<int64_t>{0, 1, 2, 4} : std::vector<int64_t>{0, 4, 8}) {
              if (!has_tile(kern, m)) continue;
              const double t = timer.us([&](int i) {
                launch_gemv8(k, s, r,
                             {pool.at(static_cast<uint64_t>(i % slots) * slot), row_bytes, sh.rows, sh.cols, xq.ptr(), xm.ptr(),
                              m, y.ptr(), nullptr},
                             st, kern, bps * sms);
              });
              const std::string cfg = kern + " R=" + std::to_string(r) + " " + (bps ? std::to_string(bps) + "/SM" : "all");
              std::printf("cfg %s %s M=%lld %s: %.2f us\n", sch.c_str(), sh.name, static_cast<long long>(m), cfg.c_str(), t);
              if (t < best) best = t, best_cfg = cfg;
              if (is_mma_kernel(kern) && t < best_mma) best_mma = t, best_mma_cfg = cfg;
              if (!is_mma_kernel(kern) && t < best_dp4a) best_dp4a = t, best_dp4a_cfg = cfg;
              layer_cfg[mi][cfg] += sh.per_layer * t;
            }
        layer_dp4a[mi] += sh.per_layer * best_dp4a;
        if (best_mma < 1e30) {
          layer_mma[mi] += sh.per_layer * best_mma;
          const double wgb = static_cast<double>(wbytes) / 1e3;
          std::printf("bench: %s %s M=%lld dp4a %.2f us (%s, %.1f %% of copy) | mma %.2f us (%s, %.1f %% of copy) | %.2fx\n",
                      sch.c_str(), sh.name, static_cast<long long>(m), best_dp4a, best_dp4a_cfg.c_str(),
                      100.0 * wgb / best_dp4a / copy_gbs, best_mma, best_mma_cfg.c_str(), 100.0 * wgb / best_mma / copy_gbs,
                      best_dp4a / best_mma);
        }
        const double act_new = static_cast<double>(m * sh.cols + m * sh.cols / 32 * 8), act_old = static_cast<double>(m * sh.cols * 4);
        const double out = static_cast<double>(m * sh.rows * 4);
        const double gbs = (static_cast<double>(wbytes) + act_new + out) / (best * 1e3);
        const double gbs_old = (static_cast<double>(wbytes) + act_old + out) / (t_old * 1e3);
        std::printf("| %s | %s %lldx%lld | %lld | %.2f | %.2f (%s) | %.0f | %.1f | %.2f (%.1f) | %.0f |\n", sch.c_str(), sh.name,
                    static_cast<long long>(sh.rows), static_cast<long long>(sh.cols), static_cast<long long>(m), t_old, best,
                    best_cfg.c_str(), gbs, 100.0 * gbs / copy_gbs, t_read,
                    100.0 * static_cast<double>(wbytes) / (t_read * 1e3) / copy_gbs, gbs_old);
        layer_new[mi] += sh.per_layer * best;
        layer_old[mi] += sh.per_layer * t_old;
      }
    }
    std::printf("bench: %s layer read ceiling (7 perfect streaming reads of its weights): %.1f us = %.0f GB/s (%.1f %% of copy)\n",
                sch.c_str(), layer_read, layer_bytes / (layer_read * 1e3), 100.0 * layer_bytes / (layer_read * 1e3) / copy_gbs);
    for (int mi = 0; mi < 5; ++mi) {
      std::vector<std::pair<double, std::string>> cfgs;
      for (const auto& [cfg, t] : layer_cfg[mi]) cfgs.push_back({t, cfg});
      std::sort(cfgs.begin(), cfgs.end());
      for (size_t i = 0; i < cfgs.size() && i < 4; ++i)
        std::printf("bench: %s layer M=%d one config for all 7: %s %.1f us\n", sch.c_str(), kMs[mi], cfgs[i].second.c_str(),
                    cfgs[i].first);
      if (s == Int8Scheme::q4_k)
        std::printf("bench: %s layer M=%d best per matrix: dp4a %.1f us (%.2fx M=1), mma %.1f us (%.2fx dp4a M=1)\n", sch.c_str(),
                    kMs[mi], layer_dp4a[mi], layer_dp4a[mi] / layer_dp4a[0], layer_mma[mi], layer_mma[mi] / layer_dp4a[0]);
    }
    for (int mi = 0; mi < 5; ++mi)
      std::printf("bench: %s Qwen3-8B layer (q,k,v,o,gate,up,down) M=%d: int8 %.1f us = %.0f GB/s of weights (%.1f %% of copy), "
                  "%.2fx the M=1 call; f32-act %.1f us (%.0f GB/s); speed-up %.2fx\n",
                  sch.c_str(), kMs[mi], layer_new[mi], layer_bytes / (layer_new[mi] * 1e3),
                  100.0 * layer_bytes / (layer_new[mi] * 1e3) / copy_gbs, layer_new[mi] / layer_new[0], layer_old[mi],
                  layer_bytes / (layer_old[mi] * 1e3), layer_old[mi] / layer_new[mi]);
  }
}

}  // namespace memra::kcheck
