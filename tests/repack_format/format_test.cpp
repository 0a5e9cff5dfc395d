// The .memra format library on its own: manifest JSON, the atomic writer (failures at
// every stage leave nothing behind), the validating reader (each kind of damage is
// refused with a message naming it), and the GGUF vocabulary file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "repack/checkpoint/model_config.hpp"
#include "repack/format/crc32c.hpp"
#include "repack/format/gguf_vocab_file.hpp"
#include "repack/format/layout.hpp"
#include "repack/format/reader.hpp"
#include "repack/format/sha256.hpp"
#include "repack/format/writer.hpp"
#include "tests/repack_format/helpers.hpp"
#include "tests/support/checkpoint_config.hpp"

namespace {

using namespace memra;
namespace fs = std::filesystem;
using repack_test::TempDir;

// A small valid config (the llama fixture's shape, written by hand so these tests need no fixtures).
std::string tiny_config_json() {
  const char* cfg = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","vocab_size":64,"hidden_size":32,
    "intermediate_size":64,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,
    "max_position_embeddings":128,"rms_norm_eps":1e-6,"rope_theta":10000.0,"torch_dtype":"bfloat16","eos_token_id":1})";
  auto c = memra::testing::hf_config_from_json(cfg);
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
  return model_config_to_json(*c);
}

struct Written {
  std::vector<std::vector<uint8_t>> data;
  std::string manifest_sha;
};

// Writes a 3-tensor .memra directory through the Writer.
Result<Written> write_sample(const fs::path& dst, format::WriterOptions wo = {}) {
  auto w = format::Writer::create(dst, std::move(wo));
  if (!w) return w.error();
  std::vector<format::TensorEntry> t(3);
  t[0] = {"token_embd.weight", "model.embed_tokens.weight", {64, 32}, "bf16", 1, "bf16", 0, 0, 64 * 32 * 2, ""};
  t[1] = {"output_norm.weight", "model.norm.weight", {32}, "f32", 1, "bf16", 0, 0, 32 * 4, ""};
  t[2] = {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", {32, 256}, "q8_0", 1, "bf16", 0, 0, 32 * 8 * 34, ""};
  MEMRA_TRY((*w)->layout(t));
  Written out;
  for (size_t i = 0; i < t.size(); ++i) {
    std::vector<uint8_t> bytes(t[i].bytes);
    for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<uint8_t>((k * 31 + i * 7) & 0x7f);  // no NaN-ish patterns needed
    auto sha = (*w)->write_tensor(t[i], bytes.data());
    if (!sha) return sha.error();
    t[i].checksum = *sha;
    out.data.push_back(std::move(bytes));
  }
  MEMRA_TRY((*w)->write_file("tokenizer.json", "{}"));
  MEMRA_TRY((*w)->write_file("source/config.json", "{}"));
  format::Manifest m;
  m.created_by = "test";
  m.source = {"/nowhere", "safetensors", std::string(64, 'a'), 123, {}};
  m.config_json = tiny_config_json();
  m.tokenizer = {"hf", {"tokenizer.json"}, ""};
  m.precision.requested = "keep";
  m.tensors = t;
  auto sha = (*w)->commit(m);
  if (!sha) return sha.error();
  out.manifest_sha = *sha;
  return out;
}

// Rewrites manifest.json through a JSON edit.
void edit_manifest(const fs::path& dir, const std::function<void(nlohmann::json&)>& f) {
  auto j = nlohmann::json::parse(repack_test::read_text(dir / "manifest.json"));
  f(j);
  const std::string s = j.dump(1);
  repack_test::write_bytes(dir / "manifest.json", s.data(), s.size());
}

TEST(RepackFormat, WriteThenReadBackEveryByte) {
  TempDir tmp;
  const fs::path dst = tmp / "m.memra";
  auto w = write_sample(dst);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(repack_test::list_dir(tmp.path()), std::vector<std::string>{"m.memra"});
  EXPECT_EQ(repack_test::list_dir(dst),
            (std::vector<std::string>{"manifest.json", "source", "tokenizer.json", "weights-00000.bin"}));
  EXPECT_EQ(w->manifest_sha, repack_test::sha256_file(dst / "manifest.json"));
  auto m = format::MemraModel::open(dst, {true, 2});
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->tensors().size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const format::Tensor& t = m->tensors()[i];
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % format::kAlignment, 0u) << t.entry->name;
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.entry->bytes), w->data[i]) << t.entry->name;
    EXPECT_EQ(t.entry->checksum, format::crc32c_hex(w->data[i].data(), w->data[i].size()));
  }
  EXPECT_EQ(m->config().architecture, "LlamaForCausalLM");
  EXPECT_EQ(model_config_to_json(m->config()), tiny_config_json());
  EXPECT_NE(m->find("output_norm.weight"), nullptr);
  EXPECT_EQ(m->find("nope"), nullptr);
}

