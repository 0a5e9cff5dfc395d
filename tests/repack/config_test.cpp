// Model config normalisation, through the family plugins of this build (the host
// has no architecture knowledge): every served fixture config.json against the
// values it states (read here with nlohmann directly) and the fixture README's
// facts; the GGUF llama config against the HF llama config; JSON round trip;
// refusals, including architectures no installed family serves.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "repack/checkpoint/gguf.hpp"
#include "repack/checkpoint/gguf_tokenizer.hpp"
#include "repack/checkpoint/model_config.hpp"
#include "tests/repack/test_util.hpp"
#include "tests/repack/test_writers.hpp"
#include "tests/support/checkpoint_config.hpp"

namespace memra::testing {
namespace {

using nlohmann::json;

ModelConfig load(const std::string& model) {
  auto c = hf_config(fixture("models/" + model).string());
  EXPECT_TRUE(c.ok()) << model << ": " << c.error().message;
  return c.ok() ? *c : ModelConfig{};
}

json raw(const std::string& model) { return json::parse(read_text(fixture("models/" + model + "/config.json"))); }


// The fields every family states the same way.
void expect_common(const ModelConfig& c, const json& j) {
  EXPECT_EQ(c.architecture, j.at("architectures")[0].get<std::string>());
  EXPECT_EQ(c.model_type, j.at("model_type").get<std::string>());
  EXPECT_EQ(c.source_format, "hf");
  EXPECT_EQ(c.dtype, "bfloat16");
  EXPECT_EQ(c.vocab_size, j.at("vocab_size").get<int64_t>());
  EXPECT_EQ(c.hidden_size, j.at("hidden_size").get<int64_t>());
  EXPECT_EQ(c.num_layers, j.at("num_hidden_layers").get<int64_t>());
  EXPECT_EQ(family_keys(c).at("num_heads"), j.at("num_attention_heads").get<int64_t>());
  EXPECT_EQ(family_keys(c).at("num_kv_heads"), j.at("num_key_value_heads").get<int64_t>());
  EXPECT_EQ(family_keys(c).at("head_dim"), j.at("head_dim").get<int64_t>());
  EXPECT_EQ(c.max_position_embeddings, j.at("max_position_embeddings").get<int64_t>());
  EXPECT_EQ(family_keys(c).at("norm_eps"), j.at("rms_norm_eps").get<double>());
  EXPECT_EQ(family_keys(c).at("norm_type"), "rms_norm");
  EXPECT_EQ(c.tie_word_embeddings, j.at("tie_word_embeddings").get<bool>());
  EXPECT_EQ(family_keys(c).at("attention_bias"), j.at("attention_bias").get<bool>());
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{j.at("eos_token_id").get<int64_t>()});
  EXPECT_FALSE(c.bos_token_id.has_value());  // bos_token_id: null (the tokenizer has no BOS)
  EXPECT_EQ(c.pad_token_id, j.at("pad_token_id").get<int64_t>());
  EXPECT_EQ(static_cast<int64_t>(family_keys(c).at("layer_types").size()), c.num_layers);
  // README: common to all tiny models.
  EXPECT_EQ(c.vocab_size, 1024);
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(family_keys(c).at("num_heads"), 4);
  EXPECT_EQ(family_keys(c).at("num_kv_heads"), 2);
  EXPECT_EQ(family_keys(c).at("head_dim"), 64);
  // Lossless JSON round trip (what a family plugin receives).
  auto back = model_config_from_json(model_config_to_json(c));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(model_config_to_json(*back), model_config_to_json(c));
}

// Keys only the family reads pass through the host untouched (to plan_create, a .memra
// manifest and back); a field the host reads and changes shows in what the family gets.
TEST(ModelConfigJson, FamilyKeysPassThroughAndHostFieldsShowChanges) {
  auto c = memra::testing::hf_config_from_json(
      R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","vocab_size":64,"hidden_size":32,
          "intermediate_size":64,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,
          "max_position_embeddings":128,"rms_norm_eps":1e-6,"rope_theta":10000.0,"eos_token_id":1})");
  ASSERT_TRUE(c.ok()) << c.error().message;
  nlohmann::json family = nlohmann::json::parse(model_config_to_json(*c));
  family["x_private"] = {{"a", {1, 2}}, {"b", "text"}};
  auto with_private = model_config_from_json(family.dump());
  ASSERT_TRUE(with_private.ok()) << with_private.error().message;
  nlohmann::json out = nlohmann::json::parse(model_config_to_json(*with_private));
  EXPECT_EQ(out["x_private"], family["x_private"]);
  EXPECT_EQ(out, family);
  // Through another round trip (a .memra manifest stores to_json and reads it back).
  auto again = model_config_from_json(model_config_to_json(*with_private));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(nlohmann::json::parse(model_config_to_json(*again)), family);
  // A host field changed after parsing wins over the text it came from.
  with_private->max_position_embeddings = 64;
  out = nlohmann::json::parse(model_config_to_json(*with_private));
  EXPECT_EQ(out["max_position_embeddings"], 64);
  EXPECT_EQ(out["x_private"], family["x_private"]);
}

class CheckpointConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fixtures_present()) GTEST_SKIP() << "fixtures not found at " << fixtures_dir();
  }
};

TEST_F(CheckpointConfig, Llama) {
  const auto c = load("llama");
  const auto j = raw("llama");
  expect_common(c, j);
  EXPECT_EQ(c.family, "llama");
  EXPECT_EQ(family_keys(c).at("intermediate_size"), j.at("intermediate_size").get<int64_t>());
  EXPECT_EQ(family_keys(c).at("rope").at("theta"), j.at("rope_parameters").at("rope_theta").get<double>());
  EXPECT_EQ(family_keys(c).at("rope").at("theta"), 500000.0);  // README
  EXPECT_EQ(family_keys(c).at("rope").at("scaling"), "none");
  EXPECT_EQ(family_keys(c).at("rope").at("rotary_dim"), 64);
  EXPECT_FALSE(family_keys(c).at("rope").at("interleaved").get<bool>());
  EXPECT_FALSE(family_keys(c).at("qk_norm").get<bool>());
  EXPECT_FALSE(family_keys(c).at("norm_weight_offset").get<bool>());
  EXPECT_EQ(family_keys(c).at("mlp_bias"), j.at("mlp_bias").get<bool>());
  EXPECT_EQ(family_keys(c).at("activation"), j.at("hidden_act").get<std::string>());
  EXPECT_FALSE((family_keys(c).value("num_experts", int64_t{0}) > 0));
  EXPECT_EQ(family_keys(c).at("layer_types"), json::array({"full_attention", "full_attention"}));
  EXPECT_EQ(family_keys(c).value("sliding_window", -1), 0);
}

TEST_F(CheckpointConfig, Qwen3HasQkNorm) {
  const auto c = load("qwen3");
  const auto j = raw("qwen3");
  expect_common(c, j);
  EXPECT_EQ(c.family, "llama");  // the family plugin that serves Qwen3
  EXPECT_TRUE(family_keys(c).at("qk_norm").get<bool>());  // README: q/k RMSNorm
  EXPECT_EQ(family_keys(c).at("rope").at("theta"), 1e6);
  EXPECT_EQ(family_keys(c).at("layer_types"), j.at("layer_types"));
  EXPECT_EQ(family_keys(c).value("sliding_window", -1), 0);  // sliding_window: null, use_sliding_window: false
}

// Qwen3-MoE: Qwen3's attention, every layer sparse (README: 8 experts, top-2,
// moe_intermediate 256, norm_topk_prob false), the experts' fields as config.json says.
TEST_F(CheckpointConfig, Qwen3MoeHasExperts) {
  const auto c = load("qwen3_moe");
  const auto j = raw("qwen3_moe");
  expect_common(c, j);
  EXPECT_EQ(c.family, "llama");
  EXPECT_TRUE(family_keys(c).at("qk_norm").get<bool>());
  EXPECT_TRUE((family_keys(c).value("num_experts", int64_t{0}) > 0));
  EXPECT_EQ(family_keys(c).at("num_experts"), j.at("num_local_experts").get<int64_t>());
  EXPECT_EQ(family_keys(c).at("num_experts"), 8);
  EXPECT_EQ(family_keys(c).at("num_experts_per_tok"), 2);
  EXPECT_EQ(family_keys(c).at("moe_intermediate_size"), 256);
  EXPECT_EQ(family_keys(c).at("intermediate_size"), j.at("intermediate_size").get<int64_t>());  // kept for mlp_only_layers
  EXPECT_FALSE(family_keys(c).value("norm_topk_prob", false));
  EXPECT_EQ(family_keys(c).value("decoder_sparse_step", int64_t{1}), 1);
  EXPECT_TRUE(family_keys(c).value("mlp_only_layers", json::array()).empty());
  EXPECT_EQ(family_keys(c).value("shared_expert_intermediate_size", int64_t{0}), 0);
}

