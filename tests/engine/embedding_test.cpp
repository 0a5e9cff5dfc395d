// Embeddings on every backend (tests/support/backends.hpp): the committed
// Qwen3-Embedding-shaped model (tests/models/qwen3-embedding-tiny, a bare Qwen3Model
// with sentence-transformers' last-token pooling and Normalize) against transformers'
// oracle (its reference.json), through the scheduler as the server runs it; and the
// batch-invariance contract: an input's vector is bitwise the same alone, batched,
// chunked and beside generation.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "host/engine/embedding_config.hpp"
#include "host/engine/embedding_vector.hpp"
#include "host/engine/scheduler.hpp"
#include "host/engine/text_model.hpp"
#include "repack/quant/fp_convert.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/fixture_engine.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_models.hpp"

namespace {

using namespace memra;
using namespace memra::engine;
using memra::testing::BackendTest;
namespace fs = std::filesystem;

float bf16_round(float v) { return memra::quant::bf16_to_f32(memra::quant::f32_to_bf16(v)); }

fs::path model_dir() { return memra::testing::test_model("qwen3-embedding-tiny"); }

struct Case {
  std::string text;
  std::vector<int32_t> input_ids;
  std::vector<double> embedding, embedding_64;
};

std::vector<Case> reference_cases() {
  const auto doc = nlohmann::json::parse(std::ifstream(model_dir() / "reference.json"));
  std::vector<Case> out;
  for (const auto& c : doc["cases"])
    out.push_back({c["text"].get<std::string>(), c["input_ids"].get<std::vector<int32_t>>(),
                   c["embedding"].get<std::vector<double>>(), c["embedding_64"].get<std::vector<double>>()});
  return out;
}

std::vector<std::vector<int32_t>> reference_inputs() {
  std::vector<std::vector<int32_t>> out;
  for (const Case& c : reference_cases()) out.push_back(c.input_ids);
  return out;
}

// Waits for a handle's end; the pooled vector (empty unless it ended with one).
SequenceUpdate wait_end(SequenceHandle& h) {
  SequenceUpdate u, last;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    h.wait(u, std::chrono::milliseconds(100));
    for (auto& t : u.tokens) last.tokens.push_back(t);
    if (u.finish != FinishReason::none) {
      last.finish = u.finish;
      last.error = u.error;
      last.embedding = u.embedding;
      return last;
    }
  }
  ADD_FAILURE() << "the sequence did not end in 120 s";
  return last;
}

SequenceRequest embedding_request(std::vector<int32_t> ids, Pooling pooling = Pooling::last_token) {
  SequenceRequest r;
  r.prompt = std::move(ids);
  r.embedding = pooling;
  return r;
}

SequenceRequest generation_request(int32_t first, int64_t tokens) {
  SequenceRequest r;
  for (int32_t i = 0; i < 9; ++i) r.prompt.push_back((first + 37 * i) % 1000);
  r.max_tokens = tokens;
  r.sampling.temperature = 0.0f;
  return r;
}

// Every input's pooled vector, all submitted at once (beside `generate` generation
// requests when > 0, whose tokens go to `generated`).
std::vector<std::vector<float>> embed_together(Scheduler& s, const std::vector<std::vector<int32_t>>& inputs, int generate = 0,
                                               std::vector<std::vector<int32_t>>* generated = nullptr,
                                               Pooling pooling = Pooling::last_token) {
  std::vector<std::shared_ptr<SequenceHandle>> gen, emb;
  for (int g = 0; g < generate; ++g) {
    auto h = s.submit(generation_request(100 + g, 24));
    EXPECT_TRUE(h.ok()) << h.error().message;
    if (h) gen.push_back(*h);
  }
  for (const auto& ids : inputs) {
    auto h = s.submit(embedding_request(ids, pooling));
    EXPECT_TRUE(h.ok()) << h.error().message;
    if (h) emb.push_back(*h);
  }
  std::vector<std::vector<float>> out;
  for (auto& h : emb) {
    SequenceUpdate u = wait_end(*h);
    EXPECT_EQ(u.finish, FinishReason::stop) << u.error;
    EXPECT_TRUE(u.tokens.empty());
    out.push_back(u.embedding);
  }
  for (auto& h : gen) {
    SequenceUpdate u = wait_end(*h);
    EXPECT_EQ(u.finish, FinishReason::length) << u.error;
    if (generated) {
      generated->emplace_back();
      for (const auto& t : u.tokens) generated->back().push_back(t.token);
    }
  }
  return out;
}