TEST(RepackFormat, TensorsSpreadOverSeveralBlobs) {
  TempDir tmp;
  format::WriterOptions wo;
  wo.max_blob_bytes = 5000;  // token_embd + output_norm fit in the first; attn_q does not
  auto w = write_sample(tmp / "m.memra", wo);
  ASSERT_TRUE(w.ok()) << w.error().message;
  auto m = format::MemraModel::open(tmp / "m.memra", {true, 2});
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->manifest().blobs.size(), 2u);
  EXPECT_EQ(m->manifest().blobs[1].file, "weights-00001.bin");
  const format::Tensor* q = m->find("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->entry->blob, 1u);
  EXPECT_EQ(q->entry->offset, 0u);
  EXPECT_EQ(std::vector<uint8_t>(q->data, q->data + q->entry->bytes), w->data[2]);
}

TEST(RepackFormat, ManifestJsonRoundTrips) {
  format::Manifest m;
  m.created_by = "memra-repack 9";
  m.created_at = "2026-01-01T00:00:00Z";
  m.source = {"/a/b", "gguf", std::string(64, 'b'), 5, {{"b", 5, std::string(64, 'c')}}};
  m.config_json = tiny_config_json();
  m.tokenizer = {"gguf", {"tokenizer.gguf.json"}, "chat_template.jinja"};
  m.precision = {"q4_k", {{"output.weight", "q6_k", "why"}}};
  m.blobs = {{"weights-00000.bin", 1024}};
  m.tensors = {{"a", "src.a", {2, 256}, "q4_k", 1, "bf16", 0, 256, 288, "0badc0de"}};
  auto back = format::manifest_from_json(format::manifest_to_json(m));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(format::manifest_to_json(*back), format::manifest_to_json(m));
  EXPECT_EQ(back->tensors[0].shape, (std::vector<uint64_t>{2, 256}));
  EXPECT_EQ(back->tokenizer.chat_template_file, "chat_template.jinja");
  EXPECT_EQ(back->precision.rules[0].scheme, "q6_k");
}

TEST(RepackFormat, LayoutSizesFollowTheSchemes) {
  EXPECT_EQ(format::tensor_bytes("bf16", 1, {3, 5}), 30u);
  EXPECT_EQ(format::tensor_bytes("f32", 1, {7}), 28u);
  EXPECT_EQ(format::tensor_bytes("q4_k", 1, {2, 512}), 2u * 2 * 144);
  EXPECT_EQ(format::tensor_bytes("q8_0", 1, {4, 64}), 4u * 2 * 34);
  EXPECT_EQ(format::tensor_bytes("q6_k", 1, {1, 256}), 210u);
  EXPECT_EQ(format::tensor_bytes("fp8", 1, {3, 256}), 3u * (2 * 4 + 256));
  EXPECT_EQ(format::tensor_bytes("q4_k", 1, {2, 100}), std::nullopt);  // breaks the block size
  EXPECT_EQ(format::tensor_bytes("fp8", 1, {2, 100}), std::nullopt);
  EXPECT_EQ(format::tensor_bytes("q4_k", 2, {2, 256}), std::nullopt);  // unknown layout version
  EXPECT_EQ(format::tensor_bytes("q9_z", 1, {2, 256}), std::nullopt);
}

// A failure at any stage of writing leaves neither the destination nor a temporary directory.
TEST(RepackFormat, FailureAtAnyStageLeavesNothing) {
  for (const std::string point : {"tensor#1", "tensor#3", "manifest", "rename"}) {
    TempDir tmp;
    format::WriterOptions wo;
    int tensors = 0;
    wo.fault = [&](std::string_view p) -> Status {
      if (p == "tensor") ++tensors;
      const std::string here = p == "tensor" ? "tensor#" + std::to_string(tensors) : std::string(p);
      if (here == point) return make_error(ErrorCode::io, "injected");
      return {};
    };
    auto w = write_sample(tmp / "m.memra", wo);
    ASSERT_FALSE(w.ok()) << point;
    EXPECT_EQ(w.error().message, "injected");
    EXPECT_TRUE(repack_test::list_dir(tmp.path()).empty()) << point << ": left " << ::testing::PrintToString(repack_test::list_dir(tmp.path()));
  }
}

TEST(RepackFormat, UnwritableBlobIsCleanedUp) {
  // Directory permissions do not stop root (the CI user): occupy the blob's path instead.
  TempDir tmp;
  const fs::path dst = tmp / "m.memra";
  auto w = format::Writer::create(dst);
  ASSERT_TRUE(w.ok()) << w.error().message;
  // Something already sits at the blob's path: creating it must fail.
  fs::create_directory((*w)->temp_dir() / "weights-00000.bin");
  std::vector<format::TensorEntry> t(1);
  t[0] = {"a", "a", {4}, "f32", 1, "f32", 0, 0, 16, ""};
  const Status st = (*w)->layout(t);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("weights-00000.bin"), std::string::npos) << st.error().message;
  w->reset();  // destroyed before commit: aborts
  EXPECT_TRUE(repack_test::list_dir(tmp.path()).empty());
}

