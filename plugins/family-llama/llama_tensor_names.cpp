// tensor_name for the llama family: memra names weights the way GGUF does
// ("blk.3.attn_q.weight"), so GGUF files need no renaming and Hugging Face names
// are mapped here.
#include "llama_config.hpp"

#include "family_plan.hpp"


#include <array>
#include <charconv>
#include <utility>

namespace memra::llama {
namespace {

// Per-layer suffixes of the dense llama-like families: HF (after "[model.]layers.N.")
// -> canonical (after "blk.N."). Sparse MLPs: canonical_moe_name.
constexpr std::array<std::pair<std::string_view, std::string_view>, 18> kLayerNames = {{
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"mlp.gate_proj.bias", "ffn_gate.bias"},
    {"mlp.up_proj.bias", "ffn_up.bias"},
    {"mlp.down_proj.bias", "ffn_down.bias"},
}};

}  // namespace

std::optional<std::string> canonical_hf_name(std::string_view n) {
  if (n == "lm_head.weight") return "output.weight";
  // A causal LM's decoder sits under "model."; a bare base model (what
  // sentence-transformers saves for Qwen3-Embedding: Qwen3Model, no lm_head) has the
  // same tensors without the prefix.
  const std::string_view top = family::strip_prefix(n, {"model."});
  if (top == "embed_tokens.weight") return "token_embd.weight";
  if (top == "norm.weight") return "output_norm.weight";
  const auto part = family::hf_layer_part(n, {"model."});
  if (!part) return std::nullopt;
  const auto [layer, rest] = *part;
  for (const auto& [hf, canon] : kLayerNames)
    if (rest == hf) return "blk." + std::to_string(layer) + "." + std::string(canon);
  // A Qwen3-MoE sparse MLP: the router "gate.weight"; transformers 5's stacked down_proj.
  // Per-expert and fused gate/up tensors are parts of the stacked ones (hf_tensor_parts).
  constexpr std::string_view kMlp = "mlp.";
  if (rest == "mlp.gate.weight") return "blk." + std::to_string(layer) + ".ffn_gate_inp.weight";
  if (rest.substr(0, kMlp.size()) == kMlp) return family::hf_stacked_expert_name("blk." + std::to_string(layer) + ".", rest.substr(kMlp.size()));
  return std::nullopt;
}

std::optional<std::string> hf_tensor_parts(std::string_view n) {
  const auto part = family::hf_layer_part(n, {"model."});
  constexpr std::string_view kMlp = "mlp.";
  if (!part || part->second.substr(0, kMlp.size()) != kMlp) return std::nullopt;
  return family::hf_expert_parts("blk." + std::to_string(part->first) + ".", part->second.substr(kMlp.size()));
}

}  // namespace memra::llama
