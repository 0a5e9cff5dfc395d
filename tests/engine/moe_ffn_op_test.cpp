// The moe_ffn v2 op on the CPU reference backend: its routing (ref::moe_route_row, the one
// definition kernels/moe/moe_route.cuh gives the CPU and the CUDA kernels) against an
// independent selection and double-precision softmax, up to 512 experts and top-8, both ways
// of norm_topk_prob; the whole op over stacked expert tensors (read in place, per-expert
// slices) with and without a sigmoid-gated shared expert against an independent
// double-precision mixture of experts on f32 weights (the real quant-float plugin's matmul),
// the rows' independence from each other, and its refusals of malformed arguments. The model-level oracle (the qwen3_moe fixture against
// transformers) is engine_fixture_test's Qwen3Moe*.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "host/backend/cpu/cpu_backend.hpp"
#include "kernels/moe/moe_route_ref.hpp"
#include "memra/ops.h"
#include "tests/support/build_plugins.hpp"

namespace memra {
namespace {

TEST(MoeRouteRef, PicksTheTopKHighestFirstWithTiesToTheLowerIndex) {
  const float logits[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.5f};
  int32_t experts[4];
  float weights[4];
  ref::moe_route_row(logits, 6, 4, false, experts, weights);
  EXPECT_EQ(experts[0], 1);
  EXPECT_EQ(experts[1], 3);  // tied with 1: the lower index first
  EXPECT_EQ(experts[2], 4);
  EXPECT_EQ(experts[3], 0);  // tied with 5
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - 2.0);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(weights[i], std::exp(logits[experts[i]] - 2.0) / sum, 1e-7) << i;
  EXPECT_EQ(weights[0], weights[1]);

  ref::moe_route_row(logits, 6, 2, true, experts, weights);
  EXPECT_EQ(weights[0], 0.5f);  // two equal logits, renormalised over the pair
  EXPECT_EQ(weights[1], 0.5f);
}

// The routing against an independent one: a stable sort by logit (ties to the lower index)
// and a double-precision softmax, over 1..512 experts and top-1..8, both ways of
// normalize_top_k; the float weights within a few ulp of the exact ones.
TEST(MoeRouteRef, MatchesAnIndependentTopKSoftmaxUpTo512ExpertsAndTop8) {
  std::mt19937 rng(11);
  for (int32_t experts : {1, 2, 8, 31, 33, 128, 512})
    for (int32_t k : {1, 2, 4, 8}) {
      if (k > experts) continue;
      for (int round = 0; round < 20; ++round) {
        std::vector<float> l(static_cast<size_t>(experts));
        std::normal_distribution<float> n(0.0f, round % 2 ? 4.0f : 0.5f);
        for (float& v : l) v = n(rng);
        if (round % 3 == 0 && experts > 3) l[2] = l[1] = l[0];  // ties
        std::vector<int32_t> order(static_cast<size_t>(experts));
        for (int32_t e = 0; e < experts; ++e) order[static_cast<size_t>(e)] = e;
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[static_cast<size_t>(a)] > l[static_cast<size_t>(b)]; });
        const double mx = l[static_cast<size_t>(order[0])];
        double z = 0, picked = 0;
        for (float v : l) z += std::exp(static_cast<double>(v) - mx);
        for (int32_t i = 0; i < k; ++i) picked += std::exp(static_cast<double>(l[static_cast<size_t>(order[static_cast<size_t>(i)])]) - mx) / z;
        for (bool normalize : {false, true}) {
          int32_t chosen[8];
          float w[8];
          ref::moe_route_row(l.data(), experts, k, normalize, chosen, w);
          for (int32_t i = 0; i < k; ++i) {
            ASSERT_EQ(chosen[i], order[static_cast<size_t>(i)]) << experts << " experts, top " << k << ", choice " << i;
            double want = std::exp(static_cast<double>(l[static_cast<size_t>(chosen[i])]) - mx) / z;
            if (normalize) want /= picked;
            EXPECT_NEAR(w[i], want, 4e-7 * std::max(want, 1e-3)) << experts << " experts, top " << k << ", normalize " << normalize;
          }
        }
      }
    }
}

TEST(MoeRouteRef, SharedExpertGateIsTheSigmoid) {
  for (float g : {-30.0f, -3.5f, -0.25f, 0.0f, 0.7f, 4.0f, 30.0f}) EXPECT_NEAR(ref::moe_shared_gate(g), 1.0 / (1.0 + std::exp(-static_cast<double>(g))), 2e-7) << g;
}