// Qwen3-Next is family-qwen3next's: its own keys pass through to its plan.
TEST_F(CheckpointConfig, Qwen3NextIsNormalisedByItsFamily) {
  auto c = hf_config(fixture("models/qwen3_next").string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->family, "qwen3next");
  EXPECT_EQ(c->architecture, "Qwen3NextForCausalLM");
  const json j = raw("qwen3_next");
  EXPECT_EQ(family_keys(*c).at("linear_num_value_heads"), j.at("linear_num_value_heads"));
  EXPECT_EQ(family_keys(*c).at("linear_conv_kernel_dim"), j.at("linear_conv_kernel_dim"));
  EXPECT_EQ(family_keys(*c).at("layer_types"), j.at("layer_types"));
  EXPECT_EQ(family_keys(*c).at("shared_expert_intermediate_size"), j.at("shared_expert_intermediate_size"));
  EXPECT_EQ(family_keys(*c).at("rope").at("rotary_dim"), 16);  // 64 x partial_rotary_factor 0.25
}

// Gemma 3 text is family-gemma's: the fixture's values (transformers 5: layer_types and
// rope_parameters per layer type), its own keys passing through to its plan.
TEST_F(CheckpointConfig, Gemma3TextIsNormalisedByItsFamily) {
  auto c = hf_config(fixture("models/gemma3_text").string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  const json j = raw("gemma3_text");
  EXPECT_EQ(c->family, "gemma");
  EXPECT_EQ(c->architecture, "Gemma3ForCausalLM");
  EXPECT_TRUE(c->tie_word_embeddings);
  const json f = family_keys(*c);
  EXPECT_EQ(f.at("layer_types"), j.at("layer_types"));
  EXPECT_EQ(f.at("layer_types_from"), "layer_types");
  EXPECT_EQ(f.at("sliding_window"), 8);
  EXPECT_EQ(f.at("rope").at("theta"), 1e6);
  EXPECT_EQ(f.at("rope").at("local_theta"), 1e4);
  EXPECT_EQ(f.at("attention_scale"), 0.125);  // query_pre_attn_scalar 64
  EXPECT_EQ(f.at("embedding_scale"), 16.0);   // sqrt(256)
  EXPECT_EQ(f.at("activation"), "gelu_tanh");
  EXPECT_TRUE(f.at("norm_weight_offset").get<bool>());
  EXPECT_EQ(f.at("final_logit_softcapping"), 0.0);  // null
  EXPECT_EQ(f.at("attn_logit_softcapping"), 0.0);
}

// Layer kinds without layer_types, as transformers' Gemma3TextConfig decides them: every
// sliding_window_pattern-th layer (1-based) is global (transformers 4's key, or the
// _sliding_window_pattern transformers 5 writes); with neither, transformers' default 6,
// which the normalised config says it assumed. transformers 4's rope_theta +
// rope_local_base_freq (10000 when absent). Refused: layer_types of the wrong length or
// kind, another activation, bidirectional attention, a GGUF file (not read yet).
TEST(CheckpointConfigGemma, LayerKindsRopeAndRefusals) {
  const json base = {{"architectures", {"Gemma3ForCausalLM"}}, {"model_type", "gemma3_text"}, {"vocab_size", 100},
                     {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 7}, {"num_attention_heads", 4},
                     {"num_key_value_heads", 2}, {"head_dim", 16}, {"eos_token_id", 1}, {"sliding_window", 32},
                     {"rope_theta", 1e6}, {"query_pre_attn_scalar", 16}, {"max_position_embeddings", 4096}};
  auto with = [&](const json& patch) {
    json j = base;
    j.merge_patch(patch);
    return hf_config_from_json(j.dump());
  };
  auto kinds = [](const ModelConfig& c) {
    const json f = family_keys(c);
    std::string s;
    for (const auto& k : f.at("layer_types")) s += k == "full_attention" ? 'F' : 'S';
    return s;
  };
  {
    auto c = with({{"sliding_window_pattern", 3}});
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(kinds(*c), "SSFSSFS");
    EXPECT_EQ(family_keys(*c).at("layer_types_from"), "sliding_window_pattern 3");
    EXPECT_EQ(family_keys(*c).at("rope").at("theta"), 1e6);
    EXPECT_EQ(family_keys(*c).at("rope").at("local_theta"), 1e4) << "rope_local_base_freq absent: transformers' 10000";
    EXPECT_EQ(family_keys(*c).at("attention_scale"), 0.25);
    EXPECT_EQ(family_keys(*c).at("embedding_scale"), 8.0);
  }
  {
    auto c = with({{"_sliding_window_pattern", 2}, {"rope_local_base_freq", 5000.0}});
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(kinds(*c), "SFSFSFS");
    EXPECT_EQ(family_keys(*c).at("rope").at("local_theta"), 5000.0);
  }
  {
    auto c = with(json::object());
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(kinds(*c), "SSSSSFS");
    EXPECT_NE(family_keys(*c).at("layer_types_from").get<std::string>().find("transformers' default sliding_window_pattern 6"),
              std::string::npos);
  }
  {
    auto c = with({{"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}, {"final_logit_softcapping", 30.0},
                   {"attn_logit_softcapping", 50.0}});
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(family_keys(*c).at("rope").at("scaling"), "linear");  // the global layers'; the local ones are never scaled
    EXPECT_EQ(family_keys(*c).at("final_logit_softcapping"), 30.0);
    EXPECT_EQ(family_keys(*c).at("attn_logit_softcapping"), 50.0);
  }
  const std::pair<json, std::string> refused[] = {
      {{{"layer_types", {"sliding_attention", "full_attention"}}}, "'layer_types' must list one entry per layer (7)"},
      {{{"layer_types", json(7, "linear_attention")}}, "is not sliding_attention or full_attention"},
      {{{"hidden_activation", "gelu"}}, "hidden_activation 'gelu' is not supported"},
      {{{"use_bidirectional_attention", true}}, "use_bidirectional_attention"},
      {{{"sliding_window_pattern", 0}}, "sliding_window_pattern must be positive"},
  };
  for (const auto& [patch, why] : refused) {
    SCOPED_TRACE(patch.dump());
    auto c = with(patch);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.error().message.find(why), std::string::npos) << c.error().message;
  }
}

// memra-bench's gemma3-12b shape (google/gemma-3-12b's text decoder) normalises and plans as
// Gemma 3 12B: every 6th layer global (8 of 48), the other 40 in a sliding group of window 1024,
// 8 KV heads of 256, the final soft-cap absent (no op required).
TEST(CheckpointConfigGemma, TheBenchShapeIsGemma3_12B) {
  auto c = hf_config_from_json(read_text(std::filesystem::path(MEMRA_SOURCE_ROOT) / "host/tools/memra-bench/shapes/gemma3-12b.config.json"));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->family, "gemma");
  EXPECT_EQ(family_keys(*c).at("layer_types_from"), "sliding_window_pattern 6");
  auto family = build_plugins().family("gemma");
  ASSERT_TRUE(family.ok()) << family.error().message;
  auto plan = family->plan_create(model_config_to_json(*c));
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  auto info = plan->info();
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->num_layers, 48);
  EXPECT_EQ(info->num_required_ops, 0u);
  ASSERT_EQ(info->num_state_groups, 2u);
  for (size_t g = 0; g < 2; ++g) {
    const memra_state_group& group = info->state_groups[g];
    EXPECT_EQ(group.kind, MEMRA_STATE_PAGED_KV);
    EXPECT_EQ(group.kv_heads, 8);
    EXPECT_EQ(group.head_dim, 256);
    const std::vector<int32_t> layers(group.layers, group.layers + group.num_layers);
    if (group.sliding_window == 0) {
      EXPECT_EQ(layers, (std::vector<int32_t>{5, 11, 17, 23, 29, 35, 41, 47}));
    } else {
      EXPECT_EQ(group.sliding_window, 1024);
      EXPECT_EQ(layers.size(), 40u);
    }
  }
}

