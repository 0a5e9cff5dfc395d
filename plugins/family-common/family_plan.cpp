#include "family_plan.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "memra/ops.h"

namespace memra::family {

using nlohmann::json;

int64_t need_int(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_integer()) throw std::runtime_error(std::string("config lacks integer '") + key + "'");
  return j[key].get<int64_t>();
}

bool bind_tensors(const std::vector<TensorSpec>& specs, const memra_weight_set& set, std::vector<memra_weight>& copy,
                  std::unordered_map<std::string, const memra_weight*>& by_name, std::string& error) {
  copy.assign(set.weights, set.weights + set.count);
  by_name.clear();
  for (const memra_weight& w : copy) by_name[w.name] = &w;
  for (const TensorSpec& spec : specs) {
    auto it = by_name.find(spec.name);
    if (it == by_name.end()) {
      error = "checkpoint lacks tensor '" + spec.name + "' that the config requires";
      return false;
    }
    const memra_weight* w = it->second;
    std::vector<int64_t> want = spec.shape;
    if (spec.any_float && w->ndim == 2 && want.size() == 3 && want[1] == 1) want = {want[0], want[2]};
    bool same = w->ndim == static_cast<int32_t>(want.size());
    for (size_t i = 0; same && i < want.size(); ++i) same = w->shape[i] == want[i];
    if (!same) {
      auto dims = [](const int64_t* d, size_t n) {
        std::string out = "[";
        for (size_t i = 0; i < n; ++i) out += (i ? ", " : "") + std::to_string(d[i]);
        return out + "]";
      };
      error = "tensor '" + spec.name + "' has shape " + dims(w->shape, static_cast<size_t>(std::max(0, std::min(w->ndim, 4)))) +
              ", which does not match the config's " + dims(want.data(), want.size());
      return false;
    }
    if (!spec.matrix && !spec.any_float && w->dtype != MEMRA_DTYPE_F32) {
      error = "tensor '" + spec.name + "' must be loaded as F32 (norms, biases and other parameter vectors)";
      return false;
    }
    if (spec.any_float && w->dtype != MEMRA_DTYPE_F32 && w->dtype != MEMRA_DTYPE_BF16 && w->dtype != MEMRA_DTYPE_F16) {
      error = "tensor '" + spec.name + "' must be f32, bf16 or f16";
      return false;
    }
  }
  return true;
}

bool rope_from_config(const json& c, int64_t head_dim, memra_rope_params& r, std::string& error, const std::string& who) {
  const json rc = c.value("rope", json::object());
  r = memra_rope_params{};
  r.struct_size = MEMRA_ROPE_PARAMS_STRUCT_SIZE;
  r.rotary_dim = static_cast<int32_t>(rc.value("rotary_dim", head_dim));
  if (r.rotary_dim <= 0 || r.rotary_dim > head_dim || r.rotary_dim % 2 != 0) {
    error = who + ": config's rope.rotary_dim " + std::to_string(r.rotary_dim) + " is not even and in 1..head_dim";
    return false;
  }
  // llama.cpp's converter permutes the q/k rows of "llama" GGUFs for interleaved-pair
  // RoPE (the config says so); other sources keep the half-split (neox) layout.
  r.neox_style = rc.value("interleaved", false) ? 0 : 1;
  r.theta = rc.value("theta", 10000.0f);
  if (!(r.theta > 0)) {
    error = who + ": config's rope.theta must be positive";
    return false;
  }
  r.factor = rc.value("factor", 1.0f);
  const std::string scaling = rc.value("scaling", std::string("none"));
  if (!rc.value("freq_factors_tensor", std::string()).empty()) {
    error = who + ": RoPE frequency-factor tensors (GGUF llama3 scaling) are not supported yet";
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
    error = "rope scaling '" + scaling + "' is not supported by " + who;
    return false;
  }
  return true;
}

bool experts_from_config(const json& c, int64_t layers, bool normalize_default, bool allow_shared, ExpertPlan& p, std::string& error,
                         const std::string& who) {
  p = ExpertPlan{};
  p.layer_moe.assign(static_cast<size_t>(layers), 0);
  const int64_t experts = c.value("num_experts", int64_t{0});
  if (experts <= 0) return true;
  const int64_t top_k = c.value("num_experts_per_tok", int64_t{0});
  p.expert_width = c.value("moe_intermediate_size", int64_t{0});
  p.shared_width = c.value("shared_expert_intermediate_size", int64_t{0});
  if (experts > 4096 || top_k <= 0 || top_k > experts || p.expert_width <= 0 || p.shared_width < 0) {
    error = who + ": config's experts are inconsistent (num_experts, num_experts_per_tok, moe_intermediate_size)";
    return false;
  }
  if (p.shared_width > 0 && !allow_shared) {
    error = who + ": shared experts (Qwen2-MoE, Qwen3-Next) are not part of this family";
    return false;
  }
  p.experts = static_cast<int32_t>(experts);
  p.top_k = static_cast<int32_t>(top_k);
  p.normalize_top_k = c.value("norm_topk_prob", normalize_default);
  const int64_t step = std::max<int64_t>(1, c.value("decoder_sparse_step", int64_t{1}));
  const std::vector<int64_t> dense = c.value("mlp_only_layers", std::vector<int64_t>{});
  for (int64_t l = 0; l < layers; ++l)
    p.layer_moe[static_cast<size_t>(l)] = (l + 1) % step == 0 && std::find(dense.begin(), dense.end(), l) == dense.end();
  return true;
}

