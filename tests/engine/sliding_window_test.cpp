// Window-only KV for sliding-window layers (docs/ARCHITECTURE.md, "State manager"): the
// layers of a sliding window keep their own KV pool, sized for the window, and give back
// every block no later token reads. A suite over backends on the qwen3 fixture with a
// window of 8 on layer 0 (tests/models/qwen3-sliding: its config and transformers'
// logits, made by tests/models/make_qwen3_sliding.py), 4-token blocks so blocks are
// dropped over and over:
//  - every logits row of a 48-token sequence (prefilled in chunks, then decoded) is
//    transformers' within the float32 bound, and the sliding pool holds only the window's
//    blocks while the full-attention pool holds them all;
//  - with layer 0 alone, row p is the full-attention model's row for tokens p-7..p alone
//    (the window's meaning, with no reference file);
//  - batching, chunking, fork and a rollback within the last step are bitwise invisible;
//  - a rollback past what the window dropped is refused by name, and the scheduler serves
//    concurrent requests with the tokens of one alone;
//  - the prefix cache keeps the sliding pool's blocks a continuation's window reads: a
//    multi-turn conversation hits it on every later turn, a prompt sharing only a beginning
//    the window had left hits less (or not at all), and every answer is bitwise a cold
//    engine's; cached sliding blocks yield when the pool runs short;
//  - speculative decoding (n-gram and a draft model that is itself a sliding model, whose
//    rollbacks span several one-token steps) gives plain decode's tokens and logprobs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "host/engine/draft_model.hpp"
#include "host/engine/engine.hpp"
#include "host/engine/scheduler.hpp"
#include "tests/engine/sequence_drain.hpp"
#include "tests/engine/speculative_gates.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/fixture_engine.hpp"
#include "tests/support/repacked_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_models.hpp"

namespace fs = std::filesystem;
using namespace memra::engine;
using memra::testing::bitwise_equal;
using memra::testing::rows_differing;

