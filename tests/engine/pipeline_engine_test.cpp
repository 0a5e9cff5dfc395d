// The pipeline backend against one backend of its stages' kind (the oracle) on the
// fixture models: the same logits bit for bit (prefill rows and decode steps, which on
// CUDA run as step graphs unless MEMRA_CUDA_GRAPH=0).
// On each backend (tests/support/backends.hpp; CUDA stages on device 0, two or more
// backends and streams on one GPU): two stages on the fixtures and a Q4_K_M GGUF
// (exactly two tensors handed over per decode step), two, three and four stages at
// every layer boundary, seeded and speculative generation (multi-token verify steps
// cross the stages; CUDA stages spread over the GPUs there are).
// On the CPU: splits leaving a stage without layers are refused, tied embeddings, a
// prefix-cache hit and a KV block copy across the split, what each stage is asked in
// which order, micro-batched and rolling steps. The 2-layer fixtures are widened to 4
// layers (layers repeated) so that three and four stages exist.
// Two CUDA devices: tests/cuda/pipeline_cuda_test.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "host/backend/cpu/cpu_backend.hpp"
#include "host/backend/pipeline/pipeline_backend.hpp"
#include "host/engine/generate.hpp"
#include "tests/engine/pipeline_test_models.hpp"
#include "tests/engine/pipeline_test_run.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/checkpoint_config.hpp"
#include "tests/support/fixture_engine.hpp"

namespace fs = std::filesystem;
using namespace memra::engine;
using memra::Status;
using memra::testing::bitwise_equal;
using memra::testing::build_plugins;
using memra::testing::StageDevices;

namespace {

fs::path model_path(const std::string& rel) { return memra::testing::fixture(rel); }

#define SKIP_WITHOUT_FIXTURE(name) MEMRA_SKIP_WITHOUT_FIXTURE(model_path("models/" + std::string(name)) / "config.json")

std::unique_ptr<ModelSource> open_source(const std::string& name, int64_t widen_to = 0) {
  return memra::pipeline_test::open_source(model_path("models/" + name), widen_to);
}

using memra::pipeline_test::decode_after_block_copy;
using memra::pipeline_test::prefill_and_decode;
using memra::pipeline_test::test_prompt;
using memra::pipeline_test::tie;
using memra::pipeline_test::widen;

EngineOptions pipeline_options(memra_backend_kind kind, int32_t stages, std::vector<int64_t> split = {}, int64_t block_size = 16,
                               StageDevices where = StageDevices::same) {
  EngineOptions o = memra::testing::engine_options(kind);
  o.max_context = 256;
  o.max_sequences = 4;
  o.block_size = block_size;
  memra::testing::set_pipeline_stages(o, stages, where);
  o.pipeline_split = std::move(split);
  return o;
}

std::unique_ptr<Engine> make_engine(std::unique_ptr<ModelSource> src, int32_t stages, std::vector<int64_t> split = {},
                                    int64_t block_size = 16) {
  return memra::pipeline_test::make_engine(std::move(src), pipeline_options(MEMRA_BACKEND_CPU, stages, std::move(split), block_size));
}

std::string split_name(int32_t stages, const std::vector<int64_t>& split) {
  std::string s = std::to_string(stages) + " stages, split {";
  for (int64_t c : split) s += std::to_string(c) + " ";
  return s + "}";
}

}  // namespace

using Pipeline = memra::testing::BackendTest;

