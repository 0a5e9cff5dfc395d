// Damaged and hostile files: every one must give a clean Error (no crash, no
// huge allocation). Made by mutating copies of fixtures, or written small.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstring>

#include "repack/checkpoint/gguf.hpp"
#include "repack/checkpoint/safetensors.hpp"
#include "tests/repack/test_util.hpp"
#include "tests/repack/test_writers.hpp"

namespace memra::testing {
namespace {

long peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024;
}

void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
size_t find_bytes(const std::vector<uint8_t>& hay, const std::string& needle, size_t from = 0) {
  auto it = std::search(hay.begin() + static_cast<long>(from), hay.end(), needle.begin(), needle.end());
  return it == hay.end() ? std::string::npos : static_cast<size_t>(it - hay.begin());
}

// Each test also checks, on the way out, that no input made the reader allocate
// much (ctest runs every test in its own process, so the peak is the test's own).
class CheckpointCorrupt : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_LT(peak_rss_mb(), 512) << "a corrupt file made the reader allocate too much"; }
};

// ---- safetensors --------------------------------------------------------------

Error st_error(const std::vector<uint8_t>& bytes) {
  auto h = safetensors::parse_header(bytes.data(), bytes.size());
  EXPECT_FALSE(h.ok());
  return h.ok() ? Error{} : h.error();
}

std::vector<uint8_t> st_with_header(const std::string& json, size_t data_bytes) {
  std::vector<uint8_t> b(8);
  put_u64(b, 0, json.size());
  b.insert(b.end(), json.begin(), json.end());
  b.resize(b.size() + data_bytes, 0);
  return b;
}

TEST_F(CheckpointCorrupt, SafetensorsTruncatedAnywhere) {
  MEMRA_REQUIRE_FIXTURES();
  const auto good = read_bytes(fixture("models/llama/model.safetensors"));
  ASSERT_TRUE(safetensors::parse_header(good.data(), good.size()).ok());
  uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  for (size_t cut : {size_t{0}, size_t{4}, size_t{7}, size_t{8}, size_t{9}, size_t(8 + n / 2), size_t(8 + n - 1),
                     size_t(8 + n), size_t(8 + n + 100), good.size() - 1}) {
    SCOPED_TRACE(cut);
    std::vector<uint8_t> b(good.begin(), good.begin() + static_cast<long>(cut));
    const Error e = st_error(b);
    EXPECT_EQ(e.code, ErrorCode::corrupt) << e.message;
  }
  // Through the file API too.
  TempDir dir;
  write_bytes(dir / "cut.safetensors", {good.begin(), good.begin() + static_cast<long>(good.size() / 2)});
  auto f = safetensors::File::open((dir / "cut.safetensors").string());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("cut.safetensors"), std::string::npos);
  EXPECT_NE(f.error().message.find("past the data section"), std::string::npos) << f.error().message;
}

TEST_F(CheckpointCorrupt, SafetensorsHeaderLengthLies) {
  MEMRA_REQUIRE_FIXTURES();
  auto b = read_bytes(fixture("models/llama/model.safetensors"));
  put_u64(b, 0, b.size());  // past EOF
  EXPECT_NE(st_error(b).message.find("runs past the end"), std::string::npos);
  put_u64(b, 0, ~uint64_t{0} >> 1);  // absurd
  EXPECT_NE(st_error(b).message.find("exceeds"), std::string::npos);
  put_u64(b, 0, 1);
  EXPECT_EQ(st_error(b).code, ErrorCode::corrupt);
}

