// tensor_name for the gemma family: memra names weights the way llama.cpp's GGUF files do
// ("blk.3.post_ffw_norm.weight"); Hugging Face names are mapped here.
#include <array>
#include <utility>

#include "family_plan.hpp"
#include "gemma_config.hpp"

namespace memra::gemma {
namespace {

// Per-layer suffixes: HF (after "model.layers.N.") -> canonical (after "blk.N.").
constexpr std::array<std::pair<std::string_view, std::string_view>, 17> kLayerNames = {{
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
}};

}  // namespace

std::optional<std::string> canonical_hf_name(std::string_view n) {
  if (n == "lm_head.weight") return "output.weight";
  const std::string_view top = family::strip_prefix(n, {"model."});
  if (top == "embed_tokens.weight") return "token_embd.weight";
  if (top == "norm.weight") return "output_norm.weight";
  const auto part = family::hf_layer_part(n, {"model."});
  if (!part) return std::nullopt;
  const auto [layer, rest] = *part;
  for (const auto& [hf, canon] : kLayerNames)
    if (rest == hf) return "blk." + std::to_string(layer) + "." + std::string(canon);
  return std::nullopt;
}

}  // namespace memra::gemma
