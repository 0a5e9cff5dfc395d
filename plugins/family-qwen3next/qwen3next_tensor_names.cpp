// tensor_name for the qwen3next family: memra names weights the GGUF way
// ("blk.3.ssm_in.weight"); Hugging Face names are mapped here.
#include <array>
#include <charconv>
#include <utility>

#include "family_plan.hpp"
#include "qwen3next_config.hpp"

namespace memra::qwen3next {
namespace {

// Per-layer suffixes: HF (after "model.layers.N.") -> canonical (after "blk.N.").
constexpr std::array<std::pair<std::string_view, std::string_view>, 30> kLayerNames = {{
    {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"},  // Qwen3.5's separate projections (llama.cpp's names)
    {"linear_attn.in_proj_z.weight", "attn_gate.weight"},
    {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
    {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"linear_attn.in_proj_qkvz.weight", "ssm_in.weight"},
    {"linear_attn.in_proj_ba.weight", "ssm_ba.weight"},
    {"linear_attn.conv1d.weight", "ssm_conv1d.weight"},
    {"linear_attn.A_log", "ssm_a_log"},
    {"linear_attn.dt_bias", "ssm_dt.bias"},
    {"linear_attn.norm.weight", "ssm_norm.weight"},
    {"linear_attn.out_proj.weight", "ssm_out.weight"},
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
}};

}  // namespace

namespace {

// A layer's tensor under one of `prefixes` ("model.layers.N.rest"): canonical `blk` + N + "." + rest's name.
std::optional<std::string> layer_tensor(std::string_view n, std::initializer_list<std::string_view> prefixes, const std::string& blk) {
  const auto part = family::hf_layer_part(n, prefixes);
  if (!part) return std::nullopt;
  const auto [layer, rest] = *part;
  const std::string b = blk + std::to_string(layer) + ".";
  for (const auto& [hf, canon] : kLayerNames)
    if (rest == hf) return b + std::string(canon);
  constexpr std::string_view kMlp = "mlp.";
  if (rest.substr(0, kMlp.size()) == kMlp)
    if (auto e = family::hf_stacked_expert_name(b, rest.substr(kMlp.size()))) return e;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> hf_tensor_parts(std::string_view n) {
  // The experts of a decoder layer ("blk.N.") or of the MTP head's layer ("mtp.N.").
  const bool mtp = family::strip_prefix(n, {"model.mtp.", "mtp."}).size() < n.size();
  const auto part = mtp ? family::hf_layer_part(n, {"model.mtp.", "mtp."}) : family::hf_layer_part(n, {"model.language_model.", "model."});
  constexpr std::string_view kMlp = "mlp.";
  if (!part || part->second.substr(0, kMlp.size()) != kMlp) return std::nullopt;
  return family::hf_expert_parts((mtp ? "mtp." : "blk.") + std::to_string(part->first) + ".", part->second.substr(kMlp.size()));
}

std::optional<std::string> canonical_hf_name(std::string_view n) {
  if (n == "lm_head.weight") return "output.weight";
  // The MTP head: "mtp.<i>." then llama.cpp's names (its GGUF has them as "blk.<layers + i>.";
  // the plan takes the prefix from the source format).
  if (const std::string_view m = family::strip_prefix(n, {"model.mtp.", "mtp."}); m.size() < n.size()) {
    for (const auto& [hf, canon] : {std::pair<std::string_view, std::string_view>{"fc.weight", "nextn.eh_proj.weight"},
                                    {"pre_fc_norm_embedding.weight", "nextn.enorm.weight"},
                                    {"pre_fc_norm_hidden.weight", "nextn.hnorm.weight"},
                                    {"norm.weight", "nextn.shared_head_norm.weight"}})
      if (m == hf) return "mtp.0." + std::string(canon);
    return layer_tensor(n, {"model.mtp.", "mtp."}, "mtp.");
  }
  // The decoder under "model." (a causal LM) or "model.language_model." (Qwen3.5's
  // image-text-to-text checkpoints; their vision tower is not read yet).
  const std::string_view top = family::strip_prefix(n, {"model.language_model.", "model."});
  if (top == "embed_tokens.weight") return "token_embd.weight";
  if (top == "norm.weight") return "output_norm.weight";
  return layer_tensor(n, {"model.language_model.", "model."}, "blk.");
}

}  // namespace memra::qwen3next
