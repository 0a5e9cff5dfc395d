#include "host/engine/mtp_drafter.hpp"

#include <algorithm>

namespace memra::engine {

namespace {

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

std::string draft_head_unavailable(const ModelSource& source, const plugins::PluginHost& plugins) {
  auto family = plugins.family(source.config.family);
  if (!family) return family.error().message;
  auto plan = family->plan_create(source.config_json);
  if (!plan) return plan.error().message;
  auto info = plan->info();
  if (!info) return info.error().message;
  if (MEMRA_STRUCT_HAS(&*info, memra_plan_info, draft_layers) && info->draft_layers > 0 && info->hidden_width > 0) return "";
  const std::string missing = plan_draft_head_missing(*plan);
  return "it has no MTP head" + (missing.empty() ? std::string() : " (" + missing + ")");
}

double mtp_draft_cost(const Engine& target) {
  // One more attention layer and the output matrix, each about a layer's bytes.
  return 2.0 / static_cast<double>(std::max<int64_t>(1, target.config().num_layers) + 2);
}

int64_t MtpDrafter::waiting_rows() const {
  const int64_t dim = engine_.hidden_width();
  return dim > 0 ? static_cast<int64_t>(hidden_.size()) / dim : 0;
}

void MtpDrafter::target_hidden(int64_t first_position, std::span<const int32_t> tokens, bool final_tokens, std::span<const float> rows,
                               int64_t dim) {
  if (dim != engine_.hidden_width() || dim <= 0 || tokens.empty() || rows.size() != tokens.size() * static_cast<size_t>(dim)) return;
  const int64_t have = waiting_rows();
  if (first_position < hidden_from_ || first_position > hidden_from_ + have) {
    // Not contiguous with what waits (the positions in between never came): start over.
    hidden_.clear();
    tokens_.clear();
    hidden_from_ = first_position;
  } else {
    // A recomputed tail (a replay after a rollback) replaces what it covers.
    hidden_.resize(static_cast<size_t>((first_position - hidden_from_) * dim));
    tokens_.resize(static_cast<size_t>(first_position - hidden_from_));
  }
  hidden_.insert(hidden_.end(), rows.begin(), rows.end());
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  most_waiting_ = std::max(most_waiting_, waiting_rows());
  // Row i needs the token at i + 1: every row before the last final token's can run now.
  if (waiting_rows() > catch_up_rows_)
    catch_up(first_position + (final_tokens ? static_cast<int64_t>(tokens.size()) : 1) - 1);
}

void MtpDrafter::catch_up(int64_t to) {
  const int64_t dim = engine_.hidden_width();
  const int64_t from = std::max(written_, hidden_from_);
  if (seq_ < 0 || to <= from || to > hidden_from_ + static_cast<int64_t>(tokens_.size())) return;
  const auto off = static_cast<size_t>(from - hidden_from_), n = static_cast<size_t>(to - from);
  HeadRequest r{seq_, from, std::span<const int32_t>(tokens_).subspan(off + 1, n),
                std::span<const float>(hidden_).subspan(off * static_cast<size_t>(dim), n * static_cast<size_t>(dim))};
  if (auto out = engine_.step_head({&r, 1}); !out) {
    error_ = out.error().message;
    return;  // the draft call catches up instead
  }
  head_rows_ += static_cast<int64_t>(n);
  written_through(to);
}

void MtpDrafter::written_through(int64_t position) {
  written_ = position;
  const auto drop = static_cast<size_t>(std::clamp<int64_t>(position - hidden_from_, 0, static_cast<int64_t>(tokens_.size())));
  hidden_.erase(hidden_.begin(), hidden_.begin() + static_cast<std::ptrdiff_t>(drop * static_cast<size_t>(engine_.hidden_width())));
  tokens_.erase(tokens_.begin(), tokens_.begin() + static_cast<std::ptrdiff_t>(drop));
  hidden_from_ += static_cast<int64_t>(drop);
}

void MtpDrafter::verified(std::span<const int32_t> context, int /*drafted*/, int /*accepted*/) {
  // The target keeps positions < context.size() - 1: drop the states of rejected rows.
  const int64_t dim = engine_.hidden_width();
  const int64_t keep = static_cast<int64_t>(context.size()) - 1 - hidden_from_;
  if (dim > 0 && keep >= 0 && waiting_rows() > keep) {
    hidden_.resize(static_cast<size_t>(keep * dim));
    tokens_.resize(static_cast<size_t>(keep));
  }
  written_ = std::min(written_, static_cast<int64_t>(context.size()) - 1);
}

std::vector<int32_t> MtpDrafter::draft(std::span<const int32_t> context, int k) {
  DraftCall call{this, context, k, {}};
  draft_batch({&call, 1});
  return call.out;
}

void MtpDrafter::draft_batch(std::span<DraftCall> calls) {
  const int64_t dim = engine_.hidden_width();
  struct Live {
    DraftCall* call;
    MtpDrafter* d;
    int64_t position;                // of the row the next head step runs
    std::vector<int32_t> tokens;     // the first step's rows
    std::vector<float> hidden;
  };
  std::vector<Live> live;
  for (DraftCall& c : calls) {
    auto* d = static_cast<MtpDrafter*>(c.drafter);
    c.out.clear();
    d->error_.clear();
    const auto L = static_cast<int64_t>(c.context.size());
    if (c.k <= 0 || L < 2 || d->seq_ < 0 || dim <= 0) continue;
    // Head rows written_ .. L - 2: the last is the first draft row (the token pending at
    // L - 1 with the state at L - 2). Rows without a target state are skipped.
    const int64_t have_end = d->hidden_from_ + static_cast<int64_t>(d->hidden_.size()) / dim;
    if (have_end < L - 1 || d->hidden_from_ > L - 2) {
      d->error_ = "no target hidden state at position " + std::to_string(L - 2);
      continue;
    }
    const int64_t from = std::max(d->written_, d->hidden_from_);
    // Drafting past the context is pointless (the verify step could not take them).
    const int k = static_cast<int>(std::min<int64_t>(c.k, engine_.max_context() - L));
    if (k <= 0) continue;
    Live l{&c, d, from, {}, {}};
    l.tokens.assign(c.context.begin() + from + 1, c.context.end());
    l.hidden.assign(d->hidden_.begin() + static_cast<std::ptrdiff_t>((from - d->hidden_from_) * dim),
                    d->hidden_.begin() + static_cast<std::ptrdiff_t>((L - 1 - d->hidden_from_) * dim));
    c.k = k;
    live.push_back(std::move(l));
  }
  if (live.empty()) return;
  std::vector<HeadRequest> reqs;
  for (const Live& l : live) reqs.push_back({l.d->seq_, l.position, l.tokens, l.hidden});
  auto rows = engine_.step_head(reqs);
  if (!rows) {
    for (Live& l : live) l.d->error_ = rows.error().message;
    return;
  }
  for (size_t i = 0; i < live.size(); ++i) {
    Live& l = live[i];
    const auto L = static_cast<int64_t>(l.call->context.size());
    l.d->head_rows_ += static_cast<int64_t>(l.tokens.size());
    l.d->written_through(L - 1);  // states before L - 1 are in the head's KV now
    l.call->out.push_back(argmax((*rows)[i].logits));
    if (l.d->keep_logits_) l.d->last_logits_ = (*rows)[i].logits;
    l.hidden = std::move((*rows)[i].hidden);
    l.position = L - 1;
  }
  // Ahead: one row per drafted position, reading the head's own state of the row before.
  while (true) {
    reqs.clear();
    std::vector<Live*> stepping;
    for (Live& l : live) {
      if (static_cast<int>(l.call->out.size()) >= l.call->k || !l.d->error_.empty()) continue;
      reqs.push_back({l.d->seq_, l.position, {&l.call->out.back(), 1}, l.hidden});
      stepping.push_back(&l);
    }
    if (reqs.empty()) break;
    auto r = engine_.step_head(reqs);
    if (!r) {
      for (Live* l : stepping) l->d->error_ = r.error().message;  // the drafts so far stand
      break;
    }
    for (size_t i = 0; i < stepping.size(); ++i) {
      Live& l = *stepping[i];
      ++l.d->head_rows_;
      ++l.position;
      l.call->out.push_back(argmax((*r)[i].logits));
      if (l.d->keep_logits_) l.d->last_logits_ = (*r)[i].logits;
      l.hidden = std::move((*r)[i].hidden);
    }
  }
}

}  // namespace memra::engine
