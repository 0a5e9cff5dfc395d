// Runs CUDA kernel code on the host, one CTA at a time: the CTA's threads (up to 1024)
// are user-level fibers (ucontext) in one OS thread; __syncthreads, __syncwarp, the warp
// shuffles, warp-collective steps (ldmatrix, mma: warp_gather) and cp.async are emulated,
// and the CUDA vocabulary the kernels use (qualifiers, vector types, the correctly
// rounded f32 operations, bit casts) is defined here. A cp.async copy lands only when its
// thread waits for its group (cp.async.wait_group). A deadlock (a warp split between a
// warp step and a block barrier) throws. What it cannot show: timing, and the device's
// own expf/tanhf (the host's stand in).
// Used by the kernel emulators (decode_attention_emulator.hpp, gemv_int8_mma_emulator.hpp),
// which add their kernels' own primitives and include the kernel source last: this
// header defines CUDA's keywords as macros.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "repack/quant/fp_convert.hpp"

namespace memra::cuda_emu {

class Cta {
 public:
  static constexpr int kMaxThreads = 1024;

  Cta() : stacks_(new char[static_cast<size_t>(kMaxThreads) * kStack]) {}  // untouched until a fiber runs on it

  // Runs body() on `threads` threads (a multiple of 32) of one CTA to completion.
  template <class Body>
  void run(int threads, Body body);

  int tid() const { return cur_; }
  int threads() const { return threads_; }
  void block_barrier() { yield(kBlock); }
  void warp_barrier() { yield(kWarp); }
  float shfl_xor(float v, int offset) {
    xchg_[cur_] = v;
    yield(kWarp);
    const float r = xchg_[cur_ ^ offset];
    yield(kWarp);
    return r;
  }
  // Every lane of the warp deposits `mine`; each then reads the warp's 32 deposits (a
  // warp-collective step: ldmatrix, mma).
  template <class T>
  void warp_gather(const T& mine, T* all) {
    static_assert(sizeof(T) <= kSlot, "deposit too large");
    std::memcpy(slot_[cur_], &mine, sizeof(T));
    yield(kWarp);
    const int base = cur_ & ~31;
    for (int l = 0; l < 32; ++l) std::memcpy(&all[l], slot_[base + l], sizeof(T));
    yield(kWarp);
  }
  void cp_async(void* dst, const void* src, int bytes) { pending_[cur_].push_back(Copy{dst, src, bytes}); }
  void commit() {
    groups_[cur_].push_back(std::move(pending_[cur_]));
    pending_[cur_].clear();
  }
  void wait_groups(int keep) {  // all but the `keep` newest committed groups land
    auto& g = groups_[cur_];
    while (static_cast<int>(g.size()) > keep) {
      for (const Copy& c : g.front()) {
        if (c.bytes) std::memcpy(c.dst, c.src, 16);
        else std::memset(c.dst, 0, 16);
      }
      g.erase(g.begin());
    }
  }

 private:
  static constexpr size_t kStack = 64 * 1024;
  static constexpr size_t kSlot = 64;
  enum State { kRunnable, kBlock, kWarp, kDone };
  struct Copy {
    void* dst;
    const void* src;
    int bytes;
  };
  void yield(State s) {
    state_[cur_] = s;
    swapcontext(&ctx_[cur_], &main_);
  }
  static void entry();
  void run_all();  // the fibers of run(), until every one is done

