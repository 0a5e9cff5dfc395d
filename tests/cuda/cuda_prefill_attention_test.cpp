// Prefill attention (kernels/attention/prefill_attention_mma.cu):
//  - CudaPrefillAttention.*: memra-kernel-check's check_prefill_attention (quick shapes:
//    300-token prompts) on the GPU — reference bounds, chunking invariance bit for bit,
//    mixed steps. Skips without a driver/GPU.
//  - CudaPrefillAttentionPlan.*: the host-side planner (no GPU): every prompt row in
//    exactly one warp slot at position % 16 of its 16-position block, CTAs of one
//    sequence and one kv head, the CTA and warp position fields the kernel's tile
//    ranges come from, generated rows listed apart; and the tile schedule those
//    fields give each row is the same for the whole prompt in one step and in chunks.
//  - CudaPrefillAttentionEmulated.*: the kernel body itself, run on the host by the
//    emulator of prefill_attention_emulator.hpp (PTX fragment layouts, shared-memory
//    bounds and race checks), against the CPU reference (kAttentionBound) and bitwise
//    across chunkings, with every cache position a step must not read set to NaN; for
//    an f32, a bf16, an f16 and an fp8 KV cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <unistd.h>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "kernels/attention/attention_ref.hpp"
#include "kernels/attention/prefill_attention_plan.hpp"
#include "repack/quant/fp_convert.hpp"
#include "tests/support/cuda_env.hpp"
#include "tests/cuda/kernel_check_run.hpp"
#include "tests/cuda/prefill_attention_emulator.hpp"

