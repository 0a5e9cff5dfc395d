// memra-host's speculative-decoding settings: flags, MEMRA_SPEC* variables and
// the ALIAS=PATH+DRAFT model spec.
#include <gtest/gtest.h>

#include <map>

#include "host/server/host_options.hpp"
#include "tests/server/env_of.hpp"

namespace memra::server {
namespace {

using test_support::env_of;

TEST(ServerSpecOptions, DefaultsFlagsAndEnvironment) {
  HostOptions o;
  EXPECT_EQ(o.spec, "");
  EXPECT_EQ(o.spec_k, 4);
  EXPECT_EQ(o.spec_max_batch, 4);
  EXPECT_LT(o.spec_verify_cost, 0.0) << "default: measured from step times";
  ASSERT_TRUE(apply_environment(o, env_of({{"MEMRA_SPEC", "ngram"}, {"MEMRA_SPEC_K", "6"}, {"MEMRA_DRAFT", "/d.gguf"},
                                           {"MEMRA_SPEC_VERIFY_COST", "0.25"}, {"MEMRA_SPEC_MAX_BATCH", "2"}})));
  EXPECT_EQ(o.spec, "ngram");
  EXPECT_EQ(o.spec_k, 6);
  EXPECT_EQ(o.draft_path, "/d.gguf");
  EXPECT_DOUBLE_EQ(o.spec_verify_cost, 0.25);
  EXPECT_EQ(o.spec_max_batch, 2);
  ASSERT_TRUE(apply_flag(o, "spec", "off"));
  EXPECT_EQ(o.spec, "off");
  ASSERT_TRUE(apply_flag(o, "spec-k", "8"));
  EXPECT_EQ(o.spec_k, 8);
  EXPECT_TRUE(apply_flag(o, "spec", "draft"));
  EXPECT_TRUE(apply_flag(o, "spec", "mtp"));  // refused at load time, with the reason
  auto bad = apply_flag(o, "spec", "eagle");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("off, ngram, draft or mtp"), std::string::npos);
  EXPECT_FALSE(apply_flag(o, "spec-k", "0"));
  EXPECT_FALSE(apply_flag(o, "spec-k", "65"));
  EXPECT_FALSE(apply_flag(o, "spec-verify-cost", "-1"));
  EXPECT_FALSE(apply_flag(o, "spec-verify-cost", "cheap"));
  ASSERT_TRUE(apply_flag(o, "spec-verify-cost", "auto"));
  EXPECT_LT(o.spec_verify_cost, 0.0);
  EXPECT_FALSE(apply_flag(o, "draft", ""));
  EXPECT_TRUE(apply_flag(o, "spec-max-batch", "0"));
}

TEST(ServerSpecOptions, ModelSpecWithADraft) {
  auto s = parse_model_spec("big=/m/qwen3-8b+/m/qwen3-0.6b.gguf");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->alias, "big");
  EXPECT_EQ(s->path, "/m/qwen3-8b");
  EXPECT_EQ(s->draft, "/m/qwen3-0.6b.gguf");
  s = parse_model_spec("/m/qwen3-8b.gguf+/m/small.gguf");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->alias, "qwen3-8b");
  EXPECT_EQ(s->draft, "/m/small.gguf");
  s = parse_model_spec("a=/m/x");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->draft, "");
  EXPECT_FALSE(parse_model_spec("a=/m/x+"));
  auto list = parse_model_list("a=/m/x+/m/d,b=/m/y");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].draft, "/m/d");
  EXPECT_EQ((*list)[1].draft, "");
}

}  // namespace
}  // namespace memra::server
