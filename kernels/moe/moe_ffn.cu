// moe_ffn v2 (memra/ops.h) on the GPU: routed experts only, with the routing on the device so
// a decode step keeps fixed launch shapes (one captured CUDA graph). The backend
// (host/backend/cuda/ops_moe.cpp) runs, per layer:
//   1. memra_moe_route: a warp per token row, moe_route.cuh's arithmetic (the CPU reference's
//      own definition: bitwise the same experts and weights) -> routes [tokens][2 * top_k];
//   2. for the step's (row, choice) slots in fixed chunks, for gate and up (then down over the
//      activation), in fixed tiles of weight rows: memra_moe_tile_ids names the chosen
//      expert's rows of the stacked [E][rows][cols] tensor, the scheme's own embedding gather
//      dequantises them (bitwise its CPU dequantiser) into an f32 tile, and memra_moe_tile_dot
//      takes each row's dot product with its slot's input row (a warp per output: lane l sums
//      columns l, l + 32, .. in order, then a fixed butterfly), so a slot's result depends on
//      its row and its expert only — never on the batch or on which rows share its expert;
//   3. memra_moe_combine: y[t] = w_0 * o_0 + .. + w_{k-1} * o_{k-1} in selection order, then
//      + sigmoid(g_t) * s_t for a shared expert (moe_route.cuh's shared_gate).
// Every operation rounds once (__f*_rn; the module is built with --fmad=false).
#include <stdint.h>

#include "kernels/moe/moe_route.cuh"

namespace {

constexpr unsigned kFull = 0xffffffffu;

}  // namespace

// routes: [tokens][2 * top_k] words, the chosen experts (int32) then their weights (float).
// A warp per row (blockDim.x = 32 * warps): the selection by warp arg-max (key, then the lower
// index), the denominator one expert per lane in moe_route.cuh's 32-lane order.
extern "C" __global__ void memra_moe_route(const float* logits, int32_t tokens, int32_t experts, int32_t top_k,
                                           int32_t normalize, float* routes) {
  using namespace memra::moe;
  const int32_t lane = threadIdx.x & 31;
  const int32_t t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (t >= tokens) return;  // whole warps leave together
  const float* l = logits + static_cast<int64_t>(t) * experts;
  float* row = routes + static_cast<int64_t>(t) * 2 * top_k;
  int32_t* chosen = reinterpret_cast<int32_t*>(row);
  int32_t picked[kMaxTopK];
  for (int32_t i = 0; i < top_k; ++i) {
    int32_t best = -1;
    uint32_t best_key = 0;
    for (int32_t e = lane; e < experts; e += kRouteLanes) {
      bool taken = false;
      for (int32_t j = 0; j < i; ++j) taken = taken || picked[j] == e;
      if (taken) continue;
      const uint32_t k = route_key(l[e]);
      if (best < 0 || route_beats(k, e, best_key, best)) best = e, best_key = k;
    }
    for (int32_t off = 16; off > 0; off >>= 1) {
      const int32_t ob = __shfl_xor_sync(kFull, best, off);
      const uint32_t ok = __shfl_xor_sync(kFull, best_key, off);
      if (ob >= 0 && (best < 0 || route_beats(ok, ob, best_key, best))) best = ob, best_key = ok;
    }
    picked[i] = best;
  }
  const float max = memra::sampling::canonical(l[picked[0]]);
  float part = route_lane_sum(l, experts, max, lane);
  // moe_route.cuh's fold (p[j] += p[j + off] for j < off) as a butterfly: for j < off,
  // j ^ off = j + off, and lane 0 ends with the reference's sum.
  for (int32_t off = kRouteLanes / 2; off > 0; off >>= 1) part = memra::sampling::f_add(part, __shfl_xor_sync(kFull, part, off));
  const float sum = __shfl_sync(kFull, part, 0);
  if (lane != 0) return;
  float weights[kMaxTopK];
  route_weights(l, picked, top_k, max, sum, normalize != 0, weights);
  for (int32_t i = 0; i < top_k; ++i) chosen[i] = picked[i], row[top_k + i] = weights[i];
}

