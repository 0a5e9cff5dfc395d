// The launch geometry of the tensor-core bf16 GEMV (gemv_mma_bf16.cuh), shared with the
// CUDA backend that launches it (host/backend/cuda/ops_matmul.cpp). No includes: nvcc
// and the host compiler both read it.
#pragma once

namespace memra::gemv_mma {

constexpr int kWarps = 8;     // k ranges per 16-row tile (threads: 32 * kWarps)
constexpr int kRows = 16;     // weight rows per block
constexpr int kTokens = 8;    // tokens per n-tile
constexpr int kStages = 8;    // 32-element chunks in flight per warp (cp.async ring)
constexpr int kChunkBytes = 32 * 2 * 16;  // a warp's chunk: 32 lanes x rows g, g + 8 x 16 bytes
// Dynamic shared memory of a block: every warp's ring (reused for the partial sums).
constexpr unsigned kSmemBytes = static_cast<unsigned>(kWarps) * kStages * kChunkBytes;

}  // namespace memra::gemv_mma
