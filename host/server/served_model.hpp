// A model memra-host serves: its alias, text side (tokenizer, chat template,
// stop ids), engine and continuous-batching scheduler. Loaded once at start
// (model_loader.cpp) and shared read-only by every request thread; the
// scheduler is the only thing requests talk to, and it is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "host/engine/embedding_config.hpp"
#include "host/engine/engine.hpp"
#include "host/engine/scheduler.hpp"
#include "host/engine/text_model.hpp"
#include "host/structured/token_vocabulary.hpp"

namespace memra::server {

struct ServedModel {
  std::string alias;    // what clients send as "model"
  std::string path;     // where it was loaded from
  std::string family;   // the family plugin's name (registry key)
  std::string quant;    // the scheme holding most matrix bytes (registry key)
  std::string verdict;  // the registry's verdict it was loaded under ("supported" or "generic")
  std::int64_t created = 0;  // Unix time it was loaded (/v1/models "created")
  std::string spec = "off";  // speculative decoding: off, ngram or draft
  std::string draft_path;    // the draft model (spec "draft")
  // Set for an embedding model (sentence-transformers' modules.json next to its weights):
  // how /v1/embeddings pools and whether it normalises.
  std::optional<engine::EmbeddingConfig> embedding;
  engine::TextModel text;
  std::unique_ptr<engine::Engine> draft_engine;  // spec "draft"; outlives the scheduler's drafters
  std::unique_ptr<engine::Engine> engine;        // declared before the scheduler: destroyed after it
  std::unique_ptr<engine::Scheduler> scheduler;

  // The vocabulary as structured outputs mask it, built on first use.
  std::shared_ptr<const structured::TokenVocabulary> token_vocabulary() {
    std::call_once(vocabulary_once_, [this] {
      vocabulary_ = structured::TokenVocabulary::build(*text.tokenizer, vocab_size(), text.stop_ids);
    });
    return vocabulary_;
  }

  std::int64_t max_context() const { return engine->max_context(); }
  std::int64_t vocab_size() const { return engine->vocab_size(); }
  // The scheduler's load, for a 503's message: "3 running (--max-running 16), 40 waiting,
  // KV cache 12 of 24777 blocks free".
  std::string load_summary() const {
    const engine::SchedulerStats s = scheduler->stats();
    return std::to_string(s.running) + " running (--max-running " + std::to_string(scheduler->options().max_running) + "), " +
           std::to_string(s.waiting) + " waiting, KV cache " + std::to_string(s.kv_blocks_free) + " of " +
           std::to_string(s.kv_blocks_total) + " blocks free";
  }

 private:
  std::once_flag vocabulary_once_;
  std::shared_ptr<const structured::TokenVocabulary> vocabulary_;
};

// The loaded models, in the order they were given. Immutable once serving starts.
class ModelSet {
 public:
  void add(std::unique_ptr<ServedModel> model) { models_.push_back(std::move(model)); }
  // nullptr when no model has this alias.
  ServedModel* find(const std::string& alias) const {
    for (const auto& m : models_) {
      if (m->alias == alias) return m.get();
    }
    return nullptr;
  }
  const std::vector<std::unique_ptr<ServedModel>>& all() const { return models_; }
  bool empty() const { return models_.empty(); }

 private:
  std::vector<std::unique_ptr<ServedModel>> models_;
};

}  // namespace memra::server