std::vector<std::vector<float>> embed_alone(Engine& e, const std::vector<std::vector<int32_t>>& inputs, SchedulerOptions so = {}) {
  Scheduler s(e, so);
  std::vector<std::vector<float>> out;
  for (const auto& ids : inputs) out.push_back(embed_together(s, {ids})[0]);
  return out;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class EngineEmbedding : public BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    engine_ = memra::testing::open_engine(model_dir(), memra::testing::engine_options(GetParam()));
    ASSERT_TRUE(engine_);
    ASSERT_EQ(engine_->hidden_width(), 256);
  }
  std::unique_ptr<Engine> engine_;
};

// The sentence-transformers files say: last-token pooling, then Normalize.
TEST(EmbeddingConfigTest, TheTestModelPoolsTheLastTokenAndNormalises) {
  auto c = read_embedding_config(model_dir(), 256);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->pooling, Pooling::last_token);
  EXPECT_TRUE((*c)->normalize);
  // A generation model ships no modules.json: not an embedding model.
  auto none = read_embedding_config(memra::testing::test_model("tiny-random"), 64);
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_FALSE(none->has_value());
}

// A copy of the model's sentence-transformers files with `modules` and `pooling` as given.
void write_st_files(const memra::testing::TempDir& d, const std::string& modules, const std::string& pooling) {
  fs::create_directories(d.path() / "1_Pooling");
  d.write("modules.json", modules);
  d.write("1_Pooling/config.json", pooling);
}

const char* kModules =
    R"([{"idx":0,"path":"","type":"sentence_transformers.models.Transformer"},
        {"idx":1,"path":"1_Pooling","type":"sentence_transformers.models.Pooling"}])";

TEST(EmbeddingConfigTest, MeanPoolingWithoutNormalizeIsRead) {
  memra::testing::TempDir d;
  write_st_files(d, kModules, R"({"word_embedding_dimension":256,"pooling_mode_mean_tokens":true,"pooling_mode_lasttoken":false})");
  auto c = read_embedding_config(d.path(), 256);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->pooling, Pooling::mean);
  EXPECT_FALSE((*c)->normalize);
}

TEST(EmbeddingConfigTest, WhatMemraCannotComputeIsRefusedNamingTheFileAndMode) {
  struct Bad {
    std::string modules, pooling, says;
  };
  const std::string dense = R"([{"idx":0,"path":"","type":"sentence_transformers.models.Transformer"},
        {"idx":1,"path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
        {"idx":2,"path":"2_Dense","type":"sentence_transformers.models.Dense"}])";
  const std::string last = R"({"pooling_mode_lasttoken":true})";
  for (const Bad& b : std::vector<Bad>{
           {kModules, R"({"pooling_mode_cls_token":true})", "pooling_mode_cls_token is not supported"},
           {kModules, R"({"pooling_mode_max_tokens":true})", "pooling_mode_max_tokens is not supported"},
           {kModules, R"({"pooling_mode_lasttoken":true,"pooling_mode_mean_tokens":true})", "sets 2 pooling modes"},
           {kModules, R"({"pooling_mode_mean_tokens":true,"include_prompt":false})", "include_prompt false"},
           {kModules, R"({"pooling_mode_lasttoken":true,"word_embedding_dimension":128})", "word_embedding_dimension 128"},
           {dense, last, "sentence_transformers.models.Dense"},
           {R"([{"idx":0,"path":"","type":"sentence_transformers.models.Transformer"}])", last, "has no sentence_transformers.models.Pooling"},
           {"{", last, "not valid JSON"},
       }) {
    memra::testing::TempDir d;
    write_st_files(d, b.modules, b.pooling);
    auto c = read_embedding_config(d.path(), 256);
    ASSERT_FALSE(c.ok()) << b.says;
    EXPECT_NE(c.error().message.find(b.says), std::string::npos) << c.error().message;
    EXPECT_NE(c.error().message.find(d.path().string()), std::string::npos) << c.error().message;
  }
}

// memra's tokenizer appends <|endoftext|> as the HF tokenizers library does (TemplateProcessing).
TEST(EmbeddingTokens, TheTokenizerGivesTheReferenceIds) {
  auto tok = load_tokenizer(model_dir().string());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  for (const Case& c : reference_cases()) EXPECT_EQ((*tok)->encode(c.text), c.input_ids) << c.text;
}