// Two stages on the 2-layer fixtures (Gemma 3's: a sliding layer on one stage, the global
// one on the other) and a GGUF: bitwise the single backend, and exactly two tensors (the
// last layer's MLP output and the residual) handed over per decode step.
TEST_P(Pipeline, TwoStagesAreBitwiseOneBackend) {
  for (const char* rel : {"models/llama", "models/qwen3", "models/gemma3_text", "gguf/llama/llama-Q4_K_M.gguf"}) {
    if (!fs::exists(model_path(rel))) GTEST_SKIP() << "fixture " << model_path(rel) << " absent (expects ../shared/fixtures)";
    const auto prompt = test_prompt(24);
    auto one = memra::pipeline_test::make_engine(memra::pipeline_test::open_source(model_path(rel)), pipeline_options(GetParam(), 1));
    auto two = memra::pipeline_test::make_engine(memra::pipeline_test::open_source(model_path(rel)), pipeline_options(GetParam(), 2));
    ASSERT_TRUE(one && two);
    const auto* pipeline = dynamic_cast<const memra::backend::PipelineBackend*>(&two->backend());
    ASSERT_NE(pipeline, nullptr);
    std::cout << "[ " << rel << " ] " << pipeline->describe() << "\n";
    EXPECT_EQ(pipeline->plan().num_layers, (std::vector<int64_t>{1, 1})) << pipeline->describe();
    const auto ref = prefill_and_decode(*one, prompt, 24);
    std::vector<int64_t> handoffs;
    const auto got = prefill_and_decode(*two, prompt, 24, &handoffs);
    EXPECT_EQ(memra::testing::rows_differing(ref, got), "")
        << rel << ": 2 " << memra::testing::backend_name(GetParam()) << " stages differ from one backend";
    for (int64_t h : handoffs) EXPECT_EQ(h, 2) << rel << ": hand-offs per decode step";
  }
}

TEST_P(Pipeline, EveryLayerBoundaryWithTwoThreeAndFourStages) {
  SKIP_WITHOUT_FIXTURE("qwen3");
  const auto prompt = test_prompt(24);
  auto one = memra::pipeline_test::make_engine(open_source("qwen3", 4), pipeline_options(GetParam(), 1));
  ASSERT_TRUE(one);
  const auto ref = prefill_and_decode(*one, prompt, 24);
  const std::vector<std::pair<int32_t, std::vector<int64_t>>> splits = {
      {2, {1}}, {2, {2}}, {2, {3}}, {2, {}},  {3, {1, 1, 2}}, {3, {1, 2, 1}},
      {3, {2, 1, 1}}, {3, {}}, {4, {1, 1, 1, 1}}, {4, {}}};
  for (const auto& [stages, split] : splits) {
    auto pp = memra::pipeline_test::make_engine(open_source("qwen3", 4), pipeline_options(GetParam(), stages, split));
    ASSERT_TRUE(pp) << split_name(stages, split);
    const auto* pipeline = dynamic_cast<const memra::backend::PipelineBackend*>(&pp->backend());
    ASSERT_NE(pipeline, nullptr);
    EXPECT_EQ(pipeline->num_stages(), stages);
    EXPECT_EQ(memra::testing::rows_differing(ref, prefill_and_decode(*pp, prompt, 24)), "")
        << split_name(stages, split) << " (" << pipeline->describe() << ") differs from one backend";
  }
}

TEST_P(Pipeline, SeededAndSpeculativeGenerationGiveTheSameTokens) {
  SKIP_WITHOUT_FIXTURE("llama");
  auto one = memra::pipeline_test::make_engine(open_source("llama", 4), pipeline_options(GetParam(), 1));
  auto three = memra::pipeline_test::make_engine(open_source("llama", 4),
                                                 pipeline_options(GetParam(), 3, {}, 16, StageDevices::spread));
  ASSERT_TRUE(one && three);
  std::cout << "[ llama widened to 4 layers ] " << three->backend().describe() << "\n";
  const auto prompt = test_prompt(24, 5);
  for (bool sampled : {false, true}) {
    GenerateOptions g;
    g.max_tokens = 32;
    g.sampling.logprobs = true;
    g.sampling.temperature = 0.0f;
    if (sampled) {
      g.sampling.temperature = 0.7f;
      g.sampling.top_k = 3;
      g.sampling.seed = 1234;
    }
    std::vector<float> lp_one, lp_pp, lp_spec;
    auto a = generate(*one, prompt, g, nullptr, [&](const TokenEvent& ev) { lp_one.push_back(ev.logprob); return true; });
    auto b = generate(*three, prompt, g, nullptr, [&](const TokenEvent& ev) { lp_pp.push_back(ev.logprob); return true; });
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->tokens, b->tokens) << (sampled ? "seeded" : "greedy");
    EXPECT_EQ(lp_one, lp_pp);
    NgramDrafter drafter;
    SpeculativeOptions s;
    s.drafter = &drafter;
    s.k = 4;
    s.policy.adaptive = false;  // speculate on every step: every verify step crosses the stages
    auto c = generate_speculative(*three, prompt, g, s, [&](const TokenEvent& ev) { lp_spec.push_back(ev.logprob); return true; });
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->tokens, a->tokens) << (sampled ? "seeded" : "greedy") << " speculative across 3 stages";
    EXPECT_EQ(lp_spec, lp_one);
    EXPECT_GT(c->drafted, 0);
  }
  EXPECT_EQ(three->kv_blocks().num_free(), three->kv_blocks().num_blocks()) << "rollback leaked KV blocks";
}

