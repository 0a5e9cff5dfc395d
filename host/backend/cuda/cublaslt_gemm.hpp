// The prompt-row GEMM through cuBLASLt (the single-pass bf16 product: bf16 activations
// and weights, f32 accumulation and output), where the library is installed.
//
// cuBLASLt is opened at run time (dlopen of libcublasLt.so.13: the system's, the CUDA
// toolkit's, or a Python wheel's; BackendOptions::cublaslt names another or turns it
// off), so the backend loads without it and then keeps its own tensor-core GEMM.
//
// Batch invariance (docs/ARCHITECTURE.md, numeric contract clause 3): one algorithm is
// pinned per (N, K, bias) for every M — chosen by the heuristic at a large M, split-K
// and reduction schemes excluded — and it is accepted only after a self-check on the
// device: the same rows computed at M = 1, 17 and 512 must be bitwise equal. A shape
// with no candidate that passes is served by the own GEMM for every M.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "core/common/result.hpp"

namespace memra::backend::cuda {

class CublasLtGemm {
 public:
  // nullptr (and `why`) when the library cannot be opened; `path` "" searches.
  static std::unique_ptr<CublasLtGemm> open(const std::string& path, CUstream stream, std::string* why);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // out[m][ldo] (f32, row-major) = x[m][k] (bf16) · w[n][k]ᵀ (bf16) (+ bias[n], f32).
  // unsupported when no invariant algorithm exists for (n, k): the caller runs its own GEMM.
  Status run(CUdeviceptr w, int64_t n, int64_t k, CUdeviceptr x, int64_t m, CUdeviceptr out, int64_t ldo, CUdeviceptr bias);

  const std::string& library() const { return library_; }
  int64_t shapes_pinned() const;
  int64_t shapes_refused() const;

 private:
  struct Api;
  struct Plan;
  CublasLtGemm() = default;
  Result<const Plan*> plan(CUdeviceptr w, int64_t n, int64_t k, CUdeviceptr bias);
  Status matmul(const Plan& p, CUdeviceptr w, int64_t n, int64_t k, CUdeviceptr x, int64_t m, CUdeviceptr out, int64_t ldo,
                CUdeviceptr bias);

  std::unique_ptr<Api> api_;
  std::string library_;
  CUstream stream_ = nullptr;
  void* handle_ = nullptr;  // cublasLtHandle_t
  CUdeviceptr workspace_ = 0;
  uint64_t workspace_bytes_ = 0;
  std::map<std::tuple<int64_t, int64_t, bool>, std::unique_ptr<Plan>> plans_;
};

}  // namespace memra::backend::cuda
