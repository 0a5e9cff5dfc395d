#include "host/engine/draft_loader.hpp"

#include <algorithm>

#include "host/engine/draft_model.hpp"
#include "host/engine/text_model.hpp"

namespace memra::engine {

Status check_same_tokenizer(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft) {
  if (target.vocab_size() != draft.vocab_size())
    return make_error(ErrorCode::invalid_argument, "the draft model's tokenizer has " + std::to_string(draft.vocab_size()) +
                                                       " tokens and the target's " + std::to_string(target.vocab_size()) +
                                                       "; use a draft model with the target's tokenizer");
  for (size_t id = 0; id < target.vocab_size(); ++id) {
    const auto t = static_cast<tokenizer::TokenId>(id);
    if (target.token_text(t) != draft.token_text(t))
      return make_error(ErrorCode::invalid_argument,
                        "the draft model's tokenizer differs from the target's at token " + std::to_string(id) + " ('" +
                            std::string(draft.token_text(t)) + "' vs '" + std::string(target.token_text(t)) +
                            "'); use a draft model with the target's tokenizer");
  }
  return {};
}

Result<std::unique_ptr<Engine>> open_draft_engine(const std::string& draft_path, const Engine& target,
                                                  const tokenizer::Tokenizer& target_tokenizer,
                                                  const plugins::PluginHost& plugins, EngineOptions options) {
  auto fail = [&](const Error& e) {
    return make_error(e.code, "cannot use " + draft_path + " as a draft model: " + e.message);
  };
  auto tok = load_tokenizer(draft_path);
  if (!tok) return fail(tok.error());
  if (auto st = check_same_tokenizer(target_tokenizer, **tok); !st) return fail(st.error());
  auto source = open_model_source(draft_path, plugins);
  if (!source) return fail(source.error());
  if ((*source)->config.vocab_size != target.vocab_size())
    return fail(make_error(ErrorCode::invalid_argument,
                           "its vocabulary has " + std::to_string((*source)->config.vocab_size) + " tokens and the target's " +
                               std::to_string(target.vocab_size()) + "; a draft model must use the target's tokenizer"));
  int64_t context = target.max_context();
  if ((*source)->config.max_position_embeddings > 0)
    context = std::min<int64_t>(context, (*source)->config.max_position_embeddings);
  options.max_context = context;
  // Its KV cache mirrors the target's (as many tokens), allocated beside the target's
  // memory plan, not from it: a draft is small, and a lower --gpu-memory-fraction makes room.
  options.plan_memory = false;
  options.kv_cache_tokens = 0;
  options.max_sequences =
      std::max<int64_t>(1, (target.kv_blocks().num_blocks() * target.block_size() + context - 1) / context);
  // A draft model is small: one backend (the first stage's device), never a pipeline.
  if (options.pipeline_stages > 1 && !options.pipeline_devices.empty())
    options.backend.device = options.pipeline_devices.front();
  options.pipeline_stages = 1;
  options.pipeline_split.clear();
  options.pipeline_devices.clear();
  auto engine = Engine::create(std::move(*source), plugins, options);
  if (!engine) return fail(engine.error());
  if (auto st = check_draft_vocab(target, **engine); !st) return fail(st.error());
  return engine;
}

}  // namespace memra::engine
