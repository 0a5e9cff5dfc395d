#include "repack/tool/validate.hpp"

#include <cmath>
#include <fstream>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <nlohmann/json.hpp>
#include <sstream>

#include "repack/format/layout.hpp"

namespace memra::repack {
namespace {

namespace fs = std::filesystem;

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Where the source's config lives, for messages.
std::string config_origin(const Source& src) {
  return src.format() == "gguf" ? "the metadata of " + src.path().string() : (src.path() / "config.json").string();
}

Status check_plan(const Source& src, const plugins::PluginHost& plugins, std::map<std::string, std::string>* keep_as_stored) {
  const std::string& family_name = src.config().family;
  auto family = plugins.family(family_name);
  if (!family)
    return make_error(family.error().code, src.path().string() + ": its config was read by family plugin '" + family_name +
                                               "', which cannot be found now: " + family.error().message);
  auto plan = family->plan_create(model_config_to_json(src.config()));
  if (!plan)
    return make_error(plan.error().code, "cannot repack " + src.path().string() + ": family plugin '" + family_name +
                                             "' cannot plan the model " + config_origin(src) + " describes: " +
                                             plan.error().message);
  auto described = plan->describe();
  if (!described) return described.error();
  const auto doc = nlohmann::json::parse(*described, nullptr, false);
  if (!doc.is_object() || !doc.contains("tensors") || !doc["tensors"].is_array()) return {};  // nothing to check against
  std::map<std::string, const SourceTensor*> by_name;
  for (const SourceTensor& t : src.tensors()) by_name.emplace(t.name, &t);
  std::vector<std::string> missing;
  for (const auto& want : doc["tensors"]) {
    if (!want.is_object() || !want.contains("name") || !want["name"].is_string()) continue;
    const std::string name = want["name"].get<std::string>();
    if (keep_as_stored && want.contains("keep_as_stored") && want["keep_as_stored"].is_string())
      (*keep_as_stored)[name] = want["keep_as_stored"].get<std::string>();
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      missing.push_back(name);
      continue;
    }
    if (!want.contains("shape") || !want["shape"].is_array()) continue;
    std::vector<uint64_t> shape;
    for (const auto& d : want["shape"])
      if (d.is_number_integer()) shape.push_back(d.get<uint64_t>());
    const SourceTensor& have = *it->second;
    if (shape != have.shape)
      return make_error(ErrorCode::invalid_argument,
                        "cannot repack " + src.path().string() + ": tensor '" + have.source_name + "' in " +
                            have.file.string() + " has shape " + shape_text(have.shape) + ", but " + config_origin(src) +
                            " asks for " + shape_text(shape) + " (family plugin '" + family_name + "' reads it as '" +
                            name + "'); the config and the weights are not of the same model");
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 4; ++i) list += (i ? ", " : "") + ("'" + missing[i] + "'");
    if (missing.size() > 4) list += ", ...";
    return make_error(ErrorCode::invalid_argument,
                      "cannot repack " + src.path().string() + ": " + config_origin(src) + " describes a model whose " +
                          std::to_string(missing.size()) + " tensor(s) " + list + " (as family plugin '" + family_name +
                          "' names them) are not in its weight files; the config and the weights are not of the same "
                          "model, or a shard is missing");
  }
  return {};
}

Status check_json_file(const fs::path& p, bool need_model) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return make_error(ErrorCode::io, "cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    const auto doc = nlohmann::json::parse(ss.str());
    if (!doc.is_object()) return make_error(ErrorCode::invalid_argument, p.string() + " is not a JSON object");
    if (need_model && (!doc.contains("model") || !doc["model"].is_object() || !doc["model"].contains("vocab")))
      return make_error(ErrorCode::invalid_argument,
                        p.string() + " has no \"model\" with a \"vocab\": it is not a Hugging Face tokenizer file");
  } catch (const nlohmann::json::exception& e) {
    return make_error(ErrorCode::invalid_argument, p.string() + " is not valid JSON (" + e.what() + ")");
  }
  return {};
}

Status check_tokenizer(const Source& src) {
  if (src.format() != "safetensors") return {};  // a GGUF's vocabulary was read when it was opened
  for (const auto& [from, name] : src.side_files()) {
    const std::string file = from.filename().string();
    if (file == "tokenizer.json" || file == "tokenizer_config.json" || file == "special_tokens_map.json")
      if (auto st = check_json_file(from, file == "tokenizer.json"); !st)
        return make_error(st.error().code, "cannot repack " + src.path().string() + ": " + st.error().message);
  }
  return {};
}

}  // namespace

Status validate_source(const Source& source, const plugins::PluginHost& plugins, std::map<std::string, std::string>* keep_as_stored) {
  MEMRA_TRY(check_plan(source, plugins, keep_as_stored));
  MEMRA_TRY(check_tokenizer(source));
  return {};
}

Status check_finite(const Source& source, const SourceTensor& t, const float* values, uint64_t first, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    if (std::isfinite(values[i])) continue;
    const uint64_t at = first + i;
    const uint64_t cols = t.shape.empty() ? 1 : t.shape.back();
    const std::string where = t.shape.size() >= 2 ? " (row " + std::to_string(at / cols) + ", column " +
                                                         std::to_string(at % cols) + ")"
                                                   : "";
    return make_error(ErrorCode::corrupt,
                      "cannot repack " + source.path().string() + ": tensor '" + t.source_name + "' in " +
                          t.file.string() + " holds " + (std::isnan(values[i]) ? "NaN" : "an infinity") + " at element " +
                          std::to_string(at) + where + "; memra does not serve non-finite weights (re-export or fix "
                          "the checkpoint)");
  }
  return {};
}

Status check_finite(const Source& source, const SourceTensor& t, const std::function<bool()>& stop) {
  if (!Source::convertible(t.scheme)) return {};
  const uint64_t n = element_count(t.shape);
  const uint64_t block = std::max<uint64_t>(1, format::scheme_block_elements(t.scheme));
  const uint64_t chunk = std::max<uint64_t>(block, (uint64_t{1} << 20) / block * block);
  std::vector<float> f32;
  for (uint64_t first = 0; first < n; first += chunk) {
    if (stop && stop()) return make_error(ErrorCode::io, "interrupted");
    const uint64_t count = std::min(chunk, n - first);
    f32.resize(count);
    MEMRA_TRY(source.to_f32(t, first, count, f32.data()));
    MEMRA_TRY(check_finite(source, t, f32.data(), first, count));
  }
  return {};
}

Status check_all_finite(const Source& source, int threads) {
  const auto& ts = source.tensors();
  const size_t n = std::max<size_t>(1, threads > 0 ? static_cast<size_t>(threads) : std::thread::hardware_concurrency());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::optional<Error> first;
  auto work = [&] {
    for (size_t i = next++; i < ts.size() && !failed.load(); i = next++) {
      if (auto st = check_finite(source, ts[i], [&] { return failed.load(); }); !st) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = st.error();
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t k = 1; k < std::min(n, ts.size()); ++k) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (first) return *first;
  return {};
}

}  // namespace memra::repack