MEMRA_INSTANTIATE_BACKENDS(Pipeline);

TEST(PipelineCpu, SplitsLeavingAStageWithoutLayersAreRefused) {
  SKIP_WITHOUT_FIXTURE("llama");
  for (const auto& [stages, split] : std::vector<std::pair<int32_t, std::vector<int64_t>>>{
           {2, {0}}, {2, {2}}, {2, {3}}, {3, {}}, {3, {1, 1}}}) {
    EngineOptions o;
    o.max_context = 64;
    o.pipeline_stages = stages;
    o.pipeline_split = split;
    auto e = Engine::create(open_source("llama"), build_plugins(), o);
    ASSERT_FALSE(e.ok()) << split_name(stages, split) << " of 2 layers was accepted";
    EXPECT_NE(e.error().message.find("at least one layer"), std::string::npos) << e.error().message;
    EXPECT_NE(e.error().message.find("pipeline"), std::string::npos) << e.error().message;
  }
}

// Tied embeddings: the table is the lookup on stage 0 and the head on the last stage.
TEST(PipelineCpu, TiedEmbeddingsLiveOnTheFirstAndLastStage) {
  SKIP_WITHOUT_FIXTURE("llama");
  auto tied = [] {
    auto s = open_source("llama");
    tie(*s);
    return s;
  };
  const auto prompt = test_prompt(24, 9);
  auto one = make_engine(tied(), 1);
  auto two = make_engine(tied(), 2);
  ASSERT_TRUE(one && two);
  const auto* pipeline = dynamic_cast<const memra::backend::PipelineBackend*>(&two->backend());
  ASSERT_NE(pipeline, nullptr);
  const memra::backend::PipelinePlan& plan = pipeline->plan();
  EXPECT_TRUE(plan.tied_output);
  EXPECT_EQ(plan.weight_stages("token_embd.weight"), 3u);
  EXPECT_TRUE(bitwise_equal(prefill_and_decode(*one, prompt, 16), prefill_and_decode(*two, prompt, 16)));
}

// A prompt whose first blocks come from the prefix cache (each stage holds those
// blocks for its own layers) computes what a cold prefill computes.
TEST(PipelineCpu, PrefixCacheHitAcrossTheSplit) {
  SKIP_WITHOUT_FIXTURE("qwen3");
  const auto prompt = test_prompt(24, 11);
  auto one = make_engine(open_source("qwen3"), 1, {}, 4);
  auto two = make_engine(open_source("qwen3"), 2, {}, 4);
  ASSERT_TRUE(one && two);
  const auto cold = prefill_and_decode(*one, prompt, 6);

  const int32_t first = two->open_sequence();
  StepRequest req{first, prompt, false, true};
  ASSERT_TRUE(two->step({&req, 1}).ok());
  two->prefix_cache().insert("t", prompt, two->sequence_blocks(first));
  two->close_sequence(first);
  std::vector<int32_t> cached = two->prefix_cache().lookup("t", prompt).blocks;
  ASSERT_EQ(cached.size(), 5u) << "5 full blocks of 4 tokens (one token left to compute)";
  const int32_t seq = two->open_sequence(std::move(cached));
  const std::span<const int32_t> rest(prompt.data() + 20, 4);
  StepRequest tail{seq, rest, true, true};
  auto out = two->step({&tail, 1});
  ASSERT_TRUE(out.ok()) << out.error().message;
  std::vector<std::vector<float>> got = *out;
  for (int s = 0; s < 6; ++s) {
    const int32_t tok = argmax(got.back());
    StepRequest d{seq, {&tok, 1}, false};
    auto o = two->step({&d, 1});
    ASSERT_TRUE(o.ok()) << o.error().message;
    got.push_back((*o)[0]);
  }
  const std::vector<std::vector<float>> expect(cold.begin() + 20, cold.end());
  EXPECT_TRUE(bitwise_equal(expect, got)) << "prefix-cache hit on 2 stages differs from a cold prefill";
}

