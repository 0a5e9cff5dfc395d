#include "host/backend/pipeline/pipeline_split.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>

namespace memra::backend {
namespace {

uint32_t all_stages(int32_t n) { return n >= 32 ? ~0u : (1u << n) - 1u; }

std::string gb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

}  // namespace

int64_t weight_layer(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return -1;
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size();
  int64_t layer = -1;
  const auto [end, ec] = std::from_chars(first, last, layer);
  if (ec != std::errc() || end == first || end == last || *end != '.') return -1;
  return layer;
}

uint32_t PipelinePlan::weight_stages(std::string_view name) const {
  const int32_t n = stages();
  const uint32_t last = 1u << (n - 1);
  const int64_t l = weight_layer(name);
  if (l >= 0 && l < layers) return 1u << layer_stage[static_cast<size_t>(l)];
  if (name == "token_embd.weight") return 1u | (tied_output ? last : 0u);
  if (name == "output_norm.weight" || name == "output.weight") return last;
  // Anything else (a family's extra tables) goes everywhere: found wherever an op runs.
  return all_stages(n);
}

std::string PipelinePlan::describe() const {
  std::string s;
  for (int32_t i = 0; i < stages(); ++i) {
    if (i) s += "; ";
    const auto k = static_cast<size_t>(i);
    s += "stage " + std::to_string(i) + ": layers " + std::to_string(first_layer[k]) + "-" +
         std::to_string(first_layer[k] + num_layers[k] - 1) + " (" + std::to_string(num_layers[k]) + "), " +
         gb(weight_bytes[k]) + " weights + " + gb(kv_bytes[k]) + " KV";
  }
  return s;
}

Result<PipelinePlan> plan_pipeline(const std::vector<memra_weight>& weights, int64_t num_layers,
                                   const PipelineSplitOptions& o) {
  const int32_t n = o.stages;
  if (n < 1 || n > kMaxPipelineStages)
    return make_error(ErrorCode::invalid_argument, "pipeline stages must be 1.." + std::to_string(kMaxPipelineStages) +
                                                       ", not " + std::to_string(n));
  if (num_layers < n)
    return make_error(ErrorCode::invalid_argument, "cannot split " + std::to_string(num_layers) + " layers into " +
                                                       std::to_string(n) + " pipeline stages: every stage needs at least one layer; use at most " +
                                                       std::to_string(num_layers) + " stages");
  PipelinePlan plan;
  plan.layers = num_layers;
  plan.tied_output = std::none_of(weights.begin(), weights.end(),
                                  [](const memra_weight& w) { return w.name && std::string_view(w.name) == "output.weight"; });

  // Measured memory: each layer's weights plus its KV; the rest by where it lives.
  auto layer_kv = [&](int64_t l) { return static_cast<size_t>(l) < o.kv_bytes_per_layer.size() ? o.kv_bytes_per_layer[static_cast<size_t>(l)] : 0; };
  std::vector<uint64_t> layer_bytes(static_cast<size_t>(num_layers));
  for (int64_t l = 0; l < num_layers; ++l) layer_bytes[static_cast<size_t>(l)] = layer_kv(l);
  uint64_t first_extra = 0, last_extra = 0, all_extra = 0;
  for (const memra_weight& w : weights) {
    const std::string_view name = w.name ? w.name : "";
    const int64_t l = weight_layer(name);
    if (l >= 0 && l < num_layers) {
      layer_bytes[static_cast<size_t>(l)] += w.bytes;
    } else if (name == "token_embd.weight") {
      first_extra += w.bytes;
      if (plan.tied_output) last_extra += w.bytes;
    } else if (name == "output_norm.weight" || name == "output.weight") {
      last_extra += w.bytes;
    } else {
      all_extra += w.bytes;
    }
  }

  std::vector<int64_t> counts;
  if (!o.split.empty()) {
    if (static_cast<int32_t>(o.split.size()) != n && static_cast<int32_t>(o.split.size()) != n - 1)
      return make_error(ErrorCode::invalid_argument, "the pipeline split lists " + std::to_string(o.split.size()) +
                                                         " layer counts for " + std::to_string(n) + " stages; give " +
                                                         std::to_string(n - 1) + " or " + std::to_string(n));
    counts = o.split;
    int64_t used = 0;
    for (int64_t c : counts) used += c;
    if (static_cast<int32_t>(counts.size()) == n - 1) counts.push_back(num_layers - used);
    else if (used != num_layers)
      return make_error(ErrorCode::invalid_argument, "the pipeline split covers " + std::to_string(used) + " layers but the model has " +
                                                         std::to_string(num_layers));
    for (int32_t s = 0; s < n; ++s)
      if (counts[static_cast<size_t>(s)] < 1)
        return make_error(ErrorCode::invalid_argument,
                          "pipeline stage " + std::to_string(s) + " would hold " + std::to_string(counts[static_cast<size_t>(s)]) +
                              " layers (the model has " + std::to_string(num_layers) +
                              "); every stage needs at least one layer: change the split or use fewer stages");
  } else {
    // Contiguous ranges minimising the largest stage: best[k][i] = the smallest possible
    // maximum when stages 0..k-1 hold layers [0, i), each at least one.
    std::vector<uint64_t> prefix(static_cast<size_t>(num_layers) + 1, 0);
    for (int64_t l = 0; l < num_layers; ++l) prefix[static_cast<size_t>(l) + 1] = prefix[static_cast<size_t>(l)] + layer_bytes[static_cast<size_t>(l)];
    auto load = [&](int32_t stage, int64_t a, int64_t b) {
      uint64_t v = prefix[static_cast<size_t>(b)] - prefix[static_cast<size_t>(a)] + all_extra;
      if (stage == 0) v += first_extra;
      if (stage == n - 1) v += last_extra;
      return v;
    };
    constexpr uint64_t kInf = std::numeric_limits<uint64_t>::max();
    const auto L = static_cast<size_t>(num_layers);
    std::vector<std::vector<uint64_t>> best(static_cast<size_t>(n) + 1, std::vector<uint64_t>(L + 1, kInf));
    std::vector<std::vector<int64_t>> cut(static_cast<size_t>(n) + 1, std::vector<int64_t>(L + 1, 0));
    best[0][0] = 0;
    for (int32_t k = 1; k <= n; ++k)
      for (int64_t i = k; i <= num_layers; ++i)
        for (int64_t j = k - 1; j < i; ++j) {
          const uint64_t prev = best[static_cast<size_t>(k) - 1][static_cast<size_t>(j)];
          if (prev == kInf) continue;
          const uint64_t v = std::max(prev, load(k - 1, j, i));
          if (v < best[static_cast<size_t>(k)][static_cast<size_t>(i)]) {
            best[static_cast<size_t>(k)][static_cast<size_t>(i)] = v;
            cut[static_cast<size_t>(k)][static_cast<size_t>(i)] = j;
          }
        }
    counts.assign(static_cast<size_t>(n), 0);
    int64_t i = num_layers;
    for (int32_t k = n; k >= 1; --k) {
      const int64_t j = cut[static_cast<size_t>(k)][static_cast<size_t>(i)];
      counts[static_cast<size_t>(k) - 1] = i - j;
      i = j;
    }
  }

  int64_t first = 0;
  for (int32_t s = 0; s < n; ++s) {
    const int64_t c = counts[static_cast<size_t>(s)];
    plan.first_layer.push_back(first);
    plan.num_layers.push_back(c);
    uint64_t kv = 0;
    for (int64_t l = first; l < first + c; ++l) plan.layer_stage.push_back(s), kv += layer_kv(l);
    plan.kv_bytes.push_back(kv);
    first += c;
  }
  plan.weight_bytes.assign(static_cast<size_t>(n), 0);
  for (const memra_weight& w : weights) {
    const uint32_t mask = plan.weight_stages(w.name ? w.name : "");
    for (int32_t s = 0; s < n; ++s)
      if (mask & (1u << s)) plan.weight_bytes[static_cast<size_t>(s)] += w.bytes;
  }
  return plan;
}

}  // namespace memra::backend
