#include "kernels/gather/gather_rows_ref.hpp"

#include <algorithm>

namespace memra::ref {

void gather_rows(const float* x, int64_t dim, const int32_t* rows, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) std::copy_n(x + static_cast<int64_t>(rows[i]) * dim, dim, out + i * dim);
}

}  // namespace memra::ref