TEST_F(CheckpointCorrupt, SafetensorsBadJson) {
  MEMRA_REQUIRE_FIXTURES();
  const auto good = read_bytes(fixture("models/llama/model.safetensors"));
  {  // non-UTF-8 byte inside a tensor name
    auto b = good;
    const size_t at = find_bytes(b, "lm_head");
    ASSERT_NE(at, std::string::npos);
    b[at + 2] = 0xff;
    EXPECT_NE(st_error(b).message.find("not well-formed UTF-8 JSON"), std::string::npos);
  }
  {  // broken syntax
    auto b = good;
    const size_t at = find_bytes(b, "\"dtype\":");
    b[at + 7] = ';';
    EXPECT_NE(st_error(b).message.find("not well-formed"), std::string::npos);
  }
  EXPECT_NE(st_error(st_with_header("[1,2]", 0)).message.find("start with '{'"), std::string::npos);
  EXPECT_NE(st_error(st_with_header(std::string(100000, '[') , 0)).message.find("start with"), std::string::npos);
  EXPECT_NE(st_error(st_with_header("{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}", 0)).message.find("nests deeper"),
            std::string::npos);
  EXPECT_EQ(st_error(st_with_header(R"({"a": 5})", 0)).code, ErrorCode::corrupt);
  EXPECT_EQ(st_error(st_with_header(R"({"__metadata__": {"k": 1}})", 0)).code, ErrorCode::corrupt);
}

TEST_F(CheckpointCorrupt, SafetensorsRangesAndDtypes) {
  auto msg = [](const std::string& json, size_t data) { return st_error(st_with_header(json, data)).message; };
  EXPECT_NE(msg(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12)
                .find("overlaps"),
            std::string::npos);
  EXPECT_NE(msg(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4).find("past the data section"), std::string::npos);
  EXPECT_NE(msg(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8).find("shape x dtype needs 12"), std::string::npos);
  EXPECT_NE(msg(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8).find("begin > end"), std::string::npos);
  EXPECT_NE(msg(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8).find("negative"), std::string::npos);
  EXPECT_NE(msg(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})", 8).find("overflows"),
            std::string::npos);
  EXPECT_NE(msg(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})", 8).find("past the data"),
            std::string::npos);
  EXPECT_NE(msg(R"({"a":{"dtype":"F32","shape":[2]}})", 8).find("lacks"), std::string::npos);
  const Error e = st_error(st_with_header(R"({"a":{"dtype":"F7","shape":[2],"data_offsets":[0,2]}})", 2));
  EXPECT_EQ(e.code, ErrorCode::unsupported);
  EXPECT_NE(e.message.find("'F7'"), std::string::npos) << e.message;
  // Valid: empty tensors share an offset without overlapping; gaps are allowed.
  auto ok = st_with_header(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"I8","shape":[2],"data_offsets":[0,2]},"c":{"dtype":"U8","shape":[],"data_offsets":[4,5]}})", 5);
  auto h = safetensors::parse_header(ok.data(), ok.size());
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->tensors.size(), 3u);
}

// ---- GGUF ---------------------------------------------------------------------

Error gguf_error(const std::vector<uint8_t>& bytes) {
  auto g = gguf::parse(bytes.data(), bytes.size());
  EXPECT_FALSE(g.ok());
  return g.ok() ? Error{} : g.error();
}

// Absolute position of a tensor info's offset field in a GGUF image.
size_t tensor_offset_field(const std::vector<uint8_t>& b, const gguf::Parsed& p, const std::string& name) {
  const gguf::TensorInfo* t = p.find_tensor(name);
  // Tensor infos are the last thing before the data; the name is unique there.
  size_t at = std::string::npos, from = 0;
  while ((from = find_bytes(b, name, from)) != std::string::npos && from < p.data_offset) at = from++;
  return at + name.size() + 4 + 8 * t->ne.size() + 4;
}

TEST_F(CheckpointCorrupt, GgufTruncatedAnywhere) {
  MEMRA_REQUIRE_FIXTURES();
  const auto good = read_bytes(fixture("gguf/llama/llama-Q4_0.gguf"));
  auto p = gguf::parse(good.data(), good.size());
  ASSERT_TRUE(p.ok());
  int n = 0;
  for (size_t cut = 0; cut < p->data_offset; cut += 97, ++n) {
    std::vector<uint8_t> b(good.begin(), good.begin() + static_cast<long>(cut));
    EXPECT_EQ(gguf_error(b).code, ErrorCode::corrupt) << "cut at " << cut;
  }
  for (size_t cut : {p->data_offset, p->data_offset + 1000, good.size() - 1}) {
    std::vector<uint8_t> b(good.begin(), good.begin() + static_cast<long>(cut));
    EXPECT_NE(gguf_error(b).message.find("runs past"), std::string::npos) << "cut at " << cut;
  }
  EXPECT_GT(n, 100);
}

