#include "kernels/rope/rope_ref.hpp"

#include <algorithm>
#include <cmath>

namespace memra::ref {
namespace {

constexpr double kPi = 3.14159265358979323846;

// transformers' _compute_llama3_parameters, in float32.
void apply_llama3(const memra_rope_params& p, std::vector<float>& inv_freq) {
  const float old_ctx = static_cast<float>(p.original_max_position);
  const float low_wavelen = old_ctx / p.low_freq_factor;
  const float high_wavelen = old_ctx / p.high_freq_factor;
  for (float& f : inv_freq) {
    const float wavelen = 2.0f * static_cast<float>(kPi) / f;
    float scaled = wavelen > low_wavelen ? f / p.factor : f;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    if (medium) {
      const float smooth = (old_ctx / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
      scaled = (1.0f - smooth) * scaled / p.factor + smooth * scaled;
    }
    f = scaled;
  }
}

// transformers' _compute_yarn_parameters.
float apply_yarn(const memra_rope_params& p, std::vector<float>& inv_freq) {
  const double dim = p.rotary_dim;
  const double base = p.theta;
  const double beta_fast = p.beta_fast > 0 ? p.beta_fast : 32.0;
  const double beta_slow = p.beta_slow > 0 ? p.beta_slow : 1.0;
  const double max_pos = p.original_max_position;
  auto correction_dim = [&](double num_rot) {
    return (dim * std::log(max_pos / (num_rot * 2.0 * kPi))) / (2.0 * std::log(base));
  };
  double low = std::floor(correction_dim(beta_fast));
  double high = std::ceil(correction_dim(beta_slow));
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float extrapolation = inv_freq[i];
    const float interpolation = inv_freq[i] / p.factor;
    float ramp = static_cast<float>((static_cast<double>(i) - low) / (high - low));
    ramp = std::clamp(ramp, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    inv_freq[i] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  if (p.attention_factor > 0) return p.attention_factor;
  return p.factor <= 1.0f ? 1.0f : static_cast<float>(0.1 * std::log(p.factor) + 1.0);
}

}  // namespace

RopeTable rope_table(const memra_rope_params& p) {
  RopeTable t;
  const int64_t pairs = p.rotary_dim / 2;
  t.inv_freq.resize(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    // 1 / theta^(2i/dim): the exponent in float32, the power as torch does it.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(p.rotary_dim);
    t.inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(p.theta, exponent);
  }
  switch (p.scaling) {
    case MEMRA_ROPE_SCALING_LINEAR:
      for (float& f : t.inv_freq) f /= p.factor;
      break;
    case MEMRA_ROPE_SCALING_LLAMA3:
      apply_llama3(p, t.inv_freq);
      break;
    case MEMRA_ROPE_SCALING_YARN:
      t.attention_factor = apply_yarn(p, t.inv_freq);
      break;
    default:
      break;
  }
  return t;
}

void rope_apply(const RopeTable& table, const memra_rope_params& p, int64_t position, float* x,
                int64_t heads, int64_t head_dim) {
  const int64_t pairs = p.rotary_dim / 2;
  for (int64_t i = 0; i < pairs; ++i) {
    const float angle = static_cast<float>(position) * table.inv_freq[static_cast<size_t>(i)];
    const float c = std::cos(angle) * table.attention_factor;
    const float s = std::sin(angle) * table.attention_factor;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + h * head_dim;
      // neox: pair (i, i + rotary_dim/2); interleaved (GGUF llama layout): pair (2i, 2i+1).
      const int64_t a = p.neox_style ? i : 2 * i;
      const int64_t b = p.neox_style ? i + pairs : 2 * i + 1;
      const float x1 = v[a];
      const float x2 = v[b];
      v[a] = x1 * c - x2 * s;
      v[b] = x2 * c + x1 * s;
    }
  }
}

}  // namespace memra::ref
