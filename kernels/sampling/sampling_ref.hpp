// Canonical token sampling, CPU reference. The CUDA kernel (sampling.cu) computes
// the same token bit for bit from the same logits row; docs/ARCHITECTURE.md
// ("Sampling") states the contract. For one row of `vocab` logits:
//  1. v_i = canonical(logit_i) (NaN -> -inf, -0 -> +0), then the row's penalty
//     entries (unique ids from the sequence's history) through apply_penalty.
//  2. temperature 0: argmax, the lowest id wins ties.
//  3. top_k in (0, vocab): candidates are the k best under (v desc, id asc); ties at
//     the k-th value are taken in ascending id order. Else every id is a candidate.
//  4. mx = max v; q_i = candidate_weight(v_i, mx, T) for candidates, 0 otherwise.
//  5. Canonical sum (sampling_math.cuh): 1024 lane partials in index order, 32 warp
//     sums in lane order, the total in warp order.
//  6. top_p < 1: tau = the largest positive float such that the canonical sum of
//     {q_j : q_j >= tau} >= top_p * total (binary search over the float's bits; the
//     sum is monotone in tau). Every q_j >= tau stays, ties at tau included.
//  7. min_p > 0: keep q_j >= min_p (the maximum's weight is exactly 1).
//  8. u = philox_uniform(seed, position) * (canonical sum of the survivors). Walk the
//     warps in order with their sums, then the chosen warp's lanes with their
//     partials, then the chosen lane's indices j, j+1024, ... adding each weight: the
//     first running sum > u wins. When rounding leaves none at a level, the last
//     survivor (in walk order) of the warp or lane reached wins.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/sampling/sampling_math.cuh"

namespace memra::ref {

// What a draw was taken from (tests: the exact distribution).
struct SampleTrace {
  std::vector<float> weight;  // [vocab] q_i of the survivors, 0 elsewhere
  float total = 0.0f;         // their canonical sum
  float tau = 0.0f;           // top_p threshold (0 when top_p is off)
};

// Step 0, in place on one raw row: each logit_bias entry (ids unique) adds its bias
// to its logit (one IEEE add), then every token the allowed-token bitset leaves out
// (bit id%64 of word id/64; ids past its `allowed_words` words: left out) becomes -inf.
// allowed NULL: every token. The kernel applies the same to its copy of the row.
void adjust_row(float* row, int64_t vocab, const sampling::BiasEntry* bias, int32_t num_bias, const uint64_t* allowed,
                int64_t allowed_words);

// The sampled token of one row. `penalties` are the row's history entries (ids unique).
int32_t sample_row(const float* logits, int64_t vocab, const sampling::RowParams& params,
                   const sampling::PenaltyEntry* penalties, int32_t num_penalties, SampleTrace* trace = nullptr);

// The canonical sum of weights[i] over i with weights[i] >= threshold (threshold >= 0).
float canonical_sum(const float* weights, int64_t n, float threshold);

}  // namespace memra::ref
