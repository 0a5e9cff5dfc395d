#include "gemma_plan.hpp"

#include <nlohmann/json.hpp>

#include "gemma_ops.hpp"

namespace memra::gemma {
namespace {

using nlohmann::json;

using family::need_int;

void add(Plan& p, std::string name, std::vector<int64_t> shape, bool matrix) {
  p.tensors.push_back({std::move(name), std::move(shape), matrix});
}

bool fail(std::string& error, const std::string& what) {
  error = "family-gemma: " + what;
  return false;
}

}  // namespace

bool plan_from_config(const char* config_json, Plan& p, std::string& error) {
  try {
    const json c = json::parse(config_json);
    p.architecture = c.value("architecture", std::string());
    if (c.value("family", std::string()) != "gemma")
      return fail(error, "plans only configs it normalised (family 'gemma'); this one says family '" + c.value("family", std::string()) +
                             "'");
    p.vocab = need_int(c, "vocab_size");
    p.hidden = need_int(c, "hidden_size");
    p.intermediate = need_int(c, "intermediate_size");
    p.layers = need_int(c, "num_layers");
    p.heads = need_int(c, "num_heads");
    p.kv_heads = need_int(c, "num_kv_heads");
    p.head_dim = need_int(c, "head_dim");
    if (p.layers <= 0 || p.hidden <= 0 || p.intermediate <= 0 || p.heads <= 0 || p.kv_heads <= 0 || p.heads % p.kv_heads != 0 ||
        p.head_dim <= 0 || p.head_dim % 2 != 0)
      return fail(error, "config has inconsistent sizes (layers, hidden, intermediate, heads, kv heads, head_dim)");
    if (c.value("activation", std::string("gelu_tanh")) != "gelu_tanh")
      return fail(error, "activation '" + c.value("activation", std::string()) + "' is not gelu_tanh");
    p.norm_eps = c.value("norm_eps", 1e-6f);
    if (!(p.norm_eps > 0)) return fail(error, "config's norm_eps must be positive");
    p.norm_unit = c.value("norm_weight_offset", true) ? 1.0f : 0.0f;
    p.embedding_scale = c.value("embedding_scale", 1.0f);
    p.attention_scale = c.value("attention_scale", 0.0f);
    p.attn_softcap = c.value("attn_logit_softcapping", 0.0f);
    p.final_softcap = c.value("final_logit_softcapping", 0.0f);
    if (!(p.embedding_scale > 0) || !(p.attention_scale > 0) || p.attn_softcap < 0 || p.final_softcap < 0)
      return fail(error, "config's embedding_scale and attention_scale must be positive, its soft-caps positive or 0");
    p.attention_bias = c.value("attention_bias", false);
    p.tied_embeddings = c.value("tie_word_embeddings", true);
    p.layer_types_from = c.value("layer_types_from", std::string("layer_types"));

    const int64_t window = c.value("sliding_window", int64_t{0});
    const json kinds = c.value("layer_types", json::array());
    if (!kinds.is_array() || static_cast<int64_t>(kinds.size()) != p.layers)
      return fail(error, "config's layer_types does not list one kind per layer");
    for (size_t l = 0; l < kinds.size(); ++l) {
      if (kinds[l] == "full_attention") p.layer_window.push_back(0);
      else if (kinds[l] == "sliding_attention" && window > 0 && window <= INT32_MAX) p.layer_window.push_back(static_cast<int32_t>(window));
      else return fail(error, "layer " + std::to_string(l) + "'s kind " + kinds[l].dump() + " is not full_attention or sliding_attention (with a window)");
    }
    for (size_t l = 0; l < p.layer_window.size(); ++l) {
      size_t g = 0;
      while (g < p.group_layers.size() && p.layer_window[static_cast<size_t>(p.group_layers[g][0])] != p.layer_window[l]) ++g;
      if (g == p.group_layers.size()) p.group_layers.emplace_back();
      p.group_layers[g].push_back(static_cast<int32_t>(l));
    }

    // RoPE: the global layers' as the config says; the sliding layers' the same rotation at
    // their own base, unscaled.
    if (!family::rope_from_config(c, p.head_dim, p.rope_global, error, "family-gemma")) return false;
    p.rope_local = p.rope_global;
    p.rope_local.scaling = MEMRA_ROPE_SCALING_NONE;
    p.rope_local.factor = 1.0f;
    p.rope_local.theta = c.value("rope", json::object()).value("local_theta", 0.0f);
    if (!(p.rope_local.theta > 0)) return fail(error, "config's rope.local_theta (the sliding layers' base) must be positive");

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
      add(p, b + "attn_q_norm.weight", {p.head_dim}, false);
      add(p, b + "attn_k_norm.weight", {p.head_dim}, false);
      add(p, b + "attn_output.weight", {p.hidden, q_width}, true);
      if (p.attention_bias) add(p, b + "attn_output.bias", {p.hidden}, false);
      add(p, b + "post_attention_norm.weight", {p.hidden}, false);
      add(p, b + "ffn_norm.weight", {p.hidden}, false);
      add(p, b + "ffn_gate.weight", {p.intermediate, p.hidden}, true);
      add(p, b + "ffn_up.weight", {p.intermediate, p.hidden}, true);
      add(p, b + "ffn_down.weight", {p.hidden, p.intermediate}, true);
      add(p, b + "post_ffw_norm.weight", {p.hidden}, false);
    }
    add(p, "output_norm.weight", {p.hidden}, false);
    if (!p.tied_embeddings) add(p, "output.weight", {p.vocab, p.hidden}, true);
    plan_bind_state(p);
    return true;
  } catch (const std::exception& e) {
    error = std::string("family-gemma: bad config: ") + e.what();
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
  if (p.final_softcap > 0) p.required_ops.push_back({MEMRA_OP_REQUIREMENT_STRUCT_SIZE, GEMMA_OP_SOFTCAP, 1u});
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
  json j = {{"family", "gemma"},
            {"architecture", p.architecture},
            {"vocab_size", p.vocab},
            {"layer_types_from", p.layer_types_from},
            {"rope_theta", {{"full_attention", p.rope_global.theta}, {"sliding_attention", p.rope_local.theta}}},
            {"attention_scale", p.attention_scale},
            {"embedding_scale", p.embedding_scale},
            {"softcap", {{"attention", p.attn_softcap}, {"final", p.final_softcap}}},
            {"tensors", t},
            {"state", groups}};
  return j.dump();
}

}  // namespace memra::gemma
