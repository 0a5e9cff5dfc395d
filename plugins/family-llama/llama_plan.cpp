#include "llama_plan.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "memra/ops.h"

namespace memra::llama {
namespace {

using nlohmann::json;

using family::need_int;

void add(Plan& p, std::string name, std::vector<int64_t> shape, bool matrix) {
  p.tensors.push_back({std::move(name), std::move(shape), matrix});
}

// Sparse layers (Qwen3-MoE): family-common's reading, without shared experts.
bool plan_experts(const json& c, Plan& p, std::string& error) {
  family::ExpertPlan e;
  if (!family::experts_from_config(c, p.layers, false, false, e, error, "family-llama")) return false;
  p.layer_moe = std::move(e.layer_moe);
  p.experts = e.experts;
  p.top_k = e.top_k;
  p.expert_width = e.expert_width;
  p.normalize_top_k = e.normalize_top_k;
  return true;
}

}  // namespace

bool plan_from_config(const char* config_json, Plan& p, std::string& error) {
  try {
    const json c = json::parse(config_json);
    p.architecture = c.value("architecture", std::string());
    if (c.value("family", std::string()) != "llama") {
      error = "family-llama plans only configs it normalised (family 'llama'); this one says family '" +
              c.value("family", std::string()) + "'";
      return false;
    }
    p.vocab = need_int(c, "vocab_size");
    p.hidden = need_int(c, "hidden_size");
    p.intermediate = need_int(c, "intermediate_size");
    p.layers = need_int(c, "num_layers");
    p.heads = need_int(c, "num_heads");
    p.kv_heads = need_int(c, "num_kv_heads");
    p.head_dim = need_int(c, "head_dim");
    if (p.heads <= 0 || p.kv_heads <= 0 || p.heads % p.kv_heads != 0 || p.head_dim <= 0 || p.head_dim % 2 != 0) {
      error = "config has inconsistent attention heads (heads, kv heads, head_dim)";
      return false;
    }
    if (!plan_experts(c, p, error)) return false;
    if (c.value("norm_type", std::string("rms_norm")) != "rms_norm" || c.value("norm_weight_offset", false) ||
        c.value("activation", std::string("silu")) != "silu" || c.value("mlp_bias", false)) {
      error = "family-llama: config asks for a norm, activation or MLP bias this family does not have";
      return false;
    }
    p.norm_eps = c.value("norm_eps", 1e-6f);
    if (!(p.norm_eps > 0)) {
      error = "config's norm_eps must be positive";
      return false;
    }
    p.attention_bias = c.value("attention_bias", false);
    p.attention_output_bias = c.value("attention_output_bias", false);
    if (c.value("attention_output_gate", false)) {
      error = "family-llama: gated attention output (Qwen3-Next) is not part of this family";
      return false;
    }
    p.qk_norm = c.value("qk_norm", false);
    p.tied_embeddings = c.value("tie_word_embeddings", false);
    const int64_t window = c.value("sliding_window", int64_t{0});
    const json kinds = c.value("layer_types", json::array());
    if (!kinds.is_array() || static_cast<int64_t>(kinds.size()) != p.layers) {
      error = "config's layer_types does not list one kind per layer";
      return false;
    }
    for (const auto& k : kinds) {
      if (k == "full_attention") p.layer_window.push_back(0);
      else if (k == "sliding_attention" && window > 0) p.layer_window.push_back(static_cast<int32_t>(window));
      else {
        error = "family-llama: layer kind " + k.dump() + " is not full_attention or sliding_attention (with a window)";
        return false;
      }
    }
    for (size_t l = 0; l < p.layer_window.size(); ++l) {
      size_t g = 0;
      while (g < p.group_layers.size() && p.layer_window[static_cast<size_t>(p.group_layers[g][0])] != p.layer_window[l]) ++g;
      if (g == p.group_layers.size()) p.group_layers.emplace_back();
      p.group_layers[g].push_back(static_cast<int32_t>(l));
    }
    plan_bind_state(p);

    if (!family::rope_from_config(c, p.head_dim, p.rope, error, "family-llama")) return false;

    const int64_t q_width = p.heads * p.head_dim, kv_width = p.kv_heads * p.head_dim;
    add(p, "token_embd.weight", {p.vocab, p.hidden}, true);
    for (int64_t l = 0; l < p.layers; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      add(p, b + "attn_norm.weight", {p.hidden}, false);
      add(p, b + "attn_q.weight", {q_width, p.hidden}, true);
      add(p, b + "attn_k.weight", {kv_width, p.hidden}, true);
      add(p, b + "attn_v.weight", {kv_width, p.hidden}, true);
      if (p.attention_bias) {
        add(p, b + "attn_q.bias", {q_width}, false);
        add(p, b + "attn_k.bias", {kv_width}, false);
        add(p, b + "attn_v.bias", {kv_width}, false);
      }
      if (p.qk_norm) {
        add(p, b + "attn_q_norm.weight", {p.head_dim}, false);
        add(p, b + "attn_k_norm.weight", {p.head_dim}, false);
      }
      add(p, b + "attn_output.weight", {p.hidden, q_width}, true);
      if (p.attention_output_bias) add(p, b + "attn_output.bias", {p.hidden}, false);
      add(p, b + "ffn_norm.weight", {p.hidden}, false);
      if (p.layer_moe[static_cast<size_t>(l)]) {
        add(p, b + "ffn_gate_inp.weight", {p.experts, p.hidden}, true);
        p.tensors.back().keep_as_stored = family::kKeepRouter;
        add(p, b + "ffn_gate_exps.weight", {p.experts, p.expert_width, p.hidden}, true);
        add(p, b + "ffn_up_exps.weight", {p.experts, p.expert_width, p.hidden}, true);
        add(p, b + "ffn_down_exps.weight", {p.experts, p.hidden, p.expert_width}, true);
        continue;
      }
      if (p.intermediate <= 0) {
        error = "family-llama: layer " + std::to_string(l) + " has a dense MLP but intermediate_size is 0";
        return false;
      }
      add(p, b + "ffn_gate.weight", {p.intermediate, p.hidden}, true);
      add(p, b + "ffn_up.weight", {p.intermediate, p.hidden}, true);
      add(p, b + "ffn_down.weight", {p.hidden, p.intermediate}, true);
    }
    add(p, "output_norm.weight", {p.hidden}, false);
    if (!p.tied_embeddings) add(p, "output.weight", {p.vocab, p.hidden}, true);
    return true;
  } catch (const std::exception& e) {
    error = std::string("family-llama: bad config: ") + e.what();
    return false;
  }
}

void plan_bind_state(Plan& p) {
  p.groups = family::paged_kv_groups(p.group_layers, p.kv_heads, p.head_dim, p.layer_window);
  p.info = {};
  p.info.struct_size = MEMRA_PLAN_INFO_STRUCT_SIZE;
  p.info.vocab_size = p.vocab;
  p.info.num_layers = static_cast<int32_t>(p.layers);
  p.info.inputs = MEMRA_INPUT_TOKEN_IDS;
  p.info.layer_ranges = 1;
  p.info.hidden_width = static_cast<int32_t>(p.hidden);  // model_forward serves MEMRA_ROW_OUTPUT_HIDDEN
  p.info.num_state_groups = p.groups.size();
  p.info.state_groups = p.groups.data();
  p.required_ops.clear();
  if (p.experts > 0)
    p.required_ops.push_back({MEMRA_OP_REQUIREMENT_STRUCT_SIZE, MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V2});
  p.info.num_required_ops = p.required_ops.size();
  p.info.required_ops = p.required_ops.data();
}

std::string plan_to_json(const Plan& p) {
  json t = json::array();
  for (const TensorSpec& s : p.tensors) t.push_back(family::tensor_json(s));
  json groups = json::array();
  for (const memra_state_group& g : p.groups)
    groups.push_back({{"kind", "paged_kv"},
                      {"layers", std::vector<int32_t>(g.layers, g.layers + g.num_layers)},
                      {"kv_heads", g.kv_heads},
                      {"head_dim", g.head_dim},
                      {"sliding_window", g.sliding_window}});
  json j = {{"family", "llama"},
            {"architecture", p.architecture},
            {"vocab_size", p.vocab},
            {"experts", {{"num_experts", p.experts}, {"top_k", p.top_k}, {"expert_width", p.expert_width},
                         {"normalize_top_k", p.normalize_top_k}, {"layers", p.layer_moe}}},
            {"tensors", t},
            {"state", groups}};
  return j.dump();
}

}  // namespace memra::llama
