// The weight schemes memra-repack can write, from the quant plugins that own them
// (memra_quant_api.scheme_info, SDK 2.10): each scheme's block, whether --quant or
// --tensor-scheme may name it, its mix (the scheme of the head and attn_v, the fallback
// for rows that break the block, the embedding-side matrices it keeps as stored), and
// the plugin whose weight_bytes and quantize write it. memra-repack names no scheme.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "core/plugin_host/plugin_host.hpp"

namespace memra::repack {

struct SchemeFacts {
  std::string name;
  int64_t block_elems = 1;
  int32_t repack = MEMRA_REPACK_QUANT;  // MEMRA_REPACK_*
  std::string sensitive;                // "" = the scheme itself
  std::string fallback;                 // "" = kept as stored
  int32_t keep_as_stored = MEMRA_KEEP_TOKEN_EMBD;  // MEMRA_KEEP_* bits
  std::string plugin;                   // its quant plugin's name
};

class SchemeCatalog {
 public:
  // Every scheme of every quant plugin `host` discovered (a plugin without scheme_info
  // gets the defaults above: a --quant target of matrices only, no mix).
  static Result<SchemeCatalog> from_plugins(const plugins::PluginHost& host);

  const SchemeFacts* find(const std::string& scheme) const;
  // "keep" and the --quant targets, sorted after "keep"; for messages and --help.
  std::vector<std::string> quant_targets() const;
  // The schemes --tensor-scheme may name, sorted.
  std::vector<std::string> tensor_schemes() const;
  // Bytes of a tensor of `shape` in `scheme` (rows = the product of the leading
  // dimensions); nullopt when the plugin cannot hold it (block size, unknown scheme).
  std::optional<uint64_t> bytes(const std::string& scheme, const std::vector<uint64_t>& shape) const;
  // `rows` x `cols` floats into `dst` (bytes(scheme, {rows, cols}) of them), by the plugin.
  Status quantize(const std::string& scheme, std::span<const float> src, int64_t rows, int64_t cols, std::span<std::byte> dst) const;

 private:
  std::vector<SchemeFacts> facts_;
  std::vector<plugins::QuantPlugin> plugins_;  // facts_[i].plugin's handle: plugins_[owner_[i]]
  std::vector<size_t> owner_;
};

// "a, b, c or d" for messages.
std::string join_or(const std::vector<std::string>& items);

}  // namespace memra::repack
