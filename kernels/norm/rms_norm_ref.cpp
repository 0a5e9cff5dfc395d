#include "kernels/norm/rms_norm_ref.hpp"

#include <cmath>

namespace memra::ref {

void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float unit_offset,
              float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    float sum = 0.0f;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i] * xr[i];
    // Same order as transformers: x * rsqrt(mean + eps), then * weight.
    const float inv = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) o[i] = (xr[i] * inv) * (w[i] + unit_offset);
  }
}

void add_rms_norm(const float* x, float* residual, const float* w, int64_t rows, int64_t dim, float eps,
                  float unit_offset, float* out) {
  for (int64_t i = 0; i < rows * dim; ++i) residual[i] += x[i];
  rms_norm(residual, w, rows, dim, eps, unit_offset, out);
}

}  // namespace memra::ref
