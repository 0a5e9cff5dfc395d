// The launch geometry of the tensor-core bf16 GEMV (gemv_mma_bf16.cuh), shared with the
// CUDA backend that launches it (host/backend/cuda/ops_matmul.cpp). No includes: nvcc
// and the host compiler both read it.
#pragma once

namespace memra::gemv_mma {

constexpr int kWarps = 16;    // k ranges per 16-row tile (threads: 32 * kWarps)
constexpr int kRows = 16;     // weight rows per block
constexpr int kTokens = 8;    // tokens per n-tile
constexpr int kUnroll = 2;    // 32-element chunks a lane loads into registers per round
// The fp8 GEMV (gemv_mma_fp8.cuh): warps per block (two blocks share an SM: per byte it
// does ~6x the bf16 GEMV's work, so one block's loads overlap the other's arithmetic),
// and the most its shared memory holds.
constexpr int kFp8Warps = 8;
constexpr int kFp8MaxWarps = 16;

}  // namespace memra::gemv_mma