std::string_view strip_prefix(std::string_view n, std::initializer_list<std::string_view> prefixes) {
  for (std::string_view prefix : prefixes)
    if (n.substr(0, prefix.size()) == prefix) return n.substr(prefix.size());
  return n;
}

std::optional<std::pair<int, std::string_view>> hf_layer_part(std::string_view n, std::initializer_list<std::string_view> prefixes) {
  n = strip_prefix(n, prefixes);
  constexpr std::string_view kLayers = "layers.";
  if (n.substr(0, kLayers.size()) != kLayers) return std::nullopt;
  n.remove_prefix(kLayers.size());
  const size_t dot = n.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  int layer = -1;
  const auto [ptr, ec] = std::from_chars(n.data(), n.data() + dot, layer);
  if (ec != std::errc() || ptr != n.data() + dot || layer < 0) return std::nullopt;
  return std::pair<int, std::string_view>{layer, n.substr(dot + 1)};
}

std::optional<std::string> hf_expert_parts(const std::string& b, std::string_view rest) {
  constexpr std::string_view kExperts = "experts.";
  if (rest.substr(0, kExperts.size()) != kExperts) return std::nullopt;
  rest.remove_prefix(kExperts.size());
  if (rest == "gate_up_proj" || rest == "gate_up_proj.weight")
    return json::array({{{"name", b + "ffn_gate_exps.weight"}, {"split", {0, 2}}}, {{"name", b + "ffn_up_exps.weight"}, {"split", {1, 2}}}})
        .dump();
  int expert = -1;
  const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), expert);
  if (ec != std::errc() || expert < 0 || ptr == rest.data() + rest.size() || *ptr != '.') return std::nullopt;
  rest.remove_prefix(static_cast<size_t>(ptr - rest.data()) + 1);
  for (const auto& [hf, canon] : {std::pair{"gate_proj.weight", "ffn_gate_exps"}, std::pair{"up_proj.weight", "ffn_up_exps"},
                                  std::pair{"down_proj.weight", "ffn_down_exps"}})
    if (rest == hf) return json::array({{{"name", b + canon + ".weight"}, {"index", expert}}}).dump();
  return std::nullopt;
}

std::optional<std::string> gguf_fused_expert_parts(std::string_view name) {
  constexpr std::string_view kFused = ".ffn_gate_up_exps.weight";
  if (name.size() <= kFused.size() || name.substr(name.size() - kFused.size()) != kFused) return std::nullopt;
  const std::string b(name.substr(0, name.size() - kFused.size() + 1));  // "blk.L."
  return json::array({{{"name", b + "ffn_gate_exps.weight"}, {"split", {0, 2}}}, {{"name", b + "ffn_up_exps.weight"}, {"split", {1, 2}}}})
      .dump();
}

std::optional<std::string> hf_stacked_expert_name(const std::string& b, std::string_view rest) {
  if (rest == "experts.down_proj" || rest == "experts.down_proj.weight") return b + "ffn_down_exps.weight";
  return std::nullopt;
}

nlohmann::json tensor_json(const TensorSpec& s) {
  nlohmann::json t = {{"name", s.name}, {"shape", s.shape}, {"matrix", s.matrix}};
  if (!s.keep_as_stored.empty()) t["keep_as_stored"] = s.keep_as_stored;
  return t;
}

std::vector<memra_state_group> paged_kv_groups(const std::vector<std::vector<int32_t>>& group_layers, int64_t kv_heads,
                                               int64_t head_dim, const std::vector<int32_t>& layer_window) {
  std::vector<memra_state_group> groups;
  for (const std::vector<int32_t>& layers : group_layers) {
    memra_state_group g{};
    g.struct_size = MEMRA_STATE_GROUP_STRUCT_SIZE;
    g.kind = MEMRA_STATE_PAGED_KV;
    g.num_layers = static_cast<int32_t>(layers.size());
    g.layers = layers.data();
    g.kv_heads = static_cast<int32_t>(kv_heads);
    g.head_dim = static_cast<int32_t>(head_dim);
    g.kv_dtype = MEMRA_DTYPE_INVALID;  // the host's default
    g.sliding_window = layer_window[static_cast<size_t>(layers[0])];
    groups.push_back(g);
  }
  return groups;
}

memra_status layer_range(const memra_forward_batch& batch, int64_t layers, const std::string& who, int64_t& first, int64_t& last,
                         std::string& error) {
  const bool ranged = batch.struct_size >= MEMRA_STRUCT_SIZE(memra_forward_batch, num_carry_out) && batch.layer_end > 0;
  first = ranged ? batch.layer_begin : 0;
  last = ranged ? batch.layer_end : layers;
  if (first < 0 || first >= last || last > layers) {
    error = who + ": layer range " + std::to_string(first) + "-" + std::to_string(last) + " is outside the model's " +
            std::to_string(layers) + " layers";
    return MEMRA_ERR_INVALID_ARGUMENT;
  }
  if ((first > 0 && (!batch.carry_in || batch.num_carry_in != 2)) || (last < layers && (!batch.carry_out || !batch.num_carry_out))) {
    error = who + ": a layer range needs the 2 carried tensors in (after layer 0) and room for them out (before the end)";
    return MEMRA_ERR_INVALID_ARGUMENT;
  }
  return MEMRA_OK;
}

}  // namespace memra::family
