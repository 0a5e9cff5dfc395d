// family-qwen3next plugin entry points: descriptor, init (the family table and the ops
// the family brings), through family-common's FamilyTable.
#include "family_plan.hpp"
#include "family_table.hpp"
#include "memra/memra.h"
#include "qwen3next_config.hpp"
#include "qwen3next_forward.hpp"
#include "qwen3next_ops.hpp"
#include "qwen3next_plan.hpp"

namespace {

namespace q = memra::qwen3next;

struct Qwen3Next {
  using Plan = q::Plan;
  using Model = q::Model;
  static std::string normalize_config(const char* raw) { return q::normalize_config(raw); }
  static std::optional<std::string> canonical_hf_name(std::string_view n) { return q::canonical_hf_name(n); }
  static std::optional<std::string> hf_tensor_parts(std::string_view n) { return q::hf_tensor_parts(n); }
  static std::optional<std::string> gguf_tensor_parts(std::string_view n) { return memra::family::gguf_fused_expert_parts(n); }
  static constexpr bool gguf_names_are_canonical = true;  // llama.cpp's names are the canonical ones
  static bool plan_from_config(const char* c, Plan& p, std::string& e) { return q::plan_from_config(c, p, e); }
  static void plan_bind_state(Plan& p) { q::plan_bind_state(p); }
  static std::string plan_to_json(const Plan& p) { return q::plan_to_json(p); }
  static bool model_bind(Model& m, const memra_weight_set& w, std::string& e) { return q::model_bind(m, w, e); }
  static memra_status model_run(Model& m, const memra_forward_batch& b, std::string& e) { return q::model_run(m, b, e); }
};

const memra_plugin_descriptor kDescriptor = {
    MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE,
    MEMRA_ABI_MAJOR,
    MEMRA_ABI_MINOR,
    MEMRA_PLUGIN_KIND_FAMILY,
    "qwen3next",
    "0.1.0",
    "Qwen3-Next hybrids: Gated DeltaNet and gated full attention, sparse MoE with a shared expert",
    q::handled_architectures(),
    memra::family::cpu_or_cuda_score,
};

const memra_family_api kFamily = memra::family::FamilyTable<Qwen3Next>::table();

}  // namespace

MEMRA_EXPORT const memra_plugin_descriptor* memra_plugin_query(void) { return &kDescriptor; }

MEMRA_EXPORT memra_status memra_plugin_init(const memra_host_api* host, memra_plugin_api* out) {
  const memra_status st = memra::family::init_context(host, out, "family-qwen3next", &kFamily);
  if (st != MEMRA_OK) return st;
  if (!MEMRA_STRUCT_HAS(out, memra_plugin_api, ops)) {
    out->shutdown(out->ctx);
    return MEMRA_ERR_ABI_MISMATCH;  // a host older than SDK 2.7 cannot take the family's ops
  }
  const auto ops = q::op_defs();
  out->num_ops = ops.size();
  out->ops = ops.data();
  return MEMRA_OK;
}
