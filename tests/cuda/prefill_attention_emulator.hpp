// A host emulation of the prefill attention kernel (kernels/attention/
// prefill_attention_body.cuh): each CTA's 128 threads run the kernel body as fibers of the
// shared fiber CTA (cta_fibers.hpp) in one OS thread, and the warp-collective primitives are built from
// the PTX ISA's fragment layouts (ldmatrix .x4 / .x4.trans, mma.m16n8k16 bf16 with f32
// accumulation, shfl.xor). It checks what a GPU run would first trip on: the index math,
// the swizzled shared-memory layout (bounds, alignment, and races — a read of a chunk
// written since the last CTA barrier, or a write to a chunk another warp read since it),
// the masks and the tile schedule. What it cannot show: the tensor cores' own
// accumulation order (the emulated mma adds c, then the 16 products in k order).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/attention/prefill_attention_body.cuh"
#include "tests/cuda/cta_fibers.hpp"
#include "tests/cuda/cta_mma.hpp"
#include "repack/quant/fp_convert.hpp"

namespace memra::attn::emu {

inline uint16_t bf16_rn(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_float(uint32_t h) {
  const uint32_t u = (h & 0xffffu) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// One CTA's state: shared memory with race tracking; its
// threads run as fibers of the shared fiber CTA (cta_fibers.hpp).
class Cta {
 public:
  static constexpr int kThreads = kPrefillThreads, kWarps = kPrefillWarps;

  Cta(int index, size_t smem_bytes) : index_(index), smem_(smem_bytes), chunks_((smem_bytes + 15) / 16) {}

  // Runs body(this, tid) on every thread to completion; returns the first error ("" if none).
  template <class Body>
  std::string run(Body body);

  int index() const { return index_; }
  std::vector<uint8_t>& smem() { return smem_; }
  void error(const std::string& e) {
    if (error_.empty()) error_ = e;
  }

  void warp_barrier(int) { fibers_->warp_barrier(); }
  void block_barrier() { fibers_->block_barrier(); }
  uint64_t generation() const { return fibers_->block_generation(); }

  // Shared-memory race tracking per 16-byte chunk.
  void note_write(uint32_t addr, uint32_t bytes, int warp);
  void note_read(uint32_t addr, uint32_t bytes, int warp);

  // The fibers' warp collectives (shuffles, warp_gather) for the ops.
  cuda_emu::Cta& fibers() { return *fibers_; }
  int current() const { return fibers_->tid(); }

 private:
  struct Chunk {
    uint64_t write_gen = UINT64_MAX, read_gen = UINT64_MAX;
    int writer = -1;
    uint32_t readers = 0;
  };

  int index_;
  std::vector<uint8_t> smem_;
  std::vector<Chunk> chunks_;
  std::string error_;
  cuda_emu::Cta* fibers_ = nullptr;
};

template <class Body>
std::string Cta::run(Body body) {
  fibers_ = &cuda_emu::process_cta();
  try {
    fibers_->run(kThreads, [&] { body(this, fibers_->tid()); });
  } catch (const std::runtime_error&) {
    error("deadlock: threads wait on barriers that not every thread reaches (divergent collective or barrier)");
  }
  return error_;
}

inline void Cta::note_write(uint32_t addr, uint32_t bytes, int warp) {
  if (addr % 16 != 0 || bytes != 16 || addr + bytes > smem_.size()) {
    error("shared store out of bounds or misaligned at byte " + std::to_string(addr));
    return;
  }
  Chunk& c = chunks_[addr / 16];
  if (c.write_gen == generation() && c.writer != warp)
    error("race: two warps write shared chunk " + std::to_string(addr) + " between barriers");
  if (c.read_gen == generation() && (c.readers & ~(1u << warp)))
    error("race: shared chunk " + std::to_string(addr) + " written after another warp read it, with no barrier between");
  c.write_gen = generation();
  c.writer = warp;
}

inline void Cta::note_read(uint32_t addr, uint32_t bytes, int warp) {
  if (addr % 16 != 0 || bytes != 16 || addr + bytes > smem_.size()) {
    error("ldmatrix row out of bounds or misaligned at byte " + std::to_string(addr));
    return;
  }
  Chunk& c = chunks_[addr / 16];
  if (c.write_gen == generation())
    error("race: shared chunk " + std::to_string(addr) + " read with no barrier since it was written");
  if (c.write_gen == UINT64_MAX) error("shared chunk " + std::to_string(addr) + " read before any write");
  if (c.read_gen != generation()) {
    c.read_gen = generation();
    c.readers = 0;
  }
  c.readers |= 1u << warp;
}

// A global buffer the emulated kernel may touch.
struct Span {
  const void* data;
  size_t bytes;
};

// The body's primitives (prefill_attention_body.cuh) on a fiber.
class HostOps {
 public:
  HostOps(Cta* c, int tid, std::vector<Span> readable, Span writable)
      : c_(c), tid_(tid), readable_(std::move(readable)), writable_(writable) {}
  int tid() const { return tid_; }
  int cta() const { return c_->index(); }
  uint32_t smem() const { return 0; }
  void sync() { c_->block_barrier(); }
  void syncwarp() { c_->warp_barrier(warp()); }
  float shfl_xor(float v, int mask) { return c_->fibers().shfl_xor(v, mask); }
  void split2(float a, float b, uint32_t& hi, uint32_t& lo) const {
    const uint16_t ha = bf16_rn(a), hb = bf16_rn(b);
    const float fa = bf16_float(ha), fb = bf16_float(hb);
    const uint16_t la = bf16_rn(std::isfinite(fa) ? a - fa : 0.0f), lb = bf16_rn(std::isfinite(fb) ? b - fb : 0.0f);
    hi = static_cast<uint32_t>(ha) | (static_cast<uint32_t>(hb) << 16);
    lo = static_cast<uint32_t>(la) | (static_cast<uint32_t>(lb) << 16);
  }
  void st_shared_v4(uint32_t addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    c_->note_write(addr, 16, warp());
    if (addr % 16 != 0 || addr + 16 > c_->smem().size()) return;
    const uint32_t w[4] = {a, b, c, d};
    std::memcpy(c_->smem().data() + addr, w, 16);
  }
  void load8(const float* src, float (&v)[8]) {
    if (!inside(src, 32, readable_)) {
      c_->error("global load of 8 floats outside the kernel's inputs (thread " + std::to_string(tid_) + ")");
      for (float& x : v) x = NAN;
      return;
    }
    if (reinterpret_cast<uintptr_t>(src) % 16 != 0) c_->error("global float4 load misaligned");
    std::memcpy(v, src, 32);
  }
  void load8_16bit(const uint16_t* src, uint32_t (&w)[4]) {
    if (!inside(src, 16, readable_)) {
      c_->error("global load of 8 16-bit elements outside the kernel's inputs (thread " + std::to_string(tid_) + ")");
      for (uint32_t& x : w) x = 0x7fc07fc0u;  // NaN pairs
      return;
    }
    if (reinterpret_cast<uintptr_t>(src) % 16 != 0) c_->error("global uint4 load misaligned");
    std::memcpy(w, src, 16);
  }
  float load_f32(const uint8_t* src) {
    if (!inside(src, 4, readable_)) {
      c_->error("global load of an fp8 row's scale outside the kernel's inputs (thread " + std::to_string(tid_) + ")");
      return NAN;
    }
    if (reinterpret_cast<uintptr_t>(src) % 4 != 0) c_->error("global f32 load misaligned");
    float f;
    std::memcpy(&f, src, 4);
    return f;
  }
  void load8_fp8_bf16(const uint8_t* src, uint32_t (&w)[4]) {
    if (!inside(src, 8, readable_)) {
      c_->error("global load of 8 fp8 codes outside the kernel's inputs (thread " + std::to_string(tid_) + ")");
      for (uint32_t& x : w) x = 0x7fc07fc0u;  // NaN pairs
      return;
    }
    if (reinterpret_cast<uintptr_t>(src) % 8 != 0) c_->error("global uint2 load misaligned");
    for (int i = 0; i < 4; ++i)
      w[i] = static_cast<uint32_t>(memra::quant::f32_to_bf16(memra::quant::f8_e4m3_to_f32(src[2 * i]))) |
             (static_cast<uint32_t>(memra::quant::f32_to_bf16(memra::quant::f8_e4m3_to_f32(src[2 * i + 1]))) << 16);
  }
  void store2(float* dst, float x, float y) {
    if (!inside(dst, 8, {writable_})) {
      c_->error("global store outside the output (thread " + std::to_string(tid_) + ")");
      return;
    }
    if (reinterpret_cast<uintptr_t>(dst) % 8 != 0) c_->error("global float2 store misaligned");
    dst[0] = x;
    dst[1] = y;
  }
  // Matrix i's 8 row addresses come from lanes 8i..8i+7; lane L gets row L/4, elements
  // 2(L%4), 2(L%4)+1 (non-transposed) or rows 2(L%4), 2(L%4)+1 of column L/4 (.trans).
  void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) { ldmatrix(addr, r, false); }
  void ldmatrix_x4_trans(uint32_t addr, uint32_t (&r)[4]) { ldmatrix(addr, r, true); }
  void split2_f16(float a, float b, uint32_t& hi, uint32_t& lo) const {
    const uint16_t ha = memra::quant::f32_to_fp16(a), hb = memra::quant::f32_to_fp16(b);
    const float fa = memra::quant::fp16_to_f32(ha), fb = memra::quant::fp16_to_f32(hb);
    const uint16_t la = memra::quant::f32_to_fp16(std::isfinite(fa) ? a - fa : 0.0f),
                   lb = memra::quant::f32_to_fp16(std::isfinite(fb) ? b - fb : 0.0f);
    hi = static_cast<uint32_t>(ha) | (static_cast<uint32_t>(hb) << 16);
    lo = static_cast<uint32_t>(la) | (static_cast<uint32_t>(lb) << 16);
  }
  // m16n8k16 (cuda_emu::mma_m16n8k16: the fragment layout, products added in k order).
  void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) { mma_of(d, a, b0, b1, false); }
  void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) { mma_of(d, a, b0, b1, true); }
  void mma_of(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool f16) {
    memra::cuda_emu::mma_m16n8k16(c_->fibers(), d, a, b0, b1, f16);
  }

