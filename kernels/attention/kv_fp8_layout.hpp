// The fp8 KV cache's block layout, one definition for the CPU reference
// (attention_ref.cpp), the RoPE + KV write and the attention kernels: a block of one layer
// holds its e4m3fn codes [block_size][kv_heads][head_dim], then one f32 scale per
// (position, kv head) [block_size][kv_heads] (so blocks stay contiguous: copies, pipeline
// stages and the prefix cache move whole blocks). nvcc and the host compiler both read it.
#pragma once

#include <stdint.h>

#if defined(__CUDACC__)
#define MEMRA_FP8KV_HD __host__ __device__
#else
#define MEMRA_FP8KV_HD
#endif

namespace memra::attn {

MEMRA_FP8KV_HD constexpr int64_t fp8_kv_block_bytes(int64_t block_size, int64_t kv_heads, int64_t head_dim) {
  return block_size * kv_heads * (head_dim + 4);
}

// Byte offsets, in the layer, of a (block, position in the block, kv head) row's codes and scale.
struct Fp8KvSlot {
  int64_t codes, scale;
};
MEMRA_FP8KV_HD inline Fp8KvSlot fp8_kv_slot(int64_t block, int64_t in_block, int64_t kvh, int64_t block_size,
                                            int64_t kv_heads, int64_t head_dim) {
  const int64_t base = block * fp8_kv_block_bytes(block_size, kv_heads, head_dim);
  const int64_t r = in_block * kv_heads + kvh;
  return {base + r * head_dim, base + block_size * kv_heads * head_dim + r * 4};
}

}  // namespace memra::attn