namespace {

using memra::attn::kPrefillRows;
using memra::attn::kPrefillTaskInts;
using memra::attn::kPrefillTaskRows;
using memra::attn::kPrefillTileN;
using memra::attn::kPrefillWarps;

TEST(CudaPrefillAttention, ReferenceBoundsChunkingInvarianceMixedSteps) {
  memra::cuda_test::run_kernel_checks(memra::kcheck::check_prefill_attention);
}

struct StepRows {
  std::vector<int32_t> pos, seq;
  std::vector<uint8_t> prompt;
  void add(int32_t s, int32_t p, bool is_prompt) {
    seq.push_back(s);
    pos.push_back(p);
    prompt.push_back(is_prompt ? 1 : 0);
  }
};

int32_t first_position(int32_t pos, int32_t window) { return window > 0 ? std::max(0, pos - window + 1) : 0; }

// What the kernel does with a plan, per prompt row: the tiles its warp runs and the
// tiles the row itself sees (not fully masked), plus the structural checks.
struct RowSchedule {
  int32_t warp_first_tile, warp_last_tile, row_first_tile, row_last_tile;
};

std::map<int32_t, RowSchedule> check_plan(const StepRows& s, int32_t heads, int32_t kv_heads, int32_t window,
                                          const memra::attn::PrefillPlan& plan) {
  const int32_t group = heads / kv_heads;
  std::map<int32_t, RowSchedule> sched;  // by token row, for head 0 of each row's kv head 0 group
  std::map<std::pair<int32_t, int32_t>, int> seen;  // (token, head) -> count
  EXPECT_EQ(plan.tasks.size(), static_cast<size_t>(plan.ctas) * kPrefillWarps * kPrefillTaskInts);
  for (int32_t c = 0; c < plan.ctas; ++c) {
    const int32_t* cta = plan.tasks.data() + static_cast<size_t>(c) * kPrefillWarps * kPrefillTaskInts;
    EXPECT_GE(cta[0], 0) << "a CTA's first task is never idle";
    const int32_t kvh = cta[0] / group, seq = cta[1];
    int32_t lo = INT32_MAX, hi = -1;
    for (int32_t w = 0; w < kPrefillWarps; ++w) {
      const int32_t* t = cta + w * kPrefillTaskInts;
      EXPECT_EQ(t[4], cta[4]);
      EXPECT_EQ(t[5], cta[5]);
      if (t[0] < 0) {
        for (int32_t r = 0; r < kPrefillRows; ++r) EXPECT_EQ(t[kPrefillTaskRows + r], -1);
        continue;
      }
      EXPECT_EQ(t[0] / group, kvh) << "one kv head per CTA";
      EXPECT_EQ(t[1], seq) << "one sequence per CTA";
      EXPECT_EQ(t[2] % kPrefillRows, 0);
      int32_t warp_min = -1;
      for (int32_t r = 0; r < kPrefillRows; ++r) {
        const int32_t tok = t[kPrefillTaskRows + r];
        if (tok < 0) continue;
        EXPECT_TRUE(s.prompt[static_cast<size_t>(tok)]);
        EXPECT_EQ(s.seq[static_cast<size_t>(tok)], seq);
        EXPECT_EQ(s.pos[static_cast<size_t>(tok)], t[2] + r) << "slot r holds position base + r";
        if (warp_min < 0) warp_min = t[2] + r;
        lo = std::min(lo, t[2] + r);
        hi = std::max(hi, t[2] + r);
        ++seen[{tok, t[0]}];
        if (t[0] % group == 0 && kvh == 0) {
          const int32_t p = t[2] + r;
          sched[tok] = {first_position(t[3], window) / kPrefillTileN, t[2] / kPrefillTileN,
                        first_position(p, window) / kPrefillTileN, p / kPrefillTileN};
        }
      }
      EXPECT_EQ(t[3], warp_min) << "the warp's smallest present position";
    }
    EXPECT_EQ(cta[4], lo);
    EXPECT_EQ(cta[5], hi);
  }
  int32_t prompt_rows = 0;
  std::vector<int32_t> generated;
  for (size_t t = 0; t < s.pos.size(); ++t) {
    if (!s.prompt[t]) {
      generated.push_back(static_cast<int32_t>(t));
      continue;
    }
    ++prompt_rows;
    for (int32_t h = 0; h < heads; ++h)
      EXPECT_EQ((seen[{static_cast<int32_t>(t), h}]), 1) << "token " << t << " head " << h << " in exactly one warp";
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(prompt_rows) * static_cast<size_t>(heads));
  EXPECT_EQ(plan.generated, generated);
  return sched;
}

TEST(CudaPrefillAttentionPlan, EveryPromptRowOnceInItsSlotAndGeneratedRowsApart) {
  std::mt19937 rng(7);
  for (const auto& [heads, kv_heads] : std::vector<std::pair<int32_t, int32_t>>{{8, 2}, {8, 1}, {4, 4}, {6, 2}, {32, 8}}) {
    StepRows s;
    // Prompts at odd offsets (a prefix-cache hit mid-way), decode rows interleaved.
    s.add(3, 57, false);
    for (int32_t p = 0; p < 40; ++p) s.add(0, p, true);
    for (int32_t p = 100; p < 133; ++p) s.add(1, p, true);
    s.add(4, 5, false);
    for (int32_t p = 7; p < 8; ++p) s.add(2, p, true);
    for (int32_t p = 250; p < 321; ++p) s.add(5, p, true);
    memra::attn::PrefillPlan plan;
    ASSERT_EQ(memra::attn::build_prefill_plan(static_cast<int32_t>(s.pos.size()), s.pos.data(), s.seq.data(),
                                              s.prompt.data(), heads, kv_heads, plan),
              "");
    EXPECT_GT(plan.ctas, 0);
    check_plan(s, heads, kv_heads, 0, plan);
    // Longest first.
    for (int32_t c = 1; c < plan.ctas; ++c)
      EXPECT_GE(plan.tasks[static_cast<size_t>(c - 1) * kPrefillWarps * kPrefillTaskInts + 5],
                plan.tasks[static_cast<size_t>(c) * kPrefillWarps * kPrefillTaskInts + 5]);
  }
}

TEST(CudaPrefillAttentionPlan, RejectsRepeatedPositionsAndBadHeads) {
  StepRows s;
  s.add(0, 3, true);
  s.add(0, 3, true);
  memra::attn::PrefillPlan plan;
  EXPECT_NE(memra::attn::build_prefill_plan(2, s.pos.data(), s.seq.data(), s.prompt.data(), 4, 2, plan), "");
  StepRows ok;
  ok.add(0, 3, true);
  EXPECT_NE(memra::attn::build_prefill_plan(1, ok.pos.data(), ok.seq.data(), ok.prompt.data(), 6, 4, plan), "");
  // No flags: every row generated, no CTA.
  EXPECT_EQ(memra::attn::build_prefill_plan(1, ok.pos.data(), ok.seq.data(), nullptr, 4, 2, plan), "");
  EXPECT_EQ(plan.ctas, 0);
  EXPECT_EQ(plan.generated, std::vector<int32_t>{0});
}

// The kernel's chunking-invariance argument, on the plan: for every row, whatever the
// chunking, the warp's last tile is the row's own last tile (no trailing tile), the
// warp starts at or before the row's first tile (leading tiles are fully masked for
// the row: exact no-ops), and the tiles the row sees are those of its position.
TEST(CudaPrefillAttentionPlan, TileScheduleOfARowDependsOnlyOnItsPosition) {
  const int32_t n = 700;
  for (int32_t window : {0, 37, 128, 300}) {
    for (int32_t chunk : {1, 7, 16, 64, 300, 700}) {
      for (int32_t p0 = 0; p0 < n; p0 += chunk) {
        StepRows s;
        s.add(1, 3, false);
        for (int32_t p = p0; p < std::min(n, p0 + chunk); ++p) s.add(0, p, true);
        memra::attn::PrefillPlan plan;
        ASSERT_EQ(memra::attn::build_prefill_plan(static_cast<int32_t>(s.pos.size()), s.pos.data(), s.seq.data(),
                                                  s.prompt.data(), 8, 2, plan),
                  "");
        const auto sched = check_plan(s, 8, 2, window, plan);
        ASSERT_EQ(sched.size(), s.pos.size() - 1);
        for (const auto& [tok, rs] : sched) {
          const int32_t p = s.pos[static_cast<size_t>(tok)];
          ASSERT_EQ(rs.warp_last_tile, rs.row_last_tile) << "position " << p << " chunk " << chunk << " window " << window;
          ASSERT_LE(rs.warp_first_tile, rs.row_first_tile) << "position " << p;
          ASSERT_EQ(rs.row_first_tile, first_position(p, window) / kPrefillTileN);
          ASSERT_EQ(rs.row_last_tile, p / kPrefillTileN);
        }
        // The CTA stages every position its rows see: [first(min), max] covers [first(p), p].
        for (int32_t c = 0; c < plan.ctas; ++c) {
          const int32_t* cta = plan.tasks.data() + static_cast<size_t>(c) * kPrefillWarps * kPrefillTaskInts;
          for (int32_t w = 0; w < kPrefillWarps; ++w)
            for (int32_t r = 0; r < kPrefillRows; ++r) {
              const int32_t tok = cta[w * kPrefillTaskInts + kPrefillTaskRows + r];
              if (tok < 0) continue;
              const int32_t p = s.pos[static_cast<size_t>(tok)];
              ASSERT_LE(first_position(cta[4], window), first_position(p, window));
              ASSERT_GE(cta[5], p);
            }
        }
      }
    }
  }
}

// ---- the kernel body on the host emulator ----

struct EmuConfig {
  int32_t heads, kv_heads, head_dim, window;
  float softcap;
  int32_t n;                    // prompt length
  std::vector<int32_t> chunks;  // chunk sizes to compare with the one-step run
  float q_scale = 1.0f;         // > 1: peakier softmax
  bool kv_bf16 = false;         // a bf16 KV cache (the _bf16 kernels' body)
  bool kv_fp8 = false;          // an fp8 KV cache (the _fp8 kernels' body): the reference's codes and scales
  bool kv_f16 = false;          // an f16 KV cache (the _f16 kernels' body: f16 operands)
};

class EmuScenario {
 public:
  static constexpr int32_t kBlock = 16;
  explicit EmuScenario(const EmuConfig& c) : c_(c) {
    std::mt19937 rng(42 + c.head_dim + c.window);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    max_blocks_ = (c.n + kBlock - 1) / kBlock + 1;
    // Sequence 0 owns blocks in a shuffled order (paging), sequence 1 (a decode row's
    // sequence, never read by the prefill kernel) the rest.
    std::vector<int32_t> ids(static_cast<size_t>(2 * max_blocks_));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    std::shuffle(ids.begin(), ids.end(), rng);
    tables_ = ids;
    row_ = static_cast<int64_t>(c.kv_heads) * c.head_dim;
    k_.resize(static_cast<size_t>(2 * max_blocks_ * kBlock * row_));
    v_.resize(k_.size());
    for (float& x : k_) x = nd(rng);
    for (float& x : v_) x = nd(rng);
    q_.resize(static_cast<size_t>(c.n) * c.heads * c.head_dim);
    for (float& x : q_) x = nd(rng) * c.q_scale;
    if (c.kv_bf16) {
      for (float x : k_) k16_.push_back(memra::quant::f32_to_bf16(x));
      for (float x : v_) v16_.push_back(memra::quant::f32_to_bf16(x));
    }
    if (c.kv_f16) {
      for (float x : k_) k16_.push_back(memra::quant::f32_to_fp16(x));
      for (float x : v_) v16_.push_back(memra::quant::f32_to_fp16(x));
    }
    if (c.kv_fp8) {  // every physical slot written by the reference (an identity table: slot s = position s)
      const size_t bytes = static_cast<size_t>(2 * max_blocks_) * static_cast<size_t>(block_bytes8());
      k8_.assign(bytes, 0);
      v8_.assign(bytes, 0);
      std::vector<int32_t> identity(static_cast<size_t>(2 * max_blocks_));
      for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int32_t>(i);
      const memra::ref::PagedKvLayer L8 = fp8_layer(k8_, v8_);
      for (int64_t slot = 0; slot < 2 * max_blocks_ * kBlock; ++slot)
        memra::ref::paged_kv_write(L8, identity.data(), slot, k_.data() + slot * row_, v_.data() + slot * row_);
    }
  }

