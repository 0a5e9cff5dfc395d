// Canonical token sampling on the device: one block of 1024 threads per row, the rows
// of a step in one launch. Bit-identical to the CPU reference (sampling_ref.cpp) for
// the same logits row, so a sequence's tokens do not depend on the backend that
// sampled them (docs/ARCHITECTURE.md, "Sampling"):
//  - every float operation is one IEEE-rounded op from sampling_math.cuh (shared with
//    the reference: memra_exp, penalties, candidate weights, Philox), and the module is
//    built with --fmad=false;
//  - sums run in the canonical order: thread j adds the weights of indices j, j+1024,
//    ... in increasing order, a warp adds its 32 partials in lane order (shuffles),
//    the total adds the 32 warp sums in warp order. Zero weights are skipped, which
//    changes no sum (x + 0 == x for x >= 0);
//  - choices (argmax, the top-k threshold and its ties) are exact comparisons and
//    integer counts, so their reduction order does not matter.
// A row's token depends only on its logits, parameters and penalty entries, never on
// the other rows of the launch (batch invariance).
#include <stdint.h>

#include "kernels/sampling/sampling_math.cuh"

namespace {

using namespace memra::sampling;
constexpr int kThreads = kLanes;

struct Shared {
  float warp_sum[kWarps];
  float lane_sum[kLanes];
  int32_t lane_count[kLanes];
  int32_t hist[256];
  uint32_t best_key[kWarps];
  int32_t best_id[kWarps];
  int32_t scan[kWarps];
  int32_t value[4];
  float fvalue[2];
};

__device__ __forceinline__ void keep_better(uint32_t& key, int32_t& id, uint32_t k2, int32_t id2) {
  if (k2 > key || (k2 == key && id2 < id)) {
    key = k2;
    id = id2;
  }
}

// The block's best (key desc, id asc); every thread gets it.
__device__ int32_t block_argmax(uint32_t key, int32_t id, Shared& sh) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    keep_better(key, id, __shfl_xor_sync(0xffffffffu, key, off), __shfl_xor_sync(0xffffffffu, id, off));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) {
    sh.best_key[threadIdx.x >> 5] = key;
    sh.best_id[threadIdx.x >> 5] = id;
  }
  __syncthreads();
  key = sh.best_key[0];
  id = sh.best_id[0];
  for (int w = 1; w < kWarps; ++w) keep_better(key, id, sh.best_key[w], sh.best_id[w]);
  return id;
}

// The canonical total of the threads' partials (partial = lane sum); every thread
// gets it. With `keep`, the lane and warp sums stay in shared memory for the walk.
__device__ float block_canonical_total(float partial, Shared& sh, bool keep) {
  float acc = 0.0f;
  for (int l = 0; l < 32; ++l) acc = f_add(acc, __shfl_sync(0xffffffffu, partial, l));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh.warp_sum[threadIdx.x >> 5] = acc;
  if (keep) sh.lane_sum[threadIdx.x] = partial;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kWarps; ++w) total = f_add(total, sh.warp_sum[w]);
  return total;
}

// Exclusive prefix sum of an int over the block (exact; any order).
__device__ int32_t block_exclusive_scan(int32_t v, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int32_t inc = v;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int32_t o = __shfl_up_sync(0xffffffffu, inc, off);
    if (lane >= off) inc += o;
  }
  __syncthreads();
  if (lane == 31) sh.scan[warp] = inc;
  __syncthreads();
  int32_t before = 0;
  for (int w = 0; w < warp; ++w) before += sh.scan[w];
  return before + inc - v;
}

__device__ __forceinline__ float load(const float* src, int64_t i) { return canonical(src[i]); }

}  // namespace