namespace {

constexpr int64_t kWindow = 8, kBlock = 4, kStep = 8;
// The float32 path (the fixture repacked to f32, f32 KV) against transformers' float32
// logits, relative to each row's max |logit| (repacked_fixture.hpp: the CPU is at ~1e-6).
constexpr double kF32Bound = 1e-4;

const fs::path kCommitted = memra::testing::test_model("qwen3-sliding");

// A checkpoint directory of the qwen3 fixture's weights and tokenizer with `config`,
// made once per variant name and process (f32: repacked to f32 weights), or empty when
// the fixture is absent.
fs::path model_variant(const std::string& name, const nlohmann::json& config, bool f32) {
  static std::map<std::string, std::unique_ptr<memra::testing::TempDir>> dirs;
  const fs::path fixture = memra::testing::fixture("models/qwen3");
  if (!fs::exists(fixture / "model.safetensors")) return {};
  auto& dir = dirs[name];
  if (!dir) {
    dir = std::make_unique<memra::testing::TempDir>("memra-sliding");
    for (const char* f : {"model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
      fs::copy_file(fixture / f, *dir / f);
    dir->write("config.json", config.dump(2));
  }
  return f32 ? memra::testing::repacked_fixture(dir->path(), "f32") : dir->path();
}

// The committed sliding model (window 8 on layer 0 of 2).
fs::path sliding_model(bool f32) {
  return model_variant("sliding", nlohmann::json::parse(std::ifstream(kCommitted / "config.json")), f32);
}

// Its first layer alone, sliding or full attention (f32 weights).
fs::path one_layer_model(const std::string& kind) {
  nlohmann::json c = nlohmann::json::parse(std::ifstream(kCommitted / "config.json"));
  c["num_hidden_layers"] = 1;
  c["layer_types"] = nlohmann::json::array({kind});
  return model_variant("one-" + kind, c, true);
}

// The 48 ids every test feeds: the fixture's prompt and greedy continuation.
std::vector<int32_t> input_ids() {
  const memra::testing::TransformersReference r = memra::testing::read_reference(memra::testing::fixture("models/qwen3"));
  std::vector<int32_t> ids = r.input_ids;
  ids.insert(ids.end(), r.greedy_ids.begin(), r.greedy_ids.end());
  return ids;
}

struct Reference {
  std::vector<int32_t> ids;
  size_t vocab = 0;
  std::vector<float> logits;  // [ids][vocab]
};

Reference read_sliding_reference() {
  const auto j = nlohmann::json::parse(std::ifstream(kCommitted / "reference.json"));
  Reference r;
  r.ids = j["input_ids"].get<std::vector<int32_t>>();
  r.vocab = j["arrays"][0]["shape"][1].get<size_t>();
  r.logits = memra::testing::read_f32(kCommitted / "reference.bin", 0, r.ids.size() * r.vocab);
  return r;
}


class SlidingWindow : public memra::testing::BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    if (sliding_model(false).empty()) GTEST_SKIP() << "fixture models/qwen3 absent (expects ../shared/fixtures)";
  }
  EngineOptions options(memra_dtype kv = MEMRA_DTYPE_F32) const {
    EngineOptions eo = memra::testing::engine_options(GetParam());
    eo.block_size = kBlock;
    eo.max_context = 64;
    eo.max_sequences = 4;
    eo.max_step_tokens = kStep;
    eo.kv_dtype = kv;
    return eo;
  }
};

// Steps `tokens` of `seq` in chunks of `chunk` (prompt rows), every row's logits.
std::vector<std::vector<float>> feed(Engine& e, int32_t seq, std::span<const int32_t> tokens, size_t chunk, bool prompt) {
  std::vector<std::vector<float>> rows;
  for (size_t at = 0; at < tokens.size(); at += chunk) {
    StepRequest r{seq, tokens.subspan(at, std::min(chunk, tokens.size() - at)), true, prompt};
    auto out = e.step({&r, 1});
    EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
    if (!out) return rows;
    for (auto& row : *out) rows.push_back(std::move(row));
  }
  return rows;
}

// Blocks a sequence still holds in a pool.
size_t held(const Engine& e, int32_t seq, int32_t pool) {
  size_t n = 0;
  for (int32_t b : e.sequence_blocks(seq, pool)) n += b >= 0;
  return n;
}

TEST_P(SlidingWindow, MatchesTransformersKeepingOnlyTheWindow) {
  if (!fs::exists(kCommitted / "reference.json")) GTEST_SKIP() << kCommitted << " has no reference (tests/models/make_qwen3_sliding.py)";
  const Reference ref = read_sliding_reference();
  ASSERT_EQ(ref.ids, input_ids()) << "the reference was made for other ids";
  const fs::path model = sliding_model(true);
  ASSERT_FALSE(model.empty());
  auto e = memra::testing::open_engine(model, options());
  ASSERT_TRUE(e);
  // Pool 0: the full-attention layer, every position; pool 1: layer 0's window.
  ASSERT_EQ(e->num_kv_pools(), 2);
  EXPECT_EQ(e->kv_pool_window(0), 0);
  EXPECT_EQ(e->kv_pool_window(1), kWindow);
  EXPECT_LT(e->kv_pool(1).num_blocks(), e->kv_pool(0).num_blocks()) << "the sliding pool is sized for its window";

  const int32_t seq = e->open_sequence();
  const std::span<const int32_t> ids(ref.ids);
  // 24 prompt tokens in chunks of 5, then 24 generated one at a time.
  std::vector<std::vector<float>> rows = feed(*e, seq, ids.subspan(0, 24), 5, true);
  size_t most_held = 0;
  for (size_t t = 24; t < ids.size(); ++t) {
    for (auto& row : feed(*e, seq, ids.subspan(t, 1), 1, false)) rows.push_back(std::move(row));
    most_held = std::max(most_held, held(*e, seq, 1));
  }
  ASSERT_EQ(rows.size(), ref.ids.size());
  double worst = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    worst = std::max(worst, memra::testing::max_rel_diff(rows[i], ref.logits.data() + i * ref.vocab, ref.vocab));
  std::cout << "[ qwen3-sliding ] " << memra::testing::backend_name(GetParam()) << ": max rel diff vs transformers " << worst << "\n";
  EXPECT_LE(worst, kF32Bound);
  // After a one-token step the pool keeps the window and the rollback margin (8 positions
  // here) before it: window + 8 positions, at most (window + 8 - 1) / block + 2 blocks.
  EXPECT_LE(most_held, static_cast<size_t>((kWindow + kStep - 1) / kBlock + 2));
  EXPECT_GT(most_held, 0u);
  EXPECT_EQ(held(*e, seq, 0), (ref.ids.size() + kBlock - 1) / kBlock);
  e->close_sequence(seq);
  for (int32_t p = 0; p < e->num_kv_pools(); ++p) EXPECT_EQ(e->kv_pool(p).num_free(), e->kv_pool(p).num_blocks()) << "pool " << p;
}

// The window's meaning, with no reference file: with one layer, the logits at position p
// depend on the tokens p - 7 .. p only, so the sliding model's row p (its history long
// dropped) is the full-attention model's last row for those 8 tokens alone (at
// positions 0..7: RoPE scores depend on relative positions only, so the rows agree to
// float rounding, far closer than a window of 7 or 9 tokens would). Rows before the
// window fills are the full model's bit for bit.
TEST_P(SlidingWindow, OneLayerWindowIsTheLastWindowTokens) {
  const std::vector<int32_t> ids = input_ids();
  auto sliding = memra::testing::open_engine(one_layer_model("sliding_attention"), options());
  auto full = memra::testing::open_engine(one_layer_model("full_attention"), options());
  ASSERT_TRUE(sliding && full);
  ASSERT_EQ(sliding->kv_pool_window(0), kWindow);
  const int32_t s = sliding->open_sequence(), f = full->open_sequence();
  const std::vector<std::vector<float>> rows = feed(*sliding, s, ids, 5, true);
  const std::vector<std::vector<float>> head = feed(*full, f, std::span(ids).subspan(0, kWindow), kWindow, true);
  ASSERT_EQ(rows.size(), ids.size());
  for (size_t p = 0; p < static_cast<size_t>(kWindow); ++p) EXPECT_TRUE(bitwise_equal(rows[p], head[p])) << "row " << p;
  double worst = 0, off_by_one = 1e9;
  for (size_t p = kWindow; p < ids.size(); p += 5) {
    for (int64_t n : {kWindow - 1, kWindow, kWindow + 1}) {
      const int32_t q = full->open_sequence();
      const std::vector<std::vector<float>> alone = feed(*full, q, std::span(ids).subspan(p + 1 - static_cast<size_t>(n), static_cast<size_t>(n)), 16, true);
      full->close_sequence(q);
      ASSERT_FALSE(alone.empty());
      const double d = memra::testing::max_rel_diff(rows[p], alone.back());
      if (n == kWindow) worst = std::max(worst, d);
      else off_by_one = std::min(off_by_one, d);
    }
  }
  std::cout << "[ one-layer window ] " << memra::testing::backend_name(GetParam()) << ": max rel diff vs the window alone " << worst
            << ", vs a window of 7 or 9 at least " << off_by_one << "\n";
  EXPECT_LE(worst, kF32Bound);
  EXPECT_GT(off_by_one, 100 * kF32Bound) << "a window one off should differ clearly";
}

// Batching, chunking, fork and rollback within the last step change no bit (f16 KV,
// bf16 weights: the serving defaults).
TEST_P(SlidingWindow, BatchingChunkingForkAndRollbackAreBitwise) {
  const std::vector<int32_t> all = input_ids();
  const std::span<const int32_t> ids(all);
  auto e = memra::testing::open_engine(sliding_model(false), options(MEMRA_DTYPE_F16));
  ASSERT_TRUE(e);
  // Alone: the prompt in one step, then one token per step.
  const int32_t a = e->open_sequence();
  std::vector<std::vector<float>> alone = feed(*e, a, ids.subspan(0, 24), 24, true);
  for (auto& row : feed(*e, a, ids.subspan(24), 1, false)) alone.push_back(std::move(row));
  // The sliding pool keeps the window and the rollback margin; the full pool every block.
  EXPECT_GT(held(*e, a, 1), 0u);
  EXPECT_LE(held(*e, a, 1), static_cast<size_t>((kWindow + kStep - 1) / kBlock + 2));
  EXPECT_EQ(held(*e, a, 0), (ids.size() + kBlock - 1) / kBlock);
  e->close_sequence(a);

  // Chunked by 3 and batched with another sequence (2 prompt tokens of its own) in every step.
  const int32_t b = e->open_sequence(), other = e->open_sequence();
  std::vector<std::vector<float>> batched;
  const std::vector<int32_t> noise(ids.rbegin(), ids.rend());
  for (size_t at = 0, step = 0; at < 40; ++step) {
    const bool prompt = at < 24;
    const size_t n = prompt ? std::min<size_t>(3, 24 - at) : 1;
    StepRequest r[2] = {{b, ids.subspan(at, n), true, prompt}, {other, std::span(noise).subspan((2 * step) % 46, 2), false, true}};
    auto out = e->step({r, 2});
    ASSERT_TRUE(out.ok()) << out.error().message;
    for (size_t k = 0; k < n; ++k) batched.push_back((*out)[k]);
    at += n;
  }
  const std::vector<std::vector<float>> head(alone.begin(), alone.begin() + static_cast<std::ptrdiff_t>(batched.size()));
  EXPECT_TRUE(bitwise_equal(head, batched)) << rows_differing(head, batched);

  // A fork continues bitwise as the original; a verify-like step of 6 generated tokens,
  // rolled back by 4 and stepped again, gives the same rows.
  auto fork = e->fork_sequence(b);
  ASSERT_TRUE(fork.ok()) << fork.error().message;
  const size_t from = batched.size();
  const std::vector<std::vector<float>> orig = feed(*e, b, ids.subspan(from, 6), 6, false);
  const std::vector<std::vector<float>> forked = feed(*e, *fork, ids.subspan(from, 6), 6, false);
  EXPECT_TRUE(bitwise_equal(orig, forked)) << rows_differing(orig, forked);
  const std::vector<std::vector<float>> want(alone.begin() + static_cast<std::ptrdiff_t>(from),
                                             alone.begin() + static_cast<std::ptrdiff_t>(from + 6));
  ASSERT_TRUE(e->truncate_sequence(b, static_cast<int64_t>(from + 2)).ok());
  const std::vector<std::vector<float>> again = feed(*e, b, ids.subspan(from + 2, 4), 1, false);
  const std::vector<std::vector<float>> tail(want.begin() + 2, want.end());
  EXPECT_TRUE(bitwise_equal(tail, again)) << rows_differing(tail, again);
  // A draft model's rollback of 7 (k = 7 < kStep) over several one-token steps: the
  // window alone would have dropped the block its next step reads, the margin kept it.
  ASSERT_TRUE(e->truncate_sequence(b, static_cast<int64_t>(from - 1)).ok());
  const std::vector<std::vector<float>> redo = feed(*e, b, ids.subspan(from - 1, 7), 1, false);
  const std::vector<std::vector<float>> last7(alone.begin() + static_cast<std::ptrdiff_t>(from - 1),
                                              alone.begin() + static_cast<std::ptrdiff_t>(from + 6));
  EXPECT_TRUE(bitwise_equal(last7, redo)) << rows_differing(last7, redo);

  // Past what the window dropped: refused by name.
  auto st = e->truncate_sequence(b, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("sliding window"), std::string::npos) << st.error().message;
  EXPECT_EQ(e->sequence_length(b), static_cast<int64_t>(from + 6)) << "a refused rollback keeps the sequence";
}

// The scheduler (per-pool admission) serves three concurrent requests with the tokens
// each gets alone (their prompts overlap, so later ones hit what earlier ones cached).
TEST_P(SlidingWindow, SchedulerServesConcurrentRequestsAsAlone) {
  const std::vector<int32_t> ids = input_ids();
  auto serve = [&](int n) {
    auto e = memra::testing::open_engine(sliding_model(false), options(MEMRA_DTYPE_F16));
    std::vector<test_support::DrainedSequence> out;
    if (!e) return out;
    EXPECT_TRUE(e->prefix_cache().enabled());
    SchedulerOptions so;
    so.max_step_tokens = kStep;
    Scheduler s(*e, so);
    std::vector<std::shared_ptr<SequenceHandle>> handles;
    for (int i = 0; i < n; ++i) {
      SequenceRequest r;
      r.prompt.assign(ids.begin() + i, ids.begin() + 20 + 3 * i);
      r.max_tokens = 24;
      r.cache_namespace = "t";
      auto h = s.submit(std::move(r));
      EXPECT_TRUE(h.ok()) << (h.ok() ? "" : h.error().message);
      if (h) handles.push_back(*h);
    }
    for (auto& h : handles) out.push_back(test_support::drain(*h));
    return out;
  };
  const auto together = serve(3);
  ASSERT_EQ(together.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    auto e = memra::testing::open_engine(sliding_model(false), options(MEMRA_DTYPE_F16));
    ASSERT_TRUE(e);
    Scheduler s(*e, SchedulerOptions{});
    SequenceRequest r;
    r.prompt.assign(ids.begin() + i, ids.begin() + 20 + 3 * i);
    r.max_tokens = 24;
    auto h = s.submit(std::move(r));
    ASSERT_TRUE(h.ok()) << h.error().message;
    const auto alone = test_support::drain(**h);
    EXPECT_EQ(alone.tokens.size(), 24u);
    EXPECT_EQ(alone, together[static_cast<size_t>(i)]);
  }
}

// The prefix cache on a model with a sliding pool (4-token blocks, a window of 8, steps of
// at most 8 tokens): each turn of a conversation (the last prompt, its answer and 5 new
// tokens) hits the last turn's prompt up to its last block boundary, whose window blocks the
// sequence still held when it offered them; greedy and seeded answers are bitwise a cold
// engine's. At the engine: a prompt read in steps of 4 had dropped its first blocks from the
// sliding pool when it was offered, so a hit takes only the window's blocks there, a prompt
// sharing only those first blocks misses, a sequence opened on the hit gives a cold
// sequence's logits, and the cache's sliding blocks yield one by one (the prefix then misses).
TEST_P(SlidingWindow, PrefixCacheHitsKeepTheWindowAndAreBitwiseCold) {
  const std::vector<int32_t> ids = input_ids();
  for (const bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "seeded sampling" : "greedy");
    auto warm = memra::testing::open_engine(sliding_model(false), options(MEMRA_DTYPE_F16));
    auto cold = memra::testing::open_engine(sliding_model(false), options(MEMRA_DTYPE_F16));
    ASSERT_TRUE(warm && cold);
    ASSERT_EQ(warm->num_kv_pools(), 2);
    SchedulerOptions so;
    so.max_step_tokens = kStep;
    Scheduler ws(*warm, so), cs(*cold, so);
    std::vector<int32_t> prompt(ids.begin(), ids.begin() + 14);
    int64_t last = 0;
    for (int turn = 0; turn < 4; ++turn) {
      SCOPED_TRACE("turn " + std::to_string(turn));
      SequenceRequest r;
      r.prompt = prompt;
      r.max_tokens = 6;
      r.sampling.temperature = sampled ? 0.8f : 0.0f;
      r.sampling.seed = 7 + static_cast<uint64_t>(turn);
      r.sampling.logprobs = true;
      SequenceRequest c = r;
      r.cache_namespace = "t";
      const auto got = test_support::drain(**ws.submit(r));
      const auto want = test_support::drain(**cs.submit(c));
      EXPECT_TRUE(got == want) << "cached and cold answers differ";
      EXPECT_EQ(want.cached, 0);
      EXPECT_EQ(got.cached, last / kBlock * kBlock) << "a turn hits the last turn's prompt up to its last block boundary";
      last = static_cast<int64_t>(prompt.size());
      prompt.insert(prompt.end(), got.tokens.begin(), got.tokens.end());
      for (int i = 0; i < 5; ++i) prompt.push_back(ids[static_cast<size_t>(20 + turn * 5 + i)]);
    }
  }

