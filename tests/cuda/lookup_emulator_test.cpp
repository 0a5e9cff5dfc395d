// The decode step's table lookups (kernels/embedding/embedding.cu) and the SDK example
// family's op kernel (sdk/examples/family-example/example_scan.cu), the files themselves,
// on the host CTA emulator (no GPU needed): each bitwise its CPU reference
// (ref::embedding_rows over every table type, with and without a scale; the recurrence
// example_scan.h states, over a step whose sequences interleave).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/embedding/embedding_ref.hpp"
#include "repack/quant/fp_convert.hpp"
#include "tests/cuda/int8_scheme_cases.hpp"
#include "tests/cuda/cta_emulator.hpp"      // (last but two: it defines CUDA's keywords as macros)
// The schemes' embedding gathers (each quant plugin's modules have their own; their
// #pragma unroll: built with -Wno-unknown-pragmas).
#include "plugins/quant-float/float_entries.cuh"
#include "plugins/quant-iq4_xs/iq4_xs_entries.cuh"
#include "plugins/quant-q4_0/q4_0_entries.cuh"
#include "plugins/quant-q4_k/q4_k_entries.cuh"
#include "plugins/quant-q5_k/q5_k_entries.cuh"
#include "plugins/quant-q6_k/q6_k_entries.cuh"
#include "plugins/quant-q8_0/q8_0_entries.cuh"
#include "sdk/examples/family-example/example_scan.cu"

namespace {

using Embedding = void (*)(const uint8_t*, int64_t, int64_t, const int32_t*, float, float*);

constexpr int64_t kTableRows = 9;
const std::vector<int32_t> kIds = {4, 0, 8, 4, 2};

void expect_lookup(const char* name, Embedding fn, memra::quant::GgmlType type, const std::vector<uint8_t>& table, int64_t row_bytes,
                   int64_t dim) {
  for (const float scale : {1.0f, 0.125f, 3.0f}) {
    SCOPED_TRACE(testing::Message() << name << " scale " << scale);
    const auto n = static_cast<int64_t>(kIds.size());
    std::vector<float> got(static_cast<size_t>(n * dim), NAN), want(got.size());
    memra::cuda_emu::launch(static_cast<unsigned>(n), 1, 128, [&] { fn(table.data(), row_bytes, dim, kIds.data(), scale, got.data()); },
                            [] {});
    ASSERT_TRUE(memra::ref::embedding_rows(type, table.data(), dim, kIds.data(), n, scale, want.data()));
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "differs from ref::embedding_rows";
  }
}

TEST(LookupEmulated, EveryTableTypeIsTheReferencesRows) {
  std::mt19937 rng(61);
  std::normal_distribution<float> n(0.0f, 1.0f);
  constexpr int64_t kDim = 768;
  const std::vector<std::pair<const char*, Embedding>> quantized = {
      {"q8_0", memra_embedding_q8_0}, {"q4_0", memra_embedding_q4_0}, {"q4_k", memra_embedding_q4_k},
      {"q5_k", memra_embedding_q5_k}, {"q6_k", memra_embedding_q6_k}, {"iq4_xs", memra_embedding_iq4_xs}};
  for (const auto& [name, fn] : quantized)
    for (const auto& c : memra::testing::int8_scheme_cases())
      if (std::string(c.name) == name)
        expect_lookup(name, fn, c.type, memra::testing::random_int8_weights(c, rng, kTableRows, kDim),
                      memra::ref::int8_scheme_row_bytes(c.scheme, kDim), kDim);
  // Float tables: u8 rows (dim % 8 == 0) and u1 rows (any dim).
  struct Float {
    const char* name;
    Embedding fn;
    memra::quant::GgmlType type;
    int bytes;
    int64_t dim;
  };
  using memra::quant::GgmlType;
  for (const Float& f : {Float{"f32_u8", memra_embedding_f32_u8, GgmlType::F32, 4, 520}, Float{"f32_u1", memra_embedding_f32_u1, GgmlType::F32, 4, 517},
                         Float{"f16_u8", memra_embedding_f16_u8, GgmlType::F16, 2, 520}, Float{"f16_u1", memra_embedding_f16_u1, GgmlType::F16, 2, 517},
                         Float{"bf16_u8", memra_embedding_bf16_u8, GgmlType::BF16, 2, 520},
                         Float{"bf16_u1", memra_embedding_bf16_u1, GgmlType::BF16, 2, 517}}) {
    std::vector<uint8_t> table(static_cast<size_t>(kTableRows * f.dim * f.bytes));
    for (int64_t i = 0; i < kTableRows * f.dim; ++i) {
      const float v = n(rng);
      if (f.bytes == 4) {
        std::memcpy(table.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = f.type == GgmlType::BF16 ? memra::quant::f32_to_bf16(v) : memra::quant::f32_to_fp16(v);
        std::memcpy(table.data() + 2 * i, &h, 2);
      }
    }
    expect_lookup(f.name, f.fn, f.type, table, f.dim * f.bytes, f.dim);
  }
}

TEST(LookupEmulated, TheExampleFamilysScanIsItsStatedRecurrence) {
  constexpr int32_t kWidth = 300, kSlots = 3;
  const std::vector<int32_t> seq = {0, 1, 0, 2, 1, 0};  // each sequence's rows in position order
  const std::vector<int32_t> slots = {2, 0, 1};         // sequence -> state slot
  const auto tokens = static_cast<int32_t>(seq.size());
  std::mt19937 rng(67);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(tokens) * kWidth), state(static_cast<size_t>(kSlots) * kWidth);
  for (float& v : x) v = n(rng);
  for (float& v : state) v = n(rng);
  std::vector<float> want_state = state, want_y(x.size()), y(x.size(), NAN);
  for (int32_t t = 0; t < tokens; ++t)  // s = decay * s + x[t], one rounding each (the stored product)
    for (int32_t i = 0; i < kWidth; ++i) {
      float& s = want_state[static_cast<size_t>(slots[static_cast<size_t>(seq[static_cast<size_t>(t)])] * kWidth + i)];
      volatile float product = 0.875f * s;
      s = product + x[static_cast<size_t>(t * kWidth + i)];
      want_y[static_cast<size_t>(t * kWidth + i)] = s;
    }
  char* state_bytes = reinterpret_cast<char*>(state.data());
  memra::cuda_emu::launch((kWidth + EXAMPLE_SCAN_THREADS - 1) / EXAMPLE_SCAN_THREADS, 1, EXAMPLE_SCAN_THREADS,
                          [&] {
                            example_decay_scan(x.data(), y.data(), tokens, kWidth, 0.875f, seq.data(), slots.data(), state_bytes,
                                               kWidth * sizeof(float));
                          },
                          [] {});
  EXPECT_EQ(std::memcmp(y.data(), want_y.data(), y.size() * 4), 0) << "outputs";
  EXPECT_EQ(std::memcmp(state.data(), want_state.data(), state.size() * 4), 0) << "states";
}

}  // namespace
