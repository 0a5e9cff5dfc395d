// Writes the fuzzers' seed corpora: small valid files made with the test
// writers, and fixture headers (whole and trimmed). usage: make_seeds <fixtures> <out>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "repack/checkpoint/gguf_parser.hpp"
#include "repack/checkpoint/safetensors_header.hpp"
#include "tests/repack/test_util.hpp"
#include "tests/repack/test_writers.hpp"

namespace fs = std::filesystem;
using namespace memra::testing;

int main(int argc, char** argv) {
  if (argc != 3 || std::string(argv[1]) == "--help") {
    std::cerr << "usage: make_seeds <fixtures_dir> <out_dir>\n  writes out_dir/{gguf,safetensors}/ seed files\n";
    return argc == 2 ? 0 : 2;
  }
  const fs::path fixtures = argv[1], out = argv[2];
  fs::create_directories(out / "gguf");
  fs::create_directories(out / "safetensors");

  // GGUF: every value type, nested arrays, a few tensor types.
  GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.kv_u32("general.alignment", 32);
  w.kv_u8("a.u8", 1), w.kv_i8("a.i8", -1), w.kv_u16("a.u16", 2), w.kv_i16("a.i16", -2);
  w.kv_i32("a.i32", -3), w.kv_f32("a.f32", 0.5f), w.kv_bool("a.bool", true), w.kv_u64("a.u64", 5);
  w.kv_i64("a.i64", -5), w.kv_f64("a.f64", 0.25), w.kv_str_array("tokenizer.ggml.tokens", {"a", "b", "c"});
  w.kv_i32_array("tokenizer.ggml.token_type", {1, 1, 3}), w.kv_f32_array("tokenizer.ggml.scores", {0, -1, -2});
  w.kv_nested_i32("a.nested", {{1, 2}, {3}});
  w.tensor("f32", {8, 2}, 0, std::vector<uint8_t>(64, 0x3f));
  w.tensor("q8_0", {32}, 8, std::vector<uint8_t>(34, 0x11));
  w.tensor("q4_k", {256}, 12, std::vector<uint8_t>(144, 0x22));
  w.tensor("q6_k", {256}, 14, std::vector<uint8_t>(210, 0x33));
  w.tensor("iq4_xs", {256}, 23, std::vector<uint8_t>(136, 0x44));
  write_bytes(out / "gguf" / "types.gguf", w.finish());
  GgufWriter v2(2);
  v2.kv_str("general.architecture", "qwen3");
  v2.tensor("bf16", {4}, 30, std::vector<uint8_t>(8, 0x40));
  write_bytes(out / "gguf" / "v2.gguf", v2.finish());

  // safetensors: a few dtypes and metadata.
  write_bytes(out / "safetensors" / "small.safetensors",
              write_safetensors({{"a", "BF16", {2, 2}, std::vector<uint8_t>(8, 1)},
                                 {"b", "F8_E4M3", {3}, std::vector<uint8_t>(3, 2)},
                                 {"c", "I64", {}, std::vector<uint8_t>(8, 3)}},
                                {{"format", "pt"}}));

  if (fs::exists(fixtures / "MANIFEST.json")) {
    // Fixture GGUF metadata: tensor infos dropped, so the tokenizer arrays stay but the file stays small.
    const auto g = read_bytes(fixtures / "gguf/llama/llama-Q4_0.gguf");
    if (auto p = memra::gguf::parse(g.data(), g.size()); p.ok()) {
      const std::string first = p->tensors.front().name;
      size_t at = 0, from = 0;
      while (true) {
        auto it = std::search(g.begin() + static_cast<long>(from), g.begin() + static_cast<long>(p->data_offset), first.begin(), first.end());
        if (it == g.begin() + static_cast<long>(p->data_offset)) break;
        at = static_cast<size_t>(it - g.begin());
        from = at + 1;
      }
      std::vector<uint8_t> meta(g.begin(), g.begin() + static_cast<long>(at - 8));
      std::memset(meta.data() + 8, 0, 8);  // tensor_count = 0
      write_bytes(out / "gguf" / "fixture-metadata.gguf", meta);
    }
    // Fixture safetensors headers with the data cut off (the parser sees real headers).
    for (const char* m : {"llama", "gemma3_text"}) {
      const auto s = read_bytes(fixtures / "models" / m / "model.safetensors");
      uint64_t n = 0;
      std::memcpy(&n, s.data(), 8);
      write_bytes(out / "safetensors" / (std::string(m) + "-header.safetensors"), {s.begin(), s.begin() + static_cast<long>(8 + n)});
    }
  }
  std::cout << "seeds written to " << out << "\n";
  return 0;
}