TEST_F(CheckpointCorrupt, GgufHeaderFields) {
  MEMRA_REQUIRE_FIXTURES();
  const auto good = read_bytes(fixture("gguf/llama/llama-Q4_0.gguf"));
  auto b = good;
  b[0] = 'X';
  EXPECT_NE(gguf_error(b).message.find("not a GGUF file"), std::string::npos);
  b = good;
  put_u32(b, 4, 1);
  EXPECT_NE(gguf_error(b).message.find("version 1"), std::string::npos);
  put_u32(b, 4, 3u << 24);
  EXPECT_NE(gguf_error(b).message.find("big-endian"), std::string::npos);
  b = good;
  put_u64(b, 8, uint64_t{1} << 60);  // tensor count
  EXPECT_NE(gguf_error(b).message.find("tensor count"), std::string::npos);
  b = good;
  put_u64(b, 16, ~uint64_t{0});  // kv count
  EXPECT_NE(gguf_error(b).message.find("metadata count"), std::string::npos);
  b = good;
  put_u64(b, 24, uint64_t{1} << 62);  // first key's length
  EXPECT_NE(gguf_error(b).message.find("metadata key length"), std::string::npos);
  b = good;
  const size_t tok = find_bytes(b, "tokenizer.ggml.tokens");
  ASSERT_NE(tok, std::string::npos);
  put_u64(b, tok + 21 + 4 + 4, uint64_t{1} << 61);  // the vocabulary array's count
  EXPECT_NE(gguf_error(b).message.find("cannot fit"), std::string::npos);
  b = good;
  put_u64(b, find_bytes(b, "tokenizer.ggml.tokens") + 21 + 4 + 4 + 8, uint64_t{1} << 40);  // first token's length
  EXPECT_NE(gguf_error(b).message.find("runs past the end"), std::string::npos);
  b = good;
  put_u32(b, tok + 21, 13);  // unknown value type
  EXPECT_NE(gguf_error(b).message.find("unknown value type"), std::string::npos);
}