// The oracle: transformers' last hidden state of the appended EOS, L2-normalised (and
// its first 64 dimensions renormalised: OpenAI's `dimensions`).
TEST_P(EngineEmbedding, EveryReferenceCaseMatchesTransformers) {
  Scheduler s(*engine_, {});
  const std::vector<Case> cases = reference_cases();
  ASSERT_FALSE(cases.empty());
  double worst_diff = 0, worst_cos = 1, worst_diff_64 = 0;
  for (const Case& c : cases) {
    const std::vector<float> pooled = embed_together(s, {c.input_ids})[0];
    ASSERT_EQ(pooled.size(), c.embedding.size()) << c.text;
    for (const auto& [dims, want, worst] : {std::tuple{int64_t{0}, &c.embedding, &worst_diff}, std::tuple{int64_t{64}, &c.embedding_64, &worst_diff_64}}) {
      const std::vector<float> got = client_embedding(pooled, dims, true);
      ASSERT_EQ(got.size(), want->size()) << c.text;
      double dot = 0, gn = 0, wn = 0, diff = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        dot += got[i] * (*want)[i];
        gn += static_cast<double>(got[i]) * got[i];
        wn += (*want)[i] * (*want)[i];
        diff = std::max(diff, std::abs(got[i] - (*want)[i]));
      }
      const double cosine = dot / std::sqrt(gn * wn);
      EXPECT_GE(cosine, memra::testing::kBf16EmbeddingCosine) << c.text << " dims " << dims;
      EXPECT_LE(diff, memra::testing::kBf16EmbeddingMaxDiff) << c.text << " dims " << dims;
      *worst = std::max(*worst, diff);
      if (dims == 0) worst_cos = std::min(worst_cos, cosine);
    }
  }
  std::printf("[ measured ] %s: worst max |diff| %.3g (dimensions 64: %.3g), worst cosine 1 - %.3g over %zu cases\n",
              memra::testing::backend_name(GetParam()), worst_diff, worst_diff_64, 1 - worst_cos, cases.size());
}

// Batch invariance: alone, all together, in 5-token prefill chunks, and beside three
// generating sequences (whose tokens are also those they get without the embeddings).
TEST_P(EngineEmbedding, AVectorIsBitwiseTheSameAloneBatchedChunkedAndBesideGeneration) {
  const auto inputs = reference_inputs();
  const auto alone = embed_alone(*engine_, inputs);
  SchedulerOptions chunked;
  chunked.max_step_tokens = 5;
  std::vector<std::vector<int32_t>> gen_alone, gen_beside;
  {
    Scheduler s(*engine_, {});
    embed_together(s, {}, 3, &gen_alone);
  }
  std::vector<std::vector<float>> batched, small_chunks, beside;
  {
    Scheduler s(*engine_, {});
    batched = embed_together(s, inputs);
  }
  small_chunks = embed_alone(*engine_, inputs, chunked);
  {
    Scheduler s(*engine_, chunked);
    beside = embed_together(s, inputs, 3, &gen_beside);
  }
  ASSERT_EQ(alone.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(alone[i].size(), 256u);
    EXPECT_TRUE(bitwise_equal(alone[i], batched[i])) << "case " << i << " batched";
    EXPECT_TRUE(bitwise_equal(alone[i], small_chunks[i])) << "case " << i << " in 5-token chunks";
    EXPECT_TRUE(bitwise_equal(alone[i], beside[i])) << "case " << i << " beside generation";
  }
  EXPECT_EQ(gen_alone, gen_beside);
}

// Mean pooling (the other mode memra computes): the mean of every row, the same in
// chunks, and what the engine's hidden rows average to.
TEST_P(EngineEmbedding, MeanPoolingAveragesEveryRowWhateverTheChunks) {
  const auto inputs = reference_inputs();
  Scheduler whole(*engine_, {});
  const auto pooled = embed_together(whole, inputs, 0, nullptr, Pooling::mean);
  SchedulerOptions chunked;
  chunked.max_step_tokens = 4;
  Scheduler in_chunks(*engine_, chunked);
  const auto pooled_chunked = embed_together(in_chunks, inputs, 0, nullptr, Pooling::mean);
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(pooled[i], pooled_chunked[i])) << "case " << i;
    const int32_t seq = engine_->open_sequence();
    StepRequest r;
    r.seq = seq;
    r.tokens = inputs[i];
    r.all_logits = true;
    r.prompt = true;
    auto rows = engine_->step_hidden(std::span<const StepRequest>(&r, 1));
    ASSERT_TRUE(rows.ok()) << rows.error().message;
    ASSERT_EQ(rows->size(), inputs[i].size());
    engine_->close_sequence(seq);
    for (size_t k = 0; k < 256; ++k) {
      double sum = 0;
      for (const auto& row : *rows) sum += row[k];
      EXPECT_NEAR(pooled[i][k], sum / static_cast<double>(rows->size()), 1e-6) << "case " << i << " dim " << k;
    }
    // The last row is what last-token pooling gives.
    EXPECT_TRUE(bitwise_equal(rows->back(), embed_alone(*engine_, {inputs[i]})[0])) << "case " << i;
  }
}