// llama.cpp's GGUF metadata for Gemma 3 ("gemma3"), read as llama.cpp reads it: layers slide
// only when attention.sliding_window is set, by attention.sliding_window_pattern (a period) or
// llama.cpp's default period 6 (said in layer_types_from); the sliding base
// rope.freq_base_swa or 10000; the attention scale 1/sqrt(head_dim), or 1/sqrt(hidden/heads) for
// the 62-layer 27B; the norms' + 1 already in the weights; tied when there is no output.weight.
TEST(CheckpointConfigGemma, GgufMetadataAsLlamaCppReadsIt) {
  auto normalise = [](uint32_t layers, uint32_t window, int pattern, float swa_base) {
    GgufWriter w;
    w.kv_str("general.architecture", "gemma3");
    w.kv_u32("gemma3.embedding_length", 5376);
    w.kv_u32("gemma3.block_count", layers);
    w.kv_u32("gemma3.feed_forward_length", 21504);
    w.kv_u32("gemma3.attention.head_count", 32);
    w.kv_u32("gemma3.attention.head_count_kv", 16);
    w.kv_u32("gemma3.attention.key_length", 128);
    w.kv_u32("gemma3.attention.value_length", 128);
    w.kv_f32("gemma3.attention.layer_norm_rms_epsilon", 1e-6f);
    w.kv_f32("gemma3.rope.freq_base", 1e6f);
    w.kv_u32("tokenizer.ggml.eos_token_id", 1);
    if (window > 0) w.kv_u32("gemma3.attention.sliding_window", window);
    if (pattern > 0) w.kv_u32("gemma3.attention.sliding_window_pattern", static_cast<uint32_t>(pattern));
    if (swa_base > 0) w.kv_f32("gemma3.rope.freq_base_swa", swa_base);
    w.tensor("token_embd.weight", {5376, 2}, 0, std::vector<uint8_t>(5376 * 2 * 4, 0));
    TempDir dir;
    write_bytes(dir / "g.gguf", w.finish());
    auto f = gguf::File::open((dir / "g.gguf").string(), {.require_dequantizable = false});
    EXPECT_TRUE(f.ok());
    return f.ok() ? gguf_config(*f) : Result<ModelConfig>(f.error());
  };
  auto kinds = [](const ModelConfig& c) {
    const json f = family_keys(c);
    std::string s;
    for (const auto& k : f.at("layer_types")) s += k == "full_attention" ? 'F' : 'S';
    return s;
  };
  {
    auto c = normalise(62, 1024, 0, 0);
    ASSERT_TRUE(c.ok()) << c.error().message;
    const json f = family_keys(*c);
    EXPECT_EQ(c->family, "gemma");
    EXPECT_EQ(c->architecture, "Gemma3ForCausalLM");
    EXPECT_EQ(kinds(*c).substr(0, 12), "SSSSSFSSSSSF");
    EXPECT_NE(f.at("layer_types_from").get<std::string>().find("llama.cpp's default sliding_window_pattern 6"), std::string::npos);
    EXPECT_NEAR(f.at("attention_scale").get<double>(), 1.0 / std::sqrt(168.0), 1e-12) << "the 27B's query_pre_attn_scalar is hidden/heads";
    EXPECT_FALSE(f.at("norm_weight_offset").get<bool>());
    EXPECT_TRUE(c->tie_word_embeddings);
    EXPECT_EQ(f.at("rope").at("local_theta"), 1e4);
    EXPECT_EQ(f.at("sliding_window"), 1024);
    EXPECT_EQ(c->vocab_size, 2);
  }
  {
    auto c = normalise(4, 512, 2, 2e4f);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(kinds(*c), "SFSF");
    EXPECT_EQ(family_keys(*c).at("layer_types_from"), "attention.sliding_window_pattern 2");
    EXPECT_NEAR(family_keys(*c).at("attention_scale").get<double>(), 1.0 / std::sqrt(128.0), 1e-12);
    EXPECT_EQ(family_keys(*c).at("rope").at("local_theta"), 2e4);
  }
  {
    auto c = normalise(3, 0, 0, 0);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(kinds(*c), "FFF") << "no window in the file: every layer global, as llama.cpp";
    EXPECT_EQ(family_keys(*c).at("sliding_window"), 0);
  }
}

