#include "host/engine/embedding_config.hpp"

#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

namespace memra::engine {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

Result<json> read_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return make_error(ErrorCode::invalid_argument, file.string() + " cannot be read");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    return make_error(ErrorCode::invalid_argument, file.string() + " is not valid JSON: " + e.what());
  }
}

Error refuse(const fs::path& file, const std::string& why) {
  return make_error(ErrorCode::unsupported, "embedding model: " + file.string() + ": " + why);
}

// The Pooling module's config: exactly one mode set, and one memra computes.
Result<Pooling> read_pooling(const fs::path& file, int64_t hidden_width) {
  auto doc = read_json(file);
  if (!doc) return doc.error();
  if (!doc->is_object()) return refuse(file, "is not a JSON object");
  std::vector<std::string> modes;
  for (const auto& [key, value] : doc->items())
    if (key.rfind("pooling_mode_", 0) == 0 && value.is_boolean() && value.get<bool>()) modes.push_back(key);
  if (modes.size() != 1)
    return refuse(file, "sets " + std::to_string(modes.size()) +
                            " pooling modes; memra pools with exactly one (pooling_mode_lasttoken or pooling_mode_mean_tokens)");
  Pooling pooling;
  if (modes[0] == "pooling_mode_lasttoken") pooling = Pooling::last_token;
  else if (modes[0] == "pooling_mode_mean_tokens") pooling = Pooling::mean;
  else
    return refuse(file, modes[0] + " is not supported; memra pools with pooling_mode_lasttoken or pooling_mode_mean_tokens");
  if (pooling == Pooling::mean && doc->contains("include_prompt") && (*doc)["include_prompt"] == false)
    return refuse(file, "include_prompt false (mean pooling without the instruction's tokens) is not supported");
  if (auto w = doc->find("word_embedding_dimension"); w != doc->end() && w->is_number_integer() && w->get<int64_t>() != hidden_width)
    return refuse(file, "word_embedding_dimension " + std::to_string(w->get<int64_t>()) + " is not the model's hidden size " +
                            std::to_string(hidden_width));
  return pooling;
}

}  // namespace

const char* to_string(Pooling p) { return p == Pooling::mean ? "mean" : "last token"; }

Result<std::optional<EmbeddingConfig>> read_embedding_config(const fs::path& model_dir, int64_t hidden_width) {
  const fs::path modules_file = model_dir / "modules.json";
  std::error_code ec;
  if (!fs::is_regular_file(modules_file, ec)) return std::optional<EmbeddingConfig>{};
  auto modules = read_json(modules_file);
  if (!modules) return modules.error();
  if (!modules->is_array() || modules->empty()) return refuse(modules_file, "is not a non-empty array of modules");
  // Transformer, then Pooling, then an optional Normalize: anything else changes the
  // vectors in ways memra does not compute (Dense projections, other encoders).
  EmbeddingConfig config;
  bool pooled = false;
  for (size_t i = 0; i < modules->size(); ++i) {
    const json& m = (*modules)[i];
    const std::string type = m.is_object() && m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : "";
    const std::string kind = type.substr(type.rfind('.') == std::string::npos ? 0 : type.rfind('.') + 1);
    if (i == 0 && kind == "Transformer") continue;
    if (i == 0) return refuse(modules_file, "module 0 is '" + type + "', not sentence_transformers.models.Transformer");
    if (kind == "Pooling" && !pooled) {
      const std::string path = m.contains("path") && m["path"].is_string() ? m["path"].get<std::string>() : "";
      auto pooling = read_pooling(model_dir / path / "config.json", hidden_width);
      if (!pooling) return pooling.error();
      config.pooling = *pooling;
      pooled = true;
    } else if (kind == "Normalize" && pooled && !config.normalize) {
      config.normalize = true;
    } else {
      return refuse(modules_file, "module " + std::to_string(i) + " ('" + type +
                                      "') is not supported; memra runs Transformer, Pooling and an optional Normalize");
    }
  }
  if (!pooled) return refuse(modules_file, "has no sentence_transformers.models.Pooling module");
  return std::optional<EmbeddingConfig>(config);
}

}  // namespace memra::engine