// The bare model still generates: with tied embeddings the logits are the hidden state
// times the token embedding table (the family binds token_embd.weight as the output).
TEST_P(EngineEmbedding, TheBareModelGeneratesWithTiedEmbeddings) {
  const std::vector<int32_t> ids = reference_cases()[0].input_ids;
  const memra_weight* table = nullptr;
  for (const memra_weight& w : engine_->source().weights)
    if (std::string(w.name) == "token_embd.weight") table = &w;
  ASSERT_NE(table, nullptr);
  ASSERT_EQ(std::string(table->quant), "bf16");
  ASSERT_EQ(table->shape[0], 1024);
  auto row = [&](int64_t v, int64_t k) {
    uint16_t bits = 0;
    std::memcpy(&bits, static_cast<const char*>(table->data) + (v * 256 + k) * 2, 2);
    const uint32_t f = static_cast<uint32_t>(bits) << 16;
    float out = 0;
    std::memcpy(&out, &f, 4);
    return out;
  };
  StepRequest r;
  r.tokens = ids;
  r.prompt = true;
  r.seq = engine_->open_sequence();
  auto hidden = engine_->step_hidden(std::span<const StepRequest>(&r, 1));
  ASSERT_TRUE(hidden.ok()) << hidden.error().message;
  engine_->close_sequence(r.seq);
  r.seq = engine_->open_sequence();
  auto logits = engine_->step(std::span<const StepRequest>(&r, 1));
  ASSERT_TRUE(logits.ok()) << logits.error().message;
  engine_->close_sequence(r.seq);
  ASSERT_EQ(hidden->size(), 1u);
  ASSERT_EQ(logits->size(), 1u);
  ASSERT_EQ((*logits)[0].size(), 1024u);
  double scale = 0, worst = 0;
  for (int64_t v = 0; v < 1024; ++v) {
    double dot = 0;
    // The head's activations are the hidden state rounded to bf16 (bf16 weights).
    for (int64_t k = 0; k < 256; ++k) dot += static_cast<double>(bf16_round((*hidden)[0][static_cast<size_t>(k)])) * row(v, k);
    worst = std::max(worst, std::abs(dot - (*logits)[0][static_cast<size_t>(v)]));
    scale = std::max(scale, std::abs(dot));
  }
  EXPECT_LE(worst, 1e-5 * scale) << "logits are not hidden x token_embd";
  // And the scheduler generates from it.
  Scheduler s(*engine_, {});
  std::vector<std::vector<int32_t>> generated;
  embed_together(s, {}, 1, &generated);
  ASSERT_EQ(generated.size(), 1u);
  EXPECT_EQ(generated[0].size(), 24u);
}

// Admission, cancellation and the KV: a queued embedding waits for room, can be
// cancelled there, and a delivered one leaves no KV behind; what can never run is
// refused at submit.
TEST_P(EngineEmbedding, EmbeddingsAreAdmittedCancelledAndFreeTheirKv) {
  SchedulerOptions one;
  one.max_running = 1;
  Scheduler s(*engine_, one);
  // As long as the context allows, so it is still running after the 50 ms below even on a
  // GPU (200 tokens of this 2-layer model take ~40 ms on an H200).
  auto gen = s.submit(generation_request(5, engine_->max_context() - 16));
  ASSERT_TRUE(gen.ok());
  ASSERT_TRUE((*gen)->wait_admitted(std::chrono::seconds(30)));
  auto queued = s.submit(embedding_request(reference_inputs()[0]));
  ASSERT_TRUE(queued.ok());
  EXPECT_FALSE((*queued)->wait_admitted(std::chrono::milliseconds(50)));  // behind the generation
  (*queued)->cancel();
  SequenceUpdate u = wait_end(**queued);
  EXPECT_EQ(u.finish, FinishReason::cancelled);
  EXPECT_TRUE(u.embedding.empty());
  (*gen)->cancel();
  EXPECT_EQ(wait_end(**gen).finish, FinishReason::cancelled);
  const auto v = embed_together(s, reference_inputs());
  EXPECT_EQ(v.size(), reference_inputs().size());
  for (int i = 0; i < 100 && s.stats().kv_blocks_free != s.stats().kv_blocks_total; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(s.stats().kv_blocks_free, s.stats().kv_blocks_total);
  EXPECT_EQ(s.stats().running, 0);

  EXPECT_FALSE(s.submit(embedding_request({})).ok());
  EXPECT_FALSE(s.submit(embedding_request({1, 1024})).ok());
  auto too_long = s.submit(embedding_request(std::vector<int32_t>(static_cast<size_t>(engine_->max_context()) + 1, 7)));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().message.find("exceeds the context"), std::string::npos) << too_long.error().message;
  // A whole context fits: an embedding reserves no generated tokens.
  EXPECT_TRUE(s.submit(embedding_request(std::vector<int32_t>(static_cast<size_t>(engine_->max_context()), 7))).ok());
}

MEMRA_INSTANTIATE_BACKENDS(EngineEmbedding);

}  // namespace