// A quant-float table for the CPU backend's matmul (f32 weights).
backend::QuantLookup float_lookup(const memra_device_info& device) {
  auto q = testing::build_plugins().quant_for("f32", device);
  EXPECT_TRUE(q.ok()) << (q.ok() ? "" : q.error().message);
  auto plugin = std::make_shared<plugins::QuantPlugin>(std::move(*q));
  return [plugin](const char* scheme) {
    return std::string(scheme) == "f32" ? backend::QuantTable{&plugin->api(), plugin->ctx()} : backend::QuantTable{};
  };
}

struct MoeCase {
  static constexpr int32_t kExperts = 5, kTopK = 2, kTokens = 7;
  static constexpr int64_t kHidden = 16, kWidth = 12, kShared = 8;
  // Stacked: gate [E][width][hidden], up [E][width][hidden], down [E][hidden][width]; then the
  // shared expert's gate, up, down and its [1][hidden] gate.
  std::vector<std::vector<float>> mats;
  std::vector<std::string> names = {"gate_exps", "up_exps", "down_exps", "gate_shexp", "up_shexp", "down_shexp", "gate_inp_shexp"};
  std::vector<memra_weight> weights;
  std::vector<float> x, logits;

  MoeCase() {
    std::mt19937 rng(7);
    std::normal_distribution<float> n(0.0f, 0.5f);
    const std::vector<std::vector<int64_t>> shapes = {{kExperts, kWidth, kHidden}, {kExperts, kWidth, kHidden}, {kExperts, kHidden, kWidth},
                                                      {kShared, kHidden},          {kShared, kHidden},          {kHidden, kShared},
                                                      {1, kHidden}};
    for (const auto& shape : shapes) {
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      mats.emplace_back(static_cast<size_t>(count));
      for (float& v : mats.back()) v = n(rng);
    }
    for (size_t i = 0; i < mats.size(); ++i) {
      memra_weight w{};
      w.struct_size = MEMRA_WEIGHT_STRUCT_SIZE;
      w.name = names[i].c_str();
      w.quant = "f32";
      w.dtype = MEMRA_DTYPE_F32;
      w.ndim = static_cast<int32_t>(shapes[i].size());
      for (size_t d = 0; d < shapes[i].size(); ++d) w.shape[d] = shapes[i][d];
      w.bytes = mats[i].size() * sizeof(float);
      w.data = mats[i].data();
      weights.push_back(w);
    }
    x.resize(static_cast<size_t>(kTokens * kHidden));
    for (float& v : x) v = n(rng);
    logits.resize(static_cast<size_t>(kTokens * kExperts));
    for (float& v : logits) v = 2.0f * n(rng);
  }

  // act(gate . x) * (up . x) then down, in double, for matrices at gate/up [width][hidden], down [hidden][width].
  static std::vector<double> mlp(const float* g, const float* u, const float* d, int64_t width, const float* xr) {
    std::vector<double> a(static_cast<size_t>(width)), y(static_cast<size_t>(kHidden), 0.0);
    for (int64_t r = 0; r < width; ++r) {
      double gs = 0, us = 0;
      for (int64_t c = 0; c < kHidden; ++c) gs += static_cast<double>(g[r * kHidden + c]) * xr[c], us += static_cast<double>(u[r * kHidden + c]) * xr[c];
      a[static_cast<size_t>(r)] = gs / (1.0 + std::exp(-gs)) * us;
    }
    for (int64_t h = 0; h < kHidden; ++h)
      for (int64_t r = 0; r < width; ++r) y[static_cast<size_t>(h)] += static_cast<double>(d[h * width + r]) * a[static_cast<size_t>(r)];
    return y;
  }