  auto e = memra::testing::open_engine(sliding_model(false), options(MEMRA_DTYPE_F16));
  ASSERT_TRUE(e);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 33);
  const int32_t a = e->open_sequence();
  // 28 tokens in steps of 4: the step at 24 drops sliding blocks 0 and 1 (no later token,
  // nor a rollback of up to kStep tokens, reads them).
  feed(*e, a, std::span<const int32_t>(prompt).first(28), 4, true);
  EXPECT_EQ(e->sequence_blocks(a, 1)[0], -1);
  EXPECT_EQ(e->sequence_blocks(a, 1)[1], -1);
  EXPECT_EQ(e->cache_prefix("t", std::span<const int32_t>(prompt).first(28), a), 28);
  e->close_sequence(a);
  // A prompt sharing blocks 0-2 only: a token at 12 reads positions 5-11 (blocks 1 and 2),
  // and block 1 is gone; shorter hits need block 0 or 1: a miss.
  std::vector<int32_t> early(prompt.begin(), prompt.begin() + 12);
  early.insert(early.end(), ids.begin() + 40, ids.begin() + 48);
  EXPECT_EQ(e->prefix_cache().lookup("t", early).blocks.size(), 0u);
  auto hit = e->prefix_cache().lookup("t", prompt);
  ASSERT_EQ(hit.tokens(kBlock), 28);
  ASSERT_EQ(hit.pool_blocks.size(), 1u);
  // A token at 28 reads positions 21-27: the sliding pool's blocks 5 and 6, none before.
  for (size_t b = 0; b < 7; ++b) EXPECT_EQ(hit.pool_blocks[0][b] >= 0, b >= 5) << "sliding block " << b;
  for (int32_t b : hit.blocks) EXPECT_GE(b, 0);
  const int32_t warm_seq = e->open_sequence(std::move(hit.blocks), hit.state, std::move(hit.pool_blocks));
  ASSERT_GE(warm_seq, 0);
  const int32_t cold_seq = e->open_sequence();
  const auto warm_rows = feed(*e, warm_seq, std::span<const int32_t>(prompt).subspan(28), kStep, true);
  const auto cold_rows = feed(*e, cold_seq, prompt, kStep, true);
  ASSERT_EQ(warm_rows.size(), 5u);
  ASSERT_EQ(cold_rows.size(), prompt.size());
  for (size_t i = 0; i < warm_rows.size(); ++i) EXPECT_TRUE(bitwise_equal(warm_rows[i], cold_rows[28 + i])) << "row " << 28 + i;
  e->close_sequence(warm_seq);
  e->close_sequence(cold_seq);
  // What the engine does when the sliding pool runs short: the cache gives its blocks there
  // back one at a time (blocks 2-6 of the prompt), keeping every entry and pool 0's blocks.
  const int32_t free_before = e->kv_pool(1).num_free();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(e->prefix_cache().evict_one(1)) << i;
  EXPECT_FALSE(e->prefix_cache().evict_one(1)) << "the cache held 5 sliding blocks";
  EXPECT_EQ(e->kv_pool(1).num_free(), free_before + 5);
  EXPECT_EQ(e->prefix_cache().entries(), 7);
  EXPECT_EQ(e->prefix_cache().lookup("t", prompt).blocks.size(), 0u) << "without its window blocks the prefix misses";
}

