#include "kernels/sampling/sampling_ref.hpp"

#include <algorithm>
#include <functional>
#include <limits>

namespace memra::ref {
namespace {

using sampling::f_add;
using sampling::kLanes;
using sampling::kWarps;

// Lane partials, warp sums and the total of the weights >= threshold.
struct Sums {
  float lane[kLanes] = {};
  float warp[kWarps] = {};
  float total = 0.0f;
};

// Over the ascending indices `ids` (those with q > 0; skipping zeros changes no sum).
void canonical_sums(const float* q, const std::vector<int64_t>& ids, float threshold, Sums& s) {
  std::fill(std::begin(s.lane), std::end(s.lane), 0.0f);
  for (int64_t i : ids)
    if (q[i] >= threshold) s.lane[i % kLanes] = f_add(s.lane[i % kLanes], q[i]);
  s.total = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    float acc = 0.0f;
    for (int l = 0; l < 32; ++l) acc = f_add(acc, s.lane[w * 32 + l]);
    s.warp[w] = acc;
    s.total = f_add(s.total, acc);
  }
}

}  // namespace

float canonical_sum(const float* weights, int64_t n, float threshold) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i)
    if (weights[i] > 0.0f) ids.push_back(i);
  Sums s;
  canonical_sums(weights, ids, threshold, s);
  return s.total;
}