  // y [tokens][hidden] in double: softmax over all experts, the top k (renormalised when
  // `normalize`), plus sigmoid(gate . x) times the shared expert when `shared`.
  std::vector<double> expected(bool normalize, bool shared) const {
    std::vector<double> y(static_cast<size_t>(kTokens * kHidden), 0.0);
    for (int t = 0; t < kTokens; ++t) {
      const float* l = logits.data() + t * kExperts;
      const float* xr = x.data() + t * kHidden;
      std::vector<int> order(kExperts);
      for (int e = 0; e < kExperts; ++e) order[static_cast<size_t>(e)] = e;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
      double z = 0, picked = 0;
      for (int e = 0; e < kExperts; ++e) z += std::exp(static_cast<double>(l[e]));
      for (int i = 0; i < kTopK; ++i) picked += std::exp(static_cast<double>(l[order[static_cast<size_t>(i)]])) / z;
      for (int i = 0; i < kTopK; ++i) {
        const int e = order[static_cast<size_t>(i)];
        double w = std::exp(static_cast<double>(l[e])) / z;
        if (normalize) w /= picked;
        const auto o = mlp(mats[0].data() + e * kWidth * kHidden, mats[1].data() + e * kWidth * kHidden, mats[2].data() + e * kHidden * kWidth,
                           kWidth, xr);
        for (int64_t h = 0; h < kHidden; ++h) y[static_cast<size_t>(t * kHidden + h)] += w * o[static_cast<size_t>(h)];
      }
      if (!shared) continue;
      double g = 0;
      for (int64_t c = 0; c < kHidden; ++c) g += static_cast<double>(mats[6][static_cast<size_t>(c)]) * xr[c];
      const auto s = mlp(mats[3].data(), mats[4].data(), mats[5].data(), kShared, xr);
      for (int64_t h = 0; h < kHidden; ++h) y[static_cast<size_t>(t * kHidden + h)] += s[static_cast<size_t>(h)] / (1.0 + std::exp(-g));
    }
    return y;
  }
};

memra_tensor tensor(std::vector<float>& v, int64_t rows, int64_t cols) {
  memra_tensor t{};
  t.struct_size = MEMRA_TENSOR_STRUCT_SIZE;
  t.dtype = MEMRA_DTYPE_F32;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.data = v.data();
  return t;
}

class MoeFfnOp : public ::testing::Test {
 protected:
  MoeCase c;
  std::unique_ptr<backend::CpuBackend> cpu;
  const memra_op* op = nullptr;
  std::vector<int32_t> ids, positions, seq_index;
  int32_t seq_len = MoeCase::kTokens;
  memra_forward_batch batch{};

  void SetUp() override {
    const memra_device_info d = backend::CpuBackend(nullptr).device_info();
    cpu = std::make_unique<backend::CpuBackend>(float_lookup(d));
    const memra_backend_ops& o = *cpu->ops();
    ASSERT_EQ(o.op_find(o.ctx, MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V2, &op), MEMRA_OK) << cpu->last_error();
    batch.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
    set_tokens(MoeCase::kTokens);
  }
  void set_tokens(int32_t n) {
    ids.assign(static_cast<size_t>(n), 1);
    positions.resize(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = i;
    seq_index.assign(static_cast<size_t>(n), 0);
    seq_len = n;
    batch.num_tokens = n;
    batch.token_ids = ids.data();
    batch.positions = positions.data();
    batch.seq_index = seq_index.data();
    batch.num_seqs = 1;
    batch.seq_lens = &seq_len;
  }

  // Runs the op over rows [first, first + n) of the case's x and logits.
  memra_status run(int32_t first, int32_t n, bool normalize, std::vector<float>& y, bool shared = false, int32_t num_weights = -1,
                   bool alias = false, int32_t top_k = MoeCase::kTopK) {
    set_tokens(n);
    std::vector<float> xs(c.x.begin() + first * MoeCase::kHidden, c.x.begin() + (first + n) * MoeCase::kHidden);
    std::vector<float> ls(c.logits.begin() + first * MoeCase::kExperts, c.logits.begin() + (first + n) * MoeCase::kExperts);
    y.assign(static_cast<size_t>(n * MoeCase::kHidden), 0.0f);
    memra_tensor tx = tensor(xs, n, MoeCase::kHidden), tl = tensor(ls, n, MoeCase::kExperts), ty = tensor(alias ? xs : y, n, MoeCase::kHidden);
    const memra_tensor* in[2] = {&tx, &tl};
    memra_tensor* out[1] = {&ty};
    std::vector<const memra_weight*> w;
    for (const memra_weight& m : c.weights) w.push_back(&m);
    memra_moe_ffn_attrs_v2 attrs{MEMRA_MOE_FFN_ATTRS_V2_STRUCT_SIZE, MoeCase::kExperts, top_k, normalize ? 1 : 0, MEMRA_ACTIVATION_SILU,
                                 shared ? 1 : 0};
    memra_op_args a{};
    a.struct_size = MEMRA_OP_ARGS_STRUCT_SIZE;
    a.layer = 0;
    a.attrs_version = MEMRA_OP_MOE_FFN_V2;
    a.attrs = &attrs;
    a.attrs_size = sizeof(attrs);
    a.num_inputs = 2;
    a.num_outputs = 1;
    a.inputs = in;
    a.outputs = out;
    a.num_weights = num_weights >= 0 ? num_weights : shared ? 7 : 3;
    a.weights = w.data();
    a.batch = &batch;
    const memra_backend_ops& o = *cpu->ops();
    return o.op_run(o.ctx, op, &a);
  }
};

TEST_F(MoeFfnOp, MatchesAnIndependentMixtureOfExperts) {
  for (bool shared : {false, true})
    for (bool normalize : {false, true}) {
      std::vector<float> y;
      ASSERT_EQ(run(0, MoeCase::kTokens, normalize, y, shared), MEMRA_OK) << cpu->last_error();
      const std::vector<double> want = c.expected(normalize, shared);
      double scale = 0, worst = 0;
      for (double v : want) scale = std::max(scale, std::fabs(v));
      for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(y[i] - want[i]));
      EXPECT_LE(worst, 1e-5 * scale) << "normalize " << normalize << ", shared " << shared;
      EXPECT_GT(scale, 0.1);
    }
}

