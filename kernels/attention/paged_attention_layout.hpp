// The work layout shared by the decode attention kernel (paged_attention.cu) and the
// CUDA backend that launches it (host/backend/cuda/ops_attention.cpp). No includes:
// nvcc and the host compiler both read it.
#pragma once

// The split rule runs on both sides (the kernel and the launch).
#if defined(__CUDACC__)
#define MEMRA_ATTN_HD __host__ __device__
#else
#define MEMRA_ATTN_HD
#endif

namespace memra::attn {

// KV positions per chunk (the unit a CTA stages and scores at once). Chunks start at the
// row's first visible position and are fixed by it (never by the batch or the device).
constexpr int kDecodeChunk = 64;
constexpr int kDecodeThreads = 128;
// head_dim must be a multiple of 8 (16-byte staging of bf16 rows) and at most this.
constexpr int kDecodeMaxHeadDim = 512;

// Split-KV: a row's chunks are cut into splits of decode_split_chunks consecutive chunks,
// one CTA each (online softmax over its chunks in order), merged by the split that
// finishes last. The split size is a function of the row's visible positions only, so
// the order of every sum of a row is too. About kDecodeSplitTarget splits per kv head
// (enough CTAs to fill the GPU at batch 1), at most kDecodeMaxSplitChunks chunks each.
constexpr int kDecodeSplitTarget = 32;
constexpr int kDecodeMaxSplitChunks = 16;
MEMRA_ATTN_HD constexpr int decode_chunks(int positions) { return (positions + kDecodeChunk - 1) / kDecodeChunk; }
MEMRA_ATTN_HD constexpr int decode_split_chunks(int chunks) {
  const int s = chunks / kDecodeSplitTarget;
  return s < 1 ? 1 : s > kDecodeMaxSplitChunks ? kDecodeMaxSplitChunks : s;
}
MEMRA_ATTN_HD constexpr int decode_splits(int positions) {
  const int c = decode_chunks(positions), s = decode_split_chunks(c);
  return (c + s - 1) / s;
}

// q heads' entries of the per-head state, padded so that the rows after them stay 16-byte aligned.
MEMRA_ATTN_HD constexpr int decode_attention_sum_slots(int group) { return (group + 3) & ~3; }

// Dynamic shared memory of memra_attention_split{,_f16,_bf16} in bytes: two chunks' row
// offsets (int64), the scores [group][chunk] (f32), the running max, sum and rescale
// factor per q head (f32, padded), the output accumulators [group][head_dim] (f32), then
// `stages` buffers of a chunk's K rows [chunk][head_dim] and, when `v_separate`, its V rows
// (else V reuses the K rows' space once the scores are done: less memory, no overlap of
// the V loads with the score phase; one stage only). Two stages let a CTA load its next
// chunk while it computes the current one.
constexpr unsigned long long decode_attention_smem_bytes(int group, int head_dim, int kv_bytes, int stages,
                                                         bool v_separate) {
  const unsigned long long tile = static_cast<unsigned long long>(kDecodeChunk) * head_dim * kv_bytes;
  return 2ull * kDecodeChunk * 8ull + static_cast<unsigned long long>(group) * kDecodeChunk * 4ull +
         3ull * static_cast<unsigned long long>(decode_attention_sum_slots(group)) * 4ull +
         static_cast<unsigned long long>(group) * head_dim * 4ull + tile * (v_separate ? 2 : 1) * stages;
}

// The buffers get what fits this (every target arch's opt-in limit is above it: sm_90
// 227 KB, sm_120 99 KB): two stages with V beside K, else one with V beside K, else V
// reusing K's space. Never changes what is computed.
constexpr unsigned long long kDecodeSmemOverlapLimit = 96ull * 1024;

}  // namespace memra::attn
