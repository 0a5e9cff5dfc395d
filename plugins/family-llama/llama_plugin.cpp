// family-llama plugin entry points: descriptor, init, and the family table
// (family-common's FamilyTable over this family's pieces).
#include "family_plan.hpp"
#include "family_table.hpp"
#include "llama_config.hpp"
#include "llama_forward.hpp"
#include "llama_plan.hpp"
#include "memra/memra.h"

namespace {

struct Llama {
  using Plan = memra::llama::Plan;
  using Model = memra::llama::Model;
  static std::string normalize_config(const char* raw) { return memra::llama::normalize_config(raw); }
  static std::optional<std::string> canonical_hf_name(std::string_view n) { return memra::llama::canonical_hf_name(n); }
  static std::optional<std::string> hf_tensor_parts(std::string_view n) { return memra::llama::hf_tensor_parts(n); }
  static std::optional<std::string> gguf_tensor_parts(std::string_view n) { return memra::family::gguf_fused_expert_parts(n); }
  static constexpr bool gguf_names_are_canonical = true;
  static bool plan_from_config(const char* c, Plan& p, std::string& e) { return memra::llama::plan_from_config(c, p, e); }
  static void plan_bind_state(Plan& p) { memra::llama::plan_bind_state(p); }
  static std::string plan_to_json(const Plan& p) { return memra::llama::plan_to_json(p); }
  static bool model_bind(Model& m, const memra_weight_set& w, std::string& e) { return memra::llama::model_bind(m, w, e); }
  static memra_status model_run(Model& m, const memra_forward_batch& b, std::string& e) { return memra::llama::model_run(m, b, e); }
};

const memra_plugin_descriptor kDescriptor = {
    MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE,
    MEMRA_ABI_MAJOR,
    MEMRA_ABI_MINOR,
    MEMRA_PLUGIN_KIND_FAMILY,
    "llama",
    "0.2.0",
    "Llama 2/3.x, Mistral, Qwen2/2.5, Qwen3 and Qwen3-MoE decoder-only transformers",
    memra::llama::handled_architectures(),
    memra::family::cpu_or_cuda_score,
};

const memra_family_api kFamily = memra::family::FamilyTable<Llama>::table();

}  // namespace

MEMRA_EXPORT const memra_plugin_descriptor* memra_plugin_query(void) { return &kDescriptor; }

MEMRA_EXPORT memra_status memra_plugin_init(const memra_host_api* host, memra_plugin_api* out) {
  return memra::family::init_context(host, out, "family-llama", &kFamily);
}
