// Bit-exactness of memra_quant_ref against gguf-py (the fixture index files hold
// the sha256 of gguf-py's float32 output for every tensor).
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "repack/checkpoint/gguf.hpp"
#include "repack/quant/dequant.hpp"
#include "tests/repack/test_util.hpp"

namespace memra::testing {
namespace {

void check_against_index(const std::string& quant) {
  const auto gguf_path = fixture("gguf/llama/llama-" + quant + ".gguf");
  const auto index_path = fixture("dequant/llama-" + quant + ".index.json");
  auto file = gguf::File::open(gguf_path.string());
  ASSERT_TRUE(file.ok()) << file.error().message;
  const auto index = nlohmann::json::parse(read_text(index_path));
  const auto& entries = index.at("tensors");
  ASSERT_EQ(entries.size(), file->tensors().size());
  std::map<std::string, int> types_seen;
  for (const auto& e : entries) {
    const std::string name = e.at("name");
    SCOPED_TRACE(quant + " tensor " + name);
    const gguf::Tensor* t = file->find_tensor(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(quant::ggml_type_name(t->info->type), e.at("ggml_type").get<std::string>());
    EXPECT_EQ(t->info->ne, e.at("ne").get<std::vector<uint64_t>>());
    EXPECT_EQ(t->info->shape(), e.at("numpy_shape").get<std::vector<uint64_t>>());
    EXPECT_EQ(t->info->nbytes, e.at("raw_bytes").get<uint64_t>());
    EXPECT_EQ(t->file_offset, e.at("raw_file_offset").get<uint64_t>());
    auto values = file->dequantize(*t);
    ASSERT_TRUE(values.ok()) << values.error().message;
    EXPECT_EQ(sha256_hex(values->data(), values->size() * sizeof(float)), e.at("f32_sha256").get<std::string>());
    const auto first8 = e.at("first8").get<std::vector<double>>();
    for (size_t i = 0; i < first8.size(); ++i) EXPECT_EQ(static_cast<double>((*values)[i]), first8[i]) << "element " << i;
    ++types_seen[e.at("ggml_type").get<std::string>()];
  }
  for (const auto& [type, n] : types_seen) std::cout << "  " << quant << ": " << n << " x " << type << " bit-exact\n";
}

TEST(DequantExact, Q4_K_M_MatchesGgufPy) {
  MEMRA_REQUIRE_FIXTURES();
  check_against_index("Q4_K_M");
}

TEST(DequantExact, IQ4_XS_MatchesGgufPy) {
  MEMRA_REQUIRE_FIXTURES();
  check_against_index("IQ4_XS");
}

TEST(DequantExact, RowDispatchRefusesUnsupportedAndBadLengths) {
  std::vector<uint8_t> src(1024);
  std::vector<float> dst(1024);
  EXPECT_FALSE(quant::dequantize_row(quant::GgmlType::IQ2_XXS, src.data(), dst.data(), 256));
  EXPECT_FALSE(quant::dequantize_row(quant::GgmlType::Q4_K, src.data(), dst.data(), 100));
  EXPECT_FALSE(quant::dequantize_row(static_cast<quant::GgmlType>(77), src.data(), dst.data(), 32));
  EXPECT_TRUE(quant::dequantize_row(quant::GgmlType::Q8_0, src.data(), dst.data(), 32));
  uint64_t bytes = 0;
  EXPECT_TRUE(quant::ggml_row_bytes(static_cast<uint32_t>(quant::GgmlType::Q4_K), 512, &bytes));
  EXPECT_EQ(bytes, 288u);
  EXPECT_FALSE(quant::ggml_row_bytes(static_cast<uint32_t>(quant::GgmlType::Q4_K), 100, &bytes));
  EXPECT_EQ(quant::ggml_type_name(23), "IQ4_XS");
  EXPECT_EQ(quant::ggml_type_name(4), "unknown(4)");
}

}  // namespace
}  // namespace memra::testing
