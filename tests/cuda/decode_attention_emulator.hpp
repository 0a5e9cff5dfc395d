// A host emulation of the decode attention kernels (kernels/attention/paged_attention.cu,
// included at the end of this header): a CTA's 128 threads run the kernel as user-level
// fibers (ucontext) in one OS thread, one CTA at a time; __syncthreads, the warp shuffles
// and cp.async are emulated. A cp.async copy lands only when its thread waits for its
// group (cp.async.wait_group), and shared memory starts as NaN, so a read of staged data
// before the wait and the barrier, or of anything never staged, shows up as NaN in the
// output. A deadlock (a warp split between a warp shuffle and a block barrier) throws.
// What it cannot show: the device's expf/tanhf (the host's stand in) and timing.
// Include it last: it defines CUDA's keywords as macros.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "repack/quant/fp_convert.hpp"

namespace memra::decode_emu {

class Cta {
 public:
  static constexpr int kThreads = 128;

  Cta() : stacks_(static_cast<size_t>(kThreads) * kStack) {}

  // Runs body() on every thread of one CTA to completion.
  template <class Body>
  void run(Body body);

  int tid() const { return cur_; }
  void block_barrier() { yield(kBlock); }
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

  std::vector<char> stacks_;
  ucontext_t main_{}, ctx_[kThreads]{};
  State state_[kThreads]{};
  float xchg_[kThreads]{};
  alignas(16) unsigned char slot_[kThreads][kSlot]{};
  std::vector<Copy> pending_[kThreads];
  std::vector<std::vector<Copy>> groups_[kThreads];
  int cur_ = 0;
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
void Cta::run(Body body) {
  g_cta = this;
  body_ = [](void* b) { (*static_cast<Body*>(b))(); };
  arg_ = &body;
  for (int i = 0; i < kThreads; ++i) {
    getcontext(&ctx_[i]);
    ctx_[i].uc_stack.ss_sp = stacks_.data() + static_cast<size_t>(i) * kStack;
    ctx_[i].uc_stack.ss_size = kStack;
    ctx_[i].uc_link = &main_;
    makecontext(&ctx_[i], &Cta::entry, 0);
    state_[i] = kRunnable;
    pending_[i].clear();
    groups_[i].clear();
  }
  for (;;) {
    bool ran = false;
    for (int i = 0; i < kThreads; ++i)
      if (state_[i] == kRunnable) {
        cur_ = i;
        swapcontext(&main_, &ctx_[i]);
        ran = true;
      }
    int done = 0, at_block = 0;
    for (int i = 0; i < kThreads; ++i) done += state_[i] == kDone, at_block += state_[i] == kBlock;
    if (done == kThreads) return;
    bool released = false;
    if (at_block + done == kThreads) {
      for (int i = 0; i < kThreads; ++i)
        if (state_[i] == kBlock) state_[i] = kRunnable;
      released = true;
    } else {
      for (int w = 0; w < kThreads / 32; ++w) {
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
    if (!ran && !released) throw std::runtime_error("decode attention emulator: deadlock (a warp split between barriers)");
  }
}
#pragma GCC diagnostic pop

}  // namespace memra::decode_emu

// The CUDA vocabulary paged_attention.cu and kernels/common/reduce.cuh use.
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
struct uint2 {
  uint32_t x, y;
};
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
struct float2 {
  float x, y;
};
inline float2 make_float2(float a, float b) { return {a, b}; }
// Correctly rounded f32 operations (the host's, round to nearest even).
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
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
inline float __fadd_rn(float a, float b) { return a + b; }
struct Dim3Emu {
  unsigned x = 0, y = 0, z = 0;
};
// threadIdx.x reads the running fiber's index.
struct ThreadIdxView {
  struct X {
    operator unsigned() const { return static_cast<unsigned>(memra::decode_emu::g_cta->tid()); }
  } x;
};
inline ThreadIdxView threadIdx;
inline Dim3Emu blockIdx, blockDim{128, 1, 1};
inline void __syncthreads() { memra::decode_emu::g_cta->block_barrier(); }
inline float __shfl_xor_sync(unsigned, float v, int offset) { return memra::decode_emu::g_cta->shfl_xor(v, offset); }
inline int __shfl_xor_sync(unsigned, int v, int offset) {  // the int's bits through the float exchange
  float f;
  std::memcpy(&f, &v, 4);
  f = memra::decode_emu::g_cta->shfl_xor(f, offset);
  std::memcpy(&v, &f, 4);
  return v;
}
inline void cp_async16(void* dst, const void* src, int src_bytes) { memra::decode_emu::g_cta->cp_async(dst, src, src_bytes); }
inline void cp_async_commit() { memra::decode_emu::g_cta->commit(); }
template <int N>
inline void cp_async_wait() {
  memra::decode_emu::g_cta->wait_groups(N);
}
alignas(16) inline unsigned char smem_raw[256 * 1024];

// The tensor-core primitives from the PTX ISA's fragment layouts (m16n8k16, 16-bit
// operands, f32 accumulation; ldmatrix .x4: lane l names row l % 8 of matrix l / 8 and
// receives, per matrix, row l / 4, columns 2 (l % 4) and + 1 — .trans: rows 2 (l % 4)
// and + 1 of column l / 4). The emulated mma adds c, then the 16 products in k order
// (the tensor cores' own accumulation order is not specified; only bounds and bit
// equalities between the emulator's own runs are checked here).
struct uint4 {
  uint32_t x, y, z, w;
};
inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return {a, b, c, d}; }
inline uint32_t to16(float x, __nv_bfloat16) { return memra::quant::f32_to_bf16(x); }
inline float from16(uint32_t h, __nv_bfloat16) { return __uint_as_float(h << 16); }
inline uint32_t to16(float x, __half) { return memra::quant::f32_to_fp16(x); }
// Two e4m3 codes (low 16 bits) as two f16 (exact: e4m3's values are f16 values).
inline uint32_t fp8x2_to_f16x2(uint32_t two) {
  const auto h = [](uint32_t c) {
    return static_cast<uint32_t>(memra::quant::f32_to_fp16(memra::quant::f8_e4m3_to_f32(static_cast<uint8_t>(c & 0xffu))));
  };
  return h(two) | (h(two >> 8) << 16);
}
inline float from16(uint32_t h, __half) { return memra::quant::fp16_to_f32(static_cast<uint16_t>(h)); }
namespace memra::decode_emu {
inline uint16_t half_at(const void* row, int col) {
  uint16_t h;
  std::memcpy(&h, static_cast<const unsigned char*>(row) + 2 * col, 2);
  return h;
}
inline void ldmatrix(uint32_t (&r)[4], const void* p, bool trans) {
  const void* rows[32];
  g_cta->warp_gather(p, rows);
  const int l = g_cta->tid() & 31;
  for (int k = 0; k < 4; ++k) {
    uint16_t e0, e1;
    if (trans) {
      e0 = half_at(rows[8 * k + 2 * (l % 4)], l / 4);
      e1 = half_at(rows[8 * k + 2 * (l % 4) + 1], l / 4);
    } else {
      e0 = half_at(rows[8 * k + l / 4], 2 * (l % 4));
      e1 = half_at(rows[8 * k + l / 4], 2 * (l % 4) + 1);
    }
    r[k] = e0 | (static_cast<uint32_t>(e1) << 16);
  }
}
template <class T>
inline void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  struct Frag {
    uint32_t a[4], b[2];
  };
  Frag all[32];
  g_cta->warp_gather(Frag{{a[0], a[1], a[2], a[3]}, {b0, b1}}, all);
  const int l = g_cta->tid() & 31;
  // A[row][k]: lane (row % 8) * 4 + (k % 8) / 2, register (row / 8) + 2 (k / 8), half k % 2.
  auto A = [&](int row, int k) {
    const uint32_t w = all[(row % 8) * 4 + (k % 8) / 2].a[(row / 8) + 2 * (k / 8)];
    return from16((k % 2) ? w >> 16 : w & 0xffffu, T{});
  };
  // B[k][col]: lane col * 4 + (k % 8) / 2, register k / 8, half k % 2.
  auto B = [&](int k, int col) {
    const uint32_t w = all[col * 4 + (k % 8) / 2].b[k / 8];
    return from16((k % 2) ? w >> 16 : w & 0xffffu, T{});
  };
  for (int i = 0; i < 4; ++i) {
    const int row = l / 4 + 8 * (i / 2), col = 2 * (l % 4) + (i % 2);
    float acc = d[i];
    for (int k = 0; k < 16; ++k) acc += A(row, k) * B(k, col);
    d[i] = acc;
  }
}
}  // namespace memra::decode_emu
inline void ldsm_x4(uint32_t (&r)[4], const void* p) { memra::decode_emu::ldmatrix(r, p, false); }
inline void ldsm_x4_trans(uint32_t (&r)[4], const void* p) { memra::decode_emu::ldmatrix(r, p, true); }
inline void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, __nv_bfloat16) {
  memra::decode_emu::mma<__nv_bfloat16>(d, a, b0, b1);
}
inline void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, __half) {
  memra::decode_emu::mma<__half>(d, a, b0, b1);
}

#include "kernels/attention/paged_attention.cu"  // (its #pragma unroll: the test builds with -Wno-unknown-pragmas)

namespace memra::decode_emu {

// Launches a grid (gx, gy) of one of the kernels: body() runs once per thread with
// blockIdx set; shared memory is NaN at the start of every CTA.
template <class Body>
void launch(unsigned gx, unsigned gy, Body body) {
  static Cta cta;
  for (unsigned y = 0; y < gy; ++y)
    for (unsigned x = 0; x < gx; ++x) {
      blockIdx.x = x;
      blockIdx.y = y;
      std::memset(smem_raw, 0xff, sizeof smem_raw);
      cta.run(body);
    }
}

}  // namespace memra::decode_emu
