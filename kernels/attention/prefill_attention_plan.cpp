#include "kernels/attention/prefill_attention_plan.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace memra::attn {

std::string build_prefill_plan(int32_t num_tokens, const int32_t* positions, const int32_t* seq_index,
                               const uint8_t* prompt, int32_t heads, int32_t kv_heads, PrefillPlan& plan) {
  plan = PrefillPlan{};
  if (kv_heads <= 0 || heads <= 0 || heads % kv_heads != 0) return "heads must be a positive multiple of kv_heads";
  const int32_t group = heads / kv_heads;
  // (sequence, base position 16k) -> the token row at each slot (-1: not in the step).
  std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> blocks;
  for (int32_t t = 0; t < num_tokens; ++t) {
    if (!prompt || !prompt[t]) {
      plan.generated.push_back(t);
      continue;
    }
    const int32_t pos = positions[t];
    if (pos < 0) return "negative position";
    auto& rows = blocks[{seq_index[t], pos / kPrefillRows * kPrefillRows}];
    if (rows.empty()) rows.assign(kPrefillRows, -1);
    int32_t& slot = rows[static_cast<size_t>(pos % kPrefillRows)];
    if (slot >= 0) return "a (sequence, position) appears twice among the prompt rows";
    slot = t;
  }

  struct Task {
    int32_t head, seq, base, min_pos;
    const std::vector<int32_t>* rows;
  };
  std::vector<std::vector<Task>> ctas;
  // Per sequence and kv head: its 16-position blocks in order, each block's group of
  // q heads in order, cut into CTAs of kPrefillWarps tasks (the last one padded).
  auto it = blocks.begin();
  while (it != blocks.end()) {
    const int32_t seq = it->first.first;
    auto end = it;
    while (end != blocks.end() && end->first.first == seq) ++end;
    for (int32_t kvh = 0; kvh < kv_heads; ++kvh) {
      std::vector<Task> tasks;
      for (auto b = it; b != end; ++b) {
        int32_t min_pos = -1;
        for (int32_t r = 0; r < kPrefillRows; ++r)
          if ((*b).second[static_cast<size_t>(r)] >= 0) {
            min_pos = b->first.second + r;
            break;
          }
        for (int32_t h = 0; h < group; ++h) tasks.push_back({kvh * group + h, seq, b->first.second, min_pos, &b->second});
      }
      for (size_t i = 0; i < tasks.size(); i += kPrefillWarps)
        ctas.emplace_back(tasks.begin() + static_cast<std::ptrdiff_t>(i),
                          tasks.begin() + static_cast<std::ptrdiff_t>(std::min(tasks.size(), i + kPrefillWarps)));
    }
    it = end;
  }

  // Each CTA's smallest and largest row position, then longest first.
  std::vector<std::pair<int32_t, int32_t>> range(ctas.size());
  for (size_t c = 0; c < ctas.size(); ++c) {
    int32_t lo = INT32_MAX, hi = -1;
    for (const Task& t : ctas[c])
      for (int32_t r = 0; r < kPrefillRows; ++r)
        if ((*t.rows)[static_cast<size_t>(r)] >= 0) {
          lo = std::min(lo, t.base + r);
          hi = std::max(hi, t.base + r);
        }
    range[c] = {lo, hi};
  }
  std::vector<size_t> order(ctas.size());
  for (size_t c = 0; c < order.size(); ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return range[a].second > range[b].second; });

  plan.ctas = static_cast<int32_t>(ctas.size());
  plan.tasks.assign(static_cast<size_t>(plan.ctas) * kPrefillWarps * kPrefillTaskInts, 0);
  for (size_t ci = 0; ci < order.size(); ++ci) {
    const size_t c = order[ci];
    for (int32_t w = 0; w < kPrefillWarps; ++w) {
      int32_t* out = plan.tasks.data() + (ci * kPrefillWarps + static_cast<size_t>(w)) * kPrefillTaskInts;
      out[4] = range[c].first;
      out[5] = range[c].second;
      if (static_cast<size_t>(w) >= ctas[c].size()) {
        out[0] = -1;
        out[1] = ctas[c][0].seq;
        for (int32_t r = 0; r < kPrefillRows; ++r) out[kPrefillTaskRows + r] = -1;
        continue;
      }
      const Task& t = ctas[c][static_cast<size_t>(w)];
      out[0] = t.head;
      out[1] = t.seq;
      out[2] = t.base;
      out[3] = t.min_pos;
      for (int32_t r = 0; r < kPrefillRows; ++r) out[kPrefillTaskRows + r] = (*t.rows)[static_cast<size_t>(r)];
    }
  }
  return "";
}

}  // namespace memra::attn
