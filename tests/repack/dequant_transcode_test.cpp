// Exactness of the dequantizers that no fixture file exercises directly
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q5_K, IQ4_NL): blocks of the
// gguf-py-verified Q4_K, Q6_K and IQ4_XS tensors are re-encoded, with a test-side
// spec-level codec, into layouts that must dequantize to bit-identical floats
// (same scale, same code, same float32 operation order).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "repack/checkpoint/gguf.hpp"
#include "repack/quant/dequant.hpp"
#include "tests/repack/block_codec.hpp"
#include "tests/repack/test_util.hpp"

namespace memra::testing {
namespace {

using quant::GgmlType;

struct Source {
  std::vector<uint8_t> bytes;  // raw blocks
  int64_t n = 0;               // elements
  std::string sha;             // gguf-py's sha256 of the float32 output
};

// The first tensor of `type` in the fixture, with its oracle sha.
Source first_tensor(const std::string& quant, GgmlType type) {
  Source s;
  auto file = gguf::File::open(fixture("gguf/llama/llama-" + quant + ".gguf").string());
  EXPECT_TRUE(file.ok());
  if (!file.ok()) return s;
  const auto index = nlohmann::json::parse(read_text(fixture("dequant/llama-" + quant + ".index.json")));
  for (const auto& t : file->tensors()) {
    if (t.type() != type) continue;
    s.bytes.assign(t.data, t.data + t.info->nbytes);
    s.n = static_cast<int64_t>(t.info->n_elements);
    for (const auto& e : index.at("tensors"))
      if (e.at("name") == t.name()) s.sha = e.at("f32_sha256");
    break;
  }
  return s;
}

std::vector<float> deq(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  EXPECT_TRUE(quant::dequantize_row(type, bytes.data(), out.data(), n));
  return out;
}

void expect_bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0 && ++mismatches <= 5)
      ADD_FAILURE() << "element " << i << ": " << a[i] << " vs " << b[i];
  EXPECT_EQ(mismatches, 0u);
}

class DequantTranscode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fixtures_present()) GTEST_SKIP() << "fixtures not found at " << fixtures_dir();
  }
};

TEST_F(DequantTranscode, CodecRoundTripsVerifiedBlocks) {
  // The test codec itself must reproduce the fixture bytes exactly.
  for (auto [quant, type, size] : {std::tuple{"Q4_K_M", GgmlType::Q4_K, 144}, {"Q4_K_M", GgmlType::Q6_K, 210},
                                    {"IQ4_XS", GgmlType::IQ4_XS, 136}}) {
    const Source s = first_tensor(quant, type);
    ASSERT_FALSE(s.bytes.empty());
    std::vector<uint8_t> again(s.bytes.size());
    for (size_t off = 0; off < s.bytes.size(); off += size) {
      if (type == GgmlType::Q4_K) Q4K::unpack(&s.bytes[off]).pack(&again[off]);
      if (type == GgmlType::Q6_K) Q6K::unpack(&s.bytes[off]).pack(&again[off]);
      if (type == GgmlType::IQ4_XS) IQ4XS::unpack(&s.bytes[off]).pack(&again[off]);
    }
    EXPECT_EQ(again, s.bytes) << quant;
  }
}

TEST_F(DequantTranscode, Q5_K_WithZeroHighBitsEqualsGgufPyQ4_K) {
  const Source s = first_tensor("Q4_K_M", GgmlType::Q4_K);
  ASSERT_FALSE(s.bytes.empty());
  const int64_t nb = s.n / 256;
  std::vector<uint8_t> q5(static_cast<size_t>(nb) * 176);
  std::array<int, 256> zero{};
  for (int64_t i = 0; i < nb; ++i) pack_q5k(Q4K::unpack(&s.bytes[i * 144]), zero, &q5[i * 176]);
  const auto out = deq(GgmlType::Q5_K, q5, s.n);
  EXPECT_EQ(sha256_hex(out.data(), out.size() * 4), s.sha);
}

