// The draft-model drafter: a second, smaller (or more heavily quantized) model
// with the same tokenizer proposes the next k tokens greedily. It keeps one
// sequence in the draft engine whose KV tracks the target's context: each call
// truncates it to the longest common prefix with the new context (rejected
// drafts and the draft's own look-ahead roll back; where a sliding-window draft
// model cannot, it starts the sequence over), feeds the missing tokens, then
// decodes k tokens greedily. A failure in the draft engine (full KV, a
// context longer than the draft model's) only means no drafts this time.
//
// Threading: the drafter and every other user of the draft Engine run on one
// thread (the scheduler's or memra-gen's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "host/engine/drafter.hpp"
#include "host/engine/engine.hpp"

namespace memra::engine {

// The draft must share the target's vocabulary: refuses different vocab sizes.
// (Token texts are compared by check_same_tokenizer, draft_loader.hpp.)
Status check_draft_vocab(const Engine& target, const Engine& draft);

// Cost of one draft token in target decode steps: the draft's matrix bytes over
// the target's (decode is memory bound).
double draft_cost_estimate(const Engine& target, const Engine& draft);

class DraftModelDrafter : public Drafter {
 public:
  // `draft` must outlive the drafter.
  DraftModelDrafter(Engine& draft, double draft_token_cost) : engine_(draft), cost_(draft_token_cost) {}
  ~DraftModelDrafter() override;
  DraftModelDrafter(const DraftModelDrafter&) = delete;
  DraftModelDrafter& operator=(const DraftModelDrafter&) = delete;

  std::vector<int32_t> draft(std::span<const int32_t> context, int k) override;
  // One draft-engine step per drafted position for all the calls together (calls
  // whose drafter is another kind, or runs another engine, are drafted one by one).
  void draft_batch(std::span<DraftCall> calls) override;
  double draft_token_cost() const override { return cost_; }
  // Why the last call drafted nothing ("" when it did not fail).
  const std::string& last_error() const { return error_; }
  int64_t tokens_in_kv() const { return static_cast<int64_t>(fed_.size()); }
  // Calls that fed the whole context again because the draft sequence could not roll
  // back (a sliding-window draft model's dropped blocks).
  int64_t restarts() const { return restarts_; }

 private:
  void reset();

  Engine& engine_;
  double cost_;
  int32_t seq_ = -1;
  std::vector<int32_t> fed_;  // the tokens whose KV the draft sequence holds
  std::string error_;
  int64_t restarts_ = 0;
};

}  // namespace memra::engine
