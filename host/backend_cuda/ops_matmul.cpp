// Matmul of the CUDA backend.
//
// Interim design: the backend implements every weight scheme itself with the
// dequant-on-the-fly GEMV kernels of kernels/matmul (one module per scheme). The
// target design is that each quant plugin's matmul slot (memra_quant_api.matmul with
// backend = MEMRA_BACKEND_CUDA) launches its own kernels through the host's kernel
// services; this file is then the fallback for the built-in schemes.
#include <algorithm>
#include <cstring>

#include "host/backend_cuda/cuda_backend.hpp"

namespace memra::backend::cuda {
namespace {

struct SchemeRow {
  const char* name;
  int block_elems;
  int block_bytes;
  bool is_float;
};
constexpr SchemeRow kSchemes[] = {
    {"f32", 1, 4, true},      {"f16", 1, 2, true},       {"bf16", 1, 2, true},      {"q8_0", 32, 34, false},
    {"q4_0", 32, 18, false},  {"q4_k", 256, 144, false}, {"q5_k", 256, 176, false}, {"q6_k", 256, 210, false},
    {"iq4_xs", 256, 136, false},
};

int64_t numel(const memra_tensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

}  // namespace

Result<SchemeInfo> CudaBackend::scheme(const memra_weight* w) const {
  if (!w->quant) return make_error(ErrorCode::invalid_argument, "weight has no quant scheme");
  std::string name(w->quant);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (w->ndim != 2) return make_error(ErrorCode::invalid_argument, std::string("weight ") + (w->name ? w->name : "?") + " is not a matrix");
  const int64_t cols = w->shape[1];
  for (const SchemeRow& s : kSchemes) {
    if (name != s.name) continue;
    if (cols <= 0 || cols % s.block_elems != 0)
      return make_error(ErrorCode::invalid_argument, "weight row length breaks the " + name + " block size");
    SchemeInfo info;
    info.row_bytes = static_cast<uint64_t>(cols / s.block_elems) * static_cast<uint64_t>(s.block_bytes);
    info.module = s.is_float ? "matmul_float" : "matmul_" + name;
    info.suffix = s.is_float ? name + (cols % 8 == 0 ? "_u8" : "_u1") : name;
    if (info.row_bytes * static_cast<uint64_t>(w->shape[0]) > w->bytes)
      return make_error(ErrorCode::invalid_argument, std::string("weight ") + (w->name ? w->name : "?") + " holds fewer bytes than its shape needs");
    return info;
  }
  return make_error(ErrorCode::unsupported, "the CUDA backend has no kernels for weight scheme '" + name +
                                                "' (it streams f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, iq4_xs); use the CPU backend or requantize");
}

memra_status CudaBackend::matmul(const memra_tensor* x, const memra_weight* w, const memra_weight* bias, memra_tensor* out) {
  memra_status st = MEMRA_OK;
  const CUdeviceptr wd = resolve(w, &st);
  if (st != MEMRA_OK) return st;
  CUdeviceptr bd = 0;
  if (bias) {
    if (bias->dtype != MEMRA_DTYPE_F32) return fail(MEMRA_ERR_INVALID_ARGUMENT, "matmul: bias must be F32");
    bd = resolve(bias, &st);
    if (st != MEMRA_OK) return st;
  }
  auto s = scheme(w);
  if (!s) return fail(s.error());
  const int64_t rows = w->shape[0], cols = w->shape[1];
  const int64_t xdim = x->ndim > 0 ? x->shape[x->ndim - 1] : 1;
  if (xdim != cols) return fail(MEMRA_ERR_INVALID_ARGUMENT, std::string("matmul: x width does not match ") + (w->name ? w->name : "?"));
  const int64_t m = numel(x) / cols;
  constexpr int64_t kTile = 16, kWarps = 4;  // kernels/matmul/gemv.cuh
  // Accumulators per lane: the smallest of 1, 2, 4, 8, 16 that holds min(m, 16)
  // tokens. Every variant computes a token identically (gemv.cuh), so the choice,
  // which depends on the batch, cannot change any token's bits.
  int64_t nt = 1;
  while (nt < std::min<int64_t>(m, kTile)) nt *= 2;
  const auto gx = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  const auto gy = static_cast<unsigned>((m + nt - 1) / nt);
  const std::string kernel = "memra_gemv_" + s->suffix + "_t" + std::to_string(nt);
  const int64_t row_bytes = static_cast<int64_t>(s->row_bytes);
  return launch(s->module.c_str(), kernel.c_str(), gx, gy, 32 * kWarps, 0, wd, row_bytes, rows, cols,
                reinterpret_cast<CUdeviceptr>(x->data), m, reinterpret_cast<CUdeviceptr>(out->data), bd);
}

}  // namespace memra::backend::cuda
