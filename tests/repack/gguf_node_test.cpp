// memra's GGUF reader against @huggingface/gguf (npm), an independent reader:
// every metadata key, type and value, and every tensor info must agree.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "repack/checkpoint/gguf.hpp"
#include "tests/repack/test_util.hpp"
#include "tests/repack/test_writers.hpp"
#include "tests/support/command.hpp"

namespace memra::testing {
namespace {

using nlohmann::json;

std::filesystem::path node_dir() {
  if (const char* env = std::getenv("MEMRA_NODE_DIR")) return env;
  return MEMRA_NODE_DIR;
}

bool node_available(std::string* why) {
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    *why = "node is not on PATH";
    return false;
  }
  if (!std::filesystem::exists(node_dir() / "node_modules" / "@huggingface" / "gguf")) {
    *why = "@huggingface/gguf is not installed in " + node_dir().string() + "/node_modules (run scripts/setup)";
    return false;
  }
  return true;
}

json node_dump(const std::filesystem::path& gguf_path) {
  const auto script = std::filesystem::path(MEMRA_SOURCE_ROOT) / "tests" / "repack" / "gguf_dump.mjs";
  const std::string cmd = "node '" + script.string() + "' '" + node_dir().string() + "' '" + gguf_path.string() + "' 2>&1";
  const memra::testing::CommandResult r = memra::testing::run_command(cmd);
  const std::string& out = r.out;
  EXPECT_EQ(r.exit_code, 0) << "node failed: " << out.substr(0, 2000);
  json j = json::parse(out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "node output is not JSON: " << out.substr(0, 2000);
  return j;
}

std::string u64_text(const json& v) { return v.is_object() && v.contains("u64") ? v["u64"].get<std::string>() : v.dump(); }

// One scalar of `type` (raw bits) against node's JSON rendering of it.
void expect_scalar(gguf::ValueType type, uint64_t bits, const json& n, const std::string& where) {
  gguf::Value v;
  v.type = type;
  v.bits = bits;
  switch (type) {
    case gguf::ValueType::u64: EXPECT_EQ(std::to_string(bits), u64_text(n)) << where; break;
    case gguf::ValueType::i64: EXPECT_EQ(std::to_string(static_cast<int64_t>(bits)), u64_text(n)) << where; break;
    case gguf::ValueType::boolean: EXPECT_EQ(n, json(bits != 0)) << where; break;
    case gguf::ValueType::f32:
    case gguf::ValueType::f64:
      ASSERT_TRUE(n.is_number()) << where << ": " << n.dump();
      EXPECT_EQ(*v.as_float(), n.get<double>()) << where;
      break;
    default:
      ASSERT_TRUE(n.is_number_integer()) << where << ": " << n.dump();
      EXPECT_EQ(*v.as_int(), n.get<int64_t>()) << where;
  }
}

void expect_array(const gguf::Array& a, const json& n, const std::string& where) {
  ASSERT_TRUE(n.is_array()) << where;
  ASSERT_EQ(a.count, n.size()) << where;
  for (uint64_t i = 0; i < a.count; ++i) {
    const std::string w = where + "[" + std::to_string(i) + "]";
    if (a.elem_type == gguf::ValueType::string) {
      EXPECT_EQ(json(a.strings[i]), n[i]) << w;
    } else if (a.elem_type == gguf::ValueType::array) {
      expect_array(a.arrays[i].array, n[i], w);
    } else {
      const size_t sz = gguf::scalar_size(a.elem_type);
      uint64_t bits = 0;
      for (size_t k = 0; k < sz; ++k) bits |= static_cast<uint64_t>(a.raw[i * sz + k]) << (8 * k);
      expect_scalar(a.elem_type, bits, n[i], w);
    }
  }
}

void compare_with_node(const std::filesystem::path& path) {
  SCOPED_TRACE(path.filename().string());
  auto file = gguf::File::open(path.string(), {.require_dequantizable = false});
  ASSERT_TRUE(file.ok()) << file.error().message;
  const json dump = node_dump(path);
  ASSERT_TRUE(dump.is_object());
  const json& md = dump.at("metadata");
  // @huggingface/gguf adds the header fields as pseudo-keys.
  EXPECT_EQ(md.at("version").at("value"), json(file->version()));
  EXPECT_EQ(u64_text(md.at("tensor_count").at("value")), std::to_string(file->tensors().size()));
  EXPECT_EQ(u64_text(md.at("kv_count").at("value")), std::to_string(file->metadata().size()));
  EXPECT_EQ(md.size(), file->metadata().size() + 3);
  for (const auto& [key, value] : file->metadata()) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(md.contains(key)) << "node does not see key " << key;
    const json& n = md.at(key);
    EXPECT_EQ(n.at("type").get<uint32_t>(), static_cast<uint32_t>(value.type));
    if (value.type == gguf::ValueType::array) {
      EXPECT_EQ(n.at("subType").get<uint32_t>(), static_cast<uint32_t>(value.array.elem_type));
      expect_array(value.array, n.at("value"), key);
    } else if (value.type == gguf::ValueType::string) {
      EXPECT_EQ(n.at("value"), json(value.str));
    } else {
      expect_scalar(value.type, value.bits, n.at("value"), key);
    }
  }
  const json& tensors = dump.at("tensors");
  ASSERT_EQ(tensors.size(), file->tensors().size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = file->tensors()[i];
    const json& n = tensors[i];
    SCOPED_TRACE(t.name());
    EXPECT_EQ(n.at("name").get<std::string>(), t.name());
    EXPECT_EQ(n.at("n_dims").get<size_t>(), t.info->ne.size());
    std::vector<std::string> ne;
    for (uint64_t d : t.info->ne) ne.push_back(std::to_string(d));
    EXPECT_EQ(n.at("shape").get<std::vector<std::string>>(), ne);
    EXPECT_EQ(n.at("dtype").get<uint32_t>(), t.info->type);
    EXPECT_EQ(n.at("offset").get<std::string>(), std::to_string(t.info->offset));
  }
  EXPECT_EQ(dump.at("tensorDataOffset").get<std::string>(), std::to_string(file->data_offset()));
}

class CheckpointGgufNode : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!node_available(&why)) GTEST_SKIP() << why;
  }
};

