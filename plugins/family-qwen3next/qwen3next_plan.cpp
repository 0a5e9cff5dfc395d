#include "qwen3next_plan.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "memra/ops.h"

namespace memra::qwen3next {
namespace {

using nlohmann::json;

using family::need_int;

void add(Plan& p, std::string name, std::vector<int64_t> shape, bool matrix, bool any_float = false) {
  p.tensors.push_back({std::move(name), std::move(shape), matrix, any_float});
}

// One decoder layer's tensors under prefix `b` ("blk.3."): the token mixer, then the MLP.
bool add_layer(Plan& p, const std::string& b, bool linear, bool moe, std::string& error) {
  const GdnAttrsV1& g = p.gdn;
  const int64_t q_width = p.heads * p.head_dim, kv_width = p.kv_heads * p.head_dim;
  const int64_t kd = static_cast<int64_t>(g.num_k_heads) * g.head_k_dim, vd = static_cast<int64_t>(g.num_v_heads) * g.head_v_dim;
  add(p, b + "attn_norm.weight", {p.hidden}, false);
  if (linear) {
    if (g.layout & QWEN3NEXT_GDN_SPLIT_QKVZ) {
      add(p, b + "attn_qkv.weight", {2 * kd + vd, p.hidden}, true);
      add(p, b + "attn_gate.weight", {vd, p.hidden}, true);
    } else {
      add(p, b + "ssm_in.weight", {2 * kd + 2 * vd, p.hidden}, true);
    }
    if (g.layout & QWEN3NEXT_GDN_SPLIT_BA) {
      add(p, b + "ssm_beta.weight", {g.num_v_heads, p.hidden}, true);
      add(p, b + "ssm_alpha.weight", {g.num_v_heads, p.hidden}, true);
    } else {
      add(p, b + "ssm_ba.weight", {2 * static_cast<int64_t>(g.num_v_heads), p.hidden}, true);
    }
    add(p, b + "ssm_conv1d.weight", {2 * kd + vd, 1, g.conv_kernel}, false, true);
    add(p, b + (g.layout & QWEN3NEXT_GDN_A_DIRECT ? "ssm_a" : "ssm_a_log"), {g.num_v_heads}, false);
    add(p, b + "ssm_dt.bias", {g.num_v_heads}, false);
    add(p, b + "ssm_norm.weight", {g.head_v_dim}, false);
    add(p, b + "ssm_out.weight", {p.hidden, vd}, true);
  } else {
    add(p, b + "attn_q.weight", {2 * q_width, p.hidden}, true);  // per head [q | gate]
    add(p, b + "attn_k.weight", {kv_width, p.hidden}, true);
    add(p, b + "attn_v.weight", {kv_width, p.hidden}, true);
    if (p.attention_bias) {
      add(p, b + "attn_q.bias", {2 * q_width}, false);
      add(p, b + "attn_k.bias", {kv_width}, false);
      add(p, b + "attn_v.bias", {kv_width}, false);
    }
    add(p, b + "attn_q_norm.weight", {p.head_dim}, false);
    add(p, b + "attn_k_norm.weight", {p.head_dim}, false);
    add(p, b + "attn_output.weight", {p.hidden, q_width}, true);
  }
  add(p, b + "post_attention_norm.weight", {p.hidden}, false);
  if (moe) {
    add(p, b + "ffn_gate_inp.weight", {p.experts, p.hidden}, true);
    p.tensors.back().keep_as_stored = family::kKeepRouter;
    add(p, b + "ffn_gate_exps.weight", {p.experts, p.expert_width, p.hidden}, true);
    add(p, b + "ffn_up_exps.weight", {p.experts, p.expert_width, p.hidden}, true);
    add(p, b + "ffn_down_exps.weight", {p.experts, p.hidden, p.expert_width}, true);
    if (p.shared_width > 0) {
      add(p, b + "ffn_gate_shexp.weight", {p.shared_width, p.hidden}, true);
      add(p, b + "ffn_up_shexp.weight", {p.shared_width, p.hidden}, true);
      add(p, b + "ffn_down_shexp.weight", {p.hidden, p.shared_width}, true);
      // Hugging Face: a [1][hidden] matrix; llama.cpp's converter: a [hidden] vector (f32).
      if (p.gguf_source) add(p, b + "ffn_gate_inp_shexp.weight", {p.hidden}, false);
      else add(p, b + "ffn_gate_inp_shexp.weight", {1, p.hidden}, true);
      p.tensors.back().keep_as_stored = family::kKeepRouter;
    }
    return true;
  }
  if (p.intermediate <= 0) {
    error = "family-qwen3next: layer " + b + " has a dense MLP but intermediate_size is 0";
    return false;
  }
  add(p, b + "ffn_gate.weight", {p.intermediate, p.hidden}, true);
  add(p, b + "ffn_up.weight", {p.intermediate, p.hidden}, true);
  add(p, b + "ffn_down.weight", {p.hidden, p.intermediate}, true);
  return true;
}

}  // namespace

bool plan_from_config(const char* config_json, Plan& p, std::string& error) {
  try {
    const json c = json::parse(config_json);
    p.architecture = c.value("architecture", std::string());
    if (c.value("family", std::string()) != "qwen3next") {
      error = "family-qwen3next plans only configs it normalised (family 'qwen3next'); this one says family '" +
              c.value("family", std::string()) + "'";
      return false;
    }
    p.vocab = need_int(c, "vocab_size");
    p.hidden = need_int(c, "hidden_size");
    p.intermediate = c.value("intermediate_size", int64_t{0});
    p.layers = need_int(c, "num_layers");
    p.heads = need_int(c, "num_heads");
    p.kv_heads = need_int(c, "num_kv_heads");
    p.head_dim = need_int(c, "head_dim");
    if (p.layers <= 0 || p.hidden <= 0 || p.heads <= 0 || p.kv_heads <= 0 || p.heads % p.kv_heads != 0 || p.head_dim <= 0 ||
        p.head_dim % 2 != 0) {
      error = "family-qwen3next: config has inconsistent attention heads (heads, kv heads, head_dim)";
      return false;
    }
    if (c.value("activation", std::string("silu")) != "silu") {
      error = "family-qwen3next: activation '" + c.value("activation", std::string()) + "' is not silu";
      return false;
    }
    p.norm_eps = c.value("norm_eps", 1e-6f);
    p.norm_unit = c.value("norm_weight_offset", true) ? 1.0f : 0.0f;
    if (!(p.norm_eps > 0)) {
      error = "family-qwen3next: config's norm_eps must be positive";
      return false;
    }
    p.attention_bias = c.value("attention_bias", false);
    p.tied_embeddings = c.value("tie_word_embeddings", false);
    const json kinds = c.value("layer_types", json::array());
    if (!kinds.is_array() || static_cast<int64_t>(kinds.size()) != p.layers) {
      error = "family-qwen3next: config's layer_types does not list one kind per layer";
      return false;
    }
    for (size_t l = 0; l < kinds.size(); ++l) {
      if (kinds[l] == "linear_attention") p.layer_linear.push_back(1);
      else if (kinds[l] == "full_attention") p.layer_linear.push_back(0);
      else {
        error = "family-qwen3next: layer " + std::to_string(l) + "'s kind " + kinds[l].dump() + " is not linear_attention or full_attention";
        return false;
      }
      (p.layer_linear.back() ? p.linear_layers : p.attention_layers).push_back(static_cast<int32_t>(l));
    }
    GdnAttrsV1& g = p.gdn;
    g.struct_size = sizeof(GdnAttrsV1);
    if (!p.linear_layers.empty()) {
      g.num_k_heads = static_cast<int32_t>(need_int(c, "linear_num_key_heads"));
      g.num_v_heads = static_cast<int32_t>(need_int(c, "linear_num_value_heads"));
      g.head_k_dim = static_cast<int32_t>(need_int(c, "linear_key_head_dim"));
      g.head_v_dim = static_cast<int32_t>(need_int(c, "linear_value_head_dim"));
      g.conv_kernel = static_cast<int32_t>(c.value("linear_conv_kernel_dim", int64_t{4}));
      g.norm_eps = p.norm_eps;
      const std::string proj = c.value("linear_projections", std::string("grouped"));
      const std::string order = c.value("linear_value_head_order", std::string("grouped"));
      const std::string decay = c.value("linear_decay", std::string("a_log"));
      if ((proj != "grouped" && proj != "split" && proj != "split_qkvz") || (order != "grouped" && order != "tiled") ||
          (decay != "a_log" && decay != "a")) {
        error = "family-qwen3next: linear_projections '" + proj + "', linear_value_head_order '" + order + "' or linear_decay '" +
                decay + "' is not one this family knows (grouped|split|split_qkvz, grouped|tiled, a_log|a)";
        return false;
      }
      g.layout = (proj != "grouped" ? QWEN3NEXT_GDN_SPLIT_QKVZ : 0) | (proj == "split" ? QWEN3NEXT_GDN_SPLIT_BA : 0) |
                 (order == "tiled" ? QWEN3NEXT_GDN_V_TILED : 0) | (decay == "a" ? QWEN3NEXT_GDN_A_DIRECT : 0);
      if (g.num_k_heads <= 0 || g.num_v_heads <= 0 || g.num_v_heads % g.num_k_heads != 0 || g.head_k_dim <= 0 ||
          g.head_k_dim > 256 || g.head_v_dim <= 0 || g.conv_kernel < 1 || g.conv_kernel > QWEN3NEXT_GDN_MAX_CONV) {
        error = "family-qwen3next: config's linear attention sizes are inconsistent (key heads must divide value heads; "
                "the key head dim at most 256; "
                "head dims and the conv kernel positive, the conv kernel at most " +
                std::to_string(QWEN3NEXT_GDN_MAX_CONV) + ")";
        return false;
      }
    }

    // Experts (with a sigmoid-gated shared expert).
    family::ExpertPlan e;
    if (!family::experts_from_config(c, p.layers, true, true, e, error, "family-qwen3next")) return false;
    p.layer_moe = std::move(e.layer_moe);
    p.experts = e.experts;
    p.top_k = e.top_k;
    p.expert_width = e.expert_width;
    p.shared_width = e.shared_width;
    p.normalize_top_k = e.normalize_top_k;
    p.gguf_source = c.value("source_format", std::string("hf")) == "gguf";

    if (!family::rope_from_config(c, p.head_dim, p.rope, error, "family-qwen3next")) return false;

    add(p, "token_embd.weight", {p.vocab, p.hidden}, true);
    for (int64_t l = 0; l < p.layers; ++l)
      if (!add_layer(p, "blk." + std::to_string(l) + ".", p.layer_linear[static_cast<size_t>(l)], p.layer_moe[static_cast<size_t>(l)],
                     error))
        return false;
    // The MTP head (memra_plan_info.draft_layers): its fc and norms, then a gated attention
    // layer with the model's MLP kind, under llama.cpp's names ("blk.<layers>." in its GGUF,
    // "mtp.0." from Hugging Face).
    p.mtp_layers = c.value("mtp_layers", int64_t{0});
    p.mtp_missing = c.value("mtp_missing", std::string());
    if (p.mtp_layers > 1) {
      p.mtp_missing = "the checkpoint has " + std::to_string(p.mtp_layers) + " MTP layers; memra drafts with one";
      p.mtp_layers = 0;
    }
    if (p.mtp_layers == 1) {
      p.mtp_prefix = c.value("source_format", std::string("hf")) == "gguf" ? "blk." + std::to_string(p.layers) + "." : "mtp.0.";
      const std::string& b = p.mtp_prefix;
      add(p, b + "nextn.eh_proj.weight", {p.hidden, 2 * p.hidden}, true);
      add(p, b + "nextn.enorm.weight", {p.hidden}, false);
      add(p, b + "nextn.hnorm.weight", {p.hidden}, false);
      add(p, b + "nextn.shared_head_norm.weight", {p.hidden}, false);
      if (!add_layer(p, b, false, p.experts > 0, error)) return false;
    }
    add(p, "output_norm.weight", {p.hidden}, false);
    if (!p.tied_embeddings) add(p, "output.weight", {p.vocab, p.hidden}, true);
    plan_bind_state(p);
    return true;
  } catch (const std::exception& e) {
    error = std::string("family-qwen3next: bad config: ") + e.what();
    return false;
  }
}

void plan_bind_state(Plan& p) {
  p.groups.clear();
  // The attention layers' KV, and the MTP layer's (numbered after the model's).
  p.kv_layers = p.attention_layers;
  if (p.mtp_layers > 0) p.kv_layers.push_back(static_cast<int32_t>(p.layers));
  if (!p.kv_layers.empty()) {
    memra_state_group g{};
    g.struct_size = MEMRA_STATE_GROUP_STRUCT_SIZE;
    g.kind = MEMRA_STATE_PAGED_KV;
    g.num_layers = static_cast<int32_t>(p.kv_layers.size());
    g.layers = p.kv_layers.data();
    g.kv_heads = static_cast<int32_t>(p.kv_heads);
    g.head_dim = static_cast<int32_t>(p.head_dim);
    g.kv_dtype = MEMRA_DTYPE_INVALID;
    p.groups.push_back(g);
  }
  if (!p.linear_layers.empty()) {
    memra_state_group g{};
    g.struct_size = MEMRA_STATE_GROUP_STRUCT_SIZE;
    g.kind = MEMRA_STATE_RECURRENT;
    g.num_layers = static_cast<int32_t>(p.linear_layers.size());
    g.layers = p.linear_layers.data();
    g.bytes_per_sequence = gdn_state_bytes(p.gdn);
    g.layout = QWEN3NEXT_STATE_LAYOUT_GDN;
    p.groups.push_back(g);
  }
  p.info = {};
  p.info.struct_size = MEMRA_PLAN_INFO_STRUCT_SIZE;
  p.info.vocab_size = p.vocab;
  p.info.num_layers = static_cast<int32_t>(p.layers);
  p.info.inputs = MEMRA_INPUT_TOKEN_IDS;
  p.info.layer_ranges = 0;  // one backend: pipeline stages come with the two-GPU work
  p.info.hidden_width = static_cast<int32_t>(p.hidden);  // model_forward serves hidden rows (embeddings, the MTP head)
  p.info.draft_layers = static_cast<int32_t>(p.mtp_layers);
  p.info.num_state_groups = p.groups.size();
  p.info.state_groups = p.groups.data();
  p.required_ops.clear();
  if (!p.linear_layers.empty()) p.required_ops.push_back({MEMRA_OP_REQUIREMENT_STRUCT_SIZE, QWEN3NEXT_OP_GDN, 1u});
  if (!p.kv_layers.empty()) p.required_ops.push_back({MEMRA_OP_REQUIREMENT_STRUCT_SIZE, QWEN3NEXT_OP_SPLIT_GATE, 1u});
  if (p.mtp_layers > 0) p.required_ops.push_back({MEMRA_OP_REQUIREMENT_STRUCT_SIZE, QWEN3NEXT_OP_CONCAT, 1u});
  p.required_ops.push_back({MEMRA_OP_REQUIREMENT_STRUCT_SIZE, QWEN3NEXT_OP_SIGMOID_MUL, 1u});
  if (p.experts > 0) p.required_ops.push_back({MEMRA_OP_REQUIREMENT_STRUCT_SIZE, MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V2});
  p.info.num_required_ops = p.required_ops.size();
  p.info.required_ops = p.required_ops.data();
}

std::string plan_to_json(const Plan& p) {
  json t = json::array();
  for (const TensorSpec& s : p.tensors) t.push_back(family::tensor_json(s));
  json kinds = json::array();
  for (uint8_t k : p.layer_linear) kinds.push_back(k ? "linear_attention" : "full_attention");
  json j = {{"family", "qwen3next"},
            {"architecture", p.architecture},
            {"vocab_size", p.vocab},
            {"layer_types", kinds},
            {"linear_attention", {{"key_heads", p.gdn.num_k_heads}, {"value_heads", p.gdn.num_v_heads},
                                  {"key_head_dim", p.gdn.head_k_dim}, {"value_head_dim", p.gdn.head_v_dim},
                                  {"conv_kernel", p.gdn.conv_kernel}, {"layout_flags", p.gdn.layout},
                                  {"state_bytes_per_sequence", gdn_state_bytes(p.gdn)}}},
            {"experts", {{"num_experts", p.experts}, {"top_k", p.top_k}, {"expert_width", p.expert_width},
                         {"shared_width", p.shared_width}, {"layers", p.layer_moe}}},
            {"mtp_layers", p.mtp_layers},
            {"tensors", t}};
  if (!p.mtp_missing.empty()) j["draft_head_missing"] = p.mtp_missing;
  return j.dump();
}

}  // namespace memra::qwen3next