 private:
  int lane() const { return tid_ & 31; }
  int warp() const { return tid_ >> 5; }
  static bool inside(const void* p, size_t bytes, const std::vector<Span>& spans) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (const Span& s : spans) {
      const auto* lo = static_cast<const uint8_t*>(s.data);
      if (b >= lo && b + bytes <= lo + s.bytes) return true;
    }
    return false;
  }
  void ldmatrix(uint32_t addr, uint32_t (&r)[4], bool trans) {
    uint32_t rows[32];
    c_->fibers().warp_gather(addr, rows);
    const int L = lane();
    if (L == 0)
      for (int i = 0; i < 32; ++i) c_->note_read(rows[i], 16, warp());
    const auto half = [&](uint32_t a) -> uint32_t {
      if (a + 2 > c_->smem().size()) return 0;
      uint16_t h;
      std::memcpy(&h, c_->smem().data() + a, 2);
      return h;
    };
    const int g = L >> 2, t = L & 3;
    for (int i = 0; i < 4; ++i) {
      if (!trans) {
        const uint32_t row = rows[8 * i + g];
        r[i] = half(row + 4 * t) | (half(row + 4 * t + 2) << 16);
      } else {
        r[i] = half(rows[8 * i + 2 * t] + 2 * g) | (half(rows[8 * i + 2 * t + 1] + 2 * g) << 16);
      }
    }
    c_->warp_barrier(warp());  // every lane has read the tile before any writes shared memory again
  }

  Cta* c_;
  int tid_;
  std::vector<Span> readable_;
  Span writable_;
};