TEST_F(CheckpointGgufNode, FixtureFilesMatch) {
  MEMRA_REQUIRE_FIXTURES();
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(fixture("gguf/llama"))) {
    if (e.path().extension() != ".gguf") continue;
    compare_with_node(e.path());
    ++n;
  }
  EXPECT_EQ(n, 7);
}

TEST_F(CheckpointGgufNode, EveryValueTypeMatches) {
  GgufWriter w(3);
  w.kv_str("general.architecture", "llama");
  w.kv_u32("general.alignment", 64);
  w.kv_u8("t.u8", 250);
  w.kv_i8("t.i8", -7);
  w.kv_u16("t.u16", 65000);
  w.kv_i16("t.i16", -30000);
  w.kv_u32("t.u32", 4000000000u);
  w.kv_i32("t.i32", -2000000000);
  w.kv_f32("t.f32", 0.1f);
  w.kv_bool("t.bool", true);
  w.kv_str("t.str", "h\xc3\xa9llo \"quoted\"\n");
  w.kv_u64("t.u64", 18000000000000000000ull);
  w.kv_i64("t.i64", -9000000000000000000ll);
  w.kv_f64("t.f64", 1.0 / 3.0);
  w.kv_str_array("t.strs", {"a", "", "\xe2\x82\xac"});
  w.kv_i32_array("t.i32s", {1, -2, 3});
  w.kv_f32_array("t.f32s", {1.5f, -0.25f});
  w.kv_nested_i32("t.nested", {{1, 2}, {}, {3}});
  w.tensor("a", {32, 2}, 0, std::vector<uint8_t>(256, 1));
  w.tensor("b", {64}, 8, std::vector<uint8_t>(68, 2));
  TempDir dir;
  write_bytes(dir / "types.gguf", w.finish(64));
  compare_with_node(dir / "types.gguf");
}

}  // namespace
}  // namespace memra::testing
