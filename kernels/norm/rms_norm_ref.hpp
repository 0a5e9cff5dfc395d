// RMSNorm, CPU reference: out = x / sqrt(mean(x^2) + eps) * (w + unit_offset).
// unit_offset is 1 for Gemma-style norms that store (w - 1).
#pragma once
#include <cstdint>

namespace memra::ref {

void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float unit_offset,
              float* out);

// residual += x; out = rms_norm(residual). The fused pre-norm of the next block.
void add_rms_norm(const float* x, float* residual, const float* w, int64_t rows, int64_t dim, float eps,
                  float unit_offset, float* out);

}  // namespace memra::ref
