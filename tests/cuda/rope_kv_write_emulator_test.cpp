// The decode step's RoPE + paged-KV write (kernels/rope/rope_kv_write.cu, the file itself)
// on the host CTA emulator (no GPU needed), launched as the CUDA backend launches it (grid
// tokens x (q heads + kv heads), 64 threads): q and k within the f32 bound of the
// reference's per-head RMSNorm and rotation, every cache element type's rows exactly what
// ref::paged_kv_write stores for the kernel's own k and v (f16 / bf16 rounding, fp8 codes
// and scales), untouched slots untouched, and a token's results independent of the launch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/attention/attention_ref.hpp"
#include "kernels/norm/rms_norm_ref.hpp"
#include "kernels/rope/rope_ref.hpp"
#include "tests/cuda/cta_emulator.hpp"   // (last but one: it defines CUDA's keywords as macros)
#include "kernels/rope/rope_kv_write.cu"  // (its #pragma unroll: built with -Wno-unknown-pragmas)

namespace {

using memra::ref::KvElement;

constexpr int32_t kQHeads = 4, kKvHeads = 2, kHeadDim = 64, kBlock = 16, kMaxBlocks = 4, kSeqs = 2;
constexpr int32_t kNumBlocks = kSeqs * kMaxBlocks;
const std::vector<int32_t> kPositions = {0, 17, 40};  // token t of sequence kSeq[t]
const std::vector<int32_t> kSeq = {0, 1, 0};
const std::vector<int32_t> kTables = {5, 2, 7, 0, 1, 6, 3, 4};  // scattered blocks, [seq][kMaxBlocks]

struct Case {
  KvElement element;
  bool neox, qk_norm;
};

int64_t cache_bytes(KvElement e) {
  const int64_t elems = static_cast<int64_t>(kNumBlocks) * kBlock * kKvHeads * kHeadDim;
  return e == KvElement::fp8 ? kNumBlocks * memra::attn::fp8_kv_block_bytes(kBlock, kKvHeads, kHeadDim)
                             : elems * (e == KvElement::f32 ? 4 : 2);
}

struct Result {
  std::vector<float> q, k;
  std::vector<uint8_t> kc, vc;
};

struct Problem {
  Case c;
  memra_rope_params rope{};
  memra::ref::RopeTable table;
  std::vector<float> q, k, v, qn, kn;
  explicit Problem(Case cs) : c(cs) {
    rope.struct_size = MEMRA_ROPE_PARAMS_STRUCT_SIZE;
    rope.rotary_dim = kHeadDim;
    rope.neox_style = c.neox ? 1 : 0;
    rope.theta = 10000.0f;
    rope.scaling = MEMRA_ROPE_SCALING_NONE;
    table = memra::ref::rope_table(rope);
    std::mt19937 rng(c.neox * 2 + c.qk_norm + 10 * static_cast<int>(c.element));
    std::normal_distribution<float> n(0.0f, 1.0f);
    const size_t tokens = kPositions.size();
    q.resize(tokens * kQHeads * kHeadDim);
    k.resize(tokens * kKvHeads * kHeadDim);
    v.resize(k.size());
    for (auto* vec : {&q, &k, &v})
      for (float& x : *vec) x = n(rng);
    qn.resize(kHeadDim);
    kn.resize(kHeadDim);
    for (float& x : qn) x = 1.0f + 0.1f * n(rng);
    for (float& x : kn) x = 1.0f + 0.1f * n(rng);
  }

