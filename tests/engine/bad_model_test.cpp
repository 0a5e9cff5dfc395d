// Bad models are refused with one clear error before the engine allocates its
// KV cache: an unknown architecture, tensors that do not match the config (a hybrid's
// layer kinds, conv kernel and head counts too), a missing tokenizer. Each case is a
// fixture copy with one thing broken.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "host/engine/engine.hpp"
#include "host/engine/text_model.hpp"
#include "tests/support/fixture_engine.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_models.hpp"

namespace fs = std::filesystem;

namespace {

using memra::testing::build_plugins;
using memra::testing::TempDir;

const fs::path kLlama = memra::testing::fixture("models/llama");

// A copy of a model (the llama fixture, in `tmp`) whose config.json is edited by `edit`.
fs::path broken_copy(const TempDir& tmp, const std::function<void(nlohmann::json&)>& edit, const fs::path& from = kLlama) {
  const fs::path dir = tmp.path();
  for (const auto& f : fs::directory_iterator(from))
    if (f.is_regular_file()) fs::copy(f.path(), dir / f.path().filename());
  auto config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  edit(config);
  std::ofstream(dir / "config.json") << config.dump(2);
  return dir;
}

std::string load_error(const fs::path& dir) {
  auto src = memra::engine::open_model_source(dir.string(), build_plugins());
  if (!src) return src.error().message;
  auto e = memra::engine::Engine::create(std::move(*src), build_plugins(), {});
  return e ? std::string() : e.error().message;
}

}  // namespace

TEST(EngineBadModel, UnknownArchitectureIsNamed) {
  MEMRA_SKIP_WITHOUT_FIXTURE(kLlama);
  const TempDir tmp("memra-bad-model-arch");
  const auto dir = broken_copy(tmp, [](nlohmann::json& c) { c["architectures"] = {"FooForCausalLM"}; });
  const std::string err = load_error(dir);
  EXPECT_NE(err.find("FooForCausalLM"), std::string::npos) << err;
}

TEST(EngineBadModel, TensorsThatDoNotMatchTheConfig) {
  MEMRA_SKIP_WITHOUT_FIXTURE(kLlama);
  const TempDir tmp("memra-bad-model-shape");
  const auto dir = broken_copy(tmp, [](nlohmann::json& c) { c["intermediate_size"] = 768; });
  const std::string err = load_error(dir);
  EXPECT_NE(err.find("ffn_"), std::string::npos) << err;
  EXPECT_NE(err.find("does not match"), std::string::npos) << err;
}

TEST(EngineBadModel, MoreLayersThanTheCheckpointHas) {
  MEMRA_SKIP_WITHOUT_FIXTURE(kLlama);
  const TempDir tmp("memra-bad-model-layers");
  const auto dir = broken_copy(tmp, [](nlohmann::json& c) { c["num_hidden_layers"] = 3; });
  const std::string err = load_error(dir);
  EXPECT_NE(err.find("blk.2."), std::string::npos) << err;
}

TEST(EngineBadModel, MissingTokenizerIsNamed) {
  MEMRA_SKIP_WITHOUT_FIXTURE(kLlama);
  const TempDir tmp("memra-bad-model-tok");
  const auto dir = broken_copy(tmp, [](nlohmann::json&) {});
  fs::remove(dir / "tokenizer.json");
  auto src = memra::engine::open_model_source(dir.string(), build_plugins());
  ASSERT_TRUE(src.ok());
  auto text = memra::engine::load_text_model(dir.string(), (*src)->config);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("tokenizer.json"), std::string::npos) << text.error().message;
}

// A hybrid (tests/models/qwen3_5-tiny: 3 DeltaNet layers then gated attention) whose config
// disagrees with its tensors is refused naming the first tensor that shows it.
TEST(EngineBadModel, HybridsWhoseConfigDisagreesWithTheirTensors) {
  const fs::path q35 = memra::testing::test_model("qwen3_5-tiny");
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* names;
  };
  const Case cases[] = {
      {"layer kinds", [](nlohmann::json& c) { c["layer_types"][0] = "full_attention"; }, "blk.0.attn_q.weight"},
      {"conv kernel", [](nlohmann::json& c) { c["linear_conv_kernel_dim"] = 3; }, "blk.0.ssm_conv1d.weight"},
      {"value heads", [](nlohmann::json& c) { c["linear_num_value_heads"] = 8; }, "blk.0.attn_qkv.weight"},
      {"key head size", [](nlohmann::json& c) { c["linear_key_head_dim"] = 64; }, "blk.0.attn_qkv.weight"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    const TempDir tmp("memra-bad-hybrid");
    const std::string err = load_error(broken_copy(tmp, k.edit, q35));
    std::cout << k.what << ": " << err << "\n";
    EXPECT_NE(err.find(k.names), std::string::npos) << err;
  }
}

// The MTP head's tensors are checked like the model's (tests/models/qwen3_5-mtp-tiny with its
// safetensors header edited in place): a transposed fc and a missing MLP matrix are refused
// at load, naming the tensor, whether or not the head drafts.
TEST(EngineBadModel, MtpTensorsThatDisagreeWithTheConfig) {
  const fs::path mtp = memra::testing::test_model("qwen3_5-mtp-tiny");
  if (!fs::exists(mtp / "model.safetensors")) GTEST_SKIP() << mtp << " absent";
  struct Case {
    const char *what, *from, *to, *names;
  };
  const Case cases[] = {
      {"fc transposed", "\"mtp.fc.weight\":{\"dtype\":\"BF16\",\"shape\":[128,256]",
       "\"mtp.fc.weight\":{\"dtype\":\"BF16\",\"shape\":[256,128]", "mtp.0.nextn.eh_proj.weight"},
      {"up_proj missing", "\"mtp.layers.0.mlp.up_proj.weight\"", "\"mtp.layers.0.mlp.up_proj.weighx\"", "mtp.0.ffn_up.weight"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    const TempDir tmp("memra-bad-mtp");
    const fs::path dir = broken_copy(tmp, [](nlohmann::json&) {}, mtp);
    std::string bytes;
    {
      std::ifstream in(dir / "model.safetensors", std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    const size_t at = bytes.find(k.from);
    ASSERT_NE(at, std::string::npos);
    ASSERT_EQ(std::string(k.from).size(), std::string(k.to).size());
    bytes.replace(at, std::string(k.from).size(), k.to);
    std::ofstream(dir / "model.safetensors", std::ios::binary | std::ios::trunc) << bytes;
    const std::string err = load_error(dir);
    std::cout << k.what << ": " << err << "\n";
    EXPECT_NE(err.find(k.names), std::string::npos) << err;
  }
}
