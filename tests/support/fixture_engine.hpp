// A fixture model as the engine tests use it: an Engine over this build's plugins, and
// the transformers reference a fixture directory carries (reference.json + .bin: the
// prompt, greedy ids and f32 logits of the prefill and of each greedy step).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "host/engine/engine.hpp"
#include "tests/support/build_plugins.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/logits.hpp"

namespace memra::testing {

// The engine over `path` (HF directory, .gguf or .memra) on `eo`'s backend, or null
// after a test failure naming why.
inline std::unique_ptr<engine::Engine> open_engine(const std::filesystem::path& path, const engine::EngineOptions& eo = {},
                                                   plugins::PluginHost& host = build_plugins()) {
  auto src = engine::open_model_source(path.string(), host);
  EXPECT_TRUE(src.ok()) << path << ": " << (src.ok() ? "" : src.error().message);
  if (!src) return nullptr;
  auto e = engine::Engine::create(std::move(*src), host, eo);
  EXPECT_TRUE(e.ok()) << path << ": " << (e.ok() ? "" : e.error().message);
  return e ? std::move(*e) : nullptr;
}

inline std::vector<float> read_f32(const std::filesystem::path& p, size_t offset_bytes, size_t count) {
  std::ifstream f(p, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset_bytes));
  std::vector<float> v(count);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(float)));
  EXPECT_TRUE(f.good()) << p;
  return v;
}

struct TransformersReference {
  std::vector<int32_t> input_ids, greedy_ids;
  size_t vocab = 0;
  std::vector<float> prefill;  // [input_ids][vocab]
  std::vector<float> steps;    // [greedy_ids][vocab]
};

// Whether `dir` holds a reference (tests skip with a message when it does not).
inline bool has_reference(const std::filesystem::path& dir) { return std::filesystem::exists(dir / "reference.json"); }

// The reference's prompt alone (the tests that only need a realistic prompt).
inline std::vector<int32_t> reference_prompt(const std::filesystem::path& dir) {
  return nlohmann::json::parse(std::ifstream(dir / "reference.json"))["input_ids"].get<std::vector<int32_t>>();
}

inline TransformersReference read_reference(const std::filesystem::path& dir) {
  const auto ref = nlohmann::json::parse(std::ifstream(dir / "reference.json"));
  TransformersReference r;
  r.input_ids = ref["input_ids"].get<std::vector<int32_t>>();
  r.greedy_ids = ref["greedy_ids"].get<std::vector<int32_t>>();
  r.vocab = ref["arrays"][0]["shape"][1].get<size_t>();
  r.prefill = read_f32(dir / "reference.bin", ref["arrays"][0]["offset_bytes"].get<size_t>(), r.input_ids.size() * r.vocab);
  r.steps = read_f32(dir / "reference.bin", ref["arrays"][1]["offset_bytes"].get<size_t>(), r.greedy_ids.size() * r.vocab);
  return r;
}

}  // namespace memra::testing

// In a test body: skip with a message when the fixture at `path` is absent.
#define MEMRA_SKIP_WITHOUT_FIXTURE(path)                                                              \
  do {                                                                                                \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "fixture " << (path) << " absent (expects ../shared/fixtures)"; \
  } while (0)
