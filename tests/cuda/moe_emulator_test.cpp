// moe_ffn v2's kernels (kernels/moe/moe_ffn.cu), the file itself, on the host CTA emulator (no
// GPU needed): the warp routing is ref::moe_route_row's choice and weights bitwise (both follow
// moe_route.cuh: the selection order, the 32-lane softmax denominator, memra_exp) over 1..512
// experts and top-1..8, both ways of normalize; the tile ids name the chosen expert's rows of
// the stacked tensor; a tile dot is its fixed-order sum, so a slot's output is bitwise the same
// computed alone or among other slots; the combine is the weighted sum in selection order plus
// the sigmoid-gated shared expert, bitwise the CPU reference's arithmetic; the plan groups every
// slot under the expert it chose; each scheme's routed GEMV (memra_moe_gemv_<s>) is its stated
// order over the exact dequantised rows (the scheme's CPU dequantiser) and gives a slot the same
// bits alone as among the other slots of its expert.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "kernels/embedding/embedding_ref.hpp"
#include "kernels/moe/moe_route_ref.hpp"
#include "tests/cuda/int8_scheme_cases.hpp"
#include "tests/cuda/cta_emulator.hpp"  // (after it only kernel files: it defines CUDA's keywords as macros)
#include "kernels/moe/moe_ffn.cu"
// The schemes' routed GEMVs (kernels/matmul/scheme_entries.cuh, beside their embedding gathers).
#include "plugins/quant-float/float_entries.cuh"
#include "plugins/quant-q4_k/q4_k_entries.cuh"
#include "plugins/quant-q6_k/q6_k_entries.cuh"
#include "plugins/quant-q8_0/q8_0_entries.cuh"

