#include "host/engine/draft_model.hpp"

#include <algorithm>

#include "host/engine/sampler.hpp"

namespace memra::engine {
namespace {

uint64_t matrix_bytes(const Engine& e) {
  uint64_t n = 0;
  for (const memra_weight& w : e.source().weights)
    if (w.ndim >= 2) n += w.bytes;
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
  DraftCall c{this, context, k, {}};
  draft_batch({&c, 1});
  return std::move(c.out);
}

void DraftModelDrafter::draft_batch(std::span<DraftCall> calls) {
  for (DraftCall& c : calls) {
    auto* d = dynamic_cast<DraftModelDrafter*>(c.drafter);
    if (d == nullptr || &d->engine_ != &engine_) {
      Drafter::draft_batch(calls);  // one by one (each DraftModelDrafter drafts alone)
      return;
    }
  }
  struct Live {
    DraftCall* call;
    DraftModelDrafter* d;
    std::span<const int32_t> missing;
    int k;
  };
  std::vector<Live> live;
  for (DraftCall& c : calls) {
    auto* d = static_cast<DraftModelDrafter*>(c.drafter);
    c.out.clear();
    d->error_.clear();
    if (c.k <= 0 || c.context.empty()) continue;
    // Feeding the context and k - 1 drafts must fit the draft model's context.
    const int64_t fit = engine_.max_context() - static_cast<int64_t>(c.context.size()) + 1;
    const int k = static_cast<int>(std::min<int64_t>(c.k, fit));
    if (k <= 0) {
      d->error_ = "the context is longer than the draft model's";
      continue;
    }
    if (d->seq_ < 0) d->seq_ = engine_.open_sequence();
    // Keep the KV of the common prefix; the last context token is always fed again
    // so that its logits row (which proposes the first draft) comes out.
    const size_t common = static_cast<size_t>(
        std::mismatch(d->fed_.begin(), d->fed_.end(), c.context.begin(), c.context.end()).first - d->fed_.begin());
    size_t keep = std::min(common, c.context.size() - 1);
    if (!engine_.truncate_sequence(d->seq_, static_cast<int64_t>(keep))) {
      // A draft model with sliding-window layers cannot roll back past the blocks its
      // window dropped: start the sequence over and feed the whole context this call.
      d->reset();
      d->seq_ = engine_.open_sequence();
      keep = 0;
      ++d->restarts_;
    }
    d->fed_.resize(keep);
    live.push_back({&c, d, c.context.subspan(keep), k});
  }
  if (live.empty()) return;

  // Drafts are the draft model's greedy tokens, sampled by the engine (on the GPU when it
  // samples there: one int32 per row comes back instead of a logits row).
  static const SamplingParams kGreedy = [] {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
  }();
  const RowSampling greedy{&kGreedy, 0, {}, {}, {}, 1, false, {}};
  std::vector<StepRequest> reqs;
  for (const Live& l : live) reqs.push_back({l.d->seq_, l.missing, false, /*prompt=*/l.missing.size() > 1, &greedy});
  auto rows = engine_.step_sampled(reqs);
  if (!rows) {
    if (live.size() == 1) {
      live[0].d->error_ = rows.error().message;
      live[0].d->reset();
    } else {
      // Too much at once (say, the draft KV cache is full): each alone, as far as it goes.
      for (Live& l : live) draft_batch({l.call, 1});
    }
    return;
  }
  for (size_t i = 0; i < live.size(); ++i) {
    live[i].d->fed_.insert(live[i].d->fed_.end(), live[i].missing.begin(), live[i].missing.end());
    live[i].call->out.push_back((*rows)[i].tokens.back());
  }
  // Then one step per drafted position, for every sequence that wants more.
  while (true) {
    reqs.clear();
    std::vector<Live*> stepping;
    for (Live& l : live) {
      if (static_cast<int>(l.call->out.size()) >= l.k || !l.d->error_.empty()) continue;
      reqs.push_back({l.d->seq_, {&l.call->out.back(), 1}, false, false, &greedy});
      stepping.push_back(&l);
    }
    if (reqs.empty()) break;
    auto r = engine_.step_sampled(reqs);
    if (!r) {
      // Keep the drafts so far; the KV still matches fed_ (a failed step changes nothing).
      for (Live* l : stepping) l->d->error_ = r.error().message;
      break;
    }
    for (size_t i = 0; i < stepping.size(); ++i) {
      stepping[i]->d->fed_.push_back(stepping[i]->call->out.back());
      stepping[i]->call->out.push_back((*r)[i].tokens.back());
    }
  }
}

}  // namespace memra::engine
