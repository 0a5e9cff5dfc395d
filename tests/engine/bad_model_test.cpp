// Bad models are refused with one clear error before the engine allocates its
// KV cache: an unknown architecture, tensors that do not match the config, a
// missing tokenizer. Each case is a fixture copy with one thing broken.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host/engine/engine.hpp"
#include "host/engine/text_model.hpp"
#include "tests/engine/test_plugins.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kLlama = fs::path(MEMRA_FIXTURES_DIR) / "models/llama";

// A copy of the llama fixture whose config.json is edited by `edit`.
fs::path broken_copy(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  const fs::path dir = fs::temp_directory_path() / ("memra-bad-model-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& f : fs::directory_iterator(kLlama)) fs::copy(f.path(), dir / f.path().filename());
  auto config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  edit(config);
  std::ofstream(dir / "config.json") << config.dump(2);
  return dir;
}

std::string load_error(const fs::path& dir) {
  auto src = memra::engine::open_model_source(dir.string(), test_plugins());
  if (!src) return src.error().message;
  auto e = memra::engine::Engine::create(std::move(*src), test_plugins(), {});
  return e ? std::string() : e.error().message;
}

}  // namespace

TEST(EngineBadModel, UnknownArchitectureIsNamed) {
  if (!fs::exists(kLlama)) GTEST_SKIP() << "fixtures absent";
  const auto dir = broken_copy("arch", [](nlohmann::json& c) { c["architectures"] = {"FooForCausalLM"}; });
  const std::string err = load_error(dir);
  EXPECT_NE(err.find("FooForCausalLM"), std::string::npos) << err;
  fs::remove_all(dir);
}

TEST(EngineBadModel, TensorsThatDoNotMatchTheConfig) {
  if (!fs::exists(kLlama)) GTEST_SKIP() << "fixtures absent";
  const auto dir = broken_copy("shape", [](nlohmann::json& c) { c["intermediate_size"] = 768; });
  const std::string err = load_error(dir);
  EXPECT_NE(err.find("ffn_"), std::string::npos) << err;
  EXPECT_NE(err.find("does not match"), std::string::npos) << err;
  fs::remove_all(dir);
}

TEST(EngineBadModel, MoreLayersThanTheCheckpointHas) {
  if (!fs::exists(kLlama)) GTEST_SKIP() << "fixtures absent";
  const auto dir = broken_copy("layers", [](nlohmann::json& c) { c["num_hidden_layers"] = 3; });
  const std::string err = load_error(dir);
  EXPECT_NE(err.find("blk.2."), std::string::npos) << err;
  fs::remove_all(dir);
}

TEST(EngineBadModel, MissingTokenizerIsNamed) {
  if (!fs::exists(kLlama)) GTEST_SKIP() << "fixtures absent";
  const auto dir = broken_copy("tok", [](nlohmann::json&) {});
  fs::remove(dir / "tokenizer.json");
  auto src = memra::engine::open_model_source(dir.string(), test_plugins());
  ASSERT_TRUE(src.ok());
  auto text = memra::engine::load_text_model(dir.string(), (*src)->config);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("tokenizer.json"), std::string::npos) << text.error().message;
  fs::remove_all(dir);
}
