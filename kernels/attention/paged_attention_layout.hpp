// The work layout shared by the decode attention kernels (paged_attention.cu) and the
// CUDA backend that launches them (host/backend/cuda/ops_attention.cpp). No includes:
// nvcc and the host compiler both read it.
#pragma once

// Used by the kernels too.
#if defined(__CUDACC__)
#define MEMRA_ATTN_HD __host__ __device__
#else
#define MEMRA_ATTN_HD
#endif

namespace memra::attn {

// KV positions per chunk. Chunks start at the row's first visible position and are
// fixed by it (never by the batch or the device), so the split-KV merge order of a
// row is a function of its position only.
constexpr int kDecodeChunk = 64;
constexpr int kDecodeThreads = 128;
// head_dim must be a multiple of 8 (16-byte staging of bf16 rows; of 16 for fp8 rows) and at most this.
constexpr int kDecodeMaxHeadDim = 512;

// The merge pass (memra_attention_combine) splits a head's dims over blocks of this many
// (head_dim is a multiple of 8, so every block has whole float4 columns).
constexpr int kCombineDims = 32;
constexpr int decode_combine_slices(int head_dim) { return (head_dim + kCombineDims - 1) / kCombineDims; }

// q heads' entries of the per-head sums, padded so that the rows after them stay 16-byte aligned.
constexpr int decode_attention_sum_slots(int group) { return (group + 3) & ~3; }

// Elements per staged K/V row: 16-bit rows (the tensor-core kernels' ldmatrix operands)
// are padded by 8 elements (16 bytes) so that 8 rows at one column fall in distinct banks.
MEMRA_ATTN_HD constexpr int decode_tile_stride(int head_dim, int kv_bytes) { return kv_bytes == 2 ? head_dim + 8 : head_dim; }

// Dynamic shared memory of memra_attention_chunk{,_f16,_bf16,_fp8} in bytes: the chunk's row
// offsets (int64), the scores [group][chunk] (f32), the per-head sums of the weights
// (f32, padded), the staged K rows [chunk][stride] and, when `v_separate`, the V rows
// beside them (else V reuses the K rows' space once the scores are done: less memory,
// no overlap of the V loads with the score phase). fp8 (kv_bytes 1): the K / V tiles
// are f16, and then come the rows' scale offsets (int64), their K and V scales (f32) and
// the raw codes [chunk][head_dim] (V's beside K's when `v_separate`).
constexpr unsigned long long decode_attention_smem_bytes(int group, int head_dim, int kv_bytes, bool v_separate) {
  const int tile_bytes = kv_bytes == 1 ? 2 : kv_bytes;
  const unsigned long long tile =
      static_cast<unsigned long long>(kDecodeChunk) * decode_tile_stride(head_dim, tile_bytes) * tile_bytes;
  const unsigned long long fp8 =
      kv_bytes == 1 ? kDecodeChunk * (8ull + 8ull) + static_cast<unsigned long long>(kDecodeChunk) * head_dim * (v_separate ? 2 : 1)
                    : 0ull;
  return kDecodeChunk * 8ull + static_cast<unsigned long long>(group) * kDecodeChunk * 4ull +
         static_cast<unsigned long long>(decode_attention_sum_slots(group)) * 4ull + tile * (v_separate ? 2 : 1) + fp8;
}

// V gets its own space when the whole block fits this (every target arch's opt-in limit
// is above it: sm_90 227 KB, sm_120 99 KB).
constexpr unsigned long long kDecodeSmemOverlapLimit = 96ull * 1024;

}  // namespace memra::attn