  int64_t block_bytes8() const { return memra::attn::fp8_kv_block_bytes(kBlock, c_.kv_heads, c_.head_dim); }
  memra::ref::PagedKvLayer fp8_layer(const std::vector<uint8_t>& k, const std::vector<uint8_t>& v) const {
    memra::ref::PagedKvLayer L{const_cast<uint8_t*>(k.data()), const_cast<uint8_t*>(v.data()), kBlock, c_.kv_heads, c_.head_dim};
    L.element = memra::ref::KvElement::fp8;
    return L;
  }

  int64_t qw() const { return static_cast<int64_t>(c_.heads) * c_.head_dim; }

  // The CPU reference rows of positions [0, n).
  std::vector<float> reference() const {
    memra::ref::PagedKvLayer L{const_cast<float*>(k_.data()), const_cast<float*>(v_.data()), kBlock, c_.kv_heads, c_.head_dim};
    if (c_.kv_bf16 || c_.kv_f16) {
      L.k = const_cast<uint16_t*>(k16_.data());
      L.v = const_cast<uint16_t*>(v16_.data());
      L.element = c_.kv_f16 ? memra::ref::KvElement::f16 : memra::ref::KvElement::bf16;
    }
    if (c_.kv_fp8) L = fp8_layer(k8_, v8_);
    std::vector<float> out(q_.size());
    for (int32_t p = 0; p < c_.n; ++p)
      memra::ref::paged_attention(L, tables_.data(), p, q_.data() + p * qw(), c_.heads, scale(), c_.window, c_.softcap,
                                  out.data() + p * qw());
    return out;
  }

