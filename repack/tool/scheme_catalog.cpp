#include "repack/tool/scheme_catalog.hpp"

#include <algorithm>

namespace memra::repack {

Result<SchemeCatalog> SchemeCatalog::from_plugins(const plugins::PluginHost& host) {
  SchemeCatalog c;
  const memra_device_info device = host.device_info();
  for (const plugins::PluginInfo& info : host.plugins()) {
    if (info.kind != plugins::PluginKind::quant) continue;
    for (const std::string& scheme : info.handles) {
      if (c.find(scheme)) continue;
      auto q = host.quant_for(scheme, device);  // the plugin the engine would take for it
      if (!q) continue;
      SchemeFacts f;
      f.name = scheme;
      f.plugin = q->info().name;
      const memra_quant_api& api = q->api();
      if (MEMRA_STRUCT_HAS(&api, memra_quant_api, scheme_info) && api.scheme_info) {
        memra_scheme_info si{};
        si.struct_size = MEMRA_SCHEME_INFO_STRUCT_SIZE;
        if (api.scheme_info(q->ctx(), scheme.c_str(), &si) != MEMRA_OK)
          return make_error(ErrorCode::invalid_argument, "quant plugin '" + f.plugin + "': scheme_info(" + scheme + ") failed: " + q->last_error());
        f.block_elems = si.block_elems > 0 ? si.block_elems : 1;
        f.repack = si.repack;
        f.sensitive = si.sensitive ? si.sensitive : "";
        f.fallback = si.fallback ? si.fallback : "";
        f.keep_as_stored = si.keep_as_stored;
      }
      c.facts_.push_back(std::move(f));
      c.owner_.push_back(c.plugins_.size());
      c.plugins_.push_back(std::move(*q));
    }
  }
  return c;
}

const SchemeFacts* SchemeCatalog::find(const std::string& scheme) const {
  for (const SchemeFacts& f : facts_)
    if (f.name == scheme) return &f;
  return nullptr;
}

std::vector<std::string> SchemeCatalog::quant_targets() const {
  std::vector<std::string> out;
  for (const SchemeFacts& f : facts_)
    if (f.repack >= MEMRA_REPACK_QUANT) out.push_back(f.name);
  std::sort(out.begin(), out.end());
  out.insert(out.begin(), "keep");
  return out;
}

std::vector<std::string> SchemeCatalog::tensor_schemes() const {
  std::vector<std::string> out;
  for (const SchemeFacts& f : facts_)
    if (f.repack >= MEMRA_REPACK_TENSOR) out.push_back(f.name);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<uint64_t> SchemeCatalog::bytes(const std::string& scheme, const std::vector<uint64_t>& shape) const {
  for (size_t i = 0; i < facts_.size(); ++i) {
    if (facts_[i].name != scheme) continue;
    if (shape.empty()) return std::nullopt;
    uint64_t rows = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
    auto b = plugins_[owner_[i]].weight_bytes(scheme, static_cast<int64_t>(rows), static_cast<int64_t>(shape.back()));
    return b ? std::optional<uint64_t>(*b) : std::nullopt;
  }
  return std::nullopt;
}

Status SchemeCatalog::quantize(const std::string& scheme, std::span<const float> src, int64_t rows, int64_t cols,
                               std::span<std::byte> dst) const {
  for (size_t i = 0; i < facts_.size(); ++i)
    if (facts_[i].name == scheme) {
      if (auto q = plugins_[owner_[i]].quantize(scheme, src, rows, cols, dst); !q)
        return make_error(q.error().code, "quant plugin '" + facts_[i].plugin + "': " + q.error().message);
      return {};
    }
  return make_error(ErrorCode::internal, "no quant plugin writes " + scheme);
}

std::string join_or(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return s;
}

}  // namespace memra::repack