  std::unique_ptr<char[]> stacks_;
  ucontext_t main_{}, ctx_[kMaxThreads]{};
  State state_[kMaxThreads]{};
  float xchg_[kMaxThreads]{};
  alignas(16) unsigned char slot_[kMaxThreads][kSlot]{};
  std::vector<Copy> pending_[kMaxThreads];
  std::vector<std::vector<Copy>> groups_[kMaxThreads];
  int cur_ = 0, threads_ = 0;
  void (*body_)(void*) = nullptr;
  void* arg_ = nullptr;
};

inline Cta* g_cta = nullptr;

inline void Cta::entry() {
  g_cta->body_(g_cta->arg_);
  g_cta->state_[g_cta->cur_] = kDone;  // uc_link returns to the scheduler
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"  // arg_ is used only while run() is on the stack
template <class Body>
void Cta::run(int threads, Body body) {
  if (threads <= 0 || threads > kMaxThreads || threads % 32 != 0) throw std::invalid_argument("CTA emulator: bad thread count");
  g_cta = this;
  threads_ = threads;
  body_ = [](void* b) { (*static_cast<Body*>(b))(); };
  arg_ = &body;
  run_all();
}
#pragma GCC diagnostic pop

inline void Cta::run_all() {
  for (int i = 0; i < threads_; ++i) {
    getcontext(&ctx_[i]);
    ctx_[i].uc_stack.ss_sp = stacks_.get() + static_cast<size_t>(i) * kStack;
    ctx_[i].uc_stack.ss_size = kStack;
    ctx_[i].uc_link = &main_;
    makecontext(&ctx_[i], &Cta::entry, 0);
    state_[i] = kRunnable;
    pending_[i].clear();
    groups_[i].clear();
  }
  for (;;) {
    bool ran = false;
    for (int i = 0; i < threads_; ++i)
      if (state_[i] == kRunnable) {
        cur_ = i;
        swapcontext(&main_, &ctx_[i]);
        ran = true;
      }
    int done = 0, at_block = 0;
    for (int i = 0; i < threads_; ++i) done += state_[i] == kDone, at_block += state_[i] == kBlock;
    if (done == threads_) return;
    bool released = false;
    if (at_block + done == threads_) {
      for (int i = 0; i < threads_; ++i)
        if (state_[i] == kBlock) state_[i] = kRunnable;
      released = true;
    } else {
      for (int w = 0; w < threads_ / 32; ++w) {
        int waiting = 0, live = 0;
        for (int l = 0; l < 32; ++l) {
          waiting += state_[w * 32 + l] == kWarp;
          live += state_[w * 32 + l] != kDone;
        }
        if (waiting > 0 && waiting == live) {
          for (int l = 0; l < 32; ++l)
            if (state_[w * 32 + l] == kWarp) state_[w * 32 + l] = kRunnable;
          released = true;
        }
      }
    }
    if (!ran && !released) throw std::runtime_error("CTA emulator: deadlock (a warp split between barriers)");
  }
}

}  // namespace memra::cuda_emu

// The CUDA vocabulary.
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n)
#define __shared__ static  // one CTA at a time: a static is the CTA's shared variable
using std::max;
using std::min;
struct float4 {
  float x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
struct float2 {
  float x, y;
};
inline float2 make_float2(float a, float b) { return {a, b}; }
struct uint2 {
  uint32_t x, y;
};
inline uint2 make_uint2(uint32_t a, uint32_t b) { return {a, b}; }
struct uint4 {
  uint32_t x, y, z, w;
};
inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return {a, b, c, d}; }
struct int4 {
  int x, y, z, w;
};
inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
// Correctly rounded f32 operations (the host's, round to nearest even).
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __bfloat162float(__nv_bfloat16 b) { return __uint_as_float(static_cast<uint32_t>(b.bits) << 16); }
struct __half {
  uint16_t bits;
};
inline float __half2float(__half h) { return memra::quant::fp16_to_f32(h.bits); }
inline __half __ushort_as_half(uint16_t bits) { return __half{bits}; }
// prmt (CUDA's __byte_perm): byte n of the result is byte s[n] (0..7, the selector
// nibble's low three bits) of the 8 bytes {y:x}.
inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t v = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) r |= static_cast<uint32_t>((v >> (8 * ((s >> (4 * n)) & 7u))) & 0xffu) << (8 * n);
  return r;
}
// The integer SIMD and funnel-shift intrinsics.
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i)
    c += static_cast<int>(static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i))) *
         static_cast<int>(static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i)));
  return c;
}
inline uint32_t __vsub4(uint32_t a, uint32_t b) {  // per byte, modulo 256
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= ((((a >> (8 * i)) & 0xffu) - ((b >> (8 * i)) & 0xffu)) & 0xffu) << (8 * i);
  return r;
}
inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t shift) {  // shift mod 32
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> (shift & 31u));
}
inline uint32_t __funnelshift_rc(uint32_t lo, uint32_t hi, uint32_t shift) {  // shift clamped to 32
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> std::min(shift, 32u));
}
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
struct Dim3Emu {
  unsigned x = 0, y = 0, z = 0;
};
// threadIdx.x reads the running fiber's index; blockDim.x its CTA's size.
struct ThreadIdxView {
  struct X {
    operator unsigned() const { return static_cast<unsigned>(memra::cuda_emu::g_cta->tid()); }
  } x;
};
struct BlockDimView {
  struct X {
    operator unsigned() const { return static_cast<unsigned>(memra::cuda_emu::g_cta->threads()); }
  } x;
  unsigned y = 1, z = 1;
};
inline ThreadIdxView threadIdx;
inline BlockDimView blockDim;
inline Dim3Emu blockIdx, gridDim{1, 1, 1};
inline void __syncthreads() { memra::cuda_emu::g_cta->block_barrier(); }
inline void __syncwarp(unsigned = 0xffffffffu) { memra::cuda_emu::g_cta->warp_barrier(); }
inline float __shfl_xor_sync(unsigned, float v, int offset) { return memra::cuda_emu::g_cta->shfl_xor(v, offset); }
inline int __shfl_xor_sync(unsigned, int v, int offset) {  // the int's bits through the float exchange
  float f;
  std::memcpy(&f, &v, 4);
  f = memra::cuda_emu::g_cta->shfl_xor(f, offset);
  std::memcpy(&v, &f, 4);
  return v;
}
inline void cp_async16(void* dst, const void* src, int src_bytes) { memra::cuda_emu::g_cta->cp_async(dst, src, src_bytes); }
inline void cp_async_commit() { memra::cuda_emu::g_cta->commit(); }
template <int N>
inline void cp_async_wait() {
  memra::cuda_emu::g_cta->wait_groups(N);
}

namespace memra::cuda_emu {

// Launches a grid (gx, gy) of `threads`-thread CTAs: body() runs once per thread with
// blockIdx and gridDim set; before each CTA, prepare() (e.g. poisoning its shared memory).
// One CTA for every launch of the process (its 64 MB of fiber stacks allocated once).
inline Cta& process_cta() {
  static Cta* cta = new Cta;
  return *cta;
}

template <class Body, class Prepare>
void launch(unsigned gx, unsigned gy, int threads, Body body, Prepare prepare) {
  Cta& cta = process_cta();
  gridDim.x = gx;
  gridDim.y = gy;
  for (unsigned y = 0; y < gy; ++y)
    for (unsigned x = 0; x < gx; ++x) {
      blockIdx.x = x;
      blockIdx.y = y;
      prepare();
      cta.run(threads, body);
    }
}

}  // namespace memra::cuda_emu