// copy_kv_block must reach every stage's layers: overwrite a sequence's second block
// with its first on both engines, then decode; a stage that skipped the copy would
// attend to other keys than the single backend does.
TEST(PipelineCpu, KvBlockCopyReachesEveryStage) {
  SKIP_WITHOUT_FIXTURE("llama");
  auto widened = [] {
    auto s = open_source("llama");
    widen(*s, 4);
    return s;
  };
  const auto prompt = test_prompt(8, 13);
  std::vector<std::vector<float>> rows;
  for (int32_t stages : {1, 3}) {
    for (bool copy : {false, true}) {
      auto e = make_engine(widened(), stages, {}, 4);
      ASSERT_TRUE(e);
      rows.push_back(decode_after_block_copy(*e, prompt, copy));
      ASSERT_FALSE(rows.back().empty());
    }
  }
  // rows: {1 stage plain, 1 stage copied, 3 stages plain, 3 stages copied}
  EXPECT_NE(rows[0], rows[1]) << "the block copy changed nothing (test has no teeth)";
  EXPECT_TRUE(bitwise_equal(rows[0], rows[2]));
  EXPECT_TRUE(bitwise_equal(rows[1], rows[3])) << "after copy_kv_block, 3 stages differ from one backend";
}

namespace {

// A CPU stage whose op table logs "<stage>:<op>" before forwarding, and logs
// "<stage>:prepare" when given the step's batch: shows what the pipeline asks of
// each stage and in which order (the CUDA stages need the batch before a matmul).
struct LoggingStage final : memra::backend::Backend {
  LoggingStage(int32_t id, std::unique_ptr<memra::backend::Backend> inner, std::vector<std::string>* log)
      : id(id), inner(std::move(inner)), log(log) {
    const memra_backend_ops& in = *this->inner->ops();
    table = in;
    table.ctx = reinterpret_cast<memra_backend_ctx*>(this);
    table.tensor_create = [](memra_backend_ctx* c, int32_t n, const int64_t* s, memra_tensor* o) {
      auto* st = self(c);  // scratch only: not logged
      return st->in().tensor_create(st->in().ctx, n, s, o);
    };
    table.embedding = [](memra_backend_ctx* c, const memra_weight* t, const memra_forward_batch* b, float sc, memra_tensor* o) {
      auto* st = self(c)->note("embedding");
      return st->in().embedding(st->in().ctx, t, b, sc, o);
    };
    table.rms_norm = [](memra_backend_ctx* c, const memra_tensor* x, const memra_weight* w, float e, float u, memra_tensor* o) {
      auto* st = self(c)->note("rms_norm");
      return st->in().rms_norm(st->in().ctx, x, w, e, u, o);
    };
    table.add_rms_norm = [](memra_backend_ctx* c, const memra_tensor* x, memra_tensor* r, const memra_weight* w, float e,
                            float u, memra_tensor* o) {
      auto* st = self(c)->note("add_rms_norm");
      return st->in().add_rms_norm(st->in().ctx, x, r, w, e, u, o);
    };
    table.matmul = [](memra_backend_ctx* c, const memra_tensor* x, const memra_weight* w, const memra_weight* b, memra_tensor* o) {
      auto* st = self(c)->note("matmul");
      return st->in().matmul(st->in().ctx, x, w, b, o);
    };
    table.gated_activation = [](memra_backend_ctx* c, memra_activation a, const memra_tensor* g, const memra_tensor* u, memra_tensor* o) {
      auto* st = self(c)->note("gated_activation");
      return st->in().gated_activation(st->in().ctx, a, g, u, o);
    };
    table.attention = [](memra_backend_ctx* c, const memra_attention_params* p, const memra_forward_batch* b, memra_tensor* q,
                         memra_tensor* k, const memra_tensor* v, memra_tensor* o) {
      auto* st = self(c)->note("attention@" + std::to_string(p->layer));
      return st->in().attention(st->in().ctx, p, b, q, k, v, o);
    };
    table.gather_logit_rows = [](memra_backend_ctx* c, const memra_tensor* x, const memra_forward_batch* b, memra_tensor* o) {
      auto* st = self(c)->note("gather_logit_rows");
      return st->in().gather_logit_rows(st->in().ctx, x, b, o);
    };
    table.logits_output = [](memra_backend_ctx* c, const memra_tensor* l, const memra_forward_batch* b) {
      auto* st = self(c)->note("logits_output");
      return st->in().logits_output(st->in().ctx, l, b);
    };
  }
  static LoggingStage* self(memra_backend_ctx* c) { return reinterpret_cast<LoggingStage*>(c); }
  const memra_backend_ops& in() const { return *inner->ops(); }
  LoggingStage* note(const std::string& what) {
    log->push_back(std::to_string(id) + ":" + what);
    return this;
  }
  const memra_backend_ops* ops() const override { return &table; }
  memra_device_info device_info() const override { return inner->device_info(); }
  Status register_ops(std::span<const memra::ops::PluginOp> ops, std::vector<std::string>* refused) override {
    return inner->register_ops(ops, refused);
  }
  Status upload_weights(const memra_weight_set& w) override { return inner->upload_weights(w); }
  Status allocate_state(const memra::backend::StateConfig& s) override { return inner->allocate_state(s); }
  Status begin_step(int32_t slot) override { return inner->begin_step(slot); }
  Status copy_kv_block(int32_t p, int32_t f, int32_t t) override { return inner->copy_kv_block(p, f, t); }
  Status copy_state_slot(int32_t f, int32_t t) override { return inner->copy_state_slot(f, t); }
  Status reset_state_slot(int32_t s) override { return inner->reset_state_slot(s); }
  std::string last_error() const override { return inner->last_error(); }
  Status copy_from(memra::backend::Backend& from, void* dst, const void* src, uint64_t bytes) override {
    note("copy_from_" + std::to_string(static_cast<LoggingStage&>(from).id));
    return inner->copy_from(*static_cast<LoggingStage&>(from).inner, dst, src, bytes);
  }
  Status copy_to_host(void* d, const void* s, uint64_t n) override { return inner->copy_to_host(d, s, n); }
  Status copy_to_device(void* d, const void* s, uint64_t n) override { return inner->copy_to_device(d, s, n); }
  memra::Result<memra_buffer> memory_alloc(memra_memory_location l, uint64_t n) override { return inner->memory_alloc(l, n); }
  void memory_free(memra_buffer& b) override { inner->memory_free(b); }
  Status prepare_batch(const memra_forward_batch& b) override {
    note("prepare");
    prepared.push_back(b);
    return {};
  }
  std::string name() const override { return "logging cpu"; }

