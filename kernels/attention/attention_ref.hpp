// Attention over a paged KV cache, CPU reference.
//
// One layer's cache is two arrays (K and V) of [num_blocks][block_size][kv_heads][head_dim]
// elements, float32, float16 or bfloat16 (raw bits, uint16_t); a sequence's block table maps
// logical block i (positions i*block_size ...) to a physical block. Grouped-query
// attention: query head h reads KV head h / (heads / kv_heads).
//
// 16-bit numerics (docs/ARCHITECTURE.md, "KV cache element type"): the write rounds K
// (after RoPE) and V to f16 or bf16, round to nearest even (f16 overflows to inf as IEEE
// does); attention reads the stored values as exact floats and runs the float32
// arithmetic below unchanged.
// fp8 (e4m3fn): a block is [block_size][kv_heads][head_dim] codes, then
// [block_size][kv_heads] f32 scales (kv_fp8_layout.hpp). Per written (position, kv head):
// d = amax / 448 over its head_dim values, code = e4m3(x / d) (round to nearest even,
// saturating; all codes 0 when d == 0); attention reads e4m3(code) * d.
#pragma once
#include <cstdint>

#include "kernels/attention/kv_fp8_layout.hpp"

namespace memra::ref {

enum class KvElement { f32, f16, bf16, fp8 };

struct PagedKvLayer {
  void* k = nullptr;  // float* (f32), uint16_t* f16 / bf16 bits, or fp8 blocks (bytes)
  void* v = nullptr;
  int64_t block_size = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  KvElement element = KvElement::f32;
};

// Stores one token's k and v ([kv_heads][head_dim] each) at `position` (rounded to
// the layer's 16-bit type, or quantised to fp8 per kv head, unless it is f32).
void paged_kv_write(const PagedKvLayer& layer, const int32_t* block_table, int64_t position, const float* k,
                    const float* v);

// out[heads][head_dim] = softmax(q·Kᵀ·scale) · V over the positions this token may see:
// [0, position] (causal), or the last `sliding_window` of them when sliding_window > 0.
// logit_softcap > 0 applies cap * tanh(score / cap) before the softmax.
void paged_attention(const PagedKvLayer& layer, const int32_t* block_table, int64_t position, const float* q,
                     int64_t heads, float scale, int64_t sliding_window, float logit_softcap, float* out);

}  // namespace memra::ref
