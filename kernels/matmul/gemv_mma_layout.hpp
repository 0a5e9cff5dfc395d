// The launch geometry of the tensor-core bf16 GEMV (gemv_mma_bf16.cuh), shared with the
// CUDA backend that launches it (host/backend/cuda/ops_matmul.cpp). No includes: nvcc
// and the host compiler both read it.
#pragma once

namespace memra::gemv_mma {

constexpr int kWarps = 8;     // k ranges per 16-row tile (threads: 32 * kWarps)
constexpr int kRows = 16;     // weight rows per block
constexpr int kTokens = 8;    // tokens per n-tile
constexpr int kBurst = 4;     // 32-element chunks per cp.async group (contiguous per row)
constexpr int kGroups = 2;    // groups in flight per warp (its ring: kBurst x kGroups slots)
constexpr int kChunkBytes = 32 * 2 * 16;  // a warp's chunk: 32 lanes x rows g, g + 8 x 16 bytes
// Dynamic shared memory of a block: every warp's ring (reused for the partial sums).
constexpr unsigned smem_bytes(int burst, int groups, int warps) {
  return static_cast<unsigned>(warps) * static_cast<unsigned>(burst * groups) * kChunkBytes;
}
constexpr unsigned kSmemBytes = smem_bytes(kBurst, kGroups, kWarps);

}  // namespace memra::gemv_mma
