// Opening a checkpoint: a single file, or the shards an index names.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "repack/checkpoint/safetensors.hpp"

namespace memra::safetensors {

struct CheckpointBuilder {
  static Status add_file(Checkpoint& c, File file) {
    const size_t shard = c.files_.size();
    c.shard_paths_.push_back(file.path());
    c.files_.push_back(std::move(file));
    for (const auto& v : c.files_.back().tensors()) {
      TensorView copy = v;
      copy.shard = shard;
      if (!c.by_name_.emplace(copy.name, 0).second)
        return make_error(ErrorCode::corrupt, "tensor '" + copy.name + "' appears in more than one shard ('" +
                                                  c.shard_paths_[shard] + "' and an earlier one)");
      c.views_.push_back(std::move(copy));
    }
    return {};
  }
  static void finish(Checkpoint& c) {
    std::sort(c.views_.begin(), c.views_.end(),
              [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
    for (size_t i = 0; i < c.views_.size(); ++i) c.by_name_[c.views_[i].name] = i;
  }
  static Result<Checkpoint> open_single(const std::string& path) {
    auto f = File::open(path);
    if (!f) return f.error();
    Checkpoint c;
    c.file_metadata_ = f->header().metadata;
    MEMRA_TRY(add_file(c, std::move(*f)));
    finish(c);
    return c;
  }
  static Result<Checkpoint> open_index(const std::string& index_path);
};

namespace {

Error index_error(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::corrupt, "safetensors index '" + path + "': " + what);
}

// A shard name must stay inside the index's directory.
bool safe_shard_name(const std::string& s) {
  return !s.empty() && s.find('/') == std::string::npos && s.find('\\') == std::string::npos && s != "." &&
         s != ".." && s.find('\0') == std::string::npos;
}

}  // namespace

Result<Checkpoint> CheckpointBuilder::open_index(const std::string& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  if (!in) return make_error(ErrorCode::not_found, "cannot open safetensors index '" + index_path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return index_error(index_path, "not a JSON object");
  const auto wm = root.find("weight_map");
  if (wm == root.end() || !wm->is_object()) return index_error(index_path, "no \"weight_map\" object");

  std::vector<std::string> shard_names;  // in first-appearance order of the sorted weight map
  std::map<std::string, std::string> expected;  // tensor -> shard
  for (const auto& [tensor, shard] : wm->items()) {
    if (!shard.is_string()) return index_error(index_path, "weight_map['" + tensor + "'] is not a string");
    const std::string name = shard.get<std::string>();
    if (!safe_shard_name(name))
      return index_error(index_path, "shard name '" + name + "' is not a plain file name");
    if (std::find(shard_names.begin(), shard_names.end(), name) == shard_names.end()) shard_names.push_back(name);
    expected.emplace(tensor, name);
  }
  if (shard_names.empty()) return index_error(index_path, "weight_map is empty");
  std::sort(shard_names.begin(), shard_names.end());

  Checkpoint c;
  const auto meta = root.find("metadata");
  if (meta != root.end()) c.index_metadata_json_ = meta->dump();
  const std::filesystem::path dir = std::filesystem::path(index_path).parent_path();
  for (const auto& name : shard_names) {
    auto f = File::open((dir / name).string());
    if (!f) return f.error();
    for (const auto& v : f->tensors()) {
      const auto it = expected.find(v.name);
      if (it == expected.end())
        return index_error(index_path, "shard '" + name + "' holds tensor '" + v.name + "' that the index does not list");
      if (it->second != name)
        return index_error(index_path, "tensor '" + v.name + "' is in shard '" + name + "' but the index says '" +
                                           it->second + "'");
    }
    MEMRA_TRY(add_file(c, std::move(*f)));
  }
  for (const auto& [tensor, shard] : expected)
    if (c.by_name_.find(tensor) == c.by_name_.end())
      return index_error(index_path, "tensor '" + tensor + "' is listed for shard '" + shard + "' but missing from it");
  finish(c);
  return c;
}

Result<Checkpoint> Checkpoint::open(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    if (fs::exists(dir / "model.safetensors.index.json", ec))
      return CheckpointBuilder::open_index((dir / "model.safetensors.index.json").string());
    if (fs::exists(dir / "model.safetensors", ec))
      return CheckpointBuilder::open_single((dir / "model.safetensors").string());
    return make_error(ErrorCode::not_found, "'" + path +
                                                "' holds neither model.safetensors.index.json nor model.safetensors; "
                                                "pass the checkpoint file or its index directly");
  }
  const std::string suffix = ".index.json";
  if (path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
    return CheckpointBuilder::open_index(path);
  return CheckpointBuilder::open_single(path);
}

}  // namespace memra::safetensors
