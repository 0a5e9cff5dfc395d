#include "repack/tool/provenance.hpp"

#include <nlohmann/json.hpp>
#include <thread>

#include "registry/registry.hpp"

namespace memra::repack {

std::string options_json(const RepackOptions& o) {
  nlohmann::ordered_json j;
  j["quant"] = o.quant;
  if (!o.overrides.empty()) {
    nlohmann::ordered_json ov = nlohmann::ordered_json::array();
    for (const SchemeOverride& x : o.overrides) ov.push_back(x.pattern + "=" + x.scheme);
    j["tensor_scheme"] = ov;
  }
  j["threads"] = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  j["force"] = o.overwrite;
  j["fsync"] = o.fsync;
  j["format_version"] = format::kFormatVersion;
  return j.dump();
}

Result<ProvenanceIds> record_provenance(const std::filesystem::path& registry_path, const RepackResult& r,
                                        const RepackOptions& o) {
  auto reg = registry::Registry::open(registry_path);
  if (!reg) return reg.error();
  registry::CheckpointInfo ci;
  ci.source_path = r.manifest.source.path;
  auto fmt = registry::parse_format(r.manifest.source.format);
  if (!fmt) return fmt.error();
  ci.format = *fmt;
  ci.sha256 = r.manifest.source.sha256;
  ci.size_bytes = r.manifest.source.size;
  ci.family = r.config.family;
  ci.architecture = r.config.architecture;
  ci.quant = r.source_quant;
  nlohmann::ordered_json p;
  p["parameters"] = r.parameters;
  p["vocab_size"] = r.config.vocab_size;
  p["hidden_size"] = r.config.hidden_size;
  p["num_layers"] = r.config.num_layers;
  p["max_position_embeddings"] = r.config.max_position_embeddings;
  // The family's shape keys as it wrote them (heads, experts, layer kinds, ...).
  if (auto family = nlohmann::ordered_json::parse(model_config_to_json(r.config), nullptr, false); family.is_object())
    p["config"] = std::move(family);
  ci.parameters_json = p.dump();
  auto ckpt = reg->record_checkpoint(ci);
  if (!ckpt) return ckpt.error();
  registry::RepackInfo ri;
  ri.checkpoint_id = ckpt->id;
  ri.output_path = r.output.string();
  ri.output_hash = r.manifest_sha256;
  ri.tool_version = r.manifest.created_by;
  ri.options_json = options_json(o);
  auto rep = reg->record_repack(ri);
  if (!rep) return rep.error();
  return ProvenanceIds{ckpt->id, rep->id};
}

}  // namespace memra::repack