  // One emulated step: prompt rows [p0, p1) of sequence 0 behind a decode row of
  // sequence 1 (listed apart by the planner); cache positions of sequence 0 outside
  // [first(p0), p1) are NaN, so a read the kernel must not make poisons the rows.
  // Returns the rows of [p0, p1) and the emulator's error.
  std::pair<std::vector<float>, std::string> step(int32_t p0, int32_t p1) const {
    std::vector<int32_t> pos = {5}, seq = {1};
    std::vector<uint8_t> prompt = {0};
    std::vector<float> q(static_cast<size_t>(qw()), 0.0f);
    for (int32_t p = p0; p < p1; ++p) {
      pos.push_back(p);
      seq.push_back(0);
      prompt.push_back(1);
      q.insert(q.end(), q_.begin() + p * qw(), q_.begin() + (p + 1) * qw());
    }
    memra::attn::PrefillPlan plan;
    const std::string perr = memra::attn::build_prefill_plan(static_cast<int32_t>(pos.size()), pos.data(), seq.data(),
                                                             prompt.data(), c_.heads, c_.kv_heads, plan);
    if (!perr.empty()) return {{}, perr};
    std::vector<float> k = k_, v = v_;
    std::vector<uint16_t> k16 = k16_, v16 = v16_;
    std::vector<uint8_t> k8 = k8_, v8 = v8_;
    const int32_t lo = c_.window > 0 ? std::max(0, p0 - c_.window + 1) : 0;
    for (int32_t p = 0; p < max_blocks_ * kBlock; ++p) {
      if (p >= lo && p < p1) continue;
      const int64_t off = (static_cast<int64_t>(tables_[static_cast<size_t>(p / kBlock)]) * kBlock + p % kBlock) * row_;
      if (c_.kv_fp8) {  // NaN codes and a NaN scale (0xff bytes) for each kv head of the slot
        const int64_t block = tables_[static_cast<size_t>(p / kBlock)], in = p % kBlock;
        const int64_t codes = block * block_bytes8() + in * row_, scales = block * block_bytes8() + kBlock * row_ + in * c_.kv_heads * 4;
        for (auto* c8 : {&k8, &v8}) {
          std::fill(c8->begin() + codes, c8->begin() + codes + row_, uint8_t{0x7f});
          std::fill(c8->begin() + scales, c8->begin() + scales + 4 * c_.kv_heads, uint8_t{0xff});
        }
      } else if (c_.kv_bf16 || c_.kv_f16) {
        const uint16_t nan = c_.kv_f16 ? uint16_t{0x7e00} : uint16_t{0x7fc0};
        std::fill(k16.begin() + off, k16.begin() + off + row_, nan);
        std::fill(v16.begin() + off, v16.begin() + off + row_, nan);
      } else {
        std::fill(k.begin() + off, k.begin() + off + row_, NAN);
        std::fill(v.begin() + off, v.begin() + off + row_, NAN);
      }
    }
    std::vector<float> out(q.size(), NAN);
    memra::attn::emu::KernelArgs a{};
    a.q = q.data();
    a.q_bytes = q.size() * 4;
    a.kv_bf16 = c_.kv_bf16;
    a.kv_fp8 = c_.kv_fp8;
    a.kv_f16 = c_.kv_f16;
    const bool k16bit = c_.kv_bf16 || c_.kv_f16;
    a.k_cache = c_.kv_fp8 ? static_cast<const void*>(k8.data()) : k16bit ? static_cast<const void*>(k16.data()) : k.data();
    a.v_cache = c_.kv_fp8 ? static_cast<const void*>(v8.data()) : k16bit ? static_cast<const void*>(v16.data()) : v.data();
    a.cache_bytes = c_.kv_fp8 ? k8.size() : k16bit ? k16.size() * 2 : k.size() * 4;
    a.heads = c_.heads;
    a.kv_heads = c_.kv_heads;
    a.head_dim = c_.head_dim;
    a.block_size = kBlock;
    a.positions = pos.data();
    a.block_tables = tables_.data();
    a.max_blocks = max_blocks_;
    a.scale = scale();
    a.window = c_.window;
    a.softcap = c_.softcap;
    a.tasks = plan.tasks.data();
    a.ctas = plan.ctas;
    a.out = out.data();
    a.out_bytes = out.size() * 4;
    const std::string err = memra::attn::emu::run_prefill_attention(a);
    // The decode row (row 0) is not the prefill kernel's: it must stay untouched.
    for (int64_t i = 0; i < qw(); ++i)
      if (!std::isnan(out[static_cast<size_t>(i)])) return {{}, "the kernel wrote the decode row"};
    return {std::vector<float>(out.begin() + qw(), out.end()), err};
  }

