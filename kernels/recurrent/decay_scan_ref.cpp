#include "kernels/recurrent/decay_scan_ref.hpp"

namespace memra::ref {

void decay_scan_row(float decay, const float* x, int64_t width, float* state, float* y) {
  for (int64_t i = 0; i < width; ++i) {
    const float decayed = decay * state[i];
    state[i] = decayed + x[i];
    y[i] = state[i];
  }
}

}  // namespace memra::ref