  int32_t id;
  std::unique_ptr<memra::backend::Backend> inner;
  std::vector<std::string>* log;
  std::vector<memra_forward_batch> prepared;
  memra_backend_ops table{};
};

}  // namespace

// What the stages are asked to do in a decode step of the 2-layer llama on 2 stages:
// every stage gets its layer range of the step's batch before its first op; layer 1's
// attention runs on stage 1 (whose KV cache holds layer 1); stage 0's range hands over
// exactly the residual and the MLP output to stage 1, whose first op is the fused add +
// next layer's norm, as on one backend.
TEST(PipelineCpu, StagesGetTheBatchFirstAndLocalLayerNumbers) {
  SKIP_WITHOUT_FIXTURE("llama");
  auto src = open_source("llama");
  ASSERT_TRUE(src);
  auto& host = build_plugins();
  std::vector<memra::plugins::QuantPlugin> quants;
  std::map<std::string, memra::backend::QuantTable> tables;
  for (const memra_weight& w : src->weights)
    if (!tables.count(w.quant)) {
      auto q = host.quant_for(w.quant, host.device_info());
      ASSERT_TRUE(q.ok()) << w.quant;
      tables[w.quant] = {&q->api(), q->ctx()};
      quants.push_back(std::move(*q));
    }
  memra::backend::QuantLookup lookup = [&](const char* s) -> memra::backend::QuantTable {
    auto it = tables.find(s);
    return it == tables.end() ? memra::backend::QuantTable{} : it->second;
  };
  auto plan = memra::backend::plan_pipeline(src->weights, 2, {2, {}, {}});
  ASSERT_TRUE(plan.ok());
  std::vector<std::string> log;
  std::vector<std::unique_ptr<memra::backend::Backend>> stages;
  std::vector<LoggingStage*> logging;
  for (int32_t s = 0; s < 2; ++s) {
    auto st = std::make_unique<LoggingStage>(s, std::make_unique<memra::backend::CpuBackend>(lookup), &log);
    logging.push_back(st.get());
    stages.push_back(std::move(st));
  }
  auto pp = memra::backend::PipelineBackend::create(std::move(stages), *plan);
  ASSERT_TRUE(pp.ok()) << pp.error().message;
  memra::backend::StateConfig state;
  const auto keys = memra::testing::family_keys(src->config);
  state.kv = memra::backend::KvCacheConfig::uniform(2, keys.at("num_kv_heads").get<int64_t>(), keys.at("head_dim").get<int64_t>(), 16, 4);
  ASSERT_TRUE((*pp)->upload_weights(src->weight_set()).ok());
  ASSERT_TRUE((*pp)->allocate_state(state).ok());
  auto family = host.family_for(src->config.architecture, host.device_info());
  ASSERT_TRUE(family.ok());
  auto mplan = family->plan_create(src->config_json);
  ASSERT_TRUE(mplan.ok());
  std::vector<memra::plugins::Model> models;  // one per stage, each over its layers
  for (const memra_backend_ops* table : (*pp)->op_tables()) {
    auto model = mplan->create_model(src->weight_set(), table);
    ASSERT_TRUE(model.ok()) << model.error().message;
    models.push_back(std::move(*model));
  }

  // One decode token at position 0 of one sequence.
  const int32_t id = 5, pos = 0, seq = 0, len = 1, table = 0, row = 0;
  const uint8_t generated = 0;
  std::vector<float> logits(static_cast<size_t>(src->config.vocab_size));
  memra_forward_batch b{};
  b.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
  b.num_tokens = 1;
  b.token_ids = &id;
  b.positions = &pos;
  b.seq_index = &seq;
  b.num_seqs = 1;
  b.seq_lens = &len;
  b.block_tables = &table;
  b.max_blocks_per_seq = 1;
  b.num_logits = 1;
  b.logits_rows = &row;
  b.logits = logits.data();
  b.prompt_tokens = &generated;
  ASSERT_TRUE((*pp)->begin_step(-1).ok());
  const Status fwd = (*pp)->forward(b, [&](size_t stage, const memra_forward_batch& range) { return models[stage].forward(range); });
  ASSERT_TRUE(fwd.ok()) << fwd.error().message;

  for (int32_t s = 0; s < 2; ++s) {
    const std::string me = std::to_string(s) + ":";
    // Hand-offs into the stage may come first (they do not use the batch).
    auto first = std::find_if(log.begin(), log.end(), [&](const std::string& e) {
      return e.rfind(me, 0) == 0 && e.find("copy_from") == std::string::npos;
    });
    ASSERT_NE(first, log.end());
    EXPECT_EQ(*first, me + "prepare") << "stage " << s << " ran an op before it had the batch";
    // Each stage is given its own layer range of the step's batch, once.
    const auto& got = logging[static_cast<size_t>(s)]->prepared;
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].token_ids, b.token_ids);
    EXPECT_EQ(got[0].layer_begin, s);
    EXPECT_EQ(got[0].layer_end, s + 1);
  }
  EXPECT_EQ(std::count(log.begin(), log.end(), "0:attention@0"), 1);
  EXPECT_EQ(std::count(log.begin(), log.end(), "1:attention@1"), 1) << "layer 1 runs on stage 1, named by the model's index";
  EXPECT_EQ(std::count(log.begin(), log.end(), "1:copy_from_0"), 2);
  EXPECT_EQ(std::count(log.begin(), log.end(), "0:copy_from_1"), 0);
  auto handoff = std::find(log.begin(), log.end(), "1:copy_from_0");
  // Stage 1 starts with the two hand-offs, then the batch, then the fused add + norm.
  ASSERT_GE(std::distance(handoff, log.end()), 4);
  EXPECT_EQ(std::vector<std::string>(handoff, handoff + 4),
            (std::vector<std::string>{"1:copy_from_0", "1:copy_from_0", "1:prepare", "1:add_rms_norm"}));
  EXPECT_EQ(log.back(), "1:logits_output");
  EXPECT_EQ((*pp)->stats().handoffs, 2);
}


