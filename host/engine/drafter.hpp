// Speculative decoding's drafters: cheap guesses of the next K tokens that the
// target model then verifies in one multi-token step. One interface for every
// kind: n-gram / prompt lookup (here), a separate draft model (draft_model.hpp)
// and, later, MTP heads. A drafter never changes the output — verification
// samples every position exactly as plain decode would — it only changes speed.
//
// Hosting MTP heads (multi-token-prediction heads shipped inside a checkpoint)
// needs two things a plain token-in/token-out drafter does not: the target's
// last-layer hidden states of the verified positions, and to know which of its
// proposals were kept. The interface carries both already:
//   - verified() is called after every verify step with the verified context and
//     how many drafts were kept (draft models use it to roll their KV back; an MTP
//     drafter would drop the hidden states of rejected positions there);
//   - wants_target_hidden() / target_hidden() are the slot for the hidden states.
//     The engine does not export hidden states yet (no family ships MTP heads);
//     the first MTP family adds that output to the step, and its drafter reads it
//     here. Until then `--spec mtp` is refused with a clear message.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace memra::engine {

class Drafter;

// One sequence's drafting request in a batch (Drafter::draft_batch).
struct DraftCall {
  Drafter* drafter = nullptr;
  std::span<const int32_t> context;
  int k = 0;
  std::vector<int32_t> out;  // the drafts
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `k` tokens expected to follow `context` (prompt + generated so far; its
  // last token is the one the next verify step feeds). May return fewer, or none.
  virtual std::vector<int32_t> draft(std::span<const int32_t> context, int k) = 0;
  // Drafts for several sequences at once (the scheduler's decoding sequences; every
  // call's drafter is of this one's kind). A kind that can share work overrides it
  // (a draft model runs one batched step for all sequences); the default drafts
  // one by one.
  virtual void draft_batch(std::span<DraftCall> calls) {
    for (DraftCall& c : calls) c.out = c.drafter->draft(c.context, c.k);
  }
  // After a verify step of `drafted` drafts, `accepted` of which were kept.
  // `context` is the verified context (the last token is again the pending one).
  virtual void verified(std::span<const int32_t> /*context*/, int /*drafted*/, int /*accepted*/) {}
  // MTP slot: true when the drafter needs the target's hidden states (see above).
  virtual bool wants_target_hidden() const { return false; }
  // MTP slot: `rows` x `dim` float hidden states of the verified positions.
  virtual void target_hidden(std::span<const float> /*rows*/, int64_t /*dim*/) {}
  // Cost of drafting one token, in units of one plain decode step of the target:
  // the fallback's cost model (spec_policy.hpp) charges it per drafted token.
  virtual double draft_token_cost() const { return 0.0; }
};

// Prompt lookup: find the most recent earlier occurrence of the context's last n
// tokens (n from max_n down to min_n) and propose what followed it. No weights.
class NgramDrafter : public Drafter {
 public:
  explicit NgramDrafter(int max_n = 3, int min_n = 1) : max_n_(max_n), min_n_(min_n) {}
  std::vector<int32_t> draft(std::span<const int32_t> context, int k) override;

 private:
  int max_n_;
  int min_n_;
};

}  // namespace memra::engine