TEST_F(CheckpointConfig, GgufLlamaMatchesHfLlama) {
  const auto hf = load("llama");
  for (const char* q : {"BF16", "Q4_K_M", "IQ4_XS"}) {
    SCOPED_TRACE(q);
    auto f = gguf::File::open(fixture(std::string("gguf/llama/llama-") + q + ".gguf").string());
    ASSERT_TRUE(f.ok()) << f.error().message;
    auto g = gguf_config(*f);
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(g->architecture, hf.architecture);
    EXPECT_EQ(g->family, hf.family);
    EXPECT_EQ(g->source_format, "gguf");
    EXPECT_EQ(g->vocab_size, hf.vocab_size);
    EXPECT_EQ(g->hidden_size, hf.hidden_size);
    EXPECT_EQ(family_keys(*g).at("intermediate_size"), family_keys(hf).at("intermediate_size"));
    EXPECT_EQ(g->num_layers, hf.num_layers);
    EXPECT_EQ(family_keys(*g).at("num_heads"), family_keys(hf).at("num_heads"));
    EXPECT_EQ(family_keys(*g).at("num_kv_heads"), family_keys(hf).at("num_kv_heads"));
    EXPECT_EQ(family_keys(*g).at("head_dim"), family_keys(hf).at("head_dim"));
    EXPECT_EQ(g->max_position_embeddings, hf.max_position_embeddings);
    EXPECT_EQ(family_keys(*g).at("rope").at("theta"), family_keys(hf).at("rope").at("theta"));
    EXPECT_EQ(family_keys(*g).at("rope").at("scaling"), family_keys(hf).at("rope").at("scaling"));
    EXPECT_EQ(family_keys(*g).at("rope").at("rotary_dim"), family_keys(hf).at("rope").at("rotary_dim"));
    EXPECT_TRUE(family_keys(*g).at("rope").at("interleaved").get<bool>());  // llama.cpp permuted q/k (see CheckpointSafetensors.LlamaValuesEqualBf16Gguf)
    EXPECT_EQ(family_keys(*g).at("norm_eps").get<float>(), family_keys(hf).at("norm_eps").get<float>());  // GGUF stores float32
    EXPECT_EQ(family_keys(*g).at("qk_norm"), family_keys(hf).at("qk_norm"));
    EXPECT_EQ(family_keys(*g).at("attention_bias"), family_keys(hf).at("attention_bias"));
    EXPECT_EQ(family_keys(*g).at("mlp_bias"), family_keys(hf).at("mlp_bias"));
    EXPECT_EQ(g->tie_word_embeddings, hf.tie_word_embeddings);
    EXPECT_EQ(family_keys(*g).at("activation"), family_keys(hf).at("activation"));
    EXPECT_EQ(family_keys(*g).at("layer_types"), family_keys(hf).at("layer_types"));
    EXPECT_EQ(g->eos_token_ids, hf.eos_token_ids);
    EXPECT_EQ(g->bos_token_id, hf.bos_token_id);
    EXPECT_EQ(g->pad_token_id, hf.pad_token_id);
    EXPECT_EQ((family_keys(*g).value("num_experts", int64_t{0}) > 0), (family_keys(hf).value("num_experts", int64_t{0}) > 0));
  }
}

