// The SDK example family (sdk/examples/family-example: attention plus its own op
// example.decay_scan over RECURRENT state) as an engine model: its plugin beside this
// build's (for the f32 quant plugin), and a source with seeded random f32 weights. Kept
// for the process, like build_plugins().
#pragma once

#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "core/plugin_host/plugin_host.hpp"
#include "host/engine/model_source.hpp"
#include "tests/support/build_plugins.hpp"

namespace memra::testing {

constexpr int kRecurrentVocab = 16, kRecurrentDim = 8;

// tests/plugins builds it into <build>/lib/memra/test-plugins.
inline plugins::PluginHost& recurrent_plugins() {
  static plugins::PluginHost* host = [] {
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return discover_build_plugins({exe.parent_path() / ".." / "lib" / "memra" / "test-plugins"});
  }();
  return *host;
}

// `config_json` reaches plan_create as is: the family's refusal switches go there.
inline std::unique_ptr<engine::ModelSource> recurrent_source(const std::string& config_json = "{}") {
  auto s = std::make_unique<engine::ModelSource>();
  s->path = "family-example";
  s->format = "memra";
  s->config.family = "example";
  s->config.architecture = "ExampleRecurrentForCausalLM";
  s->config.vocab_size = kRecurrentVocab;
  s->config.hidden_size = kRecurrentDim;
  s->config.num_layers = 2;
  s->config.max_position_embeddings = 256;
  s->config_json = config_json;
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto add = [&](const std::string& name, int64_t rows) {
    std::vector<float>& data = s->f32.emplace_back(static_cast<size_t>(rows * kRecurrentDim));
    for (float& v : data) v = u(rng);
    memra_weight w{};
    w.struct_size = MEMRA_WEIGHT_STRUCT_SIZE;
    w.name = s->strings.emplace_back(name).c_str();
    w.quant = s->strings.emplace_back("f32").c_str();
    w.dtype = MEMRA_DTYPE_F32;
    w.ndim = 2;
    w.shape[0] = rows;
    w.shape[1] = kRecurrentDim;
    w.bytes = data.size() * sizeof(float);
    w.data = data.data();
    s->weights.push_back(w);
  };
  add("token_embd.weight", kRecurrentVocab);
  add("blk.0.attn_q.weight", kRecurrentDim);
  add("blk.0.attn_k.weight", kRecurrentDim);
  add("blk.0.attn_v.weight", kRecurrentDim);
  add("output.weight", kRecurrentVocab);
  return s;
}

}  // namespace memra::testing