// logits: [*][vocab]; rows[s] is the logits row sample s reads. params: [n]
// RowParams; penalties of sample s: pen[pen_offsets[s] .. pen_offsets[s+1]) (unique
// ids). Step 0 (a request's logit_bias and grammar mask), as the reference's
// adjusted_row: biases of sample s bias[bias_offsets[s] .. bias_offsets[s+1]) (unique
// ids; bias_offsets NULL = none), its allowed-token bitset masks + mask_offsets[s] (bit
// id%64 of word id/64, ceil(vocab/64) words; offset -1 or mask_offsets NULL = every
// token) — a left-out token is -inf, a biased one logit + bias. scratch_v: [n][vocab]
// (adjusted and penalised rows), list_q/list_id: [n][cap] with cap =
// 1024 * ceil(vocab / 1024) (each thread's surviving weights and ids at j + 1024 k).
extern "C" __global__ void __launch_bounds__(kThreads)
    memra_sample_rows(const float* logits, int64_t vocab, const int32_t* rows, const RowParams* params,
                      const int32_t* pen_offsets, const PenaltyEntry* pen, const int32_t* bias_offsets,
                      const BiasEntry* bias, const int64_t* mask_offsets, const uint64_t* masks, float* scratch_v,
                      float* list_q, int32_t* list_id, int64_t cap, int32_t* tokens) {
  __shared__ Shared sh;
  const int tid = threadIdx.x;
  const int64_t s = blockIdx.x;
  const RowParams p = params[s];
  const float* src = logits + static_cast<int64_t>(rows[s]) * vocab;

  // 0 and 1. Step 0 (bias, mask) and the penalties on a copy of the row. The copy keeps
  // raw values (load() canonicalises on every read, as the reference canonicalises the
  // adjusted row); a penalised entry is canonicalised first, as the reference does.
  const int32_t pen_begin = pen_offsets[s], pen_end = pen_offsets[s + 1];
  const int32_t bias_begin = bias_offsets ? bias_offsets[s] : 0, bias_end = bias_offsets ? bias_offsets[s + 1] : 0;
  const uint64_t* allowed = mask_offsets && mask_offsets[s] >= 0 ? masks + mask_offsets[s] : nullptr;
  if (pen_end > pen_begin || bias_end > bias_begin || allowed) {
    float* v = scratch_v + s * vocab;
    for (int64_t i = tid; i < vocab; i += kThreads)
      v[i] = allowed && !((allowed[i >> 6] >> (i & 63)) & 1u) ? -__int_as_float(0x7f800000) : src[i];
    __syncthreads();
    for (int32_t e = bias_begin + tid; e < bias_end; e += kThreads) {
      const int32_t id = bias[e].id;
      if (id >= 0 && id < vocab && (!allowed || ((allowed[id >> 6] >> (id & 63)) & 1u))) v[id] = f_add(v[id], bias[e].bias);
    }
    __syncthreads();
    for (int32_t e = pen_begin + tid; e < pen_end; e += kThreads) {
      const int32_t id = pen[e].id;
      if (id >= 0 && id < vocab) v[id] = apply_penalty(load(v, id), pen[e].count, p);
    }
    __syncthreads();
    src = v;
  }

  // 2. Argmax (the lowest id wins ties): the greedy token, and the maximum.
  uint32_t best_key = 0;
  int32_t best_id = 0x7fffffff;
  for (int64_t i = tid; i < vocab; i += kThreads) keep_better(best_key, best_id, order_key(load(src, i)), static_cast<int32_t>(i));
  const int32_t best = block_argmax(best_key, best_id, sh);
  if (p.temperature == 0.0f) {
    if (tid == 0) tokens[s] = best;
    return;
  }
  const float mx = load(src, best);

  // 3. top-k: the k-th largest key by radix select (8 bits at a time), then how far
  // into its ties (ascending ids) the k best reach.
  uint32_t kth = 0;
  int64_t cutoff = vocab;
  if (p.top_k > 0 && p.top_k < vocab) {
    uint32_t prefix = 0, mask = 0;
    int32_t remaining = p.top_k, equal = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      __syncthreads();
      for (int b = tid; b < 256; b += kThreads) sh.hist[b] = 0;
      __syncthreads();
      for (int64_t i = tid; i < vocab; i += kThreads) {
        const uint32_t key = order_key(load(src, i));
        if ((key & mask) == prefix) atomicAdd(&sh.hist[(key >> shift) & 255u], 1);
      }
      __syncthreads();
      if (tid == 0) {
        int32_t above = 0, digit = 0;
        for (int b = 255; b >= 0; --b) {
          if (above + sh.hist[b] >= remaining) {
            digit = b;
            break;
          }
          above += sh.hist[b];
        }
        sh.value[0] = digit;
        sh.value[1] = remaining - above;
        sh.value[2] = sh.hist[digit];
      }
      __syncthreads();
      prefix |= static_cast<uint32_t>(sh.value[0]) << shift;
      mask |= 255u << shift;
      remaining = sh.value[1];
      equal = sh.value[2];
    }
    kth = prefix;
    if (remaining < equal) {
      // The remaining-th tie in id order: contiguous chunks per thread, counts scanned.
      const int64_t chunk = (vocab + kThreads - 1) / kThreads;
      const int64_t lo = tid * chunk, hi = lo + chunk < vocab ? lo + chunk : vocab;
      int32_t count = 0;
      for (int64_t i = lo; i < hi; ++i) count += order_key(load(src, i)) == kth;
      const int32_t before = block_exclusive_scan(count, sh);
      if (before < remaining && remaining <= before + count) {
        int32_t seen = before;
        for (int64_t i = lo; i < hi; ++i)
          if (order_key(load(src, i)) == kth && ++seen == remaining) {
            sh.value[3] = static_cast<int32_t>(i);
            break;
          }
      }
      __syncthreads();
      cutoff = sh.value[3];
    }
  }

  // 4./5. Candidate weights into this thread's list (ids ascending), its partial.
  float* lq = list_q + s * cap;
  int32_t* lid = list_id + s * cap;
  int32_t n = 0;
  float partial = 0.0f;
  for (int64_t i = tid; i < vocab; i += kThreads) {
    const float v = load(src, i);
    const uint32_t key = order_key(v);
    if (key > kth || (key == kth && i <= cutoff)) {
      const float q = candidate_weight(v, mx, p.temperature);
      if (q > 0.0f) {
        lq[tid + static_cast<int64_t>(kThreads) * n] = q;
        lid[tid + static_cast<int64_t>(kThreads) * n] = static_cast<int32_t>(i);
        ++n;
        partial = f_add(partial, q);
      }
    }
  }
  float total = block_canonical_total(partial, sh, false);

  // 6. top-p: the largest tau whose canonical sum of {q >= tau} reaches top_p * total.
  // Weights below the running lower bound can never count again: dropped from the list.
  float tau = 0.0f;
  if (p.top_p < 1.0f) {
    const float target = f_mul(p.top_p, total);
    uint32_t lo = 1, hi = 0x3f800000u;
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo + 1) / 2;
      const float t = bits_float(mid);
      float part = 0.0f;
      for (int32_t k = 0; k < n; ++k) {
        const float q = lq[tid + static_cast<int64_t>(kThreads) * k];
        if (q >= t) part = f_add(part, q);
      }
      if (block_canonical_total(part, sh, false) >= target) {
        lo = mid;
        int32_t m = 0;
        for (int32_t k = 0; k < n; ++k) {
          const float q = lq[tid + static_cast<int64_t>(kThreads) * k];
          if (q >= t) {
            lq[tid + static_cast<int64_t>(kThreads) * m] = q;
            lid[tid + static_cast<int64_t>(kThreads) * m] = lid[tid + static_cast<int64_t>(kThreads) * k];
            ++m;
          }
        }
        n = m;
      } else {
        hi = mid - 1;
      }
    }
    tau = bits_float(lo);
  }

  // 7. min-p, then the survivors' sums (kept for the walk).
  float threshold = tau;
  if (p.min_p > 0.0f && p.min_p > threshold) threshold = p.min_p;
  partial = 0.0f;
  for (int32_t k = 0; k < n; ++k) {
    const float q = lq[tid + static_cast<int64_t>(kThreads) * k];
    if (q >= threshold) partial = f_add(partial, q);
  }
  sh.lane_count[tid] = n;
  total = block_canonical_total(partial, sh, true);

  // 8. The draw: warps, then the warp's lanes, then the lane's weights, in order.
  if (tid != 0) return;
  const float u = f_mul(philox_uniform(p.seed, p.position), total);
  auto last_in_lanes = [&](int first, int last) -> int32_t {
    for (int l = last - 1; l >= first; --l)
      for (int32_t k = sh.lane_count[l] - 1; k >= 0; --k)
        if (list_q[s * cap + l + static_cast<int64_t>(kThreads) * k] >= threshold)
          return list_id[s * cap + l + static_cast<int64_t>(kThreads) * k];
    return best;  // unreachable: the maximum always survives
  };
  float c = 0.0f;
  int warp = -1;
  for (int w = 0; w < kWarps; ++w) {
    const float next = f_add(c, sh.warp_sum[w]);
    if (next > u) {
      warp = w;
      break;
    }
    c = next;
  }
  if (warp < 0) {
    tokens[s] = last_in_lanes(0, kLanes);
    return;
  }
  int lane = -1;
  for (int l = warp * 32; l < warp * 32 + 32; ++l) {
    const float next = f_add(c, sh.lane_sum[l]);
    if (next > u) {
      lane = l;
      break;
    }
    c = next;
  }
  if (lane < 0) {
    tokens[s] = last_in_lanes(warp * 32, warp * 32 + 32);
    return;
  }
  for (int32_t k = 0; k < sh.lane_count[lane]; ++k) {
    const float q = lq[lane + static_cast<int64_t>(kThreads) * k];
    if (q < threshold) continue;
    c = f_add(c, q);
    if (c > u) {
      tokens[s] = lid[lane + static_cast<int64_t>(kThreads) * k];
      return;
    }
  }
  tokens[s] = last_in_lanes(lane, lane + 1);
}

// Checks of the shared arithmetic on the device (memra-kernel-check compares them
// with the host's bit for bit).
extern "C" __global__ void memra_sampling_exp_test(const float* x, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = memra_exp(x[i]);
}

extern "C" __global__ void memra_sampling_philox_test(uint64_t seed, const uint64_t* positions, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = philox_uniform(seed, positions[i]);
}
