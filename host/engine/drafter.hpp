// Speculative decoding's drafters: cheap guesses of the next K tokens that the
// target model then verifies in one multi-token step. One interface for every
// kind: n-gram / prompt lookup (here), a separate draft model (draft_model.hpp)
// and, later, MTP heads. A drafter never changes the output — verification
// samples every position exactly as plain decode would — it only changes speed.
//
// MTP heads (mtp_drafter.hpp: a draft head shipped inside the checkpoint) need two
// things a plain token-in/token-out drafter does not: the target sequence whose blocks
// keep the head's KV (attach), and the target's final hidden states of the positions it
// computed (wants_target_hidden / target_hidden: the engine returns them with the step,
// StepRequest::want_hidden), of which verified() says which were kept.
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
  // The target sequence it drafts for (called once, when the sequence opens).
  virtual void attach(int32_t /*target_seq*/) {}
  // True when every target step of its sequence should return the hidden states.
  virtual bool wants_target_hidden() const { return false; }
  // After a target step of its sequence: the tokens it fed at first_position, ... and the
  // final hidden states (`dim` floats each) it computed there. `final_tokens`: every token
  // stays (a prompt chunk); else only the first does (a verify step's drafts may not).
  virtual void target_hidden(int64_t /*first_position*/, std::span<const int32_t> /*tokens*/, bool /*final_tokens*/,
                             std::span<const float> /*rows*/, int64_t /*dim*/) {}
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
