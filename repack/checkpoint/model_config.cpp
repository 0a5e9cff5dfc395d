// Validation of a normalised config's host fields.
#include "repack/checkpoint/model_config.hpp"

namespace memra {

Status validate(const ModelConfig& c) {
  auto bad = [&](const std::string& what) {
    return make_error(ErrorCode::invalid_argument, "model config (" + c.architecture + "): " + what);
  };
  if (c.architecture.empty() || c.family.empty()) return bad("architecture/family missing");
  if (c.vocab_size <= 0) return bad("vocab_size must be positive");
  if (c.hidden_size <= 0) return bad("hidden_size must be positive");
  if (c.num_layers <= 0) return bad("num_hidden_layers must be positive");
  if (c.max_position_embeddings < 0) return bad("max_position_embeddings must not be negative");
  if (c.eos_token_ids.empty()) return bad("no eos token id");
  for (int64_t id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size) return bad("eos token id " + std::to_string(id) + " is outside the vocabulary");
  if (c.bos_token_id && (*c.bos_token_id < 0 || *c.bos_token_id >= c.vocab_size)) return bad("bos token id outside the vocabulary");
  return {};
}

}  // namespace memra
