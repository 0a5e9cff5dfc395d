// MTP heads (#39), on each backend: the qwen3_5-mtp-tiny fixture's head against its
// explicit reference (tests/models/make_qwen3_5_mtp_fixture.py: the target part checked
// against transformers, the head written out as vLLM and llama.cpp run it) row by row,
// batched rows against one-row steps bit for bit, three drafts chained from the prompt's
// end; then the identity gates of speculative_gates.hpp with the MTP drafter (K = 1..8,
// greedy and seeded, alone and batched, across prefix-cache hits and recurrent-state
// rollbacks) and memra-gen's loop; a checkpoint without MTP weights has no head, saying why.
#include <gtest/gtest.h>

#include <fstream>

#include "host/engine/generate.hpp"
#include "host/engine/mtp_drafter.hpp"
#include "tests/engine/speculative_gates.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/fixture_engine.hpp"
#include "tests/support/logits.hpp"
#include "tests/support/repacked_fixture.hpp"
#include "tests/support/test_models.hpp"

using namespace memra::spec_gates;
using memra::testing::max_rel_diff;

namespace {

fs::path mtp_fixture() { return memra::testing::test_model("qwen3_5-mtp-tiny"); }

struct MtpReference {
  std::vector<int32_t> prompt, greedy, chain_ids;
  size_t vocab = 0, hidden = 0;
  std::vector<float> prefill, steps, head, chain;  // [24][V], [24][V], [47][V], [3][V]
};

MtpReference read_mtp_reference(const fs::path& dir) {
  const auto j = nlohmann::json::parse(std::ifstream(dir / "reference.json"));
  MtpReference r;
  r.prompt = j["input_ids"].get<std::vector<int32_t>>();
  r.greedy = j["greedy_ids"].get<std::vector<int32_t>>();
  r.chain_ids = j["mtp_chain_ids"].get<std::vector<int32_t>>();
  r.hidden = j["config"]["hidden_size"].get<size_t>();
  for (const auto& a : j["arrays"]) {
    const size_t n = a["shape"][0].get<size_t>() * a["shape"][1].get<size_t>();
    auto data = memra::testing::read_f32(dir / "reference.bin", a["offset_bytes"].get<size_t>(), n);
    const std::string name = a["name"].get<std::string>();
    if (name == "prefill_logits") r.vocab = a["shape"][1].get<size_t>(), r.prefill = std::move(data);
    else if (name == "greedy_step_logits") r.steps = std::move(data);
    else if (name == "mtp_logits") r.head = std::move(data);
    else if (name == "mtp_chain_logits") r.chain = std::move(data);
  }
  return r;
}

EngineOptions mtp_options(memra_backend_kind kind, memra_dtype kv) {
  EngineOptions eo = memra::testing::engine_options(kind);
  eo.kv_dtype = kv;
  eo.max_context = 256;
  eo.max_sequences = 12;
  eo.block_size = 8;
  eo.draft_head = true;
  eo.state_snapshot_rows = 8;  // rollbacks from row snapshots (the other path: recurrent_state_test)
  return eo;
}

class EngineMtp : public memra::testing::BackendTest {
 protected:
  void SetUp() override {
    memra::testing::BackendTest::SetUp();
    if (IsSkipped()) return;
    if (!memra::testing::has_reference(mtp_fixture())) GTEST_SKIP() << "fixture " << mtp_fixture() << " absent";
  }
};

// The head's logits at every row of the fixture's sequence, one row per step, within
// `bound` of the reference; all rows in one step end on the same last row bit for bit;
// three drafts chained from the prompt's end.
void check_head(memra_backend_kind kind, const std::string& quant, double bound) {
  const fs::path path = quant == "keep"   ? mtp_fixture()
                        : quant == "gguf" ? mtp_fixture() / "gguf" / "qwen3_5-mtp-BF16.gguf"
                                          : memra::testing::repacked_fixture(mtp_fixture(), quant);
  ASSERT_FALSE(path.empty());
  const MtpReference ref = read_mtp_reference(mtp_fixture());
  const std::string what = "mtp head (" + quant + ") on " + memra::testing::backend_name(kind);
  auto e = memra::testing::open_engine(path, mtp_options(kind, quant == "f32" ? MEMRA_DTYPE_F32 : memra::engine::kDefaultKvDtype));
  ASSERT_TRUE(e);
  ASSERT_EQ(e->draft_layers(), 1) << what;
  const size_t V = ref.vocab, H = ref.hidden;
  ASSERT_EQ(static_cast<size_t>(e->hidden_width()), H);
  std::vector<int32_t> seq_tokens = ref.prompt;
  seq_tokens.insert(seq_tokens.end(), ref.greedy.begin(), ref.greedy.end());
  const std::span<const int32_t> fed(seq_tokens.data(), seq_tokens.size() - 1);  // 47 positions

  // The target with its hidden rows (and its logits against the reference as well).
  const int32_t seq = e->open_sequence();
  StepRequest req{seq, fed, true, true};
  req.want_hidden = true;
  auto out = e->step_sampled({&req, 1});
  ASSERT_TRUE(out.ok()) << out.error().message;
  const std::vector<float>& h = out->front().hidden;
  ASSERT_EQ(h.size(), fed.size() * H);
  double worst_target = 0;
  for (size_t i = 0; i < fed.size(); ++i) {
    const float* want = i < ref.prompt.size() ? ref.prefill.data() + i * V : ref.steps.data() + (i - ref.prompt.size() + 1) * V;
    worst_target = std::max(worst_target, max_rel_diff(out->front().logits[i], want, V));
  }
  EXPECT_LE(worst_target, bound) << what << ": the target's logits";

  // Row i: the token at i + 1 and the target's state at i, one row per step.
  double worst = 0;
  int agree = 0;
  std::vector<float> last_row;
  for (size_t i = 0; i < fed.size(); ++i) {
    HeadRequest r{seq, static_cast<int64_t>(i), {&seq_tokens[i + 1], 1}, {h.data() + i * H, H}};
    auto o = e->step_head({&r, 1});
    ASSERT_TRUE(o.ok()) << o.error().message;
    worst = std::max(worst, max_rel_diff(o->front().logits, ref.head.data() + i * V, V));
    agree += memra::engine::argmax(o->front().logits) == memra::engine::argmax(std::vector<float>(ref.head.data() + i * V, ref.head.data() + (i + 1) * V));
    last_row = o->front().logits;
  }
  std::cout << "[ " << what << " ] head max rel diff vs the reference " << worst << " (target " << worst_target << "), top-1 agrees at "
            << agree << "/" << fed.size() << " rows\n";
  EXPECT_LE(worst, bound) << what << ": the head's logits differ from the reference";
  EXPECT_GE(agree, static_cast<int>(fed.size()) - 1) << what;
  EXPECT_EQ(e->sequence_length(seq), static_cast<int64_t>(fed.size())) << "a head step changed the sequence";

  // The same rows in one step (a second sequence): the last row bit for bit.
  const int32_t seq2 = e->open_sequence();
  StepRequest req2{seq2, fed, false, true};
  req2.want_hidden = true;
  auto out2 = e->step_sampled({&req2, 1});
  ASSERT_TRUE(out2.ok()) << out2.error().message;
  EXPECT_TRUE(out2->front().hidden == h) << what << ": the target's hidden rows depend on the step";
  HeadRequest all{seq2, 0, {seq_tokens.data() + 1, fed.size()}, h};
  auto o2 = e->step_head({&all, 1});
  ASSERT_TRUE(o2.ok()) << o2.error().message;
  EXPECT_TRUE(memra::testing::bitwise_equal(o2->front().logits, last_row)) << what << ": head rows depend on how they were batched";

  // Drafting 3 from the prompt's end: row 23 (x_24, h_23), then the head's own state.
  const size_t n = ref.prompt.size();
  HeadRequest first{seq, static_cast<int64_t>(n - 1), {&seq_tokens[n], 1}, {h.data() + (n - 1) * H, H}};
  auto c = e->step_head({&first, 1});
  ASSERT_TRUE(c.ok()) << c.error().message;
  double worst_chain = max_rel_diff(c->front().logits, ref.chain.data(), V);
  for (size_t j = 1; j < 3; ++j) {
    const int32_t d = memra::engine::argmax(c->front().logits);
    EXPECT_EQ(d, ref.chain_ids[j - 1]) << what << ": chained draft " << j;
    const std::vector<float> m = c->front().hidden;
    HeadRequest next{seq, static_cast<int64_t>(n - 1 + j), {&d, 1}, m};
    c = e->step_head({&next, 1});
    ASSERT_TRUE(c.ok()) << c.error().message;
    worst_chain = std::max(worst_chain, max_rel_diff(c->front().logits, ref.chain.data() + j * V, V));
  }
  EXPECT_EQ(memra::engine::argmax(c->front().logits), ref.chain_ids[2]) << what;
  EXPECT_LE(worst_chain, bound) << what << ": chained drafts";
}

}  // namespace