namespace {

std::vector<float> random_logits(std::mt19937& rng, int32_t tokens, int32_t experts) {
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<float> l(static_cast<size_t>(tokens * experts));
  for (float& v : l) v = n(rng);
  // Ties, which must go to the lower index: a whole row equal, and two equal maxima.
  if (tokens > 5 && experts > 9) {
    for (int32_t e = 0; e < experts; ++e) l[static_cast<size_t>(3 * experts + e)] = 0.25f;
    l[static_cast<size_t>(5 * experts + 2)] = l[static_cast<size_t>(5 * experts + 9)] = 9.0f;
  }
  return l;
}

std::vector<float> route(const std::vector<float>& logits, int32_t tokens, int32_t experts, int32_t top_k, bool normalize) {
  std::vector<float> routes(static_cast<size_t>(tokens * 2 * top_k), NAN);
  memra::cuda_emu::launch((tokens + 3) / 4, 1, 128,
                          [&] { memra_moe_route(logits.data(), tokens, experts, top_k, normalize ? 1 : 0, routes.data()); }, [] {});
  return routes;
}

TEST(MoeEmulated, RoutingIsTheReferencesChoiceAndWeights) {
  std::mt19937 rng(5);
  for (int32_t experts : {5, 12, 32, 33, 128, 512}) {
    const int32_t tokens = experts >= 128 ? 9 : 37;
    const std::vector<float> logits = random_logits(rng, tokens, experts);
    for (int32_t top_k : {1, 2, 3, 8})
      for (bool normalize : {false, true}) {
        if (top_k > experts) continue;
        SCOPED_TRACE(testing::Message() << experts << " experts, top_k " << top_k << ", normalize " << normalize);
        const std::vector<float> routes = route(logits, tokens, experts, top_k, normalize);
        for (int32_t t = 0; t < tokens; ++t) {
          std::vector<int32_t> chosen(static_cast<size_t>(top_k));
          std::vector<float> weights(static_cast<size_t>(top_k));
          memra::ref::moe_route_row(logits.data() + t * experts, experts, top_k, normalize, chosen.data(), weights.data());
          const float* row = routes.data() + t * 2 * top_k;
          EXPECT_EQ(std::memcmp(row, chosen.data(), chosen.size() * 4), 0) << "row " << t << " chose other experts";
          EXPECT_EQ(std::memcmp(row + top_k, weights.data(), weights.size() * 4), 0) << "row " << t << "'s weights differ";
        }
      }
  }
}

// The routed path of one stacked [E][rows][cols] matrix over a chunk of slots: tile ids, a
// stand-in gather (the scheme's embedding entry: rows copied exactly), tile dots. Each slot's
// outputs are its expert's rows dotted with its token's row in the kernel's fixed order, and
// bitwise the same whether the slot is computed alone or in the whole chunk.
TEST(MoeEmulated, ATileDotIsItsSlotsFixedOrderSumAloneOrInAChunk) {
  constexpr int32_t kTokens = 6, kExperts = 7, kTopK = 3;
  constexpr int64_t kRows = 19, kCols = 70;
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const std::vector<float> logits = random_logits(rng, kTokens, kExperts);
  const std::vector<float> routes = route(logits, kTokens, kExperts, kTopK, false);
  std::vector<float> w(static_cast<size_t>(kExperts * kRows * kCols)), x(static_cast<size_t>(kTokens * kCols));
  for (float& v : w) v = n(rng);
  for (float& v : x) v = n(rng);
  constexpr int32_t kSlots = kTokens * kTopK;
  auto run = [&](int32_t slot0, int32_t nslots, int32_t tile_rows, std::vector<float>& out) {
    std::vector<int32_t> ids(static_cast<size_t>(nslots * tile_rows));
    std::vector<float> tile(static_cast<size_t>(nslots * tile_rows * kCols));
    for (int64_t row0 = 0; row0 < kRows; row0 += tile_rows) {
      const int32_t nrows = static_cast<int32_t>(std::min<int64_t>(tile_rows, kRows - row0));
      const int64_t count = int64_t{nslots} * nrows;
      memra::cuda_emu::launch(static_cast<unsigned>((count + 255) / 256), 1, 256,
                              [&] { memra_moe_tile_ids(routes.data(), kTopK, slot0, nslots, kRows, row0, nrows, ids.data()); }, [] {});
      for (int64_t i = 0; i < count; ++i)  // the gather
        std::memcpy(tile.data() + i * kCols, w.data() + int64_t{ids[static_cast<size_t>(i)]} * kCols, kCols * sizeof(float));
      memra::cuda_emu::launch(static_cast<unsigned>((count + 7) / 8), 1, 256,
                              [&] { memra_moe_tile_dot(tile.data(), x.data(), kCols, slot0, kTopK, nslots, nrows, out.data(), kRows, slot0, row0); },
                              [] {});
    }
  };
  std::vector<float> all(static_cast<size_t>(kSlots * kRows), NAN), one(all.size(), NAN);
  run(0, kSlots, 5, all);
  for (int32_t s = 0; s < kSlots; ++s) run(s, 1, 19, one);  // alone, with other tiles
  EXPECT_EQ(std::memcmp(all.data(), one.data(), all.size() * 4), 0) << "a slot's outputs depend on the chunk";
  for (int32_t s = 0; s < kSlots; ++s) {
    const int32_t t = s / kTopK, e = reinterpret_cast<const int32_t*>(routes.data() + t * 2 * kTopK)[s % kTopK];
    for (int64_t r = 0; r < kRows; ++r) {
      float lane[32] = {};
      for (int64_t c = 0; c < kCols; ++c) lane[c % 32] += w[static_cast<size_t>((e * kRows + r) * kCols + c)] * x[static_cast<size_t>(t * kCols + c)];
      for (int off = 16; off > 0; off >>= 1)
        for (int l = 0; l < off; ++l) lane[l] = lane[l] + lane[l + off];
      EXPECT_EQ(std::bit_cast<uint32_t>(all[static_cast<size_t>(s * kRows + r)]), std::bit_cast<uint32_t>(lane[0])) << "slot " << s << " row " << r;
    }
  }
}

using MoeGemv = void (*)(const uint8_t*, int64_t, int64_t, int64_t, const int32_t*, const int32_t*, const int32_t*, const int32_t*,
                         int32_t, int64_t, const float*, int32_t, float*, int64_t);

// The plan (n_active, active[groups], start[groups + 1], order[slots]) as memra_moe_plan makes it.
struct Plan {
  std::vector<int32_t> words;
  int32_t groups = 0;
  const int32_t* n_active() const { return words.data(); }
  const int32_t* active() const { return words.data() + 1; }
  const int32_t* start() const { return words.data() + 1 + groups; }
  const int32_t* order() const { return words.data() + 2 + 2 * groups; }
};

Plan plan_of(const std::vector<float>& routes, int32_t top_k, int32_t slots, int32_t experts) {
  Plan p;
  p.groups = std::min(experts, slots);
  p.words.assign(static_cast<size_t>(2 + 2 * p.groups + slots), -7);
  int32_t* w = p.words.data();
  memra::cuda_emu::launch(1, 1, 1024, [&] {
    memra_moe_plan(routes.data(), top_k, slots, experts, w, w + 1, w + 1 + p.groups, w + 2 + 2 * p.groups);
  }, [] {});
  return p;
}

// The plan groups each slot under the expert it chose, every slot once, experts ascending.
TEST(MoeEmulated, ThePlanGroupsEverySlotUnderItsExpert) {
  std::mt19937 rng(23);
  for (int32_t experts : {3, 8, 128, 512})
    for (int32_t tokens : {1, 4, 64}) {
      const int32_t top_k = std::min(experts, 8);
      const std::vector<float> logits = random_logits(rng, tokens, experts);
      const std::vector<float> routes = route(logits, tokens, experts, top_k, true);
      const int32_t slots = tokens * top_k;
      const Plan p = plan_of(routes, top_k, slots, experts);
      SCOPED_TRACE(testing::Message() << experts << " experts, " << tokens << " tokens");
      std::vector<int32_t> seen(static_cast<size_t>(slots), 0);
      std::set<int32_t> used;
      for (int32_t s = 0; s < slots; ++s) used.insert(reinterpret_cast<const int32_t*>(routes.data() + (s / top_k) * 2 * top_k)[s % top_k]);
      ASSERT_EQ(*p.n_active(), static_cast<int32_t>(used.size()));
      ASSERT_EQ(p.start()[0], 0);
      ASSERT_EQ(p.start()[*p.n_active()], slots);
      for (int32_t g = 0; g < *p.n_active(); ++g) {
        if (g > 0) EXPECT_LT(p.active()[g - 1], p.active()[g]);
        for (int32_t i = p.start()[g]; i < p.start()[g + 1]; ++i) {
          const int32_t s = p.order()[i];
          ASSERT_GE(s, 0);
          ASSERT_LT(s, slots);
          ++seen[static_cast<size_t>(s)];
          EXPECT_EQ(reinterpret_cast<const int32_t*>(routes.data() + (s / top_k) * 2 * top_k)[s % top_k], p.active()[g]) << "slot " << s;
        }
      }
      for (int32_t s = 0; s < slots; ++s) EXPECT_EQ(seen[static_cast<size_t>(s)], 1) << "slot " << s;
    }
}

TEST(MoeEmulated, EachSchemesRoutedGemvIsItsStatedOrderOverTheExactRows) {
  constexpr int32_t kExperts = 5, kTopK = 3, kTokens = 7;  // 21 slots over 5 experts: groups of several slots
  constexpr int64_t kRows = 6, kCols = 512;
  std::mt19937 rng(17);
  std::normal_distribution<float> n(0.0f, 1.0f);
  struct Case {
    const char* name;
    MoeGemv fn;
    memra::quant::GgmlType type;
    int unit;  // the scheme's S::kUnit
  };
  using memra::quant::GgmlType;
  const Case cases[] = {{"q8_0", memra_moe_gemv_q8_0, GgmlType::Q8_0, memra::cuda::SchemeQ8_0::kUnit},
                        {"q4_k", memra_moe_gemv_q4_k, GgmlType::Q4_K, memra::cuda::SchemeQ4_K::kUnit},
                        {"q6_k", memra_moe_gemv_q6_k, GgmlType::Q6_K, memra::cuda::SchemeQ6_K::kUnit},
                        {"f32_u8", memra_moe_gemv_f32_u8, GgmlType::F32, memra_float_entries::F32U8::kUnit},
                        {"bf16_u8", memra_moe_gemv_bf16_u8, GgmlType::BF16, memra_float_entries::BF16U8::kUnit}};
  const std::vector<float> logits = random_logits(rng, kTokens, kExperts);
  const std::vector<float> routes = route(logits, kTokens, kExperts, kTopK, false);
  constexpr int32_t kSlots = kTokens * kTopK;
  const Plan plan = plan_of(routes, kTopK, kSlots, kExperts);
  ASSERT_LT(*plan.n_active(), kSlots);  // some expert serves several slots
  std::vector<float> x(static_cast<size_t>(kTokens * kCols));
  for (float& v : x) v = n(rng);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // The stacked [E][rows][cols] weight: E * rows rows of the scheme.
    std::vector<uint8_t> w;
    int64_t row_bytes = 0;
    if (c.type == GgmlType::F32 || c.type == GgmlType::BF16) {
      const int bytes = c.type == GgmlType::F32 ? 4 : 2;
      row_bytes = kCols * bytes;
      w.resize(static_cast<size_t>(kExperts * kRows * row_bytes));
      for (int64_t i = 0; i < kExperts * kRows * kCols; ++i) {
        const float v = n(rng);
        if (bytes == 4) {
          std::memcpy(w.data() + 4 * i, &v, 4);
        } else {
          const uint16_t h = memra::quant::f32_to_bf16(v);
          std::memcpy(w.data() + 2 * i, &h, 2);
        }
      }
    } else {
      for (const auto& ic : memra::testing::int8_scheme_cases())
        if (std::string(ic.name) == c.name) {
          w = memra::testing::random_int8_weights(ic, rng, kExperts * kRows, kCols);
          row_bytes = memra::ref::int8_scheme_row_bytes(ic.scheme, kCols);
        }
    }
    ASSERT_GT(row_bytes, 0);
    // The exact rows (the CPU dequantiser, as the embedding reference gathers them).
    std::vector<int32_t> all_rows(static_cast<size_t>(kExperts * kRows));
    for (int32_t i = 0; i < kExperts * kRows; ++i) all_rows[static_cast<size_t>(i)] = i;
    std::vector<float> exact(static_cast<size_t>(kExperts * kRows * kCols));
    ASSERT_TRUE(memra::ref::embedding_rows(c.type, w.data(), kCols, all_rows.data(), kExperts * kRows, 1.0f, exact.data()));
    auto run = [&](const Plan& p, std::vector<float>& out) {
      memra::cuda_emu::launch(static_cast<unsigned>((p.groups * kRows + 7) / 8), 1, 256, [&] {
        c.fn(w.data(), kRows * row_bytes, row_bytes, kCols, p.n_active(), p.active(), p.start(), p.order(), p.groups, kRows, x.data(), kTopK,
             out.data(), kRows);
      }, [] {});
    };
    std::vector<float> all(static_cast<size_t>(kSlots * kRows), NAN), one(all.size(), NAN);
    run(plan, all);
    for (int32_t s = 0; s < kSlots; ++s) {  // each slot alone: a plan of one group of one slot
      const int32_t e = reinterpret_cast<const int32_t*>(routes.data() + (s / kTopK) * 2 * kTopK)[s % kTopK];
      Plan alone;
      alone.groups = 1;
      alone.words = {1, e, 0, 1, s};
      run(alone, one);
    }
    EXPECT_EQ(std::memcmp(all.data(), one.data(), all.size() * 4), 0) << "a slot's outputs depend on the other slots of its expert";
    for (int32_t s = 0; s < kSlots; ++s) {
      const int32_t e = reinterpret_cast<const int32_t*>(routes.data() + (s / kTopK) * 2 * kTopK)[s % kTopK];
      for (int64_t r = 0; r < kRows; ++r) {
        const float* row = exact.data() + (e * kRows + r) * kCols;
        const float* xr = x.data() + (s / kTopK) * kCols;
        float lane[32] = {};
        for (int64_t u = 0; u < kCols / c.unit; ++u)
          for (int k = 0; k < c.unit; ++k) lane[u % 32] += row[u * c.unit + k] * xr[u * c.unit + k];
        for (int off = 16; off > 0; off >>= 1)
          for (int l = 0; l < off; ++l) lane[l] = lane[l] + lane[l + off];
        EXPECT_EQ(std::bit_cast<uint32_t>(all[static_cast<size_t>(s * kRows + r)]), std::bit_cast<uint32_t>(lane[0])) << "slot " << s << " row " << r;
      }
    }
  }
}