// Rolling steps: two sequences in two step slots, each issued while the other's step
// is pending (step_issue / step_collect), against each sequence run alone on one
// backend. Same rows bit for bit; slots other than 0/1 are refused; an idle slot
// collects nothing.
TEST(PipelineCpu, RollingStepsInTwoSlotsGiveOneBackendsRows) {
  SKIP_WITHOUT_FIXTURE("qwen3");
  const std::vector<int32_t> pa = test_prompt(23, 5), pb = test_prompt(9, 6);
  constexpr int kSteps = 6;
  auto single = make_engine(open_source("qwen3"), 1);
  ASSERT_TRUE(single);
  const auto want_a = prefill_and_decode(*single, pa, kSteps);
  const auto want_b = prefill_and_decode(*single, pb, kSteps);

  auto e = make_engine(open_source("qwen3"), 2);
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->step_issue({}, 0).ok());
  const int32_t sa = e->open_sequence(), sb = e->open_sequence();
  const int32_t seqs[2] = {sa, sb};
  StepRequest bad{sa, pa, false, true};
  EXPECT_FALSE(e->step_issue({&bad, 1}, 2).ok());
  std::vector<std::vector<float>> got[2];
  std::unique_ptr<PendingStep> flight[2];
  StepRequest first[2] = {{sa, pa, true, true}, {sb, pb, true, true}};
  int32_t next_token[2] = {0, 0};
  for (int g = 0; g < 2; ++g) {
    auto p = e->step_issue({&first[g], 1}, g);
    ASSERT_TRUE(p.ok()) << p.error().message;
    flight[g] = std::move(*p);
  }
  for (int round = 0; round < kSteps; ++round) {
    for (int g = 0; g < 2; ++g) {
      auto rows = e->step_collect(*flight[g]);
      ASSERT_TRUE(rows.ok()) << rows.error().message;
      for (auto& r : *rows) got[g].push_back(std::move(r));
      next_token[g] = argmax(got[g].back());
      StepRequest d{seqs[g], {&next_token[g], 1}, false};
      auto p = e->step_issue({&d, 1}, g);  // while the other group's step is pending
      ASSERT_TRUE(p.ok()) << p.error().message;
      flight[g] = std::move(*p);
    }
  }
  for (int g = 0; g < 2; ++g) {
    auto rows = e->step_collect(*flight[g]);
    ASSERT_TRUE(rows.ok());
    got[g].push_back((*rows)[0]);
  }
  ASSERT_EQ(got[0].size(), want_a.size());
  ASSERT_EQ(got[1].size(), want_b.size());
  for (size_t i = 0; i < want_a.size(); ++i) EXPECT_EQ(got[0][i], want_a[i]) << "sequence A row " << i;
  for (size_t i = 0; i < want_b.size(); ++i) EXPECT_EQ(got[1][i], want_b[i]) << "sequence B row " << i;
}
