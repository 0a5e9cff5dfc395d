// The device sampler (kernels/sampling/sampling.cu, the file itself: one block of 1024
// threads per row) on the host CTA emulator (no GPU needed): every row's token is
// ref::sample_row's for the same row after ref::adjust_row (greedy, temperature, top-k,
// top-p, min-p, penalties, logit_bias and allowed-token masks of several densities), and a
// row's token does not depend on the launch's other rows. memra-kernel-check holds the same
// on the GPU (its "sampling" lines); this runs in CI.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/sampling/sampling_ref.hpp"
#include "tests/cuda/cta_emulator.hpp"  // (last but one: it defines CUDA's keywords as macros)
#include "kernels/sampling/sampling.cu"  // (its #pragma unroll: built with -Wno-unknown-pragmas)

namespace {

using memra::sampling::BiasEntry;
using memra::sampling::PenaltyEntry;
using memra::sampling::RowParams;

constexpr int64_t kVocab = 3000;  // not a multiple of 1024: lanes without a third index
constexpr int64_t kCap = (kVocab + 1023) / 1024 * 1024;

struct Row {
  RowParams params{};
  std::vector<PenaltyEntry> pen;
  std::vector<BiasEntry> bias;
  std::vector<uint64_t> allowed;  // empty: every token
};

// The device tokens of rows `ids` (indices into `rows`) of `logits`, one launch.
std::vector<int32_t> device_tokens(const std::vector<float>& logits, const std::vector<Row>& rows, const std::vector<int32_t>& ids) {
  const auto n = static_cast<int64_t>(ids.size());
  std::vector<RowParams> params;
  std::vector<int32_t> pen_offsets{0}, bias_offsets{0};
  std::vector<PenaltyEntry> pen;
  std::vector<BiasEntry> bias;
  std::vector<int64_t> mask_offsets;
  std::vector<uint64_t> masks;
  for (const int32_t i : ids) {
    const Row& r = rows[static_cast<size_t>(i)];
    params.push_back(r.params);
    pen.insert(pen.end(), r.pen.begin(), r.pen.end());
    pen_offsets.push_back(static_cast<int32_t>(pen.size()));
    bias.insert(bias.end(), r.bias.begin(), r.bias.end());
    bias_offsets.push_back(static_cast<int32_t>(bias.size()));
    mask_offsets.push_back(r.allowed.empty() ? -1 : static_cast<int64_t>(masks.size()));
    masks.insert(masks.end(), r.allowed.begin(), r.allowed.end());
  }
  std::vector<float> scratch(static_cast<size_t>(n * kVocab)), list_q(static_cast<size_t>(n * kCap));
  std::vector<int32_t> list_id(static_cast<size_t>(n * kCap)), tokens(static_cast<size_t>(n), -1);
  memra::cuda_emu::launch(static_cast<unsigned>(n), 1, 1024,
                          [&] {
                            memra_sample_rows(logits.data(), kVocab, ids.data(), params.data(), pen_offsets.data(), pen.data(),
                                              bias_offsets.data(), bias.data(), mask_offsets.data(), masks.data(), scratch.data(),
                                              list_q.data(), list_id.data(), kCap, tokens.data());
                          },
                          [] {});
  return tokens;
}

int32_t reference_token(const std::vector<float>& logits, const Row& r, int32_t i) {
  std::vector<float> row(logits.begin() + i * kVocab, logits.begin() + (i + 1) * kVocab);
  memra::ref::adjust_row(row.data(), kVocab, r.bias.data(), static_cast<int32_t>(r.bias.size()),
                         r.allowed.empty() ? nullptr : r.allowed.data(), static_cast<int64_t>(r.allowed.size()));
  return memra::ref::sample_row(row.data(), kVocab, r.params, r.pen.data(), static_cast<int32_t>(r.pen.size()));
}

TEST(SamplingEmulated, EveryRowDrawsTheReferencesToken) {
  std::mt19937 rng(31);
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::uniform_int_distribution<int> pct(0, 99);
  const int64_t kRows = 8;
  std::vector<float> logits(static_cast<size_t>(kRows * kVocab));
  for (float& v : logits) v = n(rng);
  logits[5] = logits[900] = 9.0f;  // ties at the top of rows 0 and 1: the lower id must win
  logits[kVocab + 2000] = logits[kVocab + 2999] = 9.0f;
  int combos = 0;
  for (const float t : {0.0f, 0.8f})
    for (const int32_t k : {0, 40})
      for (const float tp : {1.0f, 0.9f}) {
        std::vector<Row> rows(static_cast<size_t>(kRows));
        for (int32_t i = 0; i < kRows; ++i) {
          Row& r = rows[static_cast<size_t>(i)];
          r.params.temperature = t;
          r.params.top_k = k;
          r.params.top_p = tp;
          r.params.min_p = i % 3 == 2 ? 0.05f : 0.0f;
          r.params.repetition_penalty = i % 2 ? 1.3f : 1.0f;
          r.params.presence_penalty = i % 2 ? 0.5f : 0.0f;
          r.params.frequency_penalty = i % 4 == 1 ? 0.25f : 0.0f;
          r.params.seed = static_cast<uint64_t>(combos) * 104729u + 5;
          r.params.position = static_cast<uint64_t>(i) * 17u + static_cast<uint64_t>(combos);
          if (i % 2)
            for (int e = 0; e < 10; ++e) r.pen.push_back({static_cast<int32_t>((e * 7919 + i) % kVocab), (e % 4) << 1 | 1});
          for (int e = 0; e < 6; ++e) r.bias.push_back({static_cast<int32_t>((e * 104729 + i * 31) % kVocab), e % 2 ? 5.5f : -100.0f});
          // Allowed-token masks by row: none, one token, ~1 %, ~90 %.
          const int density = i % 4;
          if (density > 0) {
            r.allowed.assign((kVocab + 63) / 64, 0);
            auto allow = [&](int64_t id) { r.allowed[static_cast<size_t>(id >> 6)] |= uint64_t{1} << (id & 63); };
            if (density == 1) allow(1234 + i);
            for (int64_t id = 0; id < kVocab && density > 1; ++id)
              if (pct(rng) < (density == 2 ? 1 : 90)) allow(id);
            allow(kVocab - 1);
          }
        }
        std::vector<int32_t> ids(static_cast<size_t>(kRows));
        for (int32_t i = 0; i < kRows; ++i) ids[static_cast<size_t>(i)] = i;
        const std::vector<int32_t> got = device_tokens(logits, rows, ids);
        for (int32_t i = 0; i < kRows; ++i)
          EXPECT_EQ(got[static_cast<size_t>(i)], reference_token(logits, rows[static_cast<size_t>(i)], i))
              << "row " << i << ": T " << t << " top_k " << k << " top_p " << tp;
        // Row 3 alone: the token it draws among eight.
        EXPECT_EQ(device_tokens(logits, rows, {3})[0], got[3]) << "a row's token depends on the launch";
        ++combos;
      }
}

}  // namespace