TEST_P(EngineMtp, HeadMatchesTheReferenceAsF32) { check_head(GetParam(), "f32", 1e-4); }
TEST_P(EngineMtp, HeadMatchesTheReference) { check_head(GetParam(), "keep", memra::testing::kBf16ActivationBound); }
// llama.cpp's conversion of the fixture (blk.4.nextn.*, norms with the 1 folded in), made on
// the GPU machine by tests/cuda/hybrid_on_device.sh.
TEST_P(EngineMtp, GgufHeadMatchesTheReference) {
  if (!fs::exists(mtp_fixture() / "gguf" / "qwen3_5-mtp-BF16.gguf"))
    GTEST_SKIP() << "no llama.cpp conversion of the MTP fixture (tests/cuda/hybrid_on_device.sh makes it)";
  check_head(GetParam(), "gguf", memra::testing::kBf16ActivationBound);
}

// The scheduler's identity gates with the MTP drafter: every request's tokens and
// logprobs as plain decode's, K = 1..8, greedy and seeded, alone and batched; later runs
// hit the prefix cache (the gate's requests share a namespace), rejected drafts roll the
// recurrent state back from row snapshots. The head must also have been useful.
TEST_P(EngineMtp, SchedulerOutputEqualsPlainForK1To8) {
  auto e = memra::testing::open_engine(mtp_fixture(), mtp_options(GetParam(), memra::engine::kDefaultKvDtype));
  ASSERT_TRUE(e);
  Engine* t = e.get();
  const double cost = mtp_draft_cost(*t);
  const int64_t accepted = identity_gate(*t, memra::testing::reference_prompt(mtp_fixture()),
                                         [t, cost] { return [t, cost] { return std::make_unique<MtpDrafter>(*t, cost); }; },
                                         std::string(memra::testing::backend_name(GetParam())) + " mtp");
  EXPECT_GT(accepted, 0) << "the head's drafts were never accepted: the gates only saw rejections";
  EXPECT_GT(t->prefix_cache().entries(), 0) << "the gates never reached the prefix cache";
}