TEST(RepackFormat, ExistingDestinationIsRefusedUnlessOverwriting) {
  TempDir tmp;
  const fs::path dst = tmp / "m.memra";
  ASSERT_TRUE(write_sample(dst).ok());
  const std::string before = repack_test::read_text(dst / "manifest.json");
  auto again = write_sample(dst);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::conflict);
  EXPECT_NE(again.error().message.find("--force"), std::string::npos);
  EXPECT_EQ(repack_test::read_text(dst / "manifest.json"), before);
  format::WriterOptions wo;
  wo.overwrite = true;
  auto replaced = write_sample(dst, wo);
  ASSERT_TRUE(replaced.ok()) << replaced.error().message;
  EXPECT_EQ(repack_test::list_dir(tmp.path()), std::vector<std::string>{"m.memra"});  // old copy removed
  EXPECT_TRUE(format::MemraModel::open(dst).ok());
}

// Writers hold an flock in their temporary directory: one whose lock is free belongs to
// a dead writer (kill -9) and goes, whatever output it was for; one whose lock is held
// stays. Without a lock file (older memra, or the moment before the lock), the pid decides.
TEST(RepackFormat, StaleTemporaryDirectoriesOfDeadWritersAreRemoved) {
  TempDir tmp;
  const std::string me = std::to_string(::getpid());
  fs::create_directory(tmp / ".m.memra.tmp-999999999-0000abcd");          // no lock, dead pid
  fs::create_directory(tmp / (".m.memra.tmp-" + me + "-0000abcd"));        // no lock, live pid
  fs::create_directory(tmp / ".other.memra.tmp-999999999-0000abcd");      // another output's, dead
  fs::create_directory(tmp / (".dead.memra.tmp-" + me + "-00000001"));     // a lock nobody holds
  repack_test::write_bytes(tmp / (".dead.memra.tmp-" + me + "-00000001") / ".writer.lock", "", 0);
  fs::create_directory(tmp / (".live.memra.tmp-" + me + "-00000002"));     // a lock held (by this test)
  const fs::path held = tmp / (".live.memra.tmp-" + me + "-00000002") / ".writer.lock";
  const int fd = ::open(held.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  ASSERT_TRUE(write_sample(tmp / "m.memra").ok());
  EXPECT_EQ(repack_test::list_dir(tmp.path()),
            (std::vector<std::string>{".live.memra.tmp-" + me + "-00000002", ".m.memra.tmp-" + me + "-0000abcd",
                                      "m.memra"}));
  ::close(fd);
  EXPECT_EQ(format::remove_stale_temp_dirs(tmp.path()).removed, 1u);  // its lock is free now
  EXPECT_FALSE(fs::exists(tmp / "m.memra" / ".writer.lock")) << "the lock file travelled into the output";
}

struct Damage {
  const char* what;
  std::function<void(const fs::path&)> apply;
  const char* message;  // expected in the error
  bool needs_verify = false;
};

TEST(RepackFormat, ReaderRefusesEveryKindOfDamage) {
  const std::vector<Damage> cases = {
      {"newer version", [](const fs::path& d) { edit_manifest(d, [](auto& j) { j["version"] = 2; }); }, "format version 2"},
      {"wrong format name", [](const fs::path& d) { edit_manifest(d, [](auto& j) { j["format"] = "gguf"; }); }, "expected 'memra'"},
      {"not json", [](const fs::path& d) { repack_test::write_bytes(d / "manifest.json", "{", 1); }, "not a JSON object"},
      {"missing field", [](const fs::path& d) { edit_manifest(d, [](auto& j) { j["tensors"][0].erase("bytes"); }); }, "'bytes' is missing"},
      {"misaligned", [](const fs::path& d) { edit_manifest(d, [](auto& j) { j["tensors"][2]["offset"] = 4100; }); }, "not aligned"},
      {"past the end", [](const fs::path& d) { edit_manifest(d, [](auto& j) { j["tensors"][2]["offset"] = 1u << 20; }); }, "past the end"},
      {"wrong byte count", [](const fs::path& d) { edit_manifest(d, [](auto& j) { j["tensors"][0]["bytes"] = 100; }); }, "need 4096"},
      {"overlap", [](const fs::path& d) { edit_manifest(d, [](auto& j) { j["tensors"][1]["offset"] = 256; }); }, "overlap"},
      // A scheme memra does not know at layout 1 is a quant plugin's (its plugin checks the
      // bytes at load); at another layout nobody can read it.
      {"unknown scheme and layout", [](const fs::path& d) { edit_manifest(d, [](auto& j) { j["tensors"][0]["scheme"] = "q9_z"; j["tensors"][0]["layout"] = 2; }); }, "cannot read"},
      {"blob escapes", [](const fs::path& d) { edit_manifest(d, [](auto& j) { j["blobs"][0]["file"] = "../x.bin"; }); }, "plain file name"},
      {"truncated blob",
       [](const fs::path& d) { fs::resize_file(d / "weights-00000.bin", fs::file_size(d / "weights-00000.bin") - 1); },
       "the manifest says"},
      {"missing blob", [](const fs::path& d) { fs::remove(d / "weights-00000.bin"); }, "is missing"},
      {"bad config", [](const fs::path& d) { edit_manifest(d, [](auto& j) { j["config"]["hidden_size"] = 0; }); }, "config"},
      {"missing tokenizer", [](const fs::path& d) { fs::remove(d / "tokenizer.json"); }, "tokenizer file"},
      {"flipped byte",
       [](const fs::path& d) {
         std::fstream f(d / "weights-00000.bin", std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(10);
         f.put('\x7f');
       },
       "does not match its crc32c", true},
  };
  for (const Damage& c : cases) {
    TempDir tmp;
    const fs::path dst = tmp / "m.memra";
    ASSERT_TRUE(write_sample(dst).ok());
    c.apply(dst);
    if (c.needs_verify) {
      auto plain = format::MemraModel::open(dst);
      ASSERT_TRUE(plain.ok()) << c.what << ": checksums are only read on request";
    }
    auto m = format::MemraModel::open(dst, {true, 1});
    ASSERT_FALSE(m.ok()) << c.what;
    EXPECT_NE(m.error().message.find(c.message), std::string::npos) << c.what << ": " << m.error().message;
  }
}

// Bit-at-a-time CRC-32C: the definition, as the oracle for the table and crc32-instruction paths.
uint32_t crc32c_reference(const uint8_t* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? 0x82f63b78u : 0u);
  }
  return ~c;
}