// The kernel over a plan: CTAs one after the other. Returns the first error or "".
struct KernelArgs {
  const float* q;
  const void *k_cache, *v_cache;  // float, uint16_t bf16 bits when kv_bf16, fp8 blocks when kv_fp8
  size_t q_bytes, cache_bytes;
  bool kv_bf16;
  bool kv_fp8 = false;
  bool kv_f16 = false;  // k_cache / v_cache: f16 bits
  int32_t heads, kv_heads, head_dim, block_size;
  const int32_t *positions, *block_tables;
  int32_t max_blocks;
  float scale;
  int32_t window;
  float softcap;
  const int32_t* tasks;
  int32_t ctas;
  float* out;
  size_t out_bytes;
};

inline std::string run_prefill_attention(const KernelArgs& a) {
  for (int32_t c = 0; c < a.ctas; ++c) {
    Cta cta(c, static_cast<size_t>(prefill_attention_smem_bytes(a.head_dim)));
    const std::string err = cta.run([&](Cta* ctx, int tid) {
      HostOps ops(ctx, tid, {{a.q, a.q_bytes}, {a.k_cache, a.cache_bytes}, {a.v_cache, a.cache_bytes}}, {a.out, a.out_bytes});
      auto body = [&](auto d, auto* kv_type) {
        using KvT = std::remove_pointer_t<decltype(kv_type)>;
        prefill_attention_body<decltype(d)::value, KvT>(
            ops, a.q, static_cast<const KvT*>(a.k_cache), static_cast<const KvT*>(a.v_cache), a.heads, a.kv_heads,
            a.block_size, a.positions, a.block_tables, a.max_blocks, a.scale, a.window, a.softcap, a.tasks, a.out);
      };
      using D64 = std::integral_constant<int, 64>;
      using D128 = std::integral_constant<int, 128>;
      using D256 = std::integral_constant<int, 256>;
      auto by_dim = [&](auto* kv_type) {
        if (a.head_dim == 64) body(D64{}, kv_type);
        else if (a.head_dim == 128) body(D128{}, kv_type);
        else body(D256{}, kv_type);
      };
      if (a.kv_f16) by_dim(static_cast<PaF16*>(nullptr));
      else if (a.kv_fp8) by_dim(static_cast<PaFp8*>(nullptr));
      else if (a.kv_bf16) by_dim(static_cast<uint16_t*>(nullptr));
      else by_dim(static_cast<float*>(nullptr));
    });
    if (!err.empty()) return "CTA " + std::to_string(c) + ": " + err;
  }
  return "";
}

}  // namespace memra::attn::emu
