// Integer-activation decode GEMV (numeric contract v2, q8_1-style activations), CPU
// reference. The CUDA kernels (gemv_int8.cuh) implement exactly this arithmetic.
//
// Activations. Each row of x (f32, cols a multiple of 32) is quantised on its own, in
// blocks of 32 consecutive elements (independent of the batch):
//   amax = max |x_i|                 (exact)
//   d    = amax / 127                (f32, round to nearest even)
//   q_i  = clamp(rint(x_i / d), -127, 127)   (f32 IEEE division, ties to even; q = 0 when d == 0)
//   s    = d * (float)sum_i q_i      (f32; the offset term of schemes with a min, e.g. q4_k)
// stored as int8 codes [m][cols] and one {d, s} pair of floats per block [m][cols/32].
// Inputs must be finite.
//
// Weights: the GGUF block layouts as memra repacks them (q8_0 34-byte blocks, q4_0
// 18-byte blocks; super-blocks of 256: q4_k 144 bytes, q5_k 176, q6_k 210, iq4_xs 136;
// repack/quant/dequant_kquants.cpp, dequant_iq4.cpp), rows of cols % 256 == 0 elements.
//
// Products. A "unit" is 32 weights x 32 activation codes (a q8_0/q4_0 block, a 32-element
// sub-block g = 0..7 of a super-block); u counts units along the row. The integer dot is
// exact; per unit, with dw the weight block's scale (f16 -> f32; q4_k/q5_k: d*sc, sc and
// mn the sub-block's 6-bit scale and min, d, dmin the super-block's f16 scales) and
// (da, sa) the activation's:
//   q8_0:  isum = sum q_w*q_a;          acc = fmaf((float)isum, dw*da, acc)
//   q4_0:  isum = sum (q_w - 8)*q_a;    acc = fmaf((float)isum, dw*da, acc)
//   q4_k:  isum = sum q_w*q_a;          acc = fmaf(dw*(float)isum, da, acc);
//          acc = fmaf(-(dmin*mn), sa, acc)
//   q5_k:  as q4_k with q_w = nibble | fifth bit << 4 (0..31)
//   q6_k:  q_w = 6-bit code - 32 (-32..31); the unit's halves (elements 0..15, 16..31)
//          have int8 scales sc0, sc1 (scales[2g], scales[2g+1]):
//          isum = sc0 * sum_{l<16} q_w*q_a + sc1 * sum_{l>=16} q_w*q_a   (int32);
//          acc = fmaf((float)isum, d*da, acc)
//   iq4_xs: q_w = kvalues[nibble] (the 16-entry int8 table kIq4nlValues), ls = the
//          sub-block's 6-bit scale - 32:
//          isum = ls * sum q_w*q_a   (int32);  acc = fmaf((float)isum, d*da, acc)
// Every isum is below 2^24 in magnitude (q6_k: 32*32*127*128, iq4_xs: 32*32*127*127), so
// (float)isum is exact.
// Order of the f32 sums (fixed by cols, never by M or the launch's tiling): unit u goes
// to partial p[u % 128] in ascending u; the 128 partials are four warps of 32, each
// summed by the xor butterfly (v = v + v[lane ^ off], off = 16, 8, 4, 2, 1); then
// y = ((w0 + w1) + w2) + w3 (+ bias). The kernels keep this order, so they match the
// reference bit for bit, for every M.
#pragma once

#include <cstdint>
#include <string>

namespace memra::ref {

enum class Int8Scheme { q8_0, q4_0, q4_k, q5_k, q6_k, iq4_xs };

// "q8_0" | "q4_0" | "q4_k" | "q5_k" | "q6_k" | "iq4_xs"; false otherwise.
bool int8_scheme(const std::string& name, Int8Scheme* out);

// The activation format of a matmul's rows: the one rule every backend follows (the CPU
// reference in the quant plugins, the CUDA backend's registry lookup, kernel-check);
// the name is the kernel registry's activation key (docs/ARCHITECTURE.md, "Per-scheme
// numerics"):
//  - int8x32: an integer scheme whose rows are whole 256-element runs, on its generated
//    rows (decode, speculative verify);
//  - bf16: bf16 and fp8 weights, every row (activations rounded to bf16, products of
//    the exact weights in f32);
//  - f32: any other weight (f32, f16, the other block schemes).
// Prompt rows (memra_forward_batch.prompt_tokens) follow bf16_prompt_matmul instead.
constexpr const char* kActivationInt8 = "int8x32";
constexpr const char* kActivationBf16 = "bf16";
constexpr const char* kActivationF32 = "f32";
bool int8_activation_matmul(const std::string& scheme, int64_t cols);
inline bool bf16_activation_matmul(const std::string& scheme) { return scheme == "bf16" || scheme == "fp8"; }
// The prompt rows' numerics: bf16 weights and the block and fp8 schemes (q8_0, q4_0,
// q4_k, q5_k, q6_k, iq4_xs, fp8: each weight dequantised exactly, then rounded to bf16)
// take bf16 activations, products exact in f32, f32 accumulation: the single-pass
// tensor-core GEMM. f32 and f16 weights keep f32 activations on prompt rows (the split GEMM).
bool bf16_prompt_matmul(const std::string& scheme);
// Whether prompt rows round the weights to bf16 (so differ from the generated rows'
// numerics): every bf16_prompt_matmul scheme but bf16 itself.
inline bool prompt_rounds_weights(const std::string& scheme) { return scheme != "bf16" && bf16_prompt_matmul(scheme); }
inline const char* matmul_activation(const std::string& scheme, int64_t cols) {
  if (int8_activation_matmul(scheme, cols)) return kActivationInt8;
  return bf16_activation_matmul(scheme) ? kActivationBf16 : kActivationF32;
}
int64_t int8_scheme_row_bytes(Int8Scheme s, int64_t cols);

constexpr int kInt8Block = 32;      // activation block (elements)
constexpr int kInt8Partials = 128;  // the kernels' threads per row (4 warps)

// x [m][cols] -> q [m][cols], meta [m][cols/32][2] = {d, s}. False when cols % 32 != 0.
bool quantize_act_q8(const float* x, int64_t m, int64_t cols, int8_t* q, float* meta);

// y[t][r] = sum_u unit(t, r, u) (+ bias[r]) in the order above. False when cols % 256 != 0.
bool gemv_int8(Int8Scheme s, const uint8_t* w, int64_t rows, int64_t cols, const int8_t* xq, const float* xmeta,
               int64_t m, const float* bias, float* y);

}  // namespace memra::ref
