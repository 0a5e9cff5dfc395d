// Prefill attention (kernels/attention/prefill_attention_mma.cu):
//  - CudaPrefillAttention.*: memra-kernel-check's check_prefill_attention (quick shapes:
//    300-token prompts) on the GPU — reference bounds, chunking invariance bit for bit,
//    mixed steps, MEMRA_PREFILL_ATTENTION=0. Skips without a driver/GPU.
//  - CudaPrefillAttentionPlan.*: the host-side planner (no GPU): every prompt row in
//    exactly one warp slot at position % 16 of its 16-position block, CTAs of one
//    sequence and one kv head, the CTA and warp position fields the kernel's tile
//    ranges come from, generated rows listed apart; and the tile schedule those
//    fields give each row is the same for the whole prompt in one step and in chunks.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <unistd.h>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "kernels/attention/prefill_attention_plan.hpp"
#include "tests/cuda/cuda_test_env.hpp"

namespace {

using memra::attn::kPrefillRows;
using memra::attn::kPrefillTaskInts;
using memra::attn::kPrefillTaskRows;
using memra::attn::kPrefillTileN;
using memra::attn::kPrefillWarps;

TEST(CudaPrefillAttention, ReferenceBoundsChunkingInvarianceMixedSteps) {
  const std::string why = memra::cuda_test::unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "CUDA backend unavailable: " << why;
  memra::backend::CudaBackendOpenOptions o;
  o.module_path = memra::cuda_test::module_path();
  auto b = memra::backend::CudaBackendHandle::create(o);
  ASSERT_TRUE(b.ok()) << b.error().message;
  memra::kcheck::CheckOptions opts;
  opts.quick = true;
  opts.kernel_dir = memra::cuda_test::kernel_dir();
  opts.temp_dir = (std::filesystem::temp_directory_path() / ("memra-cuda-test-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(opts.temp_dir);
  memra::kcheck::Device d(&(*b)->api(), (*b)->get());
  memra::kcheck::Report r(nullptr);
  memra::kcheck::check_prefill_attention(d, r, opts);
  std::error_code ec;
  std::filesystem::remove_all(opts.temp_dir, ec);
  ASSERT_FALSE(r.lines().empty());
  for (const auto& l : r.lines()) EXPECT_TRUE(l.pass) << l.name << ": " << l.detail;
  std::cout << "[ checks ] " << r.lines().size() << " lines\n";
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

}  // namespace
