// ModelConfig from GGUF metadata (llama.cpp's key names) plus tensor presence
// for what GGUF has no key for (biases, q/k norm, tied embeddings).
#include <algorithm>
#include <cmath>

#include "repack/checkpoint/gguf.hpp"
#include "repack/checkpoint/model_config.hpp"

namespace memra {
namespace {

struct ArchRow {
  const char* gguf;
  const char* architecture;
  const char* family;
};
constexpr ArchRow kArchs[] = {
    {"llama", "LlamaForCausalLM", "llama"},       {"qwen2", "Qwen2ForCausalLM", "qwen2"},
    {"qwen3", "Qwen3ForCausalLM", "qwen3"},       {"qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe"},
    {"gemma3", "Gemma3ForCausalLM", "gemma3"},
};

Error bad(const std::string& what) { return make_error(ErrorCode::invalid_argument, "GGUF config: " + what); }

class Keys {
 public:
  Keys(const gguf::File& f, std::string arch) : f_(f), arch_(std::move(arch)) {}
  std::string key(const char* suffix) const { return arch_ + "." + suffix; }
  const gguf::Value* find(const char* suffix) const { return f_.find(key(suffix)); }

  Result<int64_t> integer(const char* suffix, std::optional<int64_t> fallback) const {
    const gguf::Value* v = find(suffix);
    if (!v) {
      if (fallback) return *fallback;
      return bad("'" + key(suffix) + "' is missing");
    }
    if (v->as_array())
      return make_error(ErrorCode::unsupported, "GGUF config: '" + key(suffix) + "' varies per layer, which memra does not support yet");
    const auto i = v->as_int();
    if (!i) return bad("'" + key(suffix) + "' is not an integer");
    return *i;
  }
  Result<double> number(const char* suffix, double fallback) const {
    const gguf::Value* v = find(suffix);
    if (!v) return fallback;
    if (const auto f = v->as_float()) return *f;
    if (const auto i = v->as_int()) return static_cast<double>(*i);
    return bad("'" + key(suffix) + "' is not a number");
  }

