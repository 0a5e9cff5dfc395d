// The launch geometry of the tensor-core bf16 GEMV (gemv_mma_bf16.cuh), shared with the
// CUDA backend that launches it (host/backend/cuda/ops_matmul.cpp). No includes: nvcc
// and the host compiler both read it.
#pragma once

namespace memra::gemv_mma {

constexpr int kWarps = 16;    // k ranges per 16-row tile (threads: 32 * kWarps)
constexpr int kRows = 16;     // weight rows per block
constexpr int kTokens = 8;    // tokens per n-tile
constexpr int kUnroll = 2;    // 32-element chunks a lane loads into registers per round
// The shared-memory ring form (memra-kernel-check --bench-bf16 only; slower at every M on
// the H200, docs/PERFORMANCE.md): kBurst chunks per cp.async group, kGroups groups in flight.
constexpr int kChunkBytes = 32 * 2 * 16;  // a warp's chunk: 32 lanes x rows g, g + 8 x 16 bytes
// Dynamic shared memory of a ring block: every warp's ring (reused for the partial sums).
constexpr unsigned smem_bytes(int burst, int groups, int warps) {
  return static_cast<unsigned>(warps) * static_cast<unsigned>(burst * groups) * kChunkBytes;
}

}  // namespace memra::gemv_mma