TEST(MoeEmulated, EachRowIsTheWeightedSumOfItsExpertsInSelectionOrderPlusTheSharedExpert) {
  constexpr int32_t kTokens = 37, kExperts = 12, kHidden = 200, kTopK = 3;
  std::mt19937 rng(9);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const std::vector<float> logits = random_logits(rng, kTokens, kExperts);
  const std::vector<float> routes = route(logits, kTokens, kExperts, kTopK, true);
  std::vector<float> o(static_cast<size_t>(kTokens * kTopK * kHidden)), shared(static_cast<size_t>(kTokens * kHidden)), gate(kTokens);
  for (float& v : o) v = n(rng);
  for (float& v : shared) v = n(rng);
  for (float& v : gate) v = 3.0f * n(rng);
  for (bool with_shared : {false, true}) {
    std::vector<float> y(static_cast<size_t>(kTokens * kHidden), NAN);
    memra::cuda_emu::launch(kTokens, 1, 256, [&] {
      memra_moe_combine(o.data(), routes.data(), kTopK, kHidden, with_shared ? shared.data() : nullptr, with_shared ? gate.data() : nullptr, y.data());
    }, [] {});
    std::vector<float> want(y.size());
    for (int32_t t = 0; t < kTokens; ++t) {
      int32_t chosen[kTopK];
      float w[kTopK];
      memra::ref::moe_route_row(logits.data() + t * kExperts, kExperts, kTopK, true, chosen, w);
      const float g = memra::ref::moe_shared_gate(gate[static_cast<size_t>(t)]);
      for (int32_t h = 0; h < kHidden; ++h) {
        float acc = 0.0f;  // host/backend/cpu/cpu_moe_ffn.cpp's arithmetic
        for (int32_t i = 0; i < kTopK; ++i) acc += w[i] * o[static_cast<size_t>((t * kTopK + i) * kHidden + h)];
        if (with_shared) acc += g * shared[static_cast<size_t>(t * kHidden + h)];
        want[static_cast<size_t>(t * kHidden + h)] = acc;
      }
    }
    EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0) << "rows differ from the reference's weighted sum, shared " << with_shared;
  }
}

}  // namespace
