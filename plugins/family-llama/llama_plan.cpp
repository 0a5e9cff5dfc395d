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
    p.layers = need_int(c, "num_hidden_layers");
    p.heads = need_int(c, "num_attention_heads");
    p.kv_heads = c.value("num_key_value_heads", p.heads);
    p.head_dim = c.contains("head_dim") && c["head_dim"].is_number_integer() ? c["head_dim"].get<int64_t>()
                                                                              : p.hidden / p.heads;
    if (p.heads <= 0 || p.kv_heads <= 0 || p.heads % p.kv_heads != 0 || p.head_dim <= 0 || p.head_dim % 2 != 0) {
      error = "config has inconsistent attention heads (heads, kv heads, head_dim)";
      return false;
    }
    p.norm_eps = c.value("rms_norm_eps", 1e-6f);
    p.attention_bias = c.value("attention_bias", p.architecture == "Qwen2ForCausalLM");
    p.qk_norm = c.value("qk_norm", p.architecture == "Qwen3ForCausalLM");
    p.tied_embeddings = c.value("tie_word_embeddings", false);
    if (c.contains("sliding_window") && c["sliding_window"].is_number_integer() && c.value("use_sliding_window", true))
      p.sliding_window = c["sliding_window"].get<int64_t>();
    if (p.architecture != "MistralForCausalLM") p.sliding_window = 0;  // Qwen2 carries one but disables it

    memra_rope_params& r = p.rope;
    r.struct_size = MEMRA_ROPE_PARAMS_STRUCT_SIZE;
    r.rotary_dim = static_cast<int32_t>(p.head_dim * c.value("partial_rotary_factor", 1.0));
    r.neox_style = c.value("rope_interleaved", false) ? 0 : 1;
    r.theta = c.value("rope_theta", 10000.0f);
    r.scaling = MEMRA_ROPE_SCALING_NONE;
    if (c.contains("rope_scaling") && c["rope_scaling"].is_object()) {
      const json& s = c["rope_scaling"];
      const std::string type = s.value("rope_type", s.value("type", std::string("default")));
      r.factor = s.value("factor", 1.0f);
      if (type == "linear") r.scaling = MEMRA_ROPE_SCALING_LINEAR;
      else if (type == "llama3") {
        r.scaling = MEMRA_ROPE_SCALING_LLAMA3;
        r.low_freq_factor = s.value("low_freq_factor", 1.0f);
        r.high_freq_factor = s.value("high_freq_factor", 4.0f);
        r.original_max_position = s.value("original_max_position_embeddings", 8192);
      } else if (type == "yarn") {
        r.scaling = MEMRA_ROPE_SCALING_YARN;
        r.original_max_position = s.value("original_max_position_embeddings", c.value("max_position_embeddings", 4096));
        r.beta_fast = s.value("beta_fast", 32.0f);
        r.beta_slow = s.value("beta_slow", 1.0f);
        r.attention_factor = s.value("attention_factor", 0.0f);
      } else if (type != "default") {
        error = "rope scaling '" + type + "' is not supported by family-llama";
        return false;
      }
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