// The shared expert's gate as llama.cpp stores it (an F32 [hidden] vector) gives the bits of
// the [1][hidden] matrix.
TEST_F(MoeFfnOp, TheSharedGateAsAVectorIsTheMatrix) {
  std::vector<float> as_matrix, as_vector;
  ASSERT_EQ(run(0, MoeCase::kTokens, true, as_matrix, true), MEMRA_OK) << cpu->last_error();
  c.weights[6].ndim = 1;
  c.weights[6].shape[0] = MoeCase::kHidden;
  c.weights[6].shape[1] = 0;
  ASSERT_EQ(run(0, MoeCase::kTokens, true, as_vector, true), MEMRA_OK) << cpu->last_error();
  EXPECT_EQ(std::memcmp(as_matrix.data(), as_vector.data(), as_matrix.size() * sizeof(float)), 0);
}

TEST_F(MoeFfnOp, ARowIsBitwiseTheSameAloneAndInABatch) {
  for (bool shared : {false, true}) {
    std::vector<float> all, one;
    ASSERT_EQ(run(0, MoeCase::kTokens, false, all, shared), MEMRA_OK) << cpu->last_error();
    for (int32_t t = 0; t < MoeCase::kTokens; ++t) {
      ASSERT_EQ(run(t, 1, false, one, shared), MEMRA_OK) << cpu->last_error();
      for (int64_t h = 0; h < MoeCase::kHidden; ++h)
        EXPECT_EQ(std::bit_cast<uint32_t>(one[static_cast<size_t>(h)]), std::bit_cast<uint32_t>(all[static_cast<size_t>(t * MoeCase::kHidden + h)]))
            << "row " << t << " col " << h << ", shared " << shared;
    }
  }
}

TEST_F(MoeFfnOp, MalformedArgumentsAreRefusedNamingTheProblem) {
  std::vector<float> y;
  EXPECT_EQ(run(0, 3, false, y, false, 2), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(cpu->last_error().find("needs 3 weights"), std::string::npos) << cpu->last_error();
  EXPECT_EQ(run(0, 3, false, y, true, 3), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(cpu->last_error().find("needs 7 weights"), std::string::npos) << cpu->last_error();
  EXPECT_EQ(run(0, 3, false, y, false, -1, true), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(cpu->last_error().find("must not alias"), std::string::npos) << cpu->last_error();
  EXPECT_EQ(run(0, 3, false, y, false, -1, false, MoeCase::kExperts + 1), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(cpu->last_error().find("top_k must be in 1..min(num_experts, 8)"), std::string::npos) << cpu->last_error();
  // Stacked experts whose count disagrees with num_experts.
  c.weights[1].shape[0] = MoeCase::kExperts - 1;
  EXPECT_EQ(run(0, 3, false, y), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(cpu->last_error().find("up_exps must be a stacked [num_experts][rows][cols] tensor of 5 experts"), std::string::npos)
      << cpu->last_error();
  c.weights[1].shape[0] = MoeCase::kExperts;
  // A down tensor of the wrong shape.
  c.weights[2].shape[2] = MoeCase::kWidth - 1;
  EXPECT_EQ(run(0, 3, false, y), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(cpu->last_error().find("the experts are not [E][width][hidden]"), std::string::npos) << cpu->last_error();
  c.weights[2].shape[2] = MoeCase::kWidth;
  // A shared gate of the wrong size.
  c.weights[6].shape[1] = MoeCase::kHidden - 1;
  EXPECT_EQ(run(0, 3, false, y, true), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(cpu->last_error().find("shared expert's gate must be"), std::string::npos) << cpu->last_error();
}

}  // namespace
}  // namespace memra