TEST_F(CheckpointCorrupt, GgufTensorOffsetsLie) {
  MEMRA_REQUIRE_FIXTURES();
  const auto good = read_bytes(fixture("gguf/llama/llama-Q4_0.gguf"));
  auto p = gguf::parse(good.data(), good.size());
  ASSERT_TRUE(p.ok());
  const std::string last = p->tensors.back().name, first = p->tensors.front().name;
  auto b = good;
  put_u64(b, tensor_offset_field(b, *p, last), good.size());  // past EOF
  EXPECT_NE(gguf_error(b).message.find("runs past"), std::string::npos);
  b = good;
  put_u64(b, tensor_offset_field(b, *p, last), p->tensors.back().offset + 1);  // misaligned
  EXPECT_NE(gguf_error(b).message.find("not a multiple of the alignment"), std::string::npos);
  b = good;
  put_u64(b, tensor_offset_field(b, *p, last), p->tensors.front().offset);  // overlaps the first tensor
  EXPECT_NE(gguf_error(b).message.find("overlaps"), std::string::npos);
  b = good;
  put_u64(b, tensor_offset_field(b, *p, first), ~uint64_t{0} - 31);  // wraps if added carelessly
  EXPECT_NE(gguf_error(b).message.find("runs past"), std::string::npos);
  b = good;
  put_u32(b, tensor_offset_field(b, *p, first) - 4, 200);  // unknown ggml type id
  const Error e = gguf_error(b);
  EXPECT_EQ(e.code, ErrorCode::unsupported);
  EXPECT_NE(e.message.find("unknown ggml type id 200"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find(first), std::string::npos);
  b = good;
  const size_t ndims_at = tensor_offset_field(b, *p, first) - 4 - 8 * p->tensors.front().ne.size() - 4;
  put_u32(b, ndims_at, 7);
  EXPECT_NE(gguf_error(b).message.find("dimensions"), std::string::npos);
}

TEST_F(CheckpointCorrupt, GgufAlignmentAndValues) {
  auto base = [](auto&& add) {
    GgufWriter w;
    w.kv_str("general.architecture", "llama");
    add(w);
    w.tensor("t", {32}, 0, std::vector<uint8_t>(128, 0));
    return w;
  };
  EXPECT_TRUE(gguf::parse(base([](GgufWriter&) {}).finish().data(), base([](GgufWriter&) {}).finish().size()).ok());
  auto img = base([](GgufWriter& w) { w.kv_u32("general.alignment", 48); }).finish(48);
  EXPECT_NE(gguf_error(img).message.find("not a power of two"), std::string::npos);
  img = base([](GgufWriter& w) { w.kv_u32("general.alignment", 0); }).finish(32);
  EXPECT_NE(gguf_error(img).message.find("not a power of two"), std::string::npos);
  img = base([](GgufWriter& w) { w.kv_u64("general.alignment", 64); }).finish(64);
  EXPECT_NE(gguf_error(img).message.find("not UINT32"), std::string::npos);
  img = base([](GgufWriter& w) { w.kv_u32("general.alignment", 64); }).finish(64);
  auto ok = gguf::parse(img.data(), img.size());
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->alignment, 64u);
  EXPECT_EQ(ok->data_offset % 64, 0u);
  img = base([](GgufWriter& w) { w.kv_u32("a.b", 1); w.kv_u32("a.b", 2); }).finish();
  EXPECT_NE(gguf_error(img).message.find("duplicate metadata key"), std::string::npos);
  img = base([](GgufWriter& w) { w.kv_u8("bad.bool", 0); }).finish();
  img[find_bytes(img, "bad.bool") + 8 + 0] = 7;  // value type -> BOOL(7); value byte 0 stays valid
  EXPECT_TRUE(gguf::parse(img.data(), img.size()).ok());
  img[find_bytes(img, "bad.bool") + 8 + 4] = 2;  // a BOOL holding 2
  EXPECT_NE(gguf_error(img).message.find("bool value"), std::string::npos);
  // Nesting deeper than the limit: hand-built array-of-array chain.
  GgufWriter deep;
  img = deep.finish();
  std::vector<uint8_t> chain;
  auto p64 = [&](uint64_t v) { for (int i = 0; i < 8; ++i) chain.push_back(static_cast<uint8_t>(v >> (8 * i))); };
  auto p32 = [&](uint32_t v) { for (int i = 0; i < 4; ++i) chain.push_back(static_cast<uint8_t>(v >> (8 * i))); };
  p64(1);
  chain.push_back('k');
  p32(9);
  for (int i = 0; i < 50; ++i) p32(9), p64(1);
  p32(4), p64(0);
  put_u64(img, 16, 1);  // one kv
  img.insert(img.begin() + 24, chain.begin(), chain.end());
  EXPECT_NE(gguf_error(img).message.find("nest deeper"), std::string::npos);
}

TEST_F(CheckpointCorrupt, GgufUnsupportedTypeIsNamed) {
  GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.tensor("blk.0.attn_q.weight", {256, 2}, 16 /* IQ2_XXS */, std::vector<uint8_t>(2 * 66, 0));
  TempDir dir;
  write_bytes(dir / "iq2.gguf", w.finish());
  auto f = gguf::File::open((dir / "iq2.gguf").string());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().code, ErrorCode::unsupported);
  EXPECT_NE(f.error().message.find("'blk.0.attn_q.weight' (IQ2_XXS)"), std::string::npos) << f.error().message;
  auto meta_only = gguf::File::open((dir / "iq2.gguf").string(), {.require_dequantizable = false});
  ASSERT_TRUE(meta_only.ok());
  auto d = meta_only->dequantize(meta_only->tensors()[0]);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("IQ2_XXS"), std::string::npos);
}

}  // namespace
}  // namespace memra::testing