TEST_F(CheckpointConfig, GgufTokenizerAccessors) {
  auto f = gguf::File::open(fixture("gguf/llama/llama-Q8_0.gguf").string());
  ASSERT_TRUE(f.ok());
  auto t = gguf::read_tokenizer(*f);
  ASSERT_TRUE(t.ok()) << t.error().message;
  // Cross-check with the HF tokenizer.json of the same model.
  const auto tok = json::parse(read_text(fixture("models/llama/tokenizer.json")));
  EXPECT_EQ(t->model, "gpt2");
  EXPECT_EQ(t->pre, "qwen2");  // README: converted with pre-tokenizer 'qwen2'
  ASSERT_EQ(t->tokens.size(), 1024u);
  for (const auto& [piece, id] : tok.at("model").at("vocab").items()) EXPECT_EQ(t->tokens.at(id.get<size_t>()), piece);
  for (const auto& added : tok.at("added_tokens")) {
    EXPECT_EQ(t->tokens.at(added.at("id").get<size_t>()), added.at("content").get<std::string>());
    EXPECT_EQ(t->token_types.at(added.at("id").get<size_t>()), static_cast<int32_t>(gguf::TokenType::control));
  }
  const auto& merges = tok.at("model").at("merges");
  ASSERT_EQ(t->merges.size(), merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string m = merges[i].is_array() ? merges[i][0].get<std::string>() + " " + merges[i][1].get<std::string>()
                                               : merges[i].get<std::string>();
    EXPECT_EQ(t->merges[i], m);
  }
  EXPECT_EQ(t->eos_id, 1023);  // <|im_end|>
  EXPECT_EQ(t->pad_id, 1021);  // <|endoftext|>
  EXPECT_FALSE(t->bos_id.has_value());
  EXPECT_EQ(t->add_bos, false);
  EXPECT_TRUE(t->scores.empty());
  EXPECT_TRUE(t->chat_template.empty());
}

