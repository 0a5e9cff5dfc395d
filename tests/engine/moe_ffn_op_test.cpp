// The moe_ffn v1 op on the CPU reference backend: its routing (ref::moe_route_row) and the
// whole op against an independent double-precision mixture of experts on f32 weights (the
// real quant-float plugin's matmul), the rows' independence from each other, and its
// refusals of malformed arguments. The model-level oracle (the qwen3_moe fixture against
// transformers) is engine_fixture_test's Qwen3Moe*.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
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
  static constexpr int64_t kHidden = 16, kWidth = 12;
  std::vector<std::vector<float>> mats;  // gate_0.., up_0.., down_0..
  std::vector<std::string> names;
  std::vector<memra_weight> weights;
  std::vector<float> x, logits;

  MoeCase() {
    std::mt19937 rng(7);
    std::normal_distribution<float> n(0.0f, 0.5f);
    for (int kind = 0; kind < 3; ++kind)
      for (int e = 0; e < kExperts; ++e) {
        mats.emplace_back(static_cast<size_t>(kHidden * kWidth));
        for (float& v : mats.back()) v = n(rng);
        names.push_back(std::string(kind == 0 ? "gate." : kind == 1 ? "up." : "down.") + std::to_string(e));
      }
    for (size_t i = 0; i < mats.size(); ++i) {
      memra_weight w{};
      w.struct_size = MEMRA_WEIGHT_STRUCT_SIZE;
      w.name = names[i].c_str();
      w.quant = "f32";
      w.dtype = MEMRA_DTYPE_F32;
      w.ndim = 2;
      const bool down = i >= 2 * kExperts;
      w.shape[0] = down ? kHidden : kWidth;
      w.shape[1] = down ? kWidth : kHidden;
      w.bytes = mats[i].size() * sizeof(float);
      w.data = mats[i].data();
      weights.push_back(w);
    }
    x.resize(static_cast<size_t>(kTokens * kHidden));
    for (float& v : x) v = n(rng);
    logits.resize(static_cast<size_t>(kTokens * kExperts));
    for (float& v : logits) v = 2.0f * n(rng);
  }

  // y [tokens][hidden] in double: softmax over all experts, the top k renormalised.
  std::vector<double> expected(bool normalize) const {
    std::vector<double> y(static_cast<size_t>(kTokens * kHidden), 0.0);
    for (int t = 0; t < kTokens; ++t) {
      const float* l = logits.data() + t * kExperts;
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
        std::vector<double> a(static_cast<size_t>(kWidth));
        for (int64_t r = 0; r < kWidth; ++r) {
          double g = 0, u = 0;
          for (int64_t c = 0; c < kHidden; ++c) {
            g += static_cast<double>(mats[static_cast<size_t>(e)][static_cast<size_t>(r * kHidden + c)]) * x[static_cast<size_t>(t * kHidden + c)];
            u += static_cast<double>(mats[static_cast<size_t>(kExperts + e)][static_cast<size_t>(r * kHidden + c)]) * x[static_cast<size_t>(t * kHidden + c)];
          }
          a[static_cast<size_t>(r)] = g / (1.0 + std::exp(-g)) * u;
        }
        for (int64_t h = 0; h < kHidden; ++h) {
          double d = 0;
          for (int64_t r = 0; r < kWidth; ++r) d += static_cast<double>(mats[static_cast<size_t>(2 * kExperts + e)][static_cast<size_t>(h * kWidth + r)]) * a[static_cast<size_t>(r)];
          y[static_cast<size_t>(t * kHidden + h)] += w * d;
        }
      }
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
    ASSERT_EQ(o.op_find(o.ctx, MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V1, &op), MEMRA_OK) << cpu->last_error();
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
  memra_status run(int32_t first, int32_t n, bool normalize, std::vector<float>& y, int32_t num_weights = 3 * MoeCase::kExperts,
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
    memra_moe_ffn_attrs_v1 attrs{MEMRA_MOE_FFN_ATTRS_V1_STRUCT_SIZE, MoeCase::kExperts, top_k, normalize ? 1 : 0, MEMRA_ACTIVATION_SILU};
    memra_op_args a{};
    a.struct_size = MEMRA_OP_ARGS_STRUCT_SIZE;
    a.layer = 0;
    a.attrs_version = MEMRA_OP_MOE_FFN_V1;
    a.attrs = &attrs;
    a.attrs_size = sizeof(attrs);
    a.num_inputs = 2;
    a.num_outputs = 1;
    a.inputs = in;
    a.outputs = out;
    a.num_weights = num_weights;
    a.weights = w.data();
    a.batch = &batch;
    const memra_backend_ops& o = *cpu->ops();
    return o.op_run(o.ctx, op, &a);
  }
};

TEST_F(MoeFfnOp, MatchesAnIndependentMixtureOfExperts) {
  for (bool normalize : {false, true}) {
    std::vector<float> y;
    ASSERT_EQ(run(0, MoeCase::kTokens, normalize, y), MEMRA_OK) << cpu->last_error();
    const std::vector<double> want = c.expected(normalize);
    double scale = 0, worst = 0;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(y[i] - want[i]));
    EXPECT_LE(worst, 1e-5 * scale) << "normalize " << normalize;
    EXPECT_GT(scale, 0.1);
  }
}

TEST_F(MoeFfnOp, ARowIsBitwiseTheSameAloneAndInABatch) {
  std::vector<float> all, one;
  ASSERT_EQ(run(0, MoeCase::kTokens, false, all), MEMRA_OK) << cpu->last_error();
  for (int32_t t = 0; t < MoeCase::kTokens; ++t) {
    ASSERT_EQ(run(t, 1, false, one), MEMRA_OK) << cpu->last_error();
    for (int64_t h = 0; h < MoeCase::kHidden; ++h)
      EXPECT_EQ(std::bit_cast<uint32_t>(one[static_cast<size_t>(h)]), std::bit_cast<uint32_t>(all[static_cast<size_t>(t * MoeCase::kHidden + h)]))
          << "row " << t << " col " << h;
  }
}

TEST_F(MoeFfnOp, MalformedArgumentsAreRefusedNamingTheProblem) {
  std::vector<float> y;
  EXPECT_EQ(run(0, 3, false, y, 3 * MoeCase::kExperts - 1), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(cpu->last_error().find("3 * num_experts weights"), std::string::npos) << cpu->last_error();
  EXPECT_EQ(run(0, 3, false, y, 3 * MoeCase::kExperts, true), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(cpu->last_error().find("must not alias"), std::string::npos) << cpu->last_error();
  EXPECT_EQ(run(0, 3, false, y, 3 * MoeCase::kExperts, false, MoeCase::kExperts + 1), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(cpu->last_error().find("top_k must be in 1..num_experts"), std::string::npos) << cpu->last_error();
  // A down matrix of the wrong shape.
  c.weights[2 * MoeCase::kExperts + 1].shape[1] = MoeCase::kWidth - 1;
  EXPECT_EQ(run(0, 3, false, y), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(cpu->last_error().find("expert 1's matrices"), std::string::npos) << cpu->last_error();
}

}  // namespace
}  // namespace memra
