// safetensors reader: every fixture model parses, tensors agree with config.json,
// values agree with the llama BF16 GGUF (llama.cpp's converter output of the same
// weights), sharded checkpoints open through their index.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "repack/checkpoint/gguf.hpp"
#include "repack/checkpoint/model_config.hpp"
#include "repack/checkpoint/safetensors.hpp"
#include "repack/quant/fp_convert.hpp"
#include "tests/repack/test_util.hpp"
#include "tests/repack/test_writers.hpp"
#include "tests/support/checkpoint_config.hpp"

namespace memra::testing {
namespace {

using safetensors::Checkpoint;
using Shape = std::vector<uint64_t>;

TEST(CheckpointSafetensors, EveryFixtureModelParses) {
  MEMRA_REQUIRE_FIXTURES();
  const auto models = fixture_models();
  ASSERT_EQ(models.size(), 5u);
  for (const auto& m : models) {
    SCOPED_TRACE(m);
    auto ck = Checkpoint::open(fixture("models/" + m).string());
    ASSERT_TRUE(ck.ok()) << ck.error().message;
    ASSERT_EQ(ck->shard_paths().size(), 1u);
    const auto bytes = read_bytes(fixture("models/" + m + "/model.safetensors"));
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
    EXPECT_EQ(ck->tensors().size(), header.size() - 1);  // minus __metadata__
    EXPECT_EQ(ck->file_metadata(), (std::vector<std::pair<std::string, std::string>>{{"format", "pt"}}));
    uint64_t covered = 0;
    for (const auto& t : ck->tensors()) {
      const auto& h = header.at(t.name);
      EXPECT_EQ(safetensors::dtype_name(t.dtype), h.at("dtype").get<std::string>());
      EXPECT_EQ(t.shape, h.at("shape").get<Shape>());
      EXPECT_EQ(t.file_offset, 8 + n + h.at("data_offsets")[0].get<uint64_t>());
      EXPECT_EQ(t.nbytes, t.n_elements * 2);
      ASSERT_NE(t.data, nullptr);
      EXPECT_EQ(0, std::memcmp(t.data, bytes.data() + t.file_offset, t.nbytes));  // a view, no transformation
      covered += t.nbytes;
    }
    EXPECT_EQ(8 + n + covered, bytes.size());
  }
}

// Every tensor the config implies exists with the implied shape.
// Models whose architecture no installed family serves have no normalised config and
// are left out (config_test.cpp checks they are refused by name).
TEST(CheckpointSafetensors, TensorsMatchConfig) {
  MEMRA_REQUIRE_FIXTURES();
  std::set<std::string> checked;
  for (const auto& m : fixture_models()) {
    SCOPED_TRACE(m);
    const auto dir = fixture("models/" + m).string();
    auto cfg = memra::testing::hf_config(dir);
    if (!cfg.ok() && cfg.error().code == ErrorCode::unsupported) continue;
    ASSERT_TRUE(cfg.ok()) << cfg.error().message;
    checked.insert(m);
    auto ck = Checkpoint::open(dir);
    ASSERT_TRUE(ck.ok());
    const ModelConfig& c = *cfg;
    const nlohmann::json f = memra::testing::family_keys(c);  // the family's keys (docs/FORMAT.md)
    auto u64 = [&](const char* key) { return f.value(key, uint64_t{0}); };
    std::map<std::string, Shape> want;
    const uint64_t H = c.hidden_size, V = c.vocab_size, hd = u64("head_dim");
    const uint64_t heads = u64("num_heads"), kv_heads = u64("num_kv_heads"), E = u64("num_experts");
    want["model.embed_tokens.weight"] = {V, H};
    want["model.norm.weight"] = {H};
    if (!c.tie_word_embeddings) want["lm_head.weight"] = {V, H};
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      want[p + "input_layernorm.weight"] = {H};
      want[p + "post_attention_layernorm.weight"] = {H};
      const bool qwen3next = c.family == "qwen3next";
      const auto kinds = f.value("layer_types", std::vector<std::string>{});
      if (qwen3next && kinds.at(static_cast<size_t>(i)) == "linear_attention") {
        // A Gated DeltaNet layer (family-qwen3next's keys): grouped projections, the conv, gates, norm.
        const uint64_t hk = u64("linear_num_key_heads"), hv = u64("linear_num_value_heads"), dk = u64("linear_key_head_dim"),
                       dv = u64("linear_value_head_dim"), K = u64("linear_conv_kernel_dim");
        const std::string l = p + "linear_attn.";
        want[l + "in_proj_qkvz.weight"] = {2 * hk * dk + 2 * hv * dv, H};
        want[l + "in_proj_ba.weight"] = {2 * hv, H};
        want[l + "conv1d.weight"] = {2 * hk * dk + hv * dv, 1, K};
        want[l + "A_log"] = want[l + "dt_bias"] = {hv};
        want[l + "norm.weight"] = {dv};
        want[l + "out_proj.weight"] = {H, hv * dv};
      } else {
        // Attention (Qwen3-Next's q projection carries the output gate: twice the width).
        want[p + "self_attn.q_proj.weight"] = {(qwen3next ? 2 : 1) * heads * hd, H};
        want[p + "self_attn.k_proj.weight"] = {kv_heads * hd, H};
        want[p + "self_attn.v_proj.weight"] = {kv_heads * hd, H};
        want[p + "self_attn.o_proj.weight"] = {H, heads * hd};
        if (qwen3next || f.value("qk_norm", false)) want[p + "self_attn.q_norm.weight"] = want[p + "self_attn.k_norm.weight"] = {hd};
      }
      // Sparse layers: every one when decoder_sparse_step is 1 and mlp_only_layers empty (the
      // served MoE fixture; the family's plan tests cover the other layouts).
      const auto dense_only = f.value("mlp_only_layers", std::vector<int64_t>{});
      const bool sparse = E > 0 && std::find(dense_only.begin(), dense_only.end(), i) == dense_only.end() &&
                          (f.value("decoder_sparse_step", int64_t{1}) <= 1 || (i + 1) % f.value("decoder_sparse_step", int64_t{1}) == 0);
      if (sparse) {
        const uint64_t I = u64("moe_intermediate_size");
        want[p + "mlp.gate.weight"] = {E, H};
        for (uint64_t e = 0; e < E; ++e) {
          const std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
          want[ep + "gate_proj.weight"] = want[ep + "up_proj.weight"] = {I, H};
          want[ep + "down_proj.weight"] = {H, I};
        }
        if (u64("shared_expert_intermediate_size") > 0) {
          const uint64_t S = u64("shared_expert_intermediate_size");
          want[p + "mlp.shared_expert.gate_proj.weight"] = want[p + "mlp.shared_expert.up_proj.weight"] = {S, H};
          want[p + "mlp.shared_expert.down_proj.weight"] = {H, S};
          want[p + "mlp.shared_expert_gate.weight"] = {1, H};
        }
      } else {
        const uint64_t I = u64("intermediate_size");
        want[p + "mlp.gate_proj.weight"] = want[p + "mlp.up_proj.weight"] = {I, H};
        want[p + "mlp.down_proj.weight"] = {H, I};
      }
      if (c.family == "gemma")
        want[p + "pre_feedforward_layernorm.weight"] = want[p + "post_feedforward_layernorm.weight"] = {H};
    }
    for (const auto& [name, shape] : want) {
      const auto* t = ck->find(name);
      ASSERT_NE(t, nullptr) << "missing " << name;
      EXPECT_EQ(t->shape, shape) << name;
    }
    EXPECT_EQ(ck->tensors().size(), want.size()) << "the checkpoint holds tensors the config does not explain";

    // norm_weight_offset: zero-centred norm weights (fixture: 1-D norm params got
    // += 0.1*N(0,1) on top of their init, which is 0 for (1+w) norms, 1 otherwise).
    auto w = safetensors::to_f32(*ck->find("model.layers.0.input_layernorm.weight"));
    ASSERT_TRUE(w.ok());
    double mean = 0;
    for (float x : *w) mean += x;
    mean /= static_cast<double>(w->size());
    const bool offset = f.value("norm_weight_offset", false) || c.family == "qwen3next";  // (1 + w) norms
    EXPECT_NEAR(mean, offset ? 0.0 : 1.0, 0.1) << "norm_weight_offset=" << offset;
  }
  EXPECT_TRUE(checked.count("llama") && checked.count("qwen3") && checked.count("qwen3_next") && checked.count("gemma3_text"))
      << "the served fixtures were not checked";
}

// GGUF tensor name for a llama HF tensor name (llama.cpp's convention).
std::string gguf_name(const std::string& hf) {
  static const std::pair<const char*, const char*> kMap[] = {
      {"self_attn.q_proj", "attn_q"},  {"self_attn.k_proj", "attn_k"},     {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"}, {"mlp.gate_proj", "ffn_gate"}, {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},  {"input_layernorm", "attn_norm"},   {"post_attention_layernorm", "ffn_norm"}};
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "lm_head.weight") return "output.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  const std::string pre = "model.layers.";
  const size_t dot = hf.find('.', pre.size());
  const std::string layer = hf.substr(pre.size(), dot - pre.size());
  std::string rest = hf.substr(dot + 1);
  for (const auto& [from, to] : kMap)
    if (rest.rfind(from, 0) == 0) return "blk." + layer + "." + to + rest.substr(std::strlen(from));
  return "";
}

TEST(CheckpointSafetensors, LlamaValuesEqualBf16Gguf) {
  MEMRA_REQUIRE_FIXTURES();
  auto ck = Checkpoint::open(fixture("models/llama").string());
  auto gg = gguf::File::open(fixture("gguf/llama/llama-BF16.gguf").string());
  auto cfg = memra::testing::hf_config(fixture("models/llama").string());
  ASSERT_TRUE(ck.ok() && gg.ok() && cfg.ok());
  const int64_t hd = memra::testing::family_keys(*cfg).at("head_dim").get<int64_t>();
  size_t compared = 0, permuted = 0;
  for (const auto& t : ck->tensors()) {
    SCOPED_TRACE(t.name);
    const std::string gname = gguf_name(t.name);
    const gguf::Tensor* g = gg->find_tensor(gname);
    ASSERT_NE(g, nullptr) << "no GGUF tensor " << gname;
    ASSERT_EQ(g->info->shape(), t.shape);
    auto a = safetensors::to_f32(t);
    auto b = gg->dequantize(*g);
    ASSERT_TRUE(a.ok() && b.ok());
    const bool qk = gname.find("attn_q.") != std::string::npos || gname.find("attn_k.") != std::string::npos;
    const int64_t cols = t.shape.size() == 2 ? static_cast<int64_t>(t.shape[1]) : 1;
    const int64_t rows = static_cast<int64_t>(t.n_elements) / cols;
    for (int64_t r = 0; r < rows; ++r) {
      // llama.cpp permutes q/k rows per head: GGUF row h*hd + 2i + j holds HF row h*hd + j*hd/2 + i.
      int64_t src = r;
      if (qk) {
        const int64_t h = r / hd, w = r % hd, i = w / 2, j = w % 2;
        src = h * hd + j * (hd / 2) + i;
      }
      ASSERT_EQ(0, std::memcmp(&(*b)[r * cols], &(*a)[src * cols], cols * 4)) << "row " << r;
    }
    permuted += qk;
    ++compared;
  }
  EXPECT_EQ(compared, gg->tensors().size());
  EXPECT_EQ(permuted, 4u);
}

TEST(CheckpointSafetensors, ShardedCheckpointOpensThroughIndex) {
  MEMRA_REQUIRE_FIXTURES();
  auto whole = Checkpoint::open(fixture("models/llama/model.safetensors").string());
  ASSERT_TRUE(whole.ok());
  // Split into three shards, round-robin, like save_pretrained's max_shard_size does.
  TempDir dir;
  std::vector<std::vector<StTensor>> shards(3);
  nlohmann::json weight_map = nlohmann::json::object();
  size_t i = 0;
  uint64_t total = 0;
  for (const auto& t : whole->tensors()) {
    const size_t s = i++ % 3;
    shards[s].push_back({t.name, safetensors::dtype_name(t.dtype), t.shape, {t.data, t.data + t.nbytes}});
    weight_map[t.name] = "model-0000" + std::to_string(s + 1) + "-of-00003.safetensors";
    total += t.nbytes;
  }
  for (size_t s = 0; s < 3; ++s)
    write_bytes(dir / ("model-0000" + std::to_string(s + 1) + "-of-00003.safetensors"), write_safetensors(shards[s], {{"format", "pt"}}));
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const std::string index_text = index.dump();
  write_bytes(dir / "model.safetensors.index.json", {index_text.begin(), index_text.end()});

  for (const std::string& path : {dir.path().string(), (dir / "model.safetensors.index.json").string()}) {
    auto ck = Checkpoint::open(path);
    ASSERT_TRUE(ck.ok()) << ck.error().message;
    EXPECT_EQ(ck->shard_paths().size(), 3u);
    EXPECT_EQ(nlohmann::json::parse(ck->index_metadata_json()).at("total_size").get<uint64_t>(), total);
    ASSERT_EQ(ck->tensors().size(), whole->tensors().size());
    for (const auto& t : whole->tensors()) {
      const auto* s = ck->find(t.name);
      ASSERT_NE(s, nullptr) << t.name;
      EXPECT_EQ(s->shape, t.shape);
      EXPECT_EQ(s->dtype, t.dtype);
      ASSERT_EQ(s->nbytes, t.nbytes);
      EXPECT_EQ(0, std::memcmp(s->data, t.data, t.nbytes)) << t.name;
      EXPECT_EQ(ck->shard_paths()[s->shard], (dir / weight_map[t.name].get<std::string>()).string());
    }
  }

  // An index that lists a tensor its shard lacks, or a shard outside the directory.
  auto rewrite_index = [&](const nlohmann::json& wm) {
    const std::string text = nlohmann::json{{"weight_map", wm}}.dump();
    write_bytes(dir / "model.safetensors.index.json", {text.begin(), text.end()});
    return Checkpoint::open(dir.path().string());
  };
  auto wm = weight_map;
  wm["model.layers.9.extra.weight"] = "model-00001-of-00003.safetensors";
  auto r1 = rewrite_index(wm);
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.error().message.find("model.layers.9.extra.weight"), std::string::npos) << r1.error().message;
  wm = weight_map;
  wm.erase(wm.begin());
  auto r2 = rewrite_index(wm);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().message.find("does not list"), std::string::npos) << r2.error().message;
  wm = weight_map;
  wm[wm.begin().key()] = "../model-00001-of-00003.safetensors";
  auto r3 = rewrite_index(wm);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.error().message.find("plain file name"), std::string::npos) << r3.error().message;
}

