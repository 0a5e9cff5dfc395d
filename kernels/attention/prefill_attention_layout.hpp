// The work layout shared by the prefill attention kernel (prefill_attention_mma.cu)
// and its host-side planner (prefill_attention_plan.cpp). No includes: nvcc and the
// host compiler both read it.
#pragma once

namespace memra::attn {

// KV positions per tile. Tiles start at multiples of kPrefillTileN from position 0,
// whatever the window, the chunk or the other rows: the boundaries are fixed.
constexpr int kPrefillTileN = 64;
// q rows per warp: positions 16k .. 16k+15 of one sequence (one mma m16 tile); slot
// r of a warp holds position 16k + r. kPrefillTileN % kPrefillRows == 0, so every row
// of a warp ends at the same tile.
constexpr int kPrefillRows = 16;
constexpr int kPrefillWarps = 4;
constexpr int kPrefillThreads = 32 * kPrefillWarps;

// One warp task = kPrefillTaskInts int32:
//   [0] q head, or -1 for an idle warp (the CTA's task 0 is never idle)
//   [1] sequence index (row of the block tables)
//   [2] base position 16k of the warp's rows
//   [3] smallest position of the warp's rows present in the step
//   [4] smallest and [5] largest position of any row of the CTA (same in its 4 tasks)
//   [6], [7] zero
//   [8 + r] the token row (index into the step's q / out) at position base + r, or -1
// A CTA takes kPrefillWarps consecutive tasks, all of one sequence and one kv head.
constexpr int kPrefillTaskInts = 24;
constexpr int kPrefillTaskRows = 8;

static_assert(kPrefillTileN % kPrefillRows == 0, "a warp's rows must end in one tile");

// Dynamic shared memory bytes for head_dim d: per warp a Q hi and lo plane [16][d]
// bf16, then the K hi, K lo, V hi, V lo planes [kPrefillTileN][d] bf16 (96 KB at 128).
constexpr int prefill_attention_smem_bytes(int d) {
  return kPrefillWarps * 2 * kPrefillRows * d * 2 + 4 * kPrefillTileN * d * 2;
}

}  // namespace memra::attn
