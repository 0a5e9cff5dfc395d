// A host emulation of the integer-activation decode GEMVs (kernels/matmul/gemv_int8.cuh and
// gemv_int8_sb.cuh, the dp4a kernels of every integer scheme, and the activation
// quantisation) on the CTA emulator (cta_emulator.hpp): 128 fibers per CTA, the warp
// shuffles and barriers emulated, dp4a and the byte intrinsics exact. The kernels' f32
// arithmetic is the host's correctly rounded operations, so each kernel must equal
// ref::gemv_int8 (and ref::quantize_act_q8) bit for bit, as memra-kernel-check holds them
// on the GPU. Include it last: it defines CUDA's keywords as macros.
#pragma once

#include <string>

#include "tests/cuda/cta_emulator.hpp"

namespace memra::cuda::i8 {
inline uint4 ld_stream(const void* p) {
  uint4 v;
  std::memcpy(&v, p, 16);
  return v;
}
}  // namespace memra::cuda::i8

#include "plugins/quant-common/gemv_int8_blocks.cuh"  // (and gemv_int8.cuh; their #pragma unroll: built with -Wno-unknown-pragmas)
#include "plugins/quant-common/gemv_int8_sb.cuh"

namespace memra::cuda::i8_emu {

// One launch of the entry memra_gemv8_<kernel>_r<R>_t<NT> (kernel: "q8_0", "q4_0", "q4_k",
// "q4_k2", "q5_k", "q5_k2", "q6_k", "iq4_xs") over grid (gx, ceil(m / NT)); false for a
// kernel name it does not know.
template <int R, int NT>
bool launch(const std::string& kernel, unsigned gx, const memra::ref::GemvMats& ms, int64_t row_bytes, int64_t cols,
            const int8_t* xq, const float2* xm, int64_t m) {
  using namespace memra::cuda::i8;
  const auto gy = static_cast<unsigned>((m + NT - 1) / NT);
  auto go = [&](auto body) {
    memra::cuda_emu::launch(gx, gy, kThreads, body, [] {});
    return true;
  };
  if (kernel == "q8_0") return go([&] { gemv_staged<0, R, NT>(ms, row_bytes, cols, xq, xm, m); });
  if (kernel == "q4_0") return go([&] { gemv_staged<1, R, NT>(ms, row_bytes, cols, xq, xm, m); });
  if (kernel == "q4_k") return go([&] { gemv_q4_k<R, NT>(ms, row_bytes, cols, xq, xm, m); });
  if (kernel == "q4_k2") return go([&] { gemv_q4_k<R, NT, true>(ms, row_bytes, cols, xq, xm, m); });
  if (kernel == "q5_k") return go([&] { gemv_q4_k<R, NT, false, true>(ms, row_bytes, cols, xq, xm, m); });
  if (kernel == "q5_k2") return go([&] { gemv_q4_k<R, NT, true, true>(ms, row_bytes, cols, xq, xm, m); });
  if (kernel == "q6_k") return go([&] { gemv_sb_staged<0, R, NT>(ms, row_bytes, cols, xq, xm, m); });
  if (kernel == "iq4_xs") return go([&] { gemv_sb_staged<1, R, NT>(ms, row_bytes, cols, xq, xm, m); });
  return false;
}

// memra_quantize_act_q8 over m rows of x [m][cols] (128-thread blocks, one thread per 8 elements).
inline void quantize(const float* x, int64_t m, int64_t cols, int8_t* q, float2* meta) {
  const int64_t groups = m * cols / 8;
  memra::cuda_emu::launch(static_cast<unsigned>((groups + 127) / 128), 1, 128,
                          [&] { memra::cuda::i8::quantize_act_q8(x, groups, cols, nullptr, q, meta); }, [] {});
}

}  // namespace memra::cuda::i8_emu