// From Q4_K blocks with every sub-block scale and min forced to 1:
// y = (d*1)*q - (dmin*1), which Q4_1 (d, m = -dmin), Q2_K (scale/min nibbles 1)
// and Q5_K/Q5_1 reproduce exactly.
TEST_F(DequantTranscode, Q4_1_Q2_K_Q5_1_FromUnitScaleQ4_K) {
  const Source s = first_tensor("Q4_K_M", GgmlType::Q4_K);
  ASSERT_FALSE(s.bytes.empty());
  const int64_t nb = s.n / 256;
  std::vector<uint8_t> k4(nb * 144), k4_2bit(nb * 144), k5(nb * 176), q41(nb * 8 * 20), q2k(nb * 84), q51(nb * 8 * 24);
  for (int64_t i = 0; i < nb; ++i) {
    Q4K k = Q4K::unpack(&s.bytes[i * 144]);
    k.sc.fill(1);
    k.m.fill(1);
    k.pack(&k4[i * 144]);
    const uint16_t neg_dmin = static_cast<uint16_t>(k.dmin ^ 0x8000u);
    // Q4_1: eight 32-element blocks.
    for (int b = 0; b < 8; ++b) pack_q4_1(k.d, neg_dmin, &k.q[32 * b], &q41[(i * 8 + b) * 20]);
    // Q5_K / Q5_1: add a fifth bit taken from the code's own parity pattern.
    std::array<int, 256> hb{};
    std::array<int, 256> q5{};
    for (int e = 0; e < 256; ++e) hb[e] = (k.q[e] ^ e) & 1, q5[e] = k.q[e] | (hb[e] << 4);
    pack_q5k(k, hb, &k5[i * 176]);
    for (int b = 0; b < 8; ++b) pack_q5_1(k.d, neg_dmin, &q5[32 * b], &q51[(i * 8 + b) * 24]);
    // Q2_K: two-bit codes.
    Q4K k2 = k;
    for (int e = 0; e < 256; ++e) k2.q[e] &= 3;
    k2.pack(&k4_2bit[i * 144]);
    int ones[16];
    std::fill(ones, ones + 16, 1);
    pack_q2k(k.d, k.dmin, ones, ones, k2.q.data(), &q2k[i * 84]);
  }
  expect_bit_identical(deq(GgmlType::Q4_1, q41, s.n), deq(GgmlType::Q4_K, k4, s.n));
  expect_bit_identical(deq(GgmlType::Q5_1, q51, s.n), deq(GgmlType::Q5_K, k5, s.n));
  expect_bit_identical(deq(GgmlType::Q2_K, q2k, s.n), deq(GgmlType::Q4_K, k4_2bit, s.n));
}

// From Q6_K blocks with every scale forced to 1: y = d * (q - 32), which Q8_0,
// Q5_0, Q4_0 and Q3_K (scales 1) reproduce for codes in their ranges.
TEST_F(DequantTranscode, Q8_0_Q5_0_Q4_0_Q3_K_FromUnitScaleQ6_K) {
  const Source s = first_tensor("Q4_K_M", GgmlType::Q6_K);
  ASSERT_FALSE(s.bytes.empty());
  const int64_t nb = s.n / 256;
  struct Case {
    GgmlType type;
    int block_bytes;
    int code_lo, code_mask;  // signed code = (orig & mask) + lo
  };
  for (const Case c : {Case{GgmlType::Q8_0, 34, -32, 63}, Case{GgmlType::Q5_0, 22, -16, 31}, Case{GgmlType::Q4_0, 18, -8, 15},
                       Case{GgmlType::Q3_K, 110, -4, 7}}) {
    SCOPED_TRACE(quant::ggml_type_name(c.type));
    std::vector<uint8_t> k6(nb * 210), target;
    for (int64_t i = 0; i < nb; ++i) {
      Q6K k = Q6K::unpack(&s.bytes[i * 210]);
      k.sc.fill(1);
      int signed_q[256];
      for (int e = 0; e < 256; ++e) {
        signed_q[e] = (k.q[e] & c.code_mask) + c.code_lo;
        k.q[e] = signed_q[e] + 32;
      }
      k.pack(&k6[i * 210]);
      if (c.type == GgmlType::Q3_K) {
        target.resize(target.size() + 110);
        int ones[16];
        std::fill(ones, ones + 16, 1);
        pack_q3k(k.d, ones, signed_q, &target[target.size() - 110]);
        continue;
      }
      for (int b = 0; b < 8; ++b) {
        target.resize(target.size() + c.block_bytes);
        uint8_t* dst = &target[target.size() - c.block_bytes];
        int codes[32];
        for (int j = 0; j < 32; ++j) codes[j] = signed_q[32 * b + j] - c.code_lo;  // unsigned storage code
        if (c.type == GgmlType::Q8_0) pack_q8_0(k.d, &signed_q[32 * b], dst);
        if (c.type == GgmlType::Q5_0) pack_q5_0(k.d, codes, dst);
        if (c.type == GgmlType::Q4_0) pack_q4_0(k.d, codes, dst);
      }
    }
    expect_bit_identical(deq(c.type, target, s.n), deq(GgmlType::Q6_K, k6, s.n));
  }
}

// From IQ4_XS blocks with every sub-block scale forced to 1: y = (d*1)*kv[q],
// which IQ4_NL with the same d reproduces.
TEST_F(DequantTranscode, IQ4_NL_FromUnitScaleIQ4_XS) {
  const Source s = first_tensor("IQ4_XS", GgmlType::IQ4_XS);
  ASSERT_FALSE(s.bytes.empty());
  const int64_t nb = s.n / 256;
  std::vector<uint8_t> xs(nb * 136), nl(nb * 8 * 18);
  for (int64_t i = 0; i < nb; ++i) {
    IQ4XS x = IQ4XS::unpack(&s.bytes[i * 136]);
    x.ls.fill(1);
    x.pack(&xs[i * 136]);
    for (int b = 0; b < 8; ++b) pack_iq4_nl(x.d, &x.q[32 * b], &nl[(i * 8 + b) * 18]);
  }
  expect_bit_identical(deq(GgmlType::IQ4_NL, nl, s.n), deq(GgmlType::IQ4_XS, xs, s.n));
}

}  // namespace
}  // namespace memra::testing
