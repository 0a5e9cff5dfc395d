#include "llama_plan.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

namespace memra::llama {
namespace {

using nlohmann::json;

const char* const kArchitectures[] = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                                      "Qwen3ForCausalLM"};

int64_t need_int(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_integer()) throw std::runtime_error(std::string("config lacks integer '") + key + "'");
  return j[key].get<int64_t>();
}

void add(Plan& p, std::string name, std::vector<int64_t> shape, bool matrix) {
  p.tensors.push_back({std::move(name), std::move(shape), matrix});
}

}  // namespace

bool plan_from_config(const char* config_json, Plan& p, std::string& error) {
  try {
    const json c = json::parse(config_json);
    p.architecture = c.value("architecture", std::string());
    bool known = false;
    for (const char* a : kArchitectures) known = known || p.architecture == a;
    if (!known) {
      error = "family-llama does not handle architecture '" + p.architecture +
              "' (handles LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)";
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
    if (c.value("num_experts", 0) > 0) {
      error = "family-llama handles dense models only; this config has experts";
      return false;
    }
    if (c.value("norm_type", std::string("rms_norm")) != "rms_norm" || c.value("norm_weight_offset", false) ||
        c.value("activation", std::string("silu")) != "silu" || c.value("mlp_bias", false)) {
      error = "family-llama: config asks for a norm, activation or MLP bias this family does not have";
      return false;
    }
    p.norm_eps = c.value("norm_eps", 1e-6f);
    p.attention_bias = c.value("attention_bias", false);
    p.attention_output_bias = c.value("attention_output_bias", false);
    if (c.value("attention_output_gate", false)) {
      error = "family-llama: gated attention output (Qwen3-Next) is not part of this family";
      return false;
    }
    p.qk_norm = c.value("qk_norm", false);
    p.tied_embeddings = c.value("tie_word_embeddings", false);
    p.sliding_window = c.value("sliding_window", int64_t{0});

    const json rc = c.value("rope", json::object());
    memra_rope_params& r = p.rope;
    r.struct_size = MEMRA_ROPE_PARAMS_STRUCT_SIZE;
    r.rotary_dim = static_cast<int32_t>(rc.value("rotary_dim", p.head_dim));
    if (r.rotary_dim <= 0 || r.rotary_dim > p.head_dim || r.rotary_dim % 2 != 0) r.rotary_dim = static_cast<int32_t>(p.head_dim);
    // llama.cpp's converter permutes the q/k rows of "llama" GGUFs for interleaved-pair
    // RoPE (the config says so); other sources keep the half-split (neox) layout.
    r.neox_style = rc.value("interleaved", false) ? 0 : 1;
    r.theta = rc.value("theta", 10000.0f);
    r.factor = rc.value("factor", 1.0f);
    const std::string scaling = rc.value("scaling", std::string("none"));
    if (!rc.value("freq_factors_tensor", std::string()).empty()) {
      error = "family-llama: RoPE frequency-factor tensors (GGUF llama3 scaling) are not supported yet";
      return false;
    }
    if (scaling == "none") r.scaling = MEMRA_ROPE_SCALING_NONE;
    else if (scaling == "linear") r.scaling = MEMRA_ROPE_SCALING_LINEAR;
    else if (scaling == "llama3") {
      r.scaling = MEMRA_ROPE_SCALING_LLAMA3;
      r.low_freq_factor = rc.value("low_freq_factor", 1.0f);
      r.high_freq_factor = rc.value("high_freq_factor", 4.0f);
      r.original_max_position = rc.value("original_max_position", 8192);
    } else if (scaling == "yarn") {
      r.scaling = MEMRA_ROPE_SCALING_YARN;
      r.original_max_position = rc.value("original_max_position", c.value("max_position_embeddings", 4096));
      r.beta_fast = rc.value("beta_fast", 32.0f);
      r.beta_slow = rc.value("beta_slow", 1.0f);
      r.attention_factor = rc.value("attention_factor", 0.0f);
    } else {
      error = "rope scaling '" + scaling + "' is not supported by family-llama";
      return false;
    }

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

std::string plan_to_json(const Plan& p) {
  json t = json::array();
  for (const TensorSpec& s : p.tensors) t.push_back({{"name", s.name}, {"shape", s.shape}, {"matrix", s.matrix}});
  json j = {{"family", "llama"},
            {"architecture", p.architecture},
            {"vocab_size", p.vocab},
            {"tensors", t},
            {"kv", {{"layers", p.layers}, {"kv_heads", p.kv_heads}, {"head_dim", p.head_dim}}}};
  return j.dump();
}

}  // namespace memra::llama