TEST_P(EngineMtp, TheGatesCatchANonInvariantVerifyStep) {
  auto e = memra::testing::open_engine(mtp_fixture(), mtp_options(GetParam(), memra::engine::kDefaultKvDtype));
  ASSERT_TRUE(e);
  Engine* t = e.get();
  EXPECT_TRUE(gate_notices_non_invariance(*t, memra::testing::reference_prompt(mtp_fixture()),
                                          [t] { return std::make_unique<MtpDrafter>(*t, mtp_draft_cost(*t)); }));
}

// memra-gen's loop (generate_speculative) with the head, against generate().
TEST_P(EngineMtp, GenerateSpeculativeEqualsGenerate) {
  auto e = memra::testing::open_engine(mtp_fixture(), mtp_options(GetParam(), memra::engine::kDefaultKvDtype));
  ASSERT_TRUE(e);
  const std::vector<int32_t> prompt = memra::testing::reference_prompt(mtp_fixture());
  int64_t accepted = 0;
  for (bool sampled : {false, true})
    for (int k = 1; k <= 8; ++k) {
      GenerateOptions g;
      g.max_tokens = 32;
      g.sampling.temperature = sampled ? 0.7f : 0.0f;
      g.sampling.seed = 5;
      auto plain = generate(*e, prompt, g, nullptr, nullptr);
      ASSERT_TRUE(plain.ok()) << plain.error().message;
      MtpDrafter d(*e, mtp_draft_cost(*e));
      d.keep_last_logits(true);
      SpeculativeOptions so;
      so.drafter = &d;
      so.k = k;
      so.policy.adaptive = false;
      auto spec = generate_speculative(*e, prompt, g, so, nullptr);
      ASSERT_TRUE(spec.ok()) << spec.error().message;
      EXPECT_EQ(spec->tokens, plain->tokens) << "k=" << k << (sampled ? " seeded" : " greedy");
      EXPECT_GT(spec->drafted, 0);
      EXPECT_TRUE(d.last_error().empty()) << d.last_error();
      accepted += spec->accepted;
      // Caught up as the states come (after every step here) instead of at each draft:
      // the head's KV rows are the same, so are its drafts.
      MtpDrafter eager(*e, mtp_draft_cost(*e), /*catch_up_rows=*/0);
      eager.keep_last_logits(true);
      so.drafter = &eager;
      auto again = generate_speculative(*e, prompt, g, so, nullptr);
      ASSERT_TRUE(again.ok()) << again.error().message;
      EXPECT_EQ(again->tokens, plain->tokens);
      EXPECT_EQ(again->drafted, spec->drafted) << "k=" << k;
      EXPECT_EQ(again->accepted, spec->accepted) << "k=" << k << ": catching up early changed the drafts";
      EXPECT_TRUE(memra::testing::bitwise_equal(eager.last_logits(), d.last_logits()))
          << "k=" << k << ": the last draft's logits differ (the head's KV was written otherwise)";
      EXPECT_LE(eager.waiting_rows(), k + 1) << "states kept waiting";
      EXPECT_LT(eager.most_waiting_rows(), static_cast<int64_t>(prompt.size()) + k + 2);
    }
  EXPECT_GT(accepted, 0);
}

