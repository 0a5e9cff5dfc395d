#include "host/engine/draft_model.hpp"

#include <algorithm>

#include "host/engine/sampler.hpp"

namespace memra::engine {
namespace {

uint64_t matrix_bytes(const Engine& e) {
  uint64_t n = 0;
  for (const memra_weight& w : e.source().weights)
    if (w.ndim == 2) n += w.bytes;
  return n;
}

}  // namespace

Status check_draft_vocab(const Engine& target, const Engine& draft) {
  if (target.vocab_size() != draft.vocab_size())
    return make_error(ErrorCode::invalid_argument,
                      "the draft model's vocabulary has " + std::to_string(draft.vocab_size()) + " tokens and the target's " +
                          std::to_string(target.vocab_size()) + "; a draft model must use the target's tokenizer");
  return {};
}

double draft_cost_estimate(const Engine& target, const Engine& draft) {
  const uint64_t t = matrix_bytes(target);
  return t == 0 ? 1.0 : static_cast<double>(matrix_bytes(draft)) / static_cast<double>(t);
}

DraftModelDrafter::~DraftModelDrafter() { reset(); }

void DraftModelDrafter::reset() {
  if (seq_ >= 0) engine_.close_sequence(seq_);
  seq_ = -1;
  fed_.clear();
}

std::vector<int32_t> DraftModelDrafter::draft(std::span<const int32_t> context, int k) {
  std::vector<int32_t> out;
  error_.clear();
  if (k <= 0 || context.empty()) return out;
  // Feeding the context and k - 1 drafts must fit the draft model's context.
  const int64_t fit = engine_.max_context() - static_cast<int64_t>(context.size()) + 1;
  k = static_cast<int>(std::min<int64_t>(k, fit));
  if (k <= 0) {
    error_ = "the context is longer than the draft model's";
    return out;
  }
  if (seq_ < 0) seq_ = engine_.open_sequence();
  // Keep the KV of the common prefix; the last context token is always fed again
  // so that its logits row (which proposes the first draft) comes out.
  const size_t common = static_cast<size_t>(
      std::mismatch(fed_.begin(), fed_.end(), context.begin(), context.end()).first - fed_.begin());
  const size_t keep = std::min(common, context.size() - 1);
  if (auto st = engine_.truncate_sequence(seq_, static_cast<int64_t>(keep)); !st) {
    error_ = st.error().message;
    reset();
    return out;
  }
  fed_.resize(keep);
  const std::span<const int32_t> missing = context.subspan(keep);
  StepRequest req{seq_, missing, false, /*prompt=*/missing.size() > 1};
  auto rows = engine_.step({&req, 1});
  if (!rows) {
    error_ = rows.error().message;
    reset();
    return out;
  }
  fed_.insert(fed_.end(), missing.begin(), missing.end());
  out.push_back(argmax(rows->back()));
  while (static_cast<int>(out.size()) < k) {
    StepRequest next{seq_, {&out.back(), 1}, false, false};
    auto r = engine_.step({&next, 1});
    if (!r) {
      error_ = r.error().message;  // keep the drafts so far; the KV still matches fed_
      break;
    }
    fed_.push_back(out.back());
    out.push_back(argmax(r->front()));
  }
  return out;
}

}  // namespace memra::engine
