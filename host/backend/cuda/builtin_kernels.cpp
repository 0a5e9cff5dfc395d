// The CUDA backend's own matmul kernels, registered in its kernel registry like any
// plugin's: each kernels/matmul module states the scheme it streams, its block
// geometry and its prefill-GEMM entry. A scheme not registered here or by a plugin has
// no CUDA matmul (refused at upload_weights, never a silent fallback).
#include "host/backend/cuda/builtin_kernels.hpp"

#include "kernels/matmul/gemv_int8_ref.hpp"
#include "kernels/matmul/gemv_mma_layout.hpp"

namespace memra::backend::cuda {
namespace {

using Gemm = BuiltinMatmul::Gemm;
constexpr int32_t kBuiltinScore = 100;  // a plugin outbids it with a higher score

Status add_gemv(KernelRegistry& r, const std::string& scheme, BuiltinMatmul m, const std::string& activation = "f32") {
  KernelEntry e;
  e.key = {"matmul", scheme, activation, r.device_arch()};
  e.score = kBuiltinScore;
  e.provider = "the CUDA backend";
  e.builtin = std::move(m);
  return r.add(std::move(e));
}

// kernels/matmul/matmul_float.cu: one module, a kernel pair per float type (row
// alignment picks the 16-byte or the scalar loads).
BuiltinMatmul float_gemv(const std::string& type, int64_t bytes, Gemm gemm) {
  BuiltinMatmul m;
  m.module = "matmul_float";
  m.gemv_suffix = type;
  m.suffix_by_alignment = true;
  m.block_elems = 1;
  m.block_bytes = bytes;
  m.gemm = gemm;
  m.gemm_unit = 8;
  return m;
}

// kernels/matmul/matmul_<scheme>.cu: one module per block scheme.
BuiltinMatmul block_gemv(const std::string& scheme, int64_t elems, int64_t bytes) {
  BuiltinMatmul m;
  m.module = "matmul_" + scheme;
  m.gemv_suffix = scheme;
  m.block_elems = elems;
  m.block_bytes = bytes;
  m.gemm = ref::bf16_prompt_matmul(scheme) ? Gemm::dequantized_bf16 : Gemm::dequantized;
  m.gemm_unit = 8;  // memra_gemm_dequant_<scheme> dequantises octets (Octets<S>)
  return m;
}

// kernels/matmul/matmul8_<scheme>.cu: the integer-activation GEMVs (int8x32
// activations of generated rows, numeric contract v2); prompt rows take the same
// GEMM as the f32-activation entry.
BuiltinMatmul int8_gemv(const std::string& scheme, int64_t elems, int64_t bytes) {
  BuiltinMatmul m = block_gemv(scheme, elems, bytes);
  m.module = "matmul8_" + scheme;
  m.int8_activations = true;
  return m;
}

}  // namespace

Status register_builtin_kernels(KernelRegistry& r) {
  MEMRA_TRY(add_gemv(r, "f32", float_gemv("f32", 4, Gemm::dequantized)));
  MEMRA_TRY(add_gemv(r, "f16", float_gemv("f16", 2, Gemm::dequantized)));
  // bf16 weights take bf16 activations on every row (the tensor-core GEMV rounds x on
  // load; prompt rows run the single-pass GEMM).
  BuiltinMatmul bf16 = float_gemv("bf16", 2, Gemm::streams_bf16);
  bf16.gemv_mma = true;
  bf16.mma_warps = memra::gemv_mma::kWarps;
  MEMRA_TRY(add_gemv(r, "bf16", std::move(bf16), ref::kActivationBf16));
  MEMRA_TRY(add_gemv(r, "q8_0", block_gemv("q8_0", 32, 34)));
  MEMRA_TRY(add_gemv(r, "q4_0", block_gemv("q4_0", 32, 18)));
  MEMRA_TRY(add_gemv(r, "q4_k", block_gemv("q4_k", 256, 144)));
  MEMRA_TRY(add_gemv(r, "q5_k", block_gemv("q5_k", 256, 176)));
  MEMRA_TRY(add_gemv(r, "q6_k", block_gemv("q6_k", 256, 210)));
  MEMRA_TRY(add_gemv(r, "iq4_xs", block_gemv("iq4_xs", 256, 136)));
  // fp8: per 128 columns an f32 scale + 128 codes; bf16 activations on every row, the
  // tensor-core GEMV (matmul_fp8.cu) on x prepared once per activation, prompt rows the
  // single-pass GEMM.
  BuiltinMatmul fp8 = block_gemv("fp8", 128, 132);
  fp8.gemv_mma = true;
  fp8.fp8_activations = true;
  fp8.mma_warps = memra::gemv_mma::kFp8Warps;
  fp8.gemm_unit = 32;  // memra_gemm_dequant_fp8: a thread per 32 elements
  MEMRA_TRY(add_gemv(r, "fp8", std::move(fp8), ref::kActivationBf16));
  // Integer schemes whose rows are whole 256-element runs take int8 activations
  // (ref::matmul_activation); the f32 entries above serve their other row lengths.
  MEMRA_TRY(add_gemv(r, "q8_0", int8_gemv("q8_0", 32, 34), ref::kActivationInt8));
  MEMRA_TRY(add_gemv(r, "q4_0", int8_gemv("q4_0", 32, 18), ref::kActivationInt8));
  MEMRA_TRY(add_gemv(r, "q4_k", int8_gemv("q4_k", 256, 144), ref::kActivationInt8));
  MEMRA_TRY(add_gemv(r, "q5_k", int8_gemv("q5_k", 256, 176), ref::kActivationInt8));
  MEMRA_TRY(add_gemv(r, "q6_k", int8_gemv("q6_k", 256, 210), ref::kActivationInt8));
  MEMRA_TRY(add_gemv(r, "iq4_xs", int8_gemv("iq4_xs", 256, 136), ref::kActivationInt8));
  return {};
}

}  // namespace memra::backend::cuda