  // Tokens first .. first + count - 1 in one launch, over a cache of 0x5a bytes.
  Result run(int64_t first, int64_t count) const {
    Result r{std::vector<float>(q.begin() + first * kQHeads * kHeadDim, q.begin() + (first + count) * kQHeads * kHeadDim),
             std::vector<float>(k.begin() + first * kKvHeads * kHeadDim, k.begin() + (first + count) * kKvHeads * kHeadDim),
             std::vector<uint8_t>(static_cast<size_t>(cache_bytes(c.element)), 0x5a),
             std::vector<uint8_t>(static_cast<size_t>(cache_bytes(c.element)), 0x5a)};
    const float* vv = v.data() + first * kKvHeads * kHeadDim;
    const int32_t* pos = kPositions.data() + first;
    const int32_t* seq = kSeq.data() + first;
    const float* qw = c.qk_norm ? qn.data() : nullptr;
    const float* kw = c.qk_norm ? kn.data() : nullptr;
    const float eps = 1e-6f;
    memra::cuda_emu::launch(static_cast<unsigned>(count), kQHeads + kKvHeads, 64,
                            [&] {
                              const float* f = table.inv_freq.data();
                              const float af = table.attention_factor;
                              void* kc = r.kc.data();
                              void* vc = r.vc.data();
                              switch (c.element) {
                                case KvElement::f32:
                                  memra_rope_kv_write(r.q.data(), r.k.data(), vv, kQHeads, kKvHeads, kHeadDim, kHeadDim, c.neox, f, af,
                                                      pos, seq, kTables.data(), kMaxBlocks, static_cast<float*>(kc),
                                                      static_cast<float*>(vc), kBlock, qw, kw, eps);
                                  break;
                                case KvElement::f16:
                                  memra_rope_kv_write_f16(r.q.data(), r.k.data(), vv, kQHeads, kKvHeads, kHeadDim, kHeadDim, c.neox, f,
                                                          af, pos, seq, kTables.data(), kMaxBlocks, static_cast<__half*>(kc),
                                                          static_cast<__half*>(vc), kBlock, qw, kw, eps);
                                  break;
                                case KvElement::bf16:
                                  memra_rope_kv_write_bf16(r.q.data(), r.k.data(), vv, kQHeads, kKvHeads, kHeadDim, kHeadDim, c.neox,
                                                           f, af, pos, seq, kTables.data(), kMaxBlocks,
                                                           static_cast<__nv_bfloat16*>(kc), static_cast<__nv_bfloat16*>(vc), kBlock,
                                                           qw, kw, eps);
                                  break;
                                case KvElement::fp8:
                                  memra_rope_kv_write_fp8(r.q.data(), r.k.data(), vv, kQHeads, kKvHeads, kHeadDim, kHeadDim, c.neox, f,
                                                          af, pos, seq, kTables.data(), kMaxBlocks, static_cast<uint8_t*>(kc),
                                                          static_cast<uint8_t*>(vc), kBlock, qw, kw, eps);
                                  break;
                              }
                            },
                            [] {});
    return r;
  }

  // The reference's q or k for token t: per-head RMSNorm (with the weights), then RoPE.
  std::vector<float> reference(const std::vector<float>& x, int heads, const std::vector<float>& norm, int64_t t) const {
    std::vector<float> y(x.begin() + t * heads * kHeadDim, x.begin() + (t + 1) * heads * kHeadDim);
    if (c.qk_norm) memra::ref::rms_norm(y.data(), norm.data(), heads, kHeadDim, 1e-6f, 0.0f, y.data());
    memra::ref::rope_apply(table, rope, kPositions[static_cast<size_t>(t)], y.data(), heads, kHeadDim);
    return y;
  }
};

double nmse(const float* y, const std::vector<float>& ref) {
  double se = 0, sr = 0;
  for (size_t i = 0; i < ref.size(); ++i) se += (double(y[i]) - ref[i]) * (double(y[i]) - ref[i]), sr += double(ref[i]) * ref[i];
  return se / sr;
}

TEST(RopeKvWriteEmulated, RotatesNormsAndWritesEveryCacheType) {
  for (const KvElement e : {KvElement::f32, KvElement::f16, KvElement::bf16, KvElement::fp8})
    for (const bool neox : {true, false})
      for (const bool qk_norm : {false, true}) {
        SCOPED_TRACE(testing::Message() << "element " << static_cast<int>(e) << (neox ? " neox" : " interleaved")
                                        << (qk_norm ? " qk-norm" : ""));
        const Problem p({e, neox, qk_norm});
        const auto tokens = static_cast<int64_t>(kPositions.size());
        const Result all = p.run(0, tokens);
        // The cache the reference writes from the kernel's own rotated k (and v).
        std::vector<uint8_t> kc(all.kc.size(), 0x5a), vc(all.vc.size(), 0x5a);
        memra::ref::PagedKvLayer layer;
        layer.k = kc.data();
        layer.v = vc.data();
        layer.block_size = kBlock;
        layer.kv_heads = kKvHeads;
        layer.head_dim = kHeadDim;
        layer.element = e;
        for (int64_t t = 0; t < tokens; ++t) {
          EXPECT_LE(nmse(all.q.data() + t * kQHeads * kHeadDim, p.reference(p.q, kQHeads, p.qn, t)), 1e-12) << "q of token " << t;
          EXPECT_LE(nmse(all.k.data() + t * kKvHeads * kHeadDim, p.reference(p.k, kKvHeads, p.kn, t)), 1e-12) << "k of token " << t;
          memra::ref::paged_kv_write(layer, kTables.data() + kSeq[static_cast<size_t>(t)] * kMaxBlocks, kPositions[static_cast<size_t>(t)],
                                     all.k.data() + t * kKvHeads * kHeadDim, p.v.data() + t * kKvHeads * kHeadDim);
        }
        EXPECT_EQ(all.kc, kc) << "K cache (written slots and the rest)";
        EXPECT_EQ(all.vc, vc) << "V cache";
        // Token 1 alone: the bits it gets among three.
        const Result one = p.run(1, 1);
        EXPECT_EQ(std::memcmp(one.q.data(), all.q.data() + kQHeads * kHeadDim, one.q.size() * 4), 0) << "q depends on the launch";
        EXPECT_EQ(std::memcmp(one.k.data(), all.k.data() + kKvHeads * kHeadDim, one.k.size() * 4), 0) << "k depends on the launch";
      }
}

}  // namespace
