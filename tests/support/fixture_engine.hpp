// A fixture model as the engine tests use it: an Engine over this build's plugins, and
// the transformers reference a fixture directory carries (reference.json + .bin: the
// prompt, greedy ids and f32 logits of the prefill and of each greedy step).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "host/engine/engine.hpp"
#include "tests/support/build_plugins.hpp"

namespace memra::testing {

// The engine over `path` (HF directory, .gguf or .memra), or null after a test failure.
inline std::unique_ptr<engine::Engine> open_engine(const std::filesystem::path& path, const engine::EngineOptions& eo = {}) {
  auto src = engine::open_model_source(path.string(), build_plugins());
  EXPECT_TRUE(src.ok()) << (src.ok() ? "" : src.error().message);
  if (!src) return nullptr;
  auto e = engine::Engine::create(std::move(*src), build_plugins(), eo);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
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

inline float row_max_abs(const float* r, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(r[i]));
  return m;
}

// max |got - ref| / max |ref| over one row.
inline double max_rel_diff(const std::vector<float>& got, const float* ref, size_t vocab) {
  const double scale = row_max_abs(ref, vocab);
  double worst = 0;
  for (size_t v = 0; v < vocab; ++v) worst = std::max(worst, std::fabs(got[v] - ref[v]) / scale);
  return worst;
}

}  // namespace memra::testing
