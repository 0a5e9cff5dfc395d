// The run the pipeline tests (CPU and CUDA) compare between one backend and the
// stages: every prefill row of a prompt, then greedy decode rows fed back.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "host/engine/engine.hpp"
#include "host/engine/sampler.hpp"
#include "tests/engine/pipeline_test_models.hpp"
#include "tests/support/build_plugins.hpp"

namespace memra::pipeline_test {

// n token ids in [0, 1000], from `seed`.
inline std::vector<int32_t> test_prompt(size_t n, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, 1000);
  std::vector<int32_t> p;
  for (size_t i = 0; i < n; ++i) p.push_back(tok(rng));
  return p;
}

// The logits of one decode step (token 7) after `prompt`, which must fill two KV blocks,
// with the sequence's first block copied over its second before it when `copy`: what the
// copy_kv_block tests compare between one backend and pipeline stages.
inline std::vector<float> decode_after_block_copy(engine::Engine& e, const std::vector<int32_t>& prompt, bool copy) {
  const int32_t seq = e.open_sequence();
  engine::StepRequest req{seq, prompt, false, true};
  if (auto o = e.step({&req, 1}); !o.ok()) {
    ADD_FAILURE() << "prefill: " << o.error().message;
    return {};
  }
  const auto blocks = e.sequence_blocks(seq);
  if (blocks.size() != 2u) {
    ADD_FAILURE() << "the prompt fills " << blocks.size() << " KV blocks, not 2";
    return {};
  }
  if (copy)
    if (auto c = e.copy_kv_block(0, blocks[0], blocks[1]); !c.ok()) {
      ADD_FAILURE() << "copy_kv_block: " << c.error().message;
      return {};
    }
  const int32_t tok = 7;
  engine::StepRequest d{seq, {&tok, 1}, false};
  auto o = e.step({&d, 1});
  if (!o.ok()) {
    ADD_FAILURE() << "decode: " << o.error().message;
    return {};
  }
  return (*o)[0];
}

// Every prefill row, then `steps` greedy decode rows (each fed back); with `handoffs`,
// the pipeline's hand-off count after each decode step.
inline std::vector<std::vector<float>> prefill_and_decode(engine::Engine& e, const std::vector<int32_t>& prompt, int steps,
                                                          std::vector<int64_t>* handoffs = nullptr) {
  const int32_t seq = e.open_sequence();
  engine::StepRequest req{seq, prompt, true, true};
  auto out = e.step({&req, 1});
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  if (!out) return {};
  std::vector<std::vector<float>> rows = *out;
  for (int s = 0; s < steps; ++s) {
    const int32_t tok = engine::argmax(rows.back());
    engine::StepRequest d{seq, {&tok, 1}, false};
    auto o = e.step({&d, 1});
    EXPECT_TRUE(o.ok()) << (o.ok() ? "" : o.error().message);
    if (!o) break;
    rows.push_back((*o)[0]);
    if (handoffs) handoffs->push_back(e.backend().stats().handoffs);
  }
  e.close_sequence(seq);
  return rows;
}

// The model at `path` as a source, widened to `widen_to` layers when > 0 (null after a
// test failure).
inline std::unique_ptr<engine::ModelSource> open_source(const std::filesystem::path& path, int64_t widen_to = 0) {
  auto src = engine::open_model_source(path.string(), testing::build_plugins());
  EXPECT_TRUE(src.ok()) << path << ": " << (src.ok() ? "" : src.error().message);
  if (!src) return nullptr;
  if (widen_to) widen(**src, widen_to);
  return std::move(*src);
}

inline std::unique_ptr<engine::Engine> make_engine(std::unique_ptr<engine::ModelSource> src, const engine::EngineOptions& eo) {
  if (!src) return nullptr;
  auto e = engine::Engine::create(std::move(src), testing::build_plugins(), eo);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e ? std::move(*e) : nullptr;
}

}  // namespace memra::pipeline_test