// Speculative identity with window-only KV: 80-token sequences, so both pools of the
// target and of the draft model drop blocks between verify steps and rollbacks; every
// step adds at most kStep tokens (the scheduler's budget is the engines' step bound).
TEST_P(SlidingWindow, SpeculativeDecodingGivesPlainTokens) {
  EngineOptions eo = options(MEMRA_DTYPE_F16);
  eo.max_context = 128;
  auto target = memra::testing::open_engine(sliding_model(false), eo);
  auto draft = memra::testing::open_engine(sliding_model(false), eo);
  ASSERT_TRUE(target && draft);
  const std::vector<int32_t> base = input_ids();
  int64_t accepted = 0;
  for (bool sampled : {false, true}) {
    const auto reqs = memra::spec_gates::requests(base, sampled, 3, 24);
    const auto plain = memra::spec_gates::run(*target, SchedulerOptions{.max_step_tokens = kStep, .max_running = 1}, reqs, false);
    for (int k : {1, 3, 7}) {
      for (bool together : {false, true}) {
        for (bool ngram : {true, false}) {
          auto factory = ngram ? memra::spec_gates::ngram_factory() : memra::spec_gates::draft_factory(*target, *draft);
          SchedulerOptions o = memra::spec_gates::speculative(std::move(factory), k, together);
          o.max_step_tokens = kStep;
          const std::string what = std::string(ngram ? "ngram" : "draft model") + " k=" + std::to_string(k) +
                                   (sampled ? " seeded" : " greedy") + (together ? " batched" : " alone");
          // Alone, the prompts hit the prefix cache the plain run filled (speculation on a
          // cached sliding-window prefix). Batched, each run starts cold in a namespace of its
          // own: three prompts that all hit would decode side by side from the first step,
          // and three decode rows leave a step of kStep tokens no room for drafts.
          auto run_reqs = reqs;
          if (together)
            for (auto& r : run_reqs) r.cache_namespace = "spec-gate " + what;
          const auto spec = memra::spec_gates::run(*target, o, run_reqs, together);
          memra::spec_gates::expect_same(spec, plain, what);
          EXPECT_GT(spec.stats.spec_drafted, 0) << what << ": nothing was drafted";
          accepted += spec.stats.spec_accepted;
        }
      }
    }
  }
  EXPECT_GT(accepted, 0) << "no draft was ever accepted: the rollbacks were never partial";
}