 private:
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(c_.head_dim)); }
  EmuConfig c_;
  int32_t max_blocks_ = 0;
  int64_t row_ = 0;
  std::vector<int32_t> tables_;
  std::vector<float> k_, v_, q_;
  std::vector<uint16_t> k16_, v16_;  // the bf16 or f16 cache (kv_bf16, kv_f16)
  std::vector<uint8_t> k8_, v8_;     // the fp8 cache (kv_fp8)
};

void check_emulated(const EmuConfig& c) {
  EmuScenario s(c);
  const std::vector<float> ref = s.reference();
  const auto [one, err] = s.step(0, c.n);
  ASSERT_EQ(err, "");
  const memra::kcheck::Comparison cmp = memra::kcheck::compare(one, ref);
  EXPECT_EQ(cmp.nonfinite_mismatch, 0u);
  EXPECT_LE(cmp.nmse, memra::kcheck::kAttentionBound) << "max abs diff " << cmp.max_abs;
  std::cout << "[ emulated ] heads " << c.heads << "/" << c.kv_heads << " hd" << c.head_dim << " window " << c.window
            << " softcap " << c.softcap << " T=" << c.n << (c.kv_fp8 ? " fp8 KV" : c.kv_f16 ? " f16 KV" : c.kv_bf16 ? " bf16 KV" : " f32 KV") << ": nmse " << cmp.nmse
            << " vs the reference\n";
  for (int32_t chunk : c.chunks) {
    std::vector<float> got;
    for (int32_t p0 = 0; p0 < c.n; p0 += chunk) {
      const auto [rows, e] = s.step(p0, std::min(c.n, p0 + chunk));
      ASSERT_EQ(e, "") << "chunk " << chunk << " at " << p0;
      got.insert(got.end(), rows.begin(), rows.end());
    }
    ASSERT_EQ(got.size(), one.size());
    size_t first = got.size();
    for (size_t i = 0; i < got.size() && first == got.size(); ++i)
      if (std::memcmp(&got[i], &one[i], 4) != 0) first = i;
    EXPECT_EQ(first, got.size()) << "chunks of " << chunk << ": first differing element at position "
                                 << first / static_cast<size_t>(s.qw()) << " (" << got[first] << " vs " << one[first] << ")";
  }
}