// A checkpoint without MTP weights has no head, and one whose config declares a head it
// does not ship says so (memra-gen, memra-host and memra-bench print it for --spec mtp).
TEST_P(EngineMtp, ACheckpointWithoutMtpWeightsHasNoHead) {
  const fs::path plain = memra::testing::test_model("qwen3_5-tiny");
  auto e = memra::testing::open_engine(plain, mtp_options(GetParam(), memra::engine::kDefaultKvDtype));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->draft_layers(), 0);
  EXPECT_TRUE(e->draft_head_missing().empty());
  HeadRequest r{0, 0, {}, {}};
  EXPECT_FALSE(e->step_head({&r, 1}).ok());

  const fs::path dir = fs::temp_directory_path() / ("memra-mtp-declared-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(plain, dir, fs::copy_options::recursive);
  auto cfg = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  cfg["mtp_num_hidden_layers"] = 1;
  std::ofstream(dir / "config.json") << cfg.dump();
  auto d = memra::testing::open_engine(dir, mtp_options(GetParam(), memra::engine::kDefaultKvDtype));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->draft_layers(), 0);
  EXPECT_NE(d->draft_head_missing().find("declares 1 MTP layer"), std::string::npos) << d->draft_head_missing();
  d.reset();
  fs::remove_all(dir);
}

MEMRA_INSTANTIATE_BACKENDS(EngineMtp);