TEST(CheckpointConfigRefusals, UnknownArchitectureIsNamed) {
  auto c = hf_config_from_json(R"({"architectures": ["FooForCausalLM"], "vocab_size": 10})");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::unsupported);
  EXPECT_NE(c.error().message.find("architecture 'FooForCausalLM' is not supported"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("the installed family plugins serve "), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("LlamaForCausalLM"), std::string::npos) << c.error().message;
  auto none = hf_config_from_json(R"({"vocab_size": 10})");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("architectures"), std::string::npos);
}

TEST(CheckpointConfigRefusals, RopeVariantsAndBadValues) {
  const json base = {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 100}, {"hidden_size", 64},
                     {"intermediate_size", 128}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                     {"eos_token_id", 1}, {"max_position_embeddings", 8192}};
  auto with = [&](const json& extra) {
    json j = base;
    for (const auto& [k, v] : extra.items()) j[k] = v;
    return hf_config_from_json(j.dump());
  };
  auto plain = with(json::object());
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(family_keys(*plain).at("num_kv_heads"), 4);
  EXPECT_EQ(family_keys(*plain).at("head_dim"), 16);
  EXPECT_EQ(family_keys(*plain).at("rope").at("theta"), 10000.0);

  auto l3 = with({{"rope_theta", 500000.0},
                  {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                                    {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}}}});
  ASSERT_TRUE(l3.ok()) << l3.error().message;
  EXPECT_EQ(family_keys(*l3).at("rope").at("scaling"), "llama3");
  EXPECT_EQ(family_keys(*l3).at("rope").at("factor"), 8.0);
  EXPECT_EQ(family_keys(*l3).at("rope").at("high_freq_factor"), 4.0);
  EXPECT_EQ(family_keys(*l3).at("rope").at("original_max_position"), 8192);

  auto yarn = with({{"rope_parameters", {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0}}}});
  ASSERT_TRUE(yarn.ok()) << yarn.error().message;
  EXPECT_EQ(family_keys(*yarn).at("rope").at("scaling"), "yarn");
  EXPECT_EQ(family_keys(*yarn).at("rope").at("theta"), 1e6);
  EXPECT_EQ(family_keys(*yarn).at("rope").at("beta_fast"), 32.0);
  EXPECT_EQ(family_keys(*yarn).at("rope").at("original_max_position"), 8192);

  auto lin = with({{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}});
  ASSERT_TRUE(lin.ok());
  EXPECT_EQ(family_keys(*lin).at("rope").at("scaling"), "linear");

  auto dyn = with({{"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}}});
  ASSERT_FALSE(dyn.ok());
  EXPECT_NE(dyn.error().message.find("'dynamic' is not supported"), std::string::npos) << dyn.error().message;

  // The family's own keys are the family's to check, when it plans.
  auto plan_error = [&](const json& extra) -> std::string {
    json j = base;
    for (const auto& [k, v] : extra.items()) j[k] = v;
    auto raw = raw_config_from_hf_json(j.dump(), {});
    if (!raw) return raw.error().message;
    auto f = normalize_checkpoint(*raw, build_plugins());
    if (!f) return f.error().message;
    auto plan = f->plugin.plan_create(model_config_to_json(f->config));
    return plan ? std::string() : plan.error().message;
  };
  EXPECT_EQ(plan_error(json::object()), "");
  EXPECT_NE(plan_error({{"num_key_value_heads", 3}}).find("inconsistent attention heads"), std::string::npos);  // 4 into 3
  EXPECT_NE(plan_error({{"hidden_act", "relu"}}).find("activation"), std::string::npos);
  EXPECT_FALSE(with({{"vocab_size", "many"}}).ok());
  EXPECT_FALSE(with({{"eos_token_id", 100}}).ok());  // outside the vocabulary
  EXPECT_FALSE(model_config_from_json("{}").ok());
  EXPECT_FALSE(model_config_from_json("not json").ok());
}

}  // namespace
}  // namespace memra::testing
