// The MTP drafter: the checkpoint's own draft head (an MTP layer, Engine::step_head)
// proposes the next k tokens. Row i of the head reads the target's final hidden state at
// position i and the token at i + 1, and predicts the token at i + 2; its KV lives in the
// target sequence's blocks (one more attention layer), so rollback, prefix-cache hits and
// closing need nothing of their own.
//
// Each draft call first catches the head up on the positions the target computed since
// the last call (their hidden states came with the target's steps: target_hidden; a
// long prompt's are caught up as they come, once catch_up_rows wait), the last of them
// being the first draft row; then drafts ahead greedily, row j reading the
// head's own output state of row j - 1. Rows drafted ahead are rewritten by the next
// call's catch-up. Positions whose hidden states never came (a prefix-cache hit's) keep
// whatever head KV their blocks hold: drafts may differ, tokens never do.
//
// Threading: as the draft-model drafter (the scheduler's or memra-gen's thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/engine/drafter.hpp"
#include "host/engine/engine.hpp"

namespace memra::engine {

class MtpDrafter : public Drafter {
 public:
  // `target` must outlive the drafter and have its draft head enabled (EngineOptions::draft_head).
  // `catch_up_rows`: once that many target states wait, the head catches up on the final
  // ones at once (a long prompt's states need not all wait for the first draft).
  MtpDrafter(Engine& target, double draft_token_cost, int64_t catch_up_rows = 512)
      : engine_(target), cost_(draft_token_cost), catch_up_rows_(catch_up_rows) {}

  void attach(int32_t target_seq) override { seq_ = target_seq; }
  std::vector<int32_t> draft(std::span<const int32_t> context, int k) override;
  // One head step per drafted position for every call (all calls' drafters are MtpDrafters
  // of this engine).
  void draft_batch(std::span<DraftCall> calls) override;
  void verified(std::span<const int32_t> context, int drafted, int accepted) override;
  bool wants_target_hidden() const override { return true; }
  void target_hidden(int64_t first_position, std::span<const int32_t> tokens, bool final_tokens, std::span<const float> rows,
                     int64_t dim) override;
  double draft_token_cost() const override { return cost_; }
  // Head rows run since the drafter opened (catch-up and ahead), and the last failure.
  int64_t head_rows() const { return head_rows_; }
  // Target states waiting for the head, and the most that ever waited.
  int64_t waiting_rows() const;
  int64_t most_waiting_rows() const { return most_waiting_; }
  // Tests: keep the logits of each draft call's last head row (last_logits()).
  void keep_last_logits(bool on) { keep_logits_ = on; }
  const std::vector<float>& last_logits() const { return last_logits_; }
  const std::string& last_error() const { return error_; }

 private:
  Engine& engine_;
  double cost_;
  int32_t seq_ = -1;
  int64_t written_ = 0;             // head rows 0..written_-1 hold the target's states
  int64_t catch_up_rows_;
  int64_t hidden_from_ = 0;         // hidden_ and tokens_ hold the target's states and tokens from this position on
  std::vector<float> hidden_;
  std::vector<int32_t> tokens_;
  int64_t most_waiting_ = 0;
  bool keep_logits_ = false;
  std::vector<float> last_logits_;
  // Runs head rows [from, to) now (their next tokens known) and drops their states.
  void catch_up(int64_t to);
  // Head rows before `position` hold the target's states: their states are dropped.
  void written_through(int64_t position);
  int64_t head_rows_ = 0;
  std::string error_;
};

// "" when the model's plan has a draft head (memra_plan_info.draft_layers), else why not
// ("it has no MTP head (...)"): --spec mtp refuses with it before anything is loaded.
std::string draft_head_unavailable(const ModelSource& source, const plugins::PluginHost& plugins);

// Cost of one head token in target decode steps, for the fallback's cost model: one
// attention layer and the output matrix against the whole model (decode is memory bound).
double mtp_draft_cost(const Engine& target);

}  // namespace memra::engine