TEST(CheckpointSafetensors, FloatDtypesConvertExactly) {
  const float f32[3] = {1.5f, -0.0f, 3.0e-39f};
  std::vector<uint8_t> f32b(12), f16b, bf16b, f8b = {0x38, 0xb8, 0x7e, 0x01}, i32b(8, 0);
  std::memcpy(f32b.data(), f32, 12);
  for (uint16_t h : {quant::f32_to_fp16(0.5f), quant::f32_to_fp16(-65504.0f), static_cast<uint16_t>(0x0001)})
    f16b.push_back(static_cast<uint8_t>(h)), f16b.push_back(static_cast<uint8_t>(h >> 8));
  for (uint16_t h : {quant::f32_to_bf16(1.0f), quant::f32_to_bf16(-2.5f)})
    bf16b.push_back(static_cast<uint8_t>(h)), bf16b.push_back(static_cast<uint8_t>(h >> 8));
  TempDir dir;
  write_bytes(dir / "t.safetensors", write_safetensors({{"f32", "F32", {3}, f32b}, {"f16", "F16", {3}, f16b},
                                                         {"bf16", "BF16", {2}, bf16b}, {"f8", "F8_E4M3", {2, 2}, f8b},
                                                         {"i32", "I32", {2}, i32b}}));
  auto f = safetensors::File::open((dir / "t.safetensors").string());
  ASSERT_TRUE(f.ok()) << f.error().message;
  auto get = [&](const char* n) { return safetensors::to_f32(*f->find(n)); };
  EXPECT_EQ(*get("f32"), (std::vector<float>{1.5f, -0.0f, 3.0e-39f}));
  EXPECT_EQ(*get("f16"), (std::vector<float>{0.5f, -65504.0f, std::ldexp(1.0f, -24)}));
  EXPECT_EQ(*get("bf16"), (std::vector<float>{1.0f, -2.5f}));
  EXPECT_EQ(*get("f8"), (std::vector<float>{1.0f, -1.0f, 448.0f, std::ldexp(1.0f, -9)}));
  auto i32 = get("i32");
  ASSERT_FALSE(i32.ok());
  EXPECT_EQ(i32.error().code, ErrorCode::unsupported);
  EXPECT_NE(i32.error().message.find("I32"), std::string::npos);
}

}  // namespace
}  // namespace memra::testing
