// tensor_name for the llama family: memra names weights the way GGUF does
// ("blk.3.attn_q.weight"), so GGUF files need no renaming and Hugging Face names
// are mapped here.
#include "llama_config.hpp"


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

// A Qwen3-MoE sparse MLP (after "layers.N.mlp."): the router "gate.weight" and
// "experts.E.{gate,up,down}_proj.weight", named as llama.cpp named unstacked experts.
std::optional<std::string> canonical_moe_name(std::string_view rest) {
  if (rest == "gate.weight") return "ffn_gate_inp.weight";
  constexpr std::string_view kExperts = "experts.";
  if (rest.substr(0, kExperts.size()) != kExperts) return std::nullopt;
  rest.remove_prefix(kExperts.size());
  int expert = -1;
  const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), expert);
  if (ec != std::errc() || expert < 0 || ptr == rest.data() + rest.size() || *ptr != '.') return std::nullopt;
  rest.remove_prefix(static_cast<size_t>(ptr - rest.data()) + 1);
  for (const auto& [hf, canon] : {std::pair{"gate_proj.weight", "ffn_gate"}, std::pair{"up_proj.weight", "ffn_up"},
                                  std::pair{"down_proj.weight", "ffn_down"}})
    if (rest == hf) return std::string(canon) + "." + std::to_string(expert) + ".weight";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> canonical_hf_name(std::string_view n) {
  if (n == "lm_head.weight") return "output.weight";
  // A causal LM's decoder sits under "model."; a bare base model (what
  // sentence-transformers saves for Qwen3-Embedding: Qwen3Model, no lm_head) has the
  // same tensors without the prefix.
  constexpr std::string_view kDecoder = "model.";
  if (n.substr(0, kDecoder.size()) == kDecoder) n.remove_prefix(kDecoder.size());
  if (n == "embed_tokens.weight") return "token_embd.weight";
  if (n == "norm.weight") return "output_norm.weight";
  constexpr std::string_view kLayers = "layers.";
  if (n.substr(0, kLayers.size()) != kLayers) return std::nullopt;
  n.remove_prefix(kLayers.size());
  const size_t dot = n.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  int layer = -1;
  const auto [ptr, ec] = std::from_chars(n.data(), n.data() + dot, layer);
  if (ec != std::errc() || ptr != n.data() + dot || layer < 0) return std::nullopt;
  const std::string_view rest = n.substr(dot + 1);
  for (const auto& [hf, canon] : kLayerNames)
    if (rest == hf) return "blk." + std::to_string(layer) + "." + std::string(canon);
  constexpr std::string_view kMlp = "mlp.";
  if (rest.substr(0, kMlp.size()) == kMlp)
    if (auto moe = canonical_moe_name(rest.substr(kMlp.size()))) return "blk." + std::to_string(layer) + "." + *moe;
  return std::nullopt;
}

}  // namespace memra::llama
