#include "repack/format/reader.hpp"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "repack/checkpoint/mapped_file.hpp"
#include "repack/format/layout.hpp"
#include "repack/format/crc32c.hpp"

namespace memra::format {

namespace fs = std::filesystem;

struct MemraModel::State {
  fs::path dir;
  Manifest manifest;
  ModelConfig config;
  std::vector<std::shared_ptr<const MappedFile>> maps;
  std::vector<Tensor> tensors;
  std::map<std::string, size_t, std::less<>> by_name;
};

namespace {

Error damaged(const fs::path& dir, const std::string& what) {
  return make_error(ErrorCode::corrupt, dir.string() + ": " + what + "; the repack is damaged: run memra-repack again");
}

bool is_hex(const std::string& s, size_t n) {
  return s.size() == n && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool plain_name(const std::string& f) {
  if (f.empty() || f.front() == '/') return false;
  for (const auto& part : fs::path(f))
    if (part == ".." || part == ".") return false;
  return true;
}

Status validate_tensors(const MemraModel::State& s) {
  const Manifest& m = s.manifest;
  std::vector<std::pair<std::pair<uint32_t, uint64_t>, size_t>> order;  // ((blob, offset), index)
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorEntry& t = m.tensors[i];
    const std::string who = "tensor '" + t.name + "'";
    if (t.name.empty()) return damaged(s.dir, "a tensor has no name");
    if (t.blob >= m.blobs.size()) return damaged(s.dir, who + " names blob " + std::to_string(t.blob) + " of " + std::to_string(m.blobs.size()));
    const auto expected = tensor_bytes(t.scheme, t.layout, t.shape);
    // A scheme memra does not know (a quant plugin's, layout 1): its plugin checks the
    // size at load (weight_bytes); here only the blob bounds below.
    const bool plugin_scheme = !expected && scheme_block_elements(t.scheme) == 0 && t.layout == 1 && !t.scheme.empty();
    if (!expected && !plugin_scheme) {
      if (scheme_block_elements(t.scheme) == 0 || t.layout != 1)
        return make_error(ErrorCode::unsupported, s.dir.string() + ": " + who + " uses scheme '" + t.scheme + "' layout " +
                                                      std::to_string(t.layout) + ", which this memra cannot read (upgrade memra)");
      return damaged(s.dir, who + " has a shape that does not fit scheme " + t.scheme);
    }
    if (expected && *expected != t.bytes)
      return damaged(s.dir, who + " claims " + std::to_string(t.bytes) + " bytes; its shape and scheme need " + std::to_string(*expected));
    if (t.offset % m.alignment != 0) return damaged(s.dir, who + " is not aligned to " + std::to_string(m.alignment) + " bytes");
    const uint64_t size = m.blobs[t.blob].size;
    if (t.offset > size || t.bytes > size - t.offset)
      return damaged(s.dir, who + " lies past the end of " + m.blobs[t.blob].file);
    if (!is_hex(t.checksum, 8)) return damaged(s.dir, who + " has no valid crc32c");
    if (s.by_name.count(t.name) && s.by_name.at(t.name) != i) return damaged(s.dir, who + " appears twice");
    order.push_back({{t.blob, t.offset}, i});
  }
  std::sort(order.begin(), order.end());
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorEntry& a = m.tensors[order[k - 1].second];
    const TensorEntry& b = m.tensors[order[k].second];
    if (a.blob == b.blob && a.offset + a.bytes > b.offset)
      return damaged(s.dir, "tensors '" + a.name + "' and '" + b.name + "' overlap");
  }
  return {};
}

}  // namespace

bool is_memra_dir(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(path / std::string(kManifestFile), ec);
}

Result<MemraModel> MemraModel::open(const fs::path& dir, const ReadOptions& options) {
  auto s = std::make_shared<State>();
  s->dir = dir;
  const fs::path mpath = dir / std::string(kManifestFile);
  std::ifstream in(mpath, std::ios::binary);
  if (!in) return make_error(ErrorCode::not_found, mpath.string() + " cannot be read; is " + dir.string() + " a .memra directory?");
  std::stringstream ss;
  ss << in.rdbuf();
  auto m = manifest_from_json(ss.str());
  if (!m) return make_error(m.error().code, dir.string() + ": " + m.error().message);
  s->manifest = std::move(*m);
  auto config = model_config_from_json(s->manifest.config_json);
  if (!config) return damaged(dir, "its config does not validate (" + config.error().message + ")");
  s->config = std::move(*config);
  for (size_t i = 0; i < s->manifest.tensors.size(); ++i) s->by_name.emplace(s->manifest.tensors[i].name, i);
  MEMRA_TRY(validate_tensors(*s));
  for (const std::string& f : s->manifest.tokenizer.files)
    if (!plain_name(f) || !fs::exists(dir / f)) return damaged(dir, "tokenizer file '" + f + "' is missing");

  for (const BlobInfo& b : s->manifest.blobs) {
    const fs::path p = dir / b.file;
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    if (ec) return damaged(dir, "blob " + b.file + " is missing");
    if (size != b.size)
      return damaged(dir, "blob " + b.file + " has " + std::to_string(size) + " bytes, the manifest says " + std::to_string(b.size));
    if (b.size == 0) {
      s->maps.push_back(nullptr);
      continue;
    }
    auto map = MappedFile::open(p.string());
    if (!map) return map.error();
    s->maps.push_back(std::move(*map));
  }
  for (const TensorEntry& t : s->manifest.tensors) {
    const auto& map = s->maps[t.blob];
    s->tensors.push_back({&t, map ? map->data() + t.offset : nullptr});
  }
  MemraModel model;
  model.state_ = std::move(s);
  if (options.verify_checksums) MEMRA_TRY(model.verify_checksums(options.threads));
  return model;
}

const fs::path& MemraModel::dir() const { return state_->dir; }
const Manifest& MemraModel::manifest() const { return state_->manifest; }
const ModelConfig& MemraModel::config() const { return state_->config; }
const std::vector<Tensor>& MemraModel::tensors() const { return state_->tensors; }

const Tensor* MemraModel::find(std::string_view name) const {
  auto it = state_->by_name.find(name);
  return it == state_->by_name.end() ? nullptr : &state_->tensors[it->second];
}

Status MemraModel::verify_checksums(int threads) const {
  const auto& ts = state_->tensors;
  const size_t n = std::max<size_t>(1, threads > 0 ? static_cast<size_t>(threads) : std::thread::hardware_concurrency());
  std::atomic<size_t> next{0};
  std::atomic<size_t> first_bad{ts.size()};
  auto work = [&] {
    for (size_t i = next++; i < ts.size() && first_bad.load() == ts.size(); i = next++) {
      if (crc32c_hex(ts[i].data, ts[i].entry->bytes) != ts[i].entry->checksum) {
        size_t cur = first_bad.load();
        while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t k = 1; k < std::min(n, ts.size()); ++k) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (first_bad.load() < ts.size())
    return damaged(state_->dir, "tensor '" + ts[first_bad.load()].entry->name + "' does not match its crc32c checksum");
  return {};
}

}  // namespace memra::format
