// The decode step's gated activations (kernels/activation/gated_activation.cu, the file
// itself) on the host CTA emulator (no GPU needed): the plain kernels are the CPU
// reference's expressions (bit for bit here, where both call the host's expf / tanhf), and
// the _q8 / _fp8 forms write the plain output bit for bit and beside it exactly
// ref::quantize_act_q8 / ref::prepare_act_fp8 of it, whatever the grid.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/activation/gated_activation_ref.hpp"
#include "kernels/matmul/fp8_act_ref.hpp"
#include "plugins/quant-common/gemv_int8_ref.hpp"
#include "tests/cuda/cta_emulator.hpp"           // (last but one: it defines CUDA's keywords as macros)
#include "kernels/activation/gated_activation.cu"  // (its #pragma unroll: built with -Wno-unknown-pragmas)

namespace {

constexpr int64_t kN = 3 * 1280;  // three rows of 1280: whole 256-element runs and 128-element groups

bool same_bits(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

TEST(GatedActivationEmulated, FusedFormsWriteTheOutputAndTheDownProjectionsRows) {
  std::mt19937 rng(17);
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<float> gate(kN), up(kN);
  for (float& v : gate) v = n(rng);
  for (float& v : up) v = n(rng);
  for (const int act : {0, 1}) {  // silu, gelu_tanh
    SCOPED_TRACE(act == 0 ? "silu" : "gelu_tanh");
    std::vector<float> ref(kN);
    if (act == 0) memra::ref::silu_mul(gate.data(), up.data(), kN, ref.data());
    else memra::ref::gelu_tanh_mul(gate.data(), up.data(), kN, ref.data());
    std::vector<int8_t> rq(kN);
    std::vector<float> rmeta(kN / 16);
    ASSERT_TRUE(memra::ref::quantize_act_q8(ref.data(), 1, kN, rq.data(), rmeta.data()));
    std::vector<uint16_t> rplane(kN);
    std::vector<float> rback(kN / 128);
    ASSERT_TRUE(memra::ref::prepare_act_fp8(ref.data(), 1, kN, rplane.data(), rback.data()));
    for (const unsigned blocks : {1u, 5u}) {  // a grid-stride loop of 1 or 5 blocks of 256
      SCOPED_TRACE(testing::Message() << blocks << " blocks");
      std::vector<float> out(kN, NAN), out_q(kN, NAN), out_f(kN, NAN), meta(kN / 16, NAN), back(kN / 128, NAN);
      std::vector<int8_t> q(kN, 0x55);
      std::vector<uint16_t> plane(kN, 0x5555);
      auto* m2 = reinterpret_cast<float2*>(meta.data());
      auto* p2 = reinterpret_cast<uint2*>(plane.data());
      const auto* g4 = reinterpret_cast<const float4*>(gate.data());
      const auto* u4 = reinterpret_cast<const float4*>(up.data());
      memra::cuda_emu::launch(blocks, 1, 256,
                              [&] {
                                if (act == 0) {
                                  memra_silu_mul(gate.data(), up.data(), kN, out.data());
                                  memra_silu_mul_q8(gate.data(), up.data(), kN, out_q.data(), q.data(), m2);
                                  memra_silu_mul_fp8(g4, u4, kN, reinterpret_cast<float4*>(out_f.data()), p2, back.data());
                                } else {
                                  memra_gelu_tanh_mul(gate.data(), up.data(), kN, out.data());
                                  memra_gelu_tanh_mul_q8(gate.data(), up.data(), kN, out_q.data(), q.data(), m2);
                                  memra_gelu_tanh_mul_fp8(g4, u4, kN, reinterpret_cast<float4*>(out_f.data()), p2, back.data());
                                }
                              },
                              [] {});
      EXPECT_TRUE(same_bits(out.data(), ref.data(), kN * 4)) << "the reference's expression";
      EXPECT_TRUE(same_bits(out_q.data(), out.data(), kN * 4)) << "the q8 form's output";
      EXPECT_TRUE(same_bits(out_f.data(), out.data(), kN * 4)) << "the fp8 form's output";
      EXPECT_EQ(q, rq) << "int8 codes";
      EXPECT_TRUE(same_bits(meta.data(), rmeta.data(), rmeta.size() * 4)) << "{d, s} per block";
      EXPECT_EQ(plane, rplane) << "bf16 plane";
      EXPECT_TRUE(same_bits(back.data(), rback.data(), rback.size() * 4)) << "2^(120 - E) per group";
    }
  }
}

}  // namespace