// A draft model whose sliding-window sequence cannot roll back to the new context's
// common prefix (its window dropped those blocks) starts the sequence over: it drafts
// this call, exactly what a fresh drafter drafts for that context.
TEST_P(SlidingWindow, DraftModelStartsOverWhereItCannotRollBack) {
  EngineOptions eo = options(MEMRA_DTYPE_F16);
  eo.max_context = 128;
  auto draft = memra::testing::open_engine(sliding_model(false), eo);
  ASSERT_TRUE(draft);
  const std::vector<int32_t> ids = input_ids();
  ASSERT_GE(ids.size(), 40u);
  memra::engine::DraftModelDrafter d(*draft, 0.1);
  EXPECT_EQ(d.draft(std::span<const int32_t>(ids.data(), 40), 3).size(), 3u);
  std::vector<int32_t> other(ids.begin(), ids.begin() + 2);  // shares 2 tokens: far behind the window
  other.insert(other.end(), ids.rbegin(), ids.rbegin() + 30);
  const std::vector<int32_t> got = d.draft(other, 3);
  EXPECT_TRUE(d.last_error().empty()) << d.last_error();
  EXPECT_EQ(d.restarts(), 1);
  EXPECT_EQ(got.size(), 3u);
  memra::engine::DraftModelDrafter fresh(*draft, 0.1);
  EXPECT_EQ(got, fresh.draft(other, 3));
  // Rolling back within the window still keeps the sequence.
  std::vector<int32_t> longer = other;
  longer.push_back(got[0]);
  EXPECT_EQ(d.draft(longer, 3).size(), 3u);
  EXPECT_EQ(d.restarts(), 1);
}

MEMRA_INSTANTIATE_BACKENDS(SlidingWindow);

}  // namespace
