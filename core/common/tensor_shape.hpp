// Element counts of memra_tensor descriptors (sdk/include/memra/backend.h), shared by
// the CPU and CUDA backends and the pipeline backend.
#pragma once

#include <cstdint>

#include "memra/backend.h"

namespace memra {

inline int64_t tensor_numel(const memra_tensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

// The innermost (row) length; 1 for a scalar.
inline int64_t tensor_last_dim(const memra_tensor* t) { return t->ndim > 0 ? t->shape[t->ndim - 1] : 1; }

}  // namespace memra
