// Opening a draft model for speculative decoding: the same backend kind as the
// target, and the same tokenizer — refused with the reason otherwise (different
// vocabulary sizes, or a token whose text differs). Drafts from another tokenizer
// would never be accepted (the output would still be right, only slower), so a
// mismatch is a configuration mistake worth stopping for.
#pragma once

#include <memory>
#include <string>

#include "core/common/result.hpp"
#include "host/engine/engine.hpp"
#include "host/tokenizer/tokenizer.hpp"

namespace memra::engine {

// Equal vocabularies: the same size and the same text for every token id.
Status check_same_tokenizer(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft);

// Loads `draft_path` (HF directory, .gguf or .memra) as a draft for `target`, whose
// tokenizer is `target_tokenizer`. `options` are the target's engine options (its
// backend); the draft's context is the target's, capped at the draft model's own.
Result<std::unique_ptr<Engine>> open_draft_engine(const std::string& draft_path, const Engine& target,
                                                  const tokenizer::Tokenizer& target_tokenizer,
                                                  const plugins::PluginHost& plugins, EngineOptions options);

}  // namespace memra::engine