int32_t sample_row(const float* logits, int64_t vocab, const sampling::RowParams& p,
                   const sampling::PenaltyEntry* penalties, int32_t num_penalties, SampleTrace* trace) {
  using namespace sampling;
  if (p.temperature == 0.0f && num_penalties == 0) {
    // Greedy without penalties: the same choice as below without a copy of the row, in
    // two passes the compiler vectorizes (the host samples every rolling-pipeline row).
    // The largest value (a NaN, canonically -inf, never wins `a > b ? a : b`), then the
    // first index holding it (-0 == +0, as canonical() makes them).
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < vocab; ++i) m = logits[i] > m ? logits[i] : m;
    if (m != -std::numeric_limits<float>::infinity())
      for (int64_t i = 0; i < vocab; ++i)
        if (logits[i] == m) return static_cast<int32_t>(i);
    // Every value -inf or NaN (all canonically -inf): the first index, as below.
    return 0;
  }
  std::vector<float> v(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) v[static_cast<size_t>(i)] = canonical(logits[i]);
  for (int32_t e = 0; e < num_penalties; ++e) {
    const int32_t id = penalties[e].id;
    if (id >= 0 && id < vocab) v[static_cast<size_t>(id)] = apply_penalty(v[static_cast<size_t>(id)], penalties[e].count, p);
  }
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (order_key(v[static_cast<size_t>(i)]) > order_key(v[static_cast<size_t>(best)])) best = i;
  if (p.temperature == 0.0f) return static_cast<int32_t>(best);
  const float mx = v[static_cast<size_t>(best)];

  // top-k: the k-th largest key and how far into its ties (ascending ids) to go.
  uint32_t kth = 0;
  int64_t cutoff = vocab;  // ties at kth with id <= cutoff are candidates
  if (p.top_k > 0 && p.top_k < vocab) {
    std::vector<uint32_t> keys(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) keys[static_cast<size_t>(i)] = order_key(v[static_cast<size_t>(i)]);
    std::vector<uint32_t> sorted = keys;
    std::nth_element(sorted.begin(), sorted.begin() + (p.top_k - 1), sorted.end(), std::greater<uint32_t>());
    kth = sorted[static_cast<size_t>(p.top_k - 1)];
    int64_t above = 0;
    for (uint32_t k : keys) above += k > kth;
    int64_t take = p.top_k - above;
    for (int64_t i = 0; i < vocab; ++i)
      if (keys[static_cast<size_t>(i)] == kth && --take == 0) {
        cutoff = i;
        break;
      }
  }
  std::vector<float> q(static_cast<size_t>(vocab), 0.0f);
  std::vector<int64_t> nz;  // ascending ids with q > 0
  for (int64_t i = 0; i < vocab; ++i) {
    const float x = v[static_cast<size_t>(i)];
    const uint32_t k = order_key(x);
    if (k > kth || (k == kth && i <= cutoff)) q[static_cast<size_t>(i)] = candidate_weight(x, mx, p.temperature);
    if (q[static_cast<size_t>(i)] > 0.0f) nz.push_back(i);
  }

  Sums s;
  canonical_sums(q.data(), nz, 0.0f, s);
  float tau = 0.0f;
  if (p.top_p < 1.0f) {
    const float target = f_mul(p.top_p, s.total);
    uint32_t lo = 1, hi = 0x3f800000u;  // positive floats up to 1
    Sums t;
    // Weights below lo can never count again (thresholds only rise past lo): dropping them
    // from the scan leaves every sum's terms and order as they were, and a peaked row
    // (a real model's) shrinks to a few hundred candidates within a few steps.
    std::vector<int64_t> live = nz;
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo + 1) / 2;
      canonical_sums(q.data(), live, bits_float(mid), t);
      if (t.total >= target) {
        lo = mid;
        std::erase_if(live, [&](int64_t i) { return q[static_cast<size_t>(i)] < bits_float(lo); });
      } else {
        hi = mid - 1;
      }
    }
    tau = bits_float(lo);
  }
  float threshold = tau;
  if (p.min_p > 0.0f && p.min_p > threshold) threshold = p.min_p;
  canonical_sums(q.data(), nz, threshold, s);
  auto survives = [&](int64_t i) { return q[static_cast<size_t>(i)] > 0.0f && q[static_cast<size_t>(i)] >= threshold; };
  if (trace) {
    trace->weight.assign(static_cast<size_t>(vocab), 0.0f);
    for (int64_t i = 0; i < vocab; ++i)
      if (survives(i)) trace->weight[static_cast<size_t>(i)] = q[static_cast<size_t>(i)];
    trace->total = s.total;
    trace->tau = tau;
  }

  const float u = f_mul(philox_uniform(p.seed, p.position), s.total);
  // The last survivor of lanes [first, last) in walk order (lane by lane, indices ascending).
  auto last_in_lanes = [&](int first, int last) -> int32_t {
    for (int lane = last - 1; lane >= first; --lane)
      for (int64_t i = lane + ((vocab - 1 - lane) / kLanes) * kLanes; i >= lane && i < vocab; i -= kLanes)
        if (survives(i)) return static_cast<int32_t>(i);
    return static_cast<int32_t>(best);  // unreachable: the maximum always survives
  };
  float c = 0.0f;
  int warp = -1;
  for (int w = 0; w < kWarps; ++w) {
    const float next = f_add(c, s.warp[w]);
    if (next > u) {
      warp = w;
      break;
    }
    c = next;
  }
  if (warp < 0) return last_in_lanes(0, kLanes);
  int lane = -1;
  for (int l = warp * 32; l < warp * 32 + 32; ++l) {
    const float next = f_add(c, s.lane[l]);
    if (next > u) {
      lane = l;
      break;
    }
    c = next;
  }
  if (lane < 0) return last_in_lanes(warp * 32, warp * 32 + 32);
  for (int64_t i = lane; i < vocab; i += kLanes) {
    if (!survives(i)) continue;
    c = f_add(c, q[static_cast<size_t>(i)]);
    if (c > u) return static_cast<int32_t>(i);
  }
  return last_in_lanes(lane, lane + 1);
}

void adjust_row(float* row, int64_t vocab, const sampling::BiasEntry* bias, int32_t num_bias, const uint64_t* allowed,
                int64_t allowed_words) {
  for (int32_t e = 0; e < num_bias; ++e)
    if (bias[e].id >= 0 && bias[e].id < vocab) row[bias[e].id] = sampling::f_add(row[bias[e].id], bias[e].bias);
  if (allowed == nullptr) return;
  for (int64_t i = 0; i < vocab; ++i)
    if ((i >> 6) >= allowed_words || !((allowed[i >> 6] >> (i & 63)) & 1u)) row[i] = -std::numeric_limits<float>::infinity();
}

}  // namespace memra::ref
