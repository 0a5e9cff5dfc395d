#include "host/engine/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "host/engine/philox.hpp"

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

SampleResult sample(std::span<const float> logits, const SamplingParams& p, uint64_t position,
                    std::span<const int32_t> prompt, std::span<const int32_t> output) {
  const auto vocab = static_cast<int32_t>(logits.size());
  std::vector<float> x(logits.begin(), logits.end());

  // Penalties.
  if (p.repetition_penalty != 1.0f) {
    std::vector<bool> seen(static_cast<size_t>(vocab), false);
    for (int32_t t : prompt) if (t >= 0 && t < vocab) seen[static_cast<size_t>(t)] = true;
    for (int32_t t : output) if (t >= 0 && t < vocab) seen[static_cast<size_t>(t)] = true;
    for (int32_t i = 0; i < vocab; ++i)
      if (seen[static_cast<size_t>(i)]) x[static_cast<size_t>(i)] = x[static_cast<size_t>(i)] > 0 ? x[static_cast<size_t>(i)] / p.repetition_penalty : x[static_cast<size_t>(i)] * p.repetition_penalty;
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int32_t> counts;
    for (int32_t t : output) if (t >= 0 && t < vocab) ++counts[t];
    for (const auto& [t, n] : counts)
      x[static_cast<size_t>(t)] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(n);
  }

  SampleResult r;
  if (p.temperature == 0.0f) {
    r.token = argmax(x);
  } else {
    // Candidates ordered by (logit desc, id asc); top-k cuts the list.
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    std::iota(ids.begin(), ids.end(), 0);
    auto order = [&](int32_t a, int32_t b) { return better(x[static_cast<size_t>(a)], a, x[static_cast<size_t>(b)], b); };
    size_t keep = ids.size();
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < ids.size()) {
      keep = static_cast<size_t>(p.top_k);
      std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(), order);
      ids.resize(keep);
    } else {
      std::sort(ids.begin(), ids.end(), order);
    }
    // Softmax with temperature over the candidates, in candidate order.
    const float mx = x[static_cast<size_t>(ids[0])];
    std::vector<float> prob(ids.size());
    float sum = 0.0f;
    for (size_t i = 0; i < ids.size(); ++i) {
      prob[i] = std::exp((x[static_cast<size_t>(ids[i])] - mx) / p.temperature);
      sum += prob[i];
    }
    for (float& v : prob) v /= sum;
    // top-p: the shortest prefix whose mass reaches top_p (at least one token).
    if (p.top_p < 1.0f) {
      float cum = 0.0f;
      size_t n = 0;
      while (n < prob.size()) {
        cum += prob[n++];
        if (cum >= p.top_p) break;
      }
      prob.resize(n);
      ids.resize(n);
    }
    // min-p: drop tokens below min_p times the most likely one.
    if (p.min_p > 0.0f) {
      const float floor = p.min_p * prob[0];
      size_t n = 1;
      while (n < prob.size() && prob[n] >= floor) ++n;
      prob.resize(n);
      ids.resize(n);
    }
    float total = 0.0f;
    for (float v : prob) total += v;
    const float u = philox_uniform(p.seed, position) * total;
    float cum = 0.0f;
    r.token = ids.back();
    for (size_t i = 0; i < prob.size(); ++i) {
      cum += prob[i];
      if (u < cum) {
        r.token = ids[i];
        break;
      }
    }
  }

  if (p.logprobs || p.top_logprobs > 0) {
    const std::vector<float> lp = log_softmax(logits);
    r.logprob = lp[static_cast<size_t>(r.token)];
    if (p.top_logprobs > 0) {
      std::vector<int32_t> ids(static_cast<size_t>(vocab));
      std::iota(ids.begin(), ids.end(), 0);
      const auto k = std::min<size_t>(static_cast<size_t>(p.top_logprobs), ids.size());
      std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                        [&](int32_t a, int32_t b) { return better(lp[static_cast<size_t>(a)], a, lp[static_cast<size_t>(b)], b); });
      for (size_t i = 0; i < k; ++i) r.top.push_back({ids[i], lp[static_cast<size_t>(ids[i])]});
    }
  }
  return r;
}

}  // namespace memra::engine
