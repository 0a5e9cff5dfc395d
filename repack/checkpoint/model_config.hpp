// memra::ModelConfig — one normalised description of a model's architecture. A
// family plugin's config_normalize writes it (as JSON) from a checkpoint's raw
// config (repack/checkpoint/checkpoint_family.hpp); the host reads and checks it
// here, and hands the JSON form to the plugin's plan_create. The host itself knows
// no architecture.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"

namespace memra {

enum class RopeScaling { none, linear, llama3, yarn };
enum class NormType { rms_norm, layer_norm };

const char* to_string(RopeScaling v);
const char* to_string(NormType v);
bool parse_rope_scaling(std::string_view s, RopeScaling* out);
bool parse_norm_type(std::string_view s, NormType* out);

struct RopeConfig {
  double theta = 10000.0;        // base of the full-attention layers
  double local_theta = 0.0;      // base of sliding-attention layers; 0 = same as theta
  RopeScaling scaling = RopeScaling::none;
  double factor = 1.0;                 // linear, llama3, yarn
  double low_freq_factor = 0.0;        // llama3
  double high_freq_factor = 0.0;       // llama3
  int64_t original_max_position = 0;   // llama3, yarn
  double beta_fast = 0.0;              // yarn (0 = the method's default)
  double beta_slow = 0.0;              // yarn
  double attention_factor = 0.0;       // yarn mscale (0 = the method's default)
  // GGUF stores llama3-style scaling as a per-frequency factor tensor instead of
  // the parameters above; its name when present ("rope_freqs.weight").
  std::string freq_factors_tensor;
  // Which dimensions RoPE pairs: false = (i, i + rotary_dim/2) as in Hugging Face
  // checkpoints; true = (2i, 2i+1), as in GGUF llama files, whose converter
  // permuted the q/k projection rows to match.
  bool interleaved = false;
  double partial_rotary_factor = 1.0;  // fraction of head_dim that rotates
  int64_t rotary_dim = 0;              // head_dim * partial_rotary_factor
};

struct ModelConfig {
  // 2: `family` is the name of the family plugin that normalised the config.
  static constexpr int kJsonVersion = 2;

  std::string architecture;  // the checkpoint's architecture as the family names it (its HF class)
  std::string family;        // the family plugin that wrote this config (and plans it)
  std::string model_type;    // HF model_type or GGUF general.architecture, as written
  std::string source_format; // "hf" | "gguf"
  std::string dtype;         // HF "dtype"/"torch_dtype" ("bfloat16"); empty for GGUF

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // dense MLP width (0 if the model has none)
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;

  RopeConfig rope;

  NormType norm_type = NormType::rms_norm;
  double norm_eps = 1e-6;
  bool norm_weight_offset = false;  // norm multiplies by (1 + w) (Gemma, Qwen3-Next)
  bool qk_norm = false;             // RMSNorm on q and k per head before RoPE
  bool attention_bias = false;         // q/k/v projections carry a bias
  bool attention_output_bias = false;  // o_proj carries a bias
  bool mlp_bias = false;
  bool tie_word_embeddings = false;
  std::string activation = "silu";  // "silu" | "gelu_pytorch_tanh"

  // Mixture of experts (num_experts == 0: dense).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;  // 0: no shared expert
  bool norm_topk_prob = false;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;         // layers that stay dense

  // Which layers attend how (full, sliding, or a family's own kinds), windows, recurrent
  // layers' sizes, soft-caps: the family's keys (family_json), which the host never reads.

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // generation_config's list when present
  std::optional<int64_t> pad_token_id;

  // The family's normalised config as it wrote it (model_config_from_json keeps the text):
  // keys the host does not read pass through to the family's plan_create, a .memra manifest
  // and back, so a family needs no host field for its own settings.
  std::string family_json;

  bool is_moe() const { return num_experts > 0; }
  bool moe_layer(int64_t layer) const;  // honours decoder_sparse_step and mlp_only_layers
};

// The JSON the family plugin receives, and back. from_json validates like the
// builders do (required fields, known enum names) and keeps the text;
// to_json writes the fields above (so a changed field shows) plus every other key of
// family_json, unchanged.
std::string model_config_to_json(const ModelConfig& c);
Result<ModelConfig> model_config_from_json(std::string_view json);

// Consistency checks shared by every builder (positive sizes, heads divide, ...).
Status validate(const ModelConfig& c);

}  // namespace memra
