// Provenance rows: checkpoints and repacks, lookups, input validation.
#include <unistd.h>

#include <gtest/gtest.h>

#include "registry/registry.hpp"
#include "tests/registry/test_util.hpp"

namespace memra::registry {
namespace {

using test::sample_checkpoint;
using test::TempDir;

class RegistryProvenance : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Registry::open(dir_ / "registry.db");
    ASSERT_TRUE(r.ok()) << r.error().message;
    reg_.emplace(std::move(*r));
  }
  TempDir dir_;
  std::optional<Registry> reg_;
};

TEST_F(RegistryProvenance, FindsACheckpointByIdShaPathAndRepackOutput) {
  auto a = reg_->record_checkpoint(sample_checkpoint((dir_ / "models/a").string(), 'a'));
  auto b = reg_->record_checkpoint(sample_checkpoint((dir_ / "models/b.gguf").string(), 'B'));
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_NE(a->id, b->id);
  EXPECT_EQ(b->sha256, std::string(64, 'b'));  // stored lower-case
  EXPECT_FALSE(a->recorded_at.empty());
  auto rp = reg_->record_repack({b->id, (dir_ / "out/b.memra/").string(), "cafe", "memra-repack 0.1.0",
                                 R"({"quant":"q4_k"})"});
  ASSERT_TRUE(rp.ok()) << rp.error().message;
  EXPECT_EQ(rp->output_path, (dir_ / "out/b.memra").string());  // trailing separator dropped

  EXPECT_EQ(reg_->find_checkpoint(std::to_string(a->id))->id, a->id);
  EXPECT_EQ(reg_->find_checkpoint(std::string(64, 'B'))->id, b->id);
  EXPECT_EQ(reg_->find_checkpoint((dir_ / "models/./a").string())->id, a->id);
  EXPECT_EQ(reg_->find_checkpoint((dir_ / "out/b.memra").string())->id, b->id);

  // A relative path is resolved against the working directory.
  auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_.path());
  auto rel = reg_->find_checkpoint("models/a");
  std::filesystem::current_path(cwd);
  ASSERT_TRUE(rel.ok()) << rel.error().message;
  EXPECT_EQ(rel->id, a->id);

  auto missing = reg_->find_checkpoint("/no/such/model");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::not_found);
  EXPECT_NE(missing.error().message.find("/no/such/model"), std::string::npos);
}

TEST_F(RegistryProvenance, RecordingTheSameCheckpointAgainKeepsItsId) {
  auto info = sample_checkpoint((dir_ / "m").string());
  auto first = reg_->record_checkpoint(info);
  ASSERT_TRUE(first.ok()) << first.error().message;
  info.quant = "f16";
  info.parameters_json = R"({"hidden_size":4096})";
  auto second = reg_->record_checkpoint(info);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second->id, first->id);
  EXPECT_EQ(second->quant, "f16");
  EXPECT_EQ(second->parameters_json, R"({"hidden_size":4096})");
  EXPECT_EQ(second->recorded_at, first->recorded_at);
  EXPECT_EQ(reg_->list_checkpoints()->size(), 1u);
  // Different bytes at the same path are a different checkpoint.
  info.sha256 = std::string(64, 'c');
  auto third = reg_->record_checkpoint(info);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(third->id, first->id);
}

TEST_F(RegistryProvenance, RepacksAreAppendedAndListedPerCheckpoint) {
  auto a = reg_->record_checkpoint(sample_checkpoint((dir_ / "a").string(), 'a'));
  auto b = reg_->record_checkpoint(sample_checkpoint((dir_ / "b").string(), 'b'));
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(reg_->record_repack({a->id, (dir_ / "a.memra").string(), "h" + std::to_string(i), "t", "{}"}).ok());
  ASSERT_TRUE(reg_->record_repack({b->id, (dir_ / "b.memra").string(), "hb", "t", "{}"}).ok());
  EXPECT_EQ(reg_->list_repacks()->size(), 4u);
  auto of_a = reg_->list_repacks(a->id);
  ASSERT_TRUE(of_a.ok());
  ASSERT_EQ(of_a->size(), 3u);
  EXPECT_EQ((*of_a)[2].output_hash, "h2");
  EXPECT_EQ(reg_->list_repacks(b->id)->size(), 1u);
}

TEST_F(RegistryProvenance, RejectsBadInputWithClearErrors) {
  auto bad_sha = sample_checkpoint("/m");
  bad_sha.sha256 = "abc";
  auto r1 = reg_->record_checkpoint(bad_sha);
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(r1.error().message.find("sha256"), std::string::npos);

  auto bad_json = sample_checkpoint("/m");
  bad_json.parameters_json = "{not json";
  auto r2 = reg_->record_checkpoint(bad_json);
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.error().code, ErrorCode::invalid_argument);
  bad_json.parameters_json = "[1,2]";
  EXPECT_FALSE(reg_->record_checkpoint(bad_json).ok());

  auto bad_family = sample_checkpoint("/m");
  bad_family.family = "Llama 3";
  EXPECT_EQ(reg_->record_checkpoint(bad_family).error().code, ErrorCode::invalid_argument);

  auto orphan = reg_->record_repack({424242, "/out", "h", "t", "{}"});
  ASSERT_FALSE(orphan.ok());
  EXPECT_EQ(orphan.error().code, ErrorCode::not_found);
  EXPECT_NE(orphan.error().message.find("424242"), std::string::npos);
  // Nothing was written by the failed calls.
  EXPECT_TRUE(reg_->list_checkpoints()->empty());
  EXPECT_TRUE(reg_->list_repacks()->empty());
}

}  // namespace
}  // namespace memra::registry
