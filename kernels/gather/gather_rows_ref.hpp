// Row gather, CPU reference: out[i] = x[rows[i]] ([n][dim] floats).
#pragma once
#include <cstdint>

namespace memra::ref {

void gather_rows(const float* x, int64_t dim, const int32_t* rows, int64_t n, float* out);

}  // namespace memra::ref