TEST(RepackFormat, Crc32cMatchesItsDefinition) {
  EXPECT_EQ(format::crc32c("123456789", 9), 0xe3069283u);  // the published check value
  EXPECT_EQ(format::crc32c_hex("123456789", 9), "e3069283");
  EXPECT_EQ(format::crc32c("", 0), 0u);
  std::vector<uint8_t> buf(5000);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  for (size_t off : {0, 1, 3, 7}) {
    for (size_t n : {0, 1, 7, 8, 9, 63, 64, 65, 4093}) {
      EXPECT_EQ(format::crc32c(buf.data() + off, n), crc32c_reference(buf.data() + off, n)) << off << "+" << n;
      EXPECT_EQ(format::crc32c_table(buf.data() + off, n), crc32c_reference(buf.data() + off, n)) << off << "+" << n;
      // In pieces, as the writer feeds it.
      format::Crc32c c;
      c.update(buf.data() + off, n / 3);
      c.update(buf.data() + off + n / 3, n - n / 3);
      EXPECT_EQ(c.value(), crc32c_reference(buf.data() + off, n));
    }
  }
}

TEST(RepackFormat, GgufVocabularyFileRoundTrips) {
  gguf::EmbeddedTokenizer t;
  t.model = "gpt2";
  t.pre = "qwen2";
  t.tokens = {"a", "b", "\xff\xfe", "\xc4\xa0hello", "<|im_end|>"};
  t.scores = {0.5f, -1.25f, 0.0f, 3.0f, 1e-8f};
  t.token_types = {1, 1, 6, 1, 3};
  t.merges = {"a b", "\xc4\xa0 h"};
  t.eos_id = 4;
  t.pad_id = 0;
  t.add_bos = false;
  t.chat_template = "{{ messages }}";
  auto back = format::gguf_tokenizer_from_json(format::gguf_tokenizer_to_json(t));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->tokens, t.tokens);
  EXPECT_EQ(back->scores, t.scores);
  EXPECT_EQ(back->token_types, t.token_types);
  EXPECT_EQ(back->merges, t.merges);
  EXPECT_EQ(back->eos_id, t.eos_id);
  EXPECT_EQ(back->pad_id, t.pad_id);
  EXPECT_EQ(back->bos_id, std::nullopt);
  EXPECT_EQ(back->add_bos, t.add_bos);
  EXPECT_EQ(back->chat_template, t.chat_template);
  auto bad = format::gguf_tokenizer_from_json(R"({"tokens":["a"],"eos_token_id":5})");
  EXPECT_FALSE(bad.ok());
}

}  // namespace
