// Oracle: the embedded default model (memra-demo, host/default_model) on the CPU reference
// backend against transformers' float32 logits on a fixed prompt (tests/demo_model/
// reference.*, written by scripts/demo_model/train_demo_model.py from the saved bf16
// weights reloaded as float32, eager attention, on the CPU).
//
// Bounds, the v2 contract's for a bf16 model (docs/ARCHITECTURE.md, "Numeric contract"):
// transformers' 24 greedy ids and every position's logits within 1e-2 of the row's max
// |logit| (kBf16ActivationBound: the bf16 weights compute on bf16-rounded activations,
// transformers on float32 ones; measured 3.1e-3 with a float32 KV cache), with a float32
// and with a bf16 KV cache (whose rounding adds to it).
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "host/engine/engine.hpp"
#include "host/engine/sampler.hpp"
#include "host/engine/text_model.hpp"
#include "tests/support/fixture_engine.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kModel = fs::path(MEMRA_SOURCE_ROOT) / "host/default_model";
const fs::path kDraft = fs::path(MEMRA_SOURCE_ROOT) / "host/default_draft_model";
const fs::path kReference = fs::path(MEMRA_SOURCE_ROOT) / "tests/demo_model";

void check_against_transformers(memra_dtype kv_dtype, double bound) {
  const memra::testing::TransformersReference ref = memra::testing::read_reference(kReference);
  ASSERT_EQ(ref.input_ids.size(), 24u);
  ASSERT_EQ(ref.vocab, 4096u);
  memra::engine::EngineOptions eo;
  eo.kv_dtype = kv_dtype;
  auto engine = memra::testing::open_engine(kModel, eo);
  ASSERT_TRUE(engine);
  ASSERT_EQ(engine->vocab_size(), 4096);
  const int32_t seq = engine->open_sequence();
  memra::engine::StepRequest req{seq, ref.input_ids, true, true};
  auto out = engine->step({&req, 1});
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_EQ(out->size(), ref.input_ids.size());
  double worst = 0;
  for (size_t i = 0; i < ref.input_ids.size(); ++i)
    worst = std::max(worst, memra::testing::max_rel_diff((*out)[i], ref.prefill.data() + i * ref.vocab, ref.vocab));
  EXPECT_LE(worst, bound) << "prefill logits differ from transformers";

  std::vector<int32_t> produced;
  std::vector<float> last = out->back();
  double worst_step = 0;
  for (size_t s = 0; s < ref.greedy_ids.size(); ++s) {
    worst_step = std::max(worst_step, memra::testing::max_rel_diff(last, ref.steps.data() + s * ref.vocab, ref.vocab));
    produced.push_back(memra::engine::argmax(last));
    memra::engine::StepRequest d{seq, {&produced.back(), 1}, false};
    auto o = engine->step({&d, 1});
    ASSERT_TRUE(o.ok()) << o.error().message;
    last = (*o)[0];
  }
  EXPECT_EQ(produced, ref.greedy_ids) << "greedy continuation differs from transformers'";
  EXPECT_LE(worst_step, bound) << "decode-step logits differ from transformers";
  std::cout << "[ memra-demo, KV " << memra::engine::kv_dtype_name(kv_dtype) << " ] prefill max rel diff " << worst
            << ", decode " << worst_step << "\n";
}

TEST(DemoModel, LogitsMatchTransformersWithAFloat32KvCache) {
  check_against_transformers(MEMRA_DTYPE_F32, memra::testing::kBf16ActivationBound);
}

TEST(DemoModel, LogitsMatchTransformersWithAnF16KvCache) {
  check_against_transformers(MEMRA_DTYPE_F16, memra::testing::kBf16ActivationBound);
}

TEST(DemoModel, LogitsMatchTransformersWithABf16KvCache) {
  check_against_transformers(MEMRA_DTYPE_BF16, memra::testing::kBf16ActivationBound);
}

// The prompt ids of the reference are what memra's tokenizer makes of its text, and the
// greedy ids decode to the English the reference recorded.
TEST(DemoModel, TokenizerAgreesWithTheReference) {
  const auto doc = nlohmann::json::parse(std::ifstream(kReference / "reference.json"));
  auto tok = memra::engine::load_tokenizer(kModel.string());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const std::vector<int32_t> ids = (*tok)->encode(doc["prompt_text"].get<std::string>(), false);
  ASSERT_GE(ids.size(), 24u);
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + 24), doc["input_ids"].get<std::vector<int32_t>>());
  EXPECT_EQ((*tok)->decode(doc["greedy_ids"].get<std::vector<int32_t>>(), {.skip_special_tokens = true, .clean_up_tokenization_spaces = std::nullopt}),
            doc["greedy_text"].get<std::string>());
}

// The draft model shares the demo model's vocabulary, token for token (what --spec draft
// checks at load).
TEST(DemoModel, TheDraftModelHasTheSameTokenizer) {
  auto target = memra::engine::load_tokenizer(kModel.string());
  auto draft = memra::engine::load_tokenizer(kDraft.string());
  ASSERT_TRUE(target.ok() && draft.ok());
  ASSERT_EQ((*target)->vocab_size(), (*draft)->vocab_size());
  for (int32_t id = 0; id < static_cast<int32_t>((*target)->vocab_size()); ++id)
    ASSERT_EQ((*target)->token_text(id), (*draft)->token_text(id)) << "token " << id;
  auto engine = memra::testing::open_engine(kDraft);
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->vocab_size(), 4096);
}

}  // namespace
