// CPU quantizers: float32 -> the weight layouts memra's quant plugins read. Each scheme's
// quantiser is in its plugin's folder (plugins/quant-<s>/<s>_quantize.cpp); the dispatcher
// (quantize.cpp) and the shared search helpers (quantize_internal.hpp) here.
//
//   q8_0, q4_0, q4_k, q5_k, GGUF block layouts, byte-compatible with ggml, so the exact
//   q6_k, iq4_xs            dequantizers in repack/quant (and llama.cpp) read them.
//   fp8                     memra fp8 layout v1: per row, cols/128 float32 scales, then
//                           cols e4m3fn bytes; value = e4m3(q) * scale of its 128-column group.
//
// The scale searches minimise the plain squared round-trip error of each block (see
// docs/FORMAT.md, "Quantizers"). Output is deterministic: the same floats give the same
// bytes on every run and thread count. Standard library only, so quant plugins built
// against the SDK alone can link it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memra::quant {

enum class QuantScheme { q8_0, q4_0, q4_k, q5_k, q6_k, iq4_xs, fp8 };

inline constexpr int64_t kFp8Group = 128;          // columns per fp8 scale
inline constexpr uint32_t kFp8LayoutVersion = 1;   // memra fp8 layout version written here

// "q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "iq4_xs", "fp8".
const char* scheme_name(QuantScheme s);
// Lower-case names as above; false when unknown.
bool parse_scheme(std::string_view name, QuantScheme* out);
// Elements per block: 32 (q8_0, q4_0), 256 (k-quants, iq4_xs), 128 (fp8 scale group).
int64_t scheme_block_size(QuantScheme s);
// Bytes of one row of `cols` elements; 0 when cols is not a positive multiple of the block size.
uint64_t scheme_row_bytes(QuantScheme s, int64_t cols);

// Quantizes `rows` x `cols` float32 values (row-major) into `dst` (rows * row_bytes).
// Returns false with a message in *error (may be null) when the shape does not fit the
// scheme, dst is too small, a value is not finite, or the values overflow the scheme's
// float16 scales.
bool quantize_rows(QuantScheme s, const float* src, int64_t rows, int64_t cols, void* dst, uint64_t dst_bytes,
                   std::string* error);

// Block-level entry points: `n` elements (a multiple of the block size), finite input.
// Return false only when a scale overflows float16 (|x| beyond ~1e6).
bool quantize_q8_0(const float* x, void* dst, int64_t n);
bool quantize_q4_0(const float* x, void* dst, int64_t n);
bool quantize_q4_k(const float* x, void* dst, int64_t n);
bool quantize_q5_k(const float* x, void* dst, int64_t n);
bool quantize_q6_k(const float* x, void* dst, int64_t n);
bool quantize_iq4_xs(const float* x, void* dst, int64_t n);
// One fp8 row of `cols` (multiple of 128) values.
void quantize_fp8_row(const float* x, void* dst, int64_t cols);

}  // namespace memra::quant