TEST(CudaPrefillAttentionEmulated, Gqa2Hd64FullAttention) { check_emulated({4, 2, 64, 0, 0.0f, 100, {1, 7, 64}}); }
// head_dim 256 (Qwen3.5's gated attention: 24 q heads over 4 kv heads, a group of 6).
TEST(CudaPrefillAttentionEmulated, F16KvGqa6Hd256Window) {
  check_emulated({6, 1, 256, 20, 0.0f, 48, {17}, 1.0f, false, false, true});
}
TEST(CudaPrefillAttentionEmulated, Gqa2Hd128WindowAndSoftcap) { check_emulated({2, 1, 128, 37, 20.0f, 90, {1, 16, 33}}); }
TEST(CudaPrefillAttentionEmulated, Mha3Hd64Window80) { check_emulated({3, 3, 64, 80, 0.0f, 150, {7, 50}}); }
// The Qwen3-8B group (4 q heads per kv head: a CTA is one 16-position block's group),
// with scores ~N(0, 16): the kernel-check's "peaky" case.
TEST(CudaPrefillAttentionEmulated, Gqa4Hd128PeakyScores) { check_emulated({8, 2, 128, 0, 0.0f, 70, {1, 23}, 4.0f}); }
// A bf16 KV cache (the _bf16 kernels: K/V staged as the hi plane, no lo term) against
// the reference over the same bf16 cache, same bound, and chunking bit for bit.
TEST(CudaPrefillAttentionEmulated, Bf16KvGqa2Hd64FullAttention) {
  check_emulated({4, 2, 64, 0, 0.0f, 100, {1, 7, 64}, 1.0f, true});
}
TEST(CudaPrefillAttentionEmulated, Bf16KvGqa4Hd128WindowSoftcapPeaky) {
  check_emulated({8, 2, 128, 37, 20.0f, 70, {1, 23}, 4.0f, true});
}
// An fp8 KV cache (the _fp8 kernels: each code times its row's scale on load, then the
// f32 path) against the reference over the same codes and scales, chunking bit for bit.
// An f16 KV cache (the _f16 kernels: f16 operands, q and P split into f16 hi + lo, K/V
// exact as stored: two mma per product).
TEST(CudaPrefillAttentionEmulated, F16KvGqa2Hd64FullAttention) {
  check_emulated({4, 2, 64, 0, 0.0f, 100, {1, 7, 64}, 1.0f, false, false, true});
}
TEST(CudaPrefillAttentionEmulated, F16KvGqa4Hd128WindowSoftcapPeaky) {
  check_emulated({8, 2, 128, 37, 20.0f, 70, {1, 23}, 4.0f, false, false, true});
}
TEST(CudaPrefillAttentionEmulated, Fp8KvGqa2Hd64FullAttention) {
  check_emulated({4, 2, 64, 0, 0.0f, 100, {1, 7, 64}, 1.0f, false, true});
}
TEST(CudaPrefillAttentionEmulated, Fp8KvGqa4Hd128WindowSoftcapPeaky) {
  check_emulated({8, 2, 128, 37, 20.0f, 70, {1, 23}, 4.0f, false, true});
}

}  // namespace
