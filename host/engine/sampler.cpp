#include "host/engine/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/sampling/sampling_ref.hpp"

namespace memra::engine {
namespace {

// log-softmax of the raw logits: what logprobs report (before penalties and temperature).
std::vector<float> log_softmax(std::span<const float> x) {
  const float mx = *std::max_element(x.begin(), x.end());
  double sum = 0.0;
  for (float v : x) sum += std::exp(static_cast<double>(v - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - lse;
  return out;
}

bool better(float a_val, int32_t a_id, float b_val, int32_t b_id) {
  return a_val > b_val || (a_val == b_val && a_id < b_id);
}

}  // namespace

std::optional<const char*> validate(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f && p.temperature <= 100.0f)) return "temperature must be between 0 and 100";
  if (p.top_k < 0) return "top_k must be >= 0";
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return "top_p must be in (0, 1]";
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return "min_p must be in [0, 1]";
  if (!(p.repetition_penalty > 0.0f && p.repetition_penalty <= 10.0f)) return "repetition_penalty must be in (0, 10]";
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) return "presence_penalty must be in [-2, 2]";
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) return "frequency_penalty must be in [-2, 2]";
  if (p.top_logprobs < 0 || p.top_logprobs > 20) return "top_logprobs must be between 0 and 20";
  return std::nullopt;
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  return best;
}

sampling::RowParams row_params(const SamplingParams& p, uint64_t position) {
  sampling::RowParams r{};
  r.temperature = p.temperature;
  r.top_k = p.top_k;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.repetition_penalty = p.repetition_penalty;
  r.presence_penalty = p.presence_penalty;
  r.frequency_penalty = p.frequency_penalty;
  r.seed = p.seed;
  r.position = position;
  return r;
}

std::vector<sampling::PenaltyEntry> penalty_entries(const SamplingParams& p, std::span<const int32_t> prompt,
                                                    std::span<const int32_t> output, std::span<const int32_t> assumed) {
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool counted = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  std::vector<sampling::PenaltyEntry> out;
  if (!repetition && !counted) return out;
  // (id, 2 per output occurrence | 1 when seen), merged by id.
  std::vector<std::pair<int32_t, int32_t>> all;
  all.reserve((repetition ? prompt.size() : 0) + output.size() + assumed.size());
  if (repetition)
    for (int32_t t : prompt) all.emplace_back(t, 1);
  for (int32_t t : output) all.emplace_back(t, 3);
  for (int32_t t : assumed) all.emplace_back(t, 3);
  std::sort(all.begin(), all.end());
  for (const auto& [id, c] : all) {
    if (id < 0) continue;
    if (out.empty() || out.back().id != id) out.push_back({id, 0});
    out.back().count = ((out.back().count >> 1) + (c >> 1)) << 1 | 1;
  }
  return out;
}

void fill_logprobs(std::span<const float> logits, const SamplingParams& p, SampleResult& r) {
  if (!p.logprobs && p.top_logprobs <= 0) return;
  const auto vocab = static_cast<int32_t>(logits.size());
  const std::vector<float> lp = log_softmax(logits);
  r.logprob = lp[static_cast<size_t>(r.token)];
  r.top.clear();
  if (p.top_logprobs > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    std::iota(ids.begin(), ids.end(), 0);
    const auto k = std::min<size_t>(static_cast<size_t>(p.top_logprobs), ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                      [&](int32_t a, int32_t b) { return better(lp[static_cast<size_t>(a)], a, lp[static_cast<size_t>(b)], b); });
    for (size_t i = 0; i < k; ++i) r.top.push_back({ids[i], lp[static_cast<size_t>(ids[i])]});
  }
}

std::vector<float> adjusted_row(std::span<const float> logits, const RowAdjust& adjust) {
  std::vector<float> row(logits.begin(), logits.end());
  ref::adjust_row(row.data(), static_cast<int64_t>(row.size()), adjust.bias.data(), static_cast<int32_t>(adjust.bias.size()),
                  adjust.allowed ? adjust.allowed->data() : nullptr,
                  adjust.allowed ? static_cast<int64_t>(adjust.allowed->size()) : 0);
  return row;
}

bool any_allowed(const RowAdjust& adjust, int64_t vocab) {
  if (adjust.allowed == nullptr) return vocab > 0;
  const std::vector<uint64_t>& bits = *adjust.allowed;
  for (int64_t i = 0; i < vocab; ++i) {
    const size_t w = static_cast<size_t>(i >> 6);
    if (w < bits.size() && ((bits[w] >> (i & 63)) & 1u)) return true;
  }
  return false;
}

SampleResult sample(std::span<const float> logits, const SamplingParams& p, uint64_t position,
                    std::span<const int32_t> prompt, std::span<const int32_t> output) {
  const std::vector<sampling::PenaltyEntry> pen = penalty_entries(p, prompt, output);
  SampleResult r;
  r.token = ref::sample_row(logits.data(), static_cast<int64_t>(logits.size()), row_params(p, position), pen.data(),
                            static_cast<int32_t>(pen.size()));
  fill_logprobs(logits, p, r);
  return r;
}

}  // namespace memra::engine
