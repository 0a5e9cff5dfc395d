// Whether a model is an embedding model, and how its vectors are made: read from the
// sentence-transformers files next to its weights (modules.json, the Pooling module's
// config.json, a Normalize module after it). Qwen3-Embedding and its kind ship them;
// a model without modules.json is not an embedding model.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "core/common/result.hpp"

namespace memra::engine {

enum class Pooling {
  last_token,  // the last token's final hidden state (pooling_mode_lasttoken)
  mean,        // the mean of every token's final hidden state (pooling_mode_mean_tokens)
};
const char* to_string(Pooling p);

struct EmbeddingConfig {
  Pooling pooling = Pooling::last_token;
  bool normalize = false;  // a Normalize module follows the pooling: vectors are L2-normalised
};

// nullopt: `model_dir` has no modules.json (not an embedding model, or not a directory).
// An error names the file and what memra cannot run (another pooling mode, a Dense
// module, a missing Pooling config, a width that is not `hidden_width`).
Result<std::optional<EmbeddingConfig>> read_embedding_config(const std::filesystem::path& model_dir, int64_t hidden_width);

}  // namespace memra::engine
