// RECURRENT state and ops by name, through the engine with the recurrent test family
// (tests/plugins/test_plugins/recurrent_family.c), on every backend (a suite over
// backends, tests/support/backends.hpp): slots follow sequences, logits match
// an independent implementation of the toy model, batching/chunking/forking/rollback
// are bitwise invariant, speculative decoding is token-identical, pipeline stages route
// the state to its layer's stage, and bad plans are refused naming the plugin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "host/backend/cpu/cpu_backend.hpp"
#include "host/backend/pipeline/pipeline_backend.hpp"
#include "host/engine/drafter.hpp"
#include "host/engine/engine.hpp"
#include "host/engine/generate.hpp"
#include "host/engine/scheduler.hpp"
#include "host/ops/op_registry.hpp"
#include "memra/ops.h"
#include "tests/engine/recurrent_test_model.hpp"
#include "tests/engine/sequence_drain.hpp"
#include "tests/support/backends.hpp"

namespace memra::engine {
namespace {

using testing::kRecurrentDim;
using testing::kRecurrentVocab;
using Rows = std::vector<std::vector<float>>;

// On the suite's backend (and its pipeline stages' devices).
class RecurrentState : public testing::BackendTest {
 protected:
  EngineOptions options(int32_t stages = 1) const {
    EngineOptions o = testing::engine_options(GetParam());
    o.kv_dtype = MEMRA_DTYPE_F32;  // the oracle is f64 arithmetic; 16-bit KV has its own suite
    testing::set_pipeline_stages(o, stages);
    return o;
  }
  std::unique_ptr<Engine> load() const { return load(options()); }
  static std::unique_ptr<Engine> load(EngineOptions o, const std::string& config = "{}") {
    if (o.block_size == 16) o.block_size = 4;  // small blocks: forks and rollbacks cross block edges
    auto e = Engine::create(testing::recurrent_source(config), testing::recurrent_plugins(), o);
    EXPECT_TRUE(e) << (e ? "" : e.error().message);
    return e ? std::move(*e) : nullptr;
  }
};

std::string refusal(const std::string& config, EngineOptions o = {}) {
  auto e = Engine::create(testing::recurrent_source(config), testing::recurrent_plugins(), o);
  return e ? std::string("loaded") : e.error().message;
}

Rows step(Engine& e, int32_t seq, std::vector<int32_t> tokens, bool all = true) {
  StepRequest r;
  r.seq = seq;
  r.tokens = tokens;
  r.all_logits = all;
  auto out = e.step(std::span<const StepRequest>(&r, 1));
  EXPECT_TRUE(out) << (out ? "" : out.error().message);
  return out ? *out : Rows{};
}

// The toy model written out independently (plain loops, double accumulation).
Rows oracle(const Engine& e, const std::vector<int32_t>& tokens) {
  auto w = [&](const char* name) {
    for (const memra_weight& x : e.source().weights)
      if (std::string(x.name) == name) return static_cast<const float*>(x.data);
    return static_cast<const float*>(nullptr);
  };
  const float *E = w("token_embd.weight"), *Wq = w("blk.0.attn_q.weight"), *Wk = w("blk.0.attn_k.weight"),
              *Wv = w("blk.0.attn_v.weight"), *Wo = w("output.weight");
  const int D = kRecurrentDim;
  auto mv = [&](const float* W, int rows, const std::vector<double>& x) {
    std::vector<double> y(static_cast<size_t>(rows), 0.0);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < D; ++c) y[r] += static_cast<double>(W[r * D + c]) * x[c];
    return y;
  };
  std::vector<std::vector<double>> K, V;
  std::vector<double> state(D, 0.0);
  Rows out;
  for (int32_t t : tokens) {
    std::vector<double> x(E + t * D, E + (t + 1) * D);
    const auto q = mv(Wq, D, x);
    K.push_back(mv(Wk, D, x));
    V.push_back(mv(Wv, D, x));
    std::vector<double> score;
    for (const auto& k : K) {
      double d = 0;
      for (int i = 0; i < D; ++i) d += q[i] * k[i];
      score.push_back(d / std::sqrt(static_cast<double>(D)));
    }
    const double mx = *std::max_element(score.begin(), score.end());
    double sum = 0;
    for (double& s : score) sum += (s = std::exp(s - mx));
    for (int i = 0; i < D; ++i) {
      double a = 0;
      for (size_t j = 0; j < K.size(); ++j) a += score[j] / sum * V[j][i];
      x[i] += a;                          // x1
      state[i] = 0.75 * state[i] + x[i];  // the decay_scan state
      x[i] += state[i];                   // x2
    }
    const auto logits = mv(Wo, kRecurrentVocab, x);
    out.emplace_back(logits.begin(), logits.end());
  }
  return out;
}

int32_t argmax(const std::vector<float>& row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

const std::vector<int32_t> kPrompt = {3, 1, 4, 1, 5, 9, 2};

TEST_P(RecurrentState, LogitsMatchAnIndependentImplementation) {
  auto e = load();
  ASSERT_TRUE(e);
  const int32_t seq = e->open_sequence();
  std::vector<int32_t> history = kPrompt;
  Rows got = step(*e, seq, kPrompt);
  for (int i = 0; i < 4; ++i) {
    const int32_t next = argmax(got.back());
    history.push_back(next);
    Rows more = step(*e, seq, {next});
    got.insert(got.end(), more.begin(), more.end());
  }
  const Rows want = oracle(*e, history);
  ASSERT_EQ(got.size(), history.size());
  for (size_t t = 0; t < got.size(); ++t)
    for (int v = 0; v < kRecurrentVocab; ++v) EXPECT_NEAR(got[t][v], want[t][v], 1e-4) << "position " << t << " id " << v;
  // The state carries the history: the same last token after another history differs.
  const int32_t other = e->open_sequence();
  std::vector<int32_t> changed = kPrompt;
  changed[0] = 7;
  EXPECT_NE(step(*e, other, changed).back(), step(*e, e->open_sequence(), kPrompt).back());
}

TEST_P(RecurrentState, SlotsAreAllocatedAndFreedWithSequences) {
  EngineOptions o = options();
  o.max_sequences = 3;
  auto e = load(o);
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->has_recurrent_state());
  EXPECT_EQ(e->free_state_slots(), 6);  // live + snapshot per sequence
  // Live and snapshot per sequence, and the prefix cache's 3 (one per sequence) snapshots.
  EXPECT_EQ(e->recurrent_state_bytes(), 9u * kRecurrentDim * sizeof(float));
  // KV only for the attention layer (layer 1 is recurrent): K and V, every block, f32.
  EXPECT_EQ(e->kv_cache_bytes(), 2u * static_cast<uint64_t>(e->kv_blocks().num_blocks() * e->block_size()) * kRecurrentDim * sizeof(float));
  o.kv_dtype = MEMRA_DTYPE_BF16;
  EXPECT_EQ(load(o)->kv_cache_bytes() * 2, e->kv_cache_bytes());
  const int32_t a = e->open_sequence();
  const Rows first = step(*e, a, kPrompt);
  const int32_t b = e->open_sequence(), c = e->open_sequence();
  ASSERT_GE(b, 0);
  ASSERT_GE(c, 0);
  EXPECT_FALSE(e->can_open_sequence());
  EXPECT_EQ(e->open_sequence(), -1);
  e->close_sequence(a);
  EXPECT_EQ(e->free_state_slots(), 2);
  // A reused slot starts from zero: the same prompt gives the first sequence's logits.
  const int32_t d = e->open_sequence();
  ASSERT_GE(d, 0);
  EXPECT_EQ(step(*e, d, kPrompt), first);
  for (int32_t s : {b, c, d}) e->close_sequence(s);
  EXPECT_EQ(e->free_state_slots(), 6);
  EXPECT_EQ(e->kv_blocks().num_free(), e->kv_blocks().num_blocks());
}

TEST_P(RecurrentState, BatchingAndChunkingAreBitwiseInvariant) {
  auto alone = load(), together = load();
  ASSERT_TRUE(alone && together);
  const int32_t a = alone->open_sequence();
  Rows want = step(*alone, a, kPrompt, false);
  std::vector<int32_t> fed;
  for (int i = 0; i < 5; ++i) {
    fed.push_back(argmax(want.back()));
    Rows r = step(*alone, a, {fed.back()}, false);
    want.push_back(r[0]);
  }
  // Beside another sequence, the prompt split in chunks of 3, 2, 2 (the last with B's prompt).
  const int32_t x = together->open_sequence(), y = together->open_sequence();
  step(*together, x, {kPrompt[0], kPrompt[1], kPrompt[2]}, false);
  step(*together, x, {kPrompt[3], kPrompt[4]}, false);
  const std::vector<int32_t> rest = {kPrompt[5], kPrompt[6]}, other = {8, 8, 2, 6};
  StepRequest rs[2];
  rs[0].seq = x, rs[0].tokens = rest;
  rs[1].seq = y, rs[1].tokens = other;
  auto out = together->step(rs);
  ASSERT_TRUE(out);
  Rows got = {(*out)[0]};
  for (int32_t tok : fed) {
    const std::vector<int32_t> mine = {tok}, theirs = {static_cast<int32_t>((tok + 5) % kRecurrentVocab)};
    rs[0].tokens = mine;
    rs[1].tokens = theirs;
    auto o2 = together->step(rs);
    ASSERT_TRUE(o2);
    got.push_back((*o2)[0]);
  }
  EXPECT_EQ(got, want);
}

TEST_P(RecurrentState, AForkedSequenceContinuesIdentically) {
  auto e = load();
  ASSERT_TRUE(e);
  const int32_t a = e->open_sequence();
  step(*e, a, {kPrompt.begin(), kPrompt.begin() + 5});  // mid-block (blocks of 4)
  auto f = e->fork_sequence(a);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(e->sequence_length(*f), 5);
  const std::vector<int32_t> next = {2, 7, 1, 8};
  const Rows from_a = step(*e, a, next), from_f = step(*e, *f, next);
  EXPECT_EQ(from_f, from_a);
  // ... and both equal a sequence that was fed the whole history itself.
  std::vector<int32_t> history(kPrompt.begin(), kPrompt.begin() + 5);
  history.insert(history.end(), next.begin(), next.end());
  const Rows fresh = step(*e, e->open_sequence(), history);
  EXPECT_EQ(Rows(fresh.end() - 4, fresh.end()), from_a);
}

TEST_P(RecurrentState, RollbackRestoresTheSnapshotAndReplaysTheKeptTokens) {
  for (int32_t stages : {1, 2}) {
    SCOPED_TRACE(stages);
    auto e = load(options(stages));
    ASSERT_TRUE(e);
    const int32_t spec = e->open_sequence(), plain = e->open_sequence();
    step(*e, spec, kPrompt);
    step(*e, plain, kPrompt);
    // A verify step of 4 drafts of which 2 are kept, then the next token.
    step(*e, spec, {5, 3, 5, 8});
    ASSERT_TRUE(e->truncate_sequence(spec, static_cast<int64_t>(kPrompt.size()) + 2));
    EXPECT_EQ(e->sequence_length(spec), static_cast<int64_t>(kPrompt.size()) + 2);
    step(*e, plain, {5, 3});
    EXPECT_EQ(step(*e, spec, {9, 7}), step(*e, plain, {9, 7}));
    // Only the last step can be rolled back: the state has no older snapshot.
    EXPECT_FALSE(e->truncate_sequence(spec, 3));
    EXPECT_TRUE(e->truncate_sequence(spec, e->sequence_length(spec)));  // keeping everything is a no-op
  }
}

TEST_P(RecurrentState, SpeculativeDecodingIsTokenIdenticalToPlainDecode) {
  for (const float temperature : {0.0f, 0.9f}) {
    SCOPED_TRACE(temperature);
    auto e = load();
    ASSERT_TRUE(e);
    GenerateOptions g;
    g.max_tokens = 48;
    g.sampling.temperature = temperature;
    g.sampling.seed = 11;
    const std::vector<int32_t> prompt = {1, 2, 3, 1, 2, 3, 1, 2};
    auto plain = generate(*e, prompt, g, nullptr, nullptr);
    ASSERT_TRUE(plain) << plain.error().message;
    NgramDrafter drafter;
    SpeculativeOptions s;
    s.drafter = &drafter;
    s.policy.adaptive = false;
    auto fast = generate_speculative(*e, prompt, g, s, nullptr);
    ASSERT_TRUE(fast) << fast.error().message;
    EXPECT_EQ(fast->tokens, plain->tokens);
    EXPECT_GT(fast->verify_steps, 0);
    EXPECT_GT(fast->drafted, fast->accepted);  // some drafts were rolled back
  }
}

// Admission waits for state slots (2 sequences' worth here, 6 requests), and plain and speculative serving give generate()'s tokens
// while the prefix cache keeps prompts with their state (the prompts share their first
// block: later ones start from a cached state).
TEST_P(RecurrentState, TheSchedulerAdmitsByStateSlotsAndServesGenerateTokens) {
  auto request = [](int v) {
    SequenceRequest r;
    for (int i = 0; i < 5 + v; ++i) r.prompt.push_back((i * 5 + (i < 4 ? 0 : v * 3)) % kRecurrentVocab);
    r.max_tokens = 10;
    r.sampling.temperature = v % 2 ? 0.9f : 0.0f;
    r.sampling.seed = 40 + static_cast<uint64_t>(v);
    r.cache_namespace = "tenant";
    return r;
  };
  std::vector<std::vector<int32_t>> want;
  auto ref = load();
  ASSERT_TRUE(ref);
  for (int v = 0; v < 6; ++v) {
    const SequenceRequest r = request(v);
    GenerateOptions g;
    g.max_tokens = r.max_tokens;
    g.sampling = r.sampling;
    auto out = generate(*ref, r.prompt, g, nullptr, nullptr);
    ASSERT_TRUE(out);
    want.push_back(out->tokens);
  }
  for (const bool speculative : {false, true}) {
    SCOPED_TRACE(speculative);
    EngineOptions o = options();
    o.max_sequences = 2;
    auto e = load(o);
    ASSERT_TRUE(e);
    {
      SchedulerOptions so;
      so.max_running = 6;
      if (speculative) {
        so.make_drafter = [] { return std::make_unique<NgramDrafter>(); };
        so.spec_policy.adaptive = false;
      }
      Scheduler sched(*e, so);
      std::vector<std::shared_ptr<SequenceHandle>> hs;
      for (int v = 0; v < 6; ++v) hs.push_back(*sched.submit(request(v)));
      for (int v = 0; v < 6; ++v) EXPECT_EQ(test_support::drain(*hs[static_cast<size_t>(v)]).tokens, want[static_cast<size_t>(v)]) << v;
      EXPECT_GT(sched.stats().prefix_hit_tokens, 0);
    }
    EXPECT_EQ(e->free_state_slots(), 4);  // 2 x (live and snapshot); the cache has its own
    EXPECT_GT(e->cached_state_slots(), 0);
    EXPECT_GT(e->prefix_cache().entries(), 0);
  }
}

TEST_P(RecurrentState, PipelineStagesRouteTheStateToItsLayer) {
  auto one = load(), split = load(options(2));
  ASSERT_TRUE(one && split);
  const auto* pipeline = dynamic_cast<const backend::PipelineBackend*>(&split->backend());
  ASSERT_NE(pipeline, nullptr);
  EXPECT_EQ(pipeline->plan().layer_stage[1], 1);  // the recurrent layer is on stage 1
  const int32_t a = one->open_sequence(), b = split->open_sequence();
  EXPECT_EQ(step(*split, b, kPrompt), step(*one, a, kPrompt));
  auto fa = one->fork_sequence(a);
  auto fb = split->fork_sequence(b);
  ASSERT_TRUE(fa && fb);
  EXPECT_EQ(step(*split, *fb, {4, 4}), step(*one, *fa, {4, 4}));
  // A batched step: each sequence keeps its own state slot on both stages.
  const std::vector<int32_t> p1 = {1, 2, 3}, p2 = {9, 8, 7, 6};
  StepRequest rs[2];
  Rows want;
  for (Engine* e : {one.get(), split.get()}) {
    rs[0].seq = e->open_sequence(), rs[0].tokens = p1, rs[0].all_logits = true;
    rs[1].seq = e->open_sequence(), rs[1].tokens = p2, rs[1].all_logits = true;
    auto out = e->step(rs);
    ASSERT_TRUE(out) << out.error().message;
    if (e == one.get()) want = *out;
    else EXPECT_EQ(*out, want);
  }
}

TEST(RecurrentStatePlans, BadPlansAreRefusedNamingThePlugin) {
  const std::string kind = refusal("{\"bad_state_kind\":1}");
  EXPECT_NE(kind.find("family plugin 'example'"), std::string::npos) << kind;
  EXPECT_NE(kind.find("unknown state kind 99"), std::string::npos) << kind;
  const std::string op = refusal("{\"bad_op\":1}");
  EXPECT_NE(op.find("family plugin 'example' requires op 'no_such_op' v1"), std::string::npos) << op;
  const std::string version = refusal("{\"bad_op_version\":1}");
  EXPECT_NE(version.find("requires op 'example.decay_scan' v7, which this host does not have (it has v1)"), std::string::npos) << version;
}

MEMRA_INSTANTIATE_BACKENDS(RecurrentState);

TEST(OpRegistry, EveryCpuOpIsFoundByNameAndVersion) {
  backend::CpuBackend cpu(nullptr);
  const memra_backend_ops& o = *cpu.ops();
  ASSERT_TRUE(MEMRA_STRUCT_HAS(&o, memra_backend_ops, op_run));
  ASSERT_FALSE(ops::registered_ops().empty());
  for (const ops::OpSpec& spec : ops::registered_ops()) {
    const memra_op* op = nullptr;
    const std::string name(spec.name);
    const memra_status st = o.op_find(o.ctx, name.c_str(), spec.version, &op);
    if (spec.backends & ops::kCpu) {
      EXPECT_EQ(st, MEMRA_OK) << name << ": " << cpu.last_error();
      EXPECT_NE(op, nullptr);
    } else {
      EXPECT_EQ(st, MEMRA_ERR_UNSUPPORTED) << name;
    }
    EXPECT_EQ(o.op_find(o.ctx, name.c_str(), spec.version + 1000, &op), MEMRA_ERR_UNSUPPORTED) << name;
  }
  const memra_op* op = nullptr;
  EXPECT_EQ(o.op_find(o.ctx, "no_such_op", 1, &op), MEMRA_ERR_NOT_FOUND);
  // Attributes of the wrong version are refused by op_run, not misread.
  ASSERT_EQ(o.op_find(o.ctx, MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V2, &op), MEMRA_OK);
  memra_op_args args{};
  args.struct_size = MEMRA_OP_ARGS_STRUCT_SIZE;
  args.attrs_version = 1;
  EXPECT_EQ(o.op_run(o.ctx, op, &args), MEMRA_ERR_ABI_MISMATCH);
}

}  // namespace
}  // namespace memra::engine