 private:
  const gguf::File& f_;
  std::string arch_;
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

Result<ModelConfig> model_config_from_gguf(const gguf::File& f) {
  const std::string arch = f.architecture();
  if (arch.empty()) return bad("'general.architecture' is missing; is this a model GGUF?");
  ModelConfig c;
  c.source_format = "gguf";
  c.model_type = arch;
  for (const auto& row : kArchs)
    if (arch == row.gguf) c.architecture = row.architecture, c.family = row.family;
  if (c.family.empty())
    return make_error(ErrorCode::unsupported, "GGUF architecture '" + arch + "' is not supported; supported: " +
                                                  join(supported_gguf_architectures()));
  const Keys k(f, arch);
  const std::string& fam = c.family;
  auto set = [](Result<int64_t> r, int64_t& out) -> Status {
    if (!r) return r.error();
    out = *r;
    return {};
  };
  MEMRA_TRY(set(k.integer("block_count", std::nullopt), c.num_layers));
  MEMRA_TRY(set(k.integer("embedding_length", std::nullopt), c.hidden_size));
  MEMRA_TRY(set(k.integer("attention.head_count", std::nullopt), c.num_heads));
  MEMRA_TRY(set(k.integer("attention.head_count_kv", c.num_heads), c.num_kv_heads));
  if (c.num_heads <= 0) return bad("attention.head_count must be positive");
  MEMRA_TRY(set(k.integer("attention.key_length", c.hidden_size / c.num_heads), c.head_dim));
  int64_t value_len = 0;
  MEMRA_TRY(set(k.integer("attention.value_length", c.head_dim), value_len));
  if (value_len != c.head_dim)
    return make_error(ErrorCode::unsupported, "GGUF config: value_length " + std::to_string(value_len) +
                                                  " differs from key_length " + std::to_string(c.head_dim) + "; not supported");
  MEMRA_TRY(set(k.integer("feed_forward_length", fam == "qwen3_moe" ? std::optional<int64_t>(0) : std::nullopt),
                c.intermediate_size));
  MEMRA_TRY(set(k.integer("context_length", 0), c.max_position_embeddings));

  // Vocabulary: the explicit key, else the tokenizer's size, else the embedding rows.
  if (k.find("vocab_size")) {
    MEMRA_TRY(set(k.integer("vocab_size", std::nullopt), c.vocab_size));
  } else if (const gguf::Value* toks = f.find("tokenizer.ggml.tokens"); toks && toks->as_array()) {
    c.vocab_size = static_cast<int64_t>(toks->as_array()->count);
  } else if (const gguf::Tensor* emb = f.find_tensor("token_embd.weight"); emb && emb->info->ne.size() == 2) {
    c.vocab_size = static_cast<int64_t>(emb->info->ne[1]);
  }

  auto eps = k.number("attention.layer_norm_rms_epsilon", 0);
  if (!eps) return eps.error();
  if (!(*eps > 0)) return bad("'" + k.key("attention.layer_norm_rms_epsilon") + "' is missing or not positive");
  c.norm_eps = *eps;
  c.norm_type = NormType::rms_norm;
  // llama.cpp's converter already adds 1 to Gemma norm weights, so GGUF norms multiply by w.
  c.norm_weight_offset = false;
  c.activation = fam == "gemma3" ? "gelu_pytorch_tanh" : "silu";

  // Architecture facts GGUF records only as tensors.
  c.qk_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  c.attention_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.attention_output_bias = f.find_tensor("blk.0.attn_output.bias") != nullptr;
  c.mlp_bias = f.find_tensor("blk.0.ffn_up.bias") != nullptr || f.find_tensor("blk.0.ffn_down.bias") != nullptr;
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;

  // RoPE.
  auto theta = k.number("rope.freq_base", fam == "gemma3" ? 1e6 : 10000.0);
  if (!theta) return theta.error();
  c.rope.theta = *theta;
  c.rope.interleaved = fam == "llama";  // llama.cpp permutes llama q/k rows; the others use NEOX pairing
  MEMRA_TRY(set(k.integer("rope.dimension_count", c.head_dim), c.rope.rotary_dim));
  c.rope.partial_rotary_factor = c.head_dim > 0 ? static_cast<double>(c.rope.rotary_dim) / static_cast<double>(c.head_dim) : 1.0;
  std::string scaling = "none";
  if (const gguf::Value* st = k.find("rope.scaling.type")) {
    if (!st->as_string()) return bad("'" + k.key("rope.scaling.type") + "' is not a string");
    scaling = *st->as_string();
  } else if (k.find("rope.scale_linear")) {
    scaling = "linear";
  }
  if (scaling == "linear") {
    c.rope.scaling = RopeScaling::linear;
    auto fct = k.find("rope.scaling.factor") ? k.number("rope.scaling.factor", 0) : k.number("rope.scale_linear", 0);
    if (!fct) return fct.error();
    c.rope.factor = *fct;
  } else if (scaling == "yarn") {
    c.rope.scaling = RopeScaling::yarn;
    auto fct = k.number("rope.scaling.factor", 0);
    auto af = k.number("rope.scaling.attn_factor", 0);
    auto bf = k.number("rope.scaling.yarn_beta_fast", 32);
    auto bs = k.number("rope.scaling.yarn_beta_slow", 1);
    if (!fct || !af || !bf || !bs) return bad("yarn parameters are not numbers");
    c.rope.factor = *fct, c.rope.attention_factor = *af, c.rope.beta_fast = *bf, c.rope.beta_slow = *bs;
    MEMRA_TRY(set(k.integer("rope.scaling.original_context_length", c.max_position_embeddings), c.rope.original_max_position));
  } else if (scaling != "none") {
    return make_error(ErrorCode::unsupported, "GGUF config: rope scaling type '" + scaling +
                                                  "' is not supported; supported: none, linear, yarn (llama3 via rope_freqs.weight)");
  }
  if (f.find_tensor("rope_freqs.weight") != nullptr) {
    // llama3-style scaling, baked into per-frequency factors by the converter.
    if (c.rope.scaling != RopeScaling::none) return bad("both rope_freqs.weight and rope.scaling.type are present");
    c.rope.scaling = RopeScaling::llama3;
    c.rope.freq_factors_tensor = "rope_freqs.weight";
  }

  c.layer_types.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), LayerKind::full_attention);
  if (fam == "gemma3") {
    MEMRA_TRY(set(k.integer("attention.sliding_window", std::nullopt), c.sliding_window));
    auto local = k.number("rope.freq_base_swa", 10000.0);  // llama.cpp's Gemma 3 default
    if (!local) return local.error();
    c.rope.local_theta = *local;
    const gguf::Value* pat = k.find("attention.sliding_window_pattern");
    if (pat && pat->as_array()) {
      const gguf::Array* a = pat->as_array();
      if (a->elem_type != gguf::ValueType::boolean || a->count == 0) return bad("sliding_window_pattern is not a bool array");
      for (int64_t i = 0; i < c.num_layers; ++i)
        if (*a->int_at(static_cast<uint64_t>(i) % a->count)) c.layer_types[static_cast<size_t>(i)] = LayerKind::sliding_attention;
    } else {
      int64_t period = 6;
      MEMRA_TRY(set(k.integer("attention.sliding_window_pattern", 6), period));
      for (int64_t i = 0; i < c.num_layers; ++i)
        if (period == 0 || i % period < period - 1) c.layer_types[static_cast<size_t>(i)] = LayerKind::sliding_attention;
    }
    auto fsc = k.number("final_logit_softcapping", 0), asc = k.number("attn_logit_softcapping", 0);
    if (!fsc || !asc) return bad("softcapping values are not numbers");
    c.final_logit_softcapping = *fsc, c.attn_logit_softcapping = *asc;
    c.query_pre_attn_scalar = static_cast<double>(c.head_dim);
  }
  if (fam == "qwen3_moe") {
    MEMRA_TRY(set(k.integer("expert_count", std::nullopt), c.num_experts));
    MEMRA_TRY(set(k.integer("expert_used_count", std::nullopt), c.num_experts_per_tok));
    MEMRA_TRY(set(k.integer("expert_feed_forward_length", std::nullopt), c.moe_intermediate_size));
    MEMRA_TRY(set(k.integer("expert_shared_feed_forward_length", 0), c.shared_expert_intermediate_size));
    c.norm_topk_prob = true;  // llama.cpp's qwen3moe graph always renormalises the top-k weights
    if (const gguf::Value* nw = k.find("expert_weights_norm")) {
      if (!nw->as_bool()) return bad("'" + k.key("expert_weights_norm") + "' is not a BOOL");
      c.norm_topk_prob = *nw->as_bool();
    }
  }

  // Special tokens from the embedded tokenizer.
  auto id = [&](const char* key) -> std::optional<int64_t> {
    const gguf::Value* v = f.find(key);
    return v ? v->as_int() : std::nullopt;
  };
  c.bos_token_id = id("tokenizer.ggml.bos_token_id");
  c.pad_token_id = id("tokenizer.ggml.padding_token_id");
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (const auto e = id(key); e && std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), *e) == c.eos_token_ids.end())
      c.eos_token_ids.push_back(*e);
  }

  MEMRA_TRY(validate(c));
  return c;
}

}  // namespace memra