// ids[j * nrows + r] = expert(slot0 + j) * rows + row0 + r: the rows [row0, row0 + nrows) of
// the expert slot slot0 + j chose, as rows of the stacked tensor viewed [E * rows][cols].
extern "C" __global__ void memra_moe_tile_ids(const float* routes, int32_t top_k, int32_t slot0, int32_t nslots, int64_t rows,
                                              int64_t row0, int32_t nrows, int32_t* ids) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(nslots) * nrows) return;
  const int32_t j = static_cast<int32_t>(i / nrows), r = static_cast<int32_t>(i % nrows);
  const int32_t s = slot0 + j, t = s / top_k, c = s % top_k;
  const int32_t e = reinterpret_cast<const int32_t*>(routes + static_cast<int64_t>(t) * 2 * top_k)[c];
  ids[i] = static_cast<int32_t>(static_cast<int64_t>(e) * rows + row0 + r);
}

// out[(out_base + j) * out_stride + row0 + r] = tile[j][r][:] . in[(in_base + j) / in_div][:]
// for j < nslots, r < nrows: a warp per output, lane l summing columns l, l + 32, .. in order,
// then the 32 partials folded as a butterfly (xor 16, 8, 4, 2, 1).
extern "C" __global__ void memra_moe_tile_dot(const float* tile, const float* in, int64_t cols, int32_t in_base, int32_t in_div,
                                              int32_t nslots, int32_t nrows, float* out, int64_t out_stride, int32_t out_base,
                                              int64_t row0) {
  const int32_t lane = threadIdx.x & 31;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (w >= static_cast<int64_t>(nslots) * nrows) return;
  const int32_t j = static_cast<int32_t>(w / nrows), r = static_cast<int32_t>(w % nrows);
  const float* a = tile + w * cols;
  const float* b = in + static_cast<int64_t>((in_base + j) / in_div) * cols;
  float s = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) s = __fadd_rn(s, __fmul_rn(a[c], b[c]));
  for (int32_t off = 16; off > 0; off >>= 1) s = __fadd_rn(s, __shfl_xor_sync(kFull, s, off));
  if (lane == 0) out[static_cast<int64_t>(out_base + j) * out_stride + row0 + r] = s;
}

// y[t] = w_0 * o[t * k] + .. + w_{k-1} * o[t * k + k - 1], from 0 in that order; then, with a
// shared expert (shared != NULL), + shared_gate(gate[t]) * shared[t]. One block per row.
extern "C" __global__ void memra_moe_combine(const float* o, const float* routes, int32_t top_k, int32_t hidden, const float* shared,
                                             const float* gate, float* y) {
  const int32_t t = blockIdx.x;
  const float* weights = routes + static_cast<int64_t>(t) * 2 * top_k + top_k;
  const float g = shared ? memra::moe::shared_gate(gate[t]) : 0.0f;
  for (int32_t h = threadIdx.x; h < hidden; h += blockDim.x) {
    float acc = 0.0f;
    for (int32_t i = 0; i < top_k; ++i)
      acc = __fadd_rn(acc, __fmul_rn(weights[i], o[(static_cast<int64_t>(t) * top_k + i) * hidden + h]));
    if (shared) acc = __fadd_rn(acc, __fmul_rn(g, shared[static_cast<int64_t>(t) * hidden + h]));
    y[static_cast<int64_t>(t) * hidden + h] = acc;
  }
}

// The step's (row, choice) slots grouped by expert for the schemes' routed GEMVs
// (kernels/matmul/scheme_entries.cuh moe_gemv): *n_active groups, group g expert active[g]
// (ascending) with the slots order[start[g] .. start[g + 1]). One block (up to 1024 threads;
// experts <= 512). The order of slots within a group is not fixed (atomics), and need not be:
// each slot's output is computed on its own, in the same order, wherever it sits.
extern "C" __global__ void memra_moe_plan(const float* routes, int32_t top_k, int32_t slots, int32_t experts, int32_t* n_active,
                                          int32_t* active, int32_t* start, int32_t* order) {
  __shared__ int count[512];
  __shared__ int base[512];
  for (int32_t e = threadIdx.x; e < experts; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int32_t s = threadIdx.x; s < slots; s += blockDim.x)
    atomicAdd(&count[reinterpret_cast<const int32_t*>(routes + static_cast<int64_t>(s / top_k) * 2 * top_k)[s % top_k]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t n = 0, at = 0;
    for (int32_t e = 0; e < experts; ++e) {
      base[e] = at;
      if (count[e] == 0) continue;
      active[n] = e;
      start[n] = at;
      at += count[e];
      ++n;
    }
    start[n] = at;
    *n_active = n;
  }
  __syncthreads();
  for (int32_t s = threadIdx.x; s < slots; s += blockDim.x) {
    const int32_t e = reinterpret_cast<const int32_t*>(routes + static_cast<int64_t>(s / top_k) * 2 * top_k)[s % top_k];
    order[atomicAdd(&base[e], 1)] = s;
  }
}
