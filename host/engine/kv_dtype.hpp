// The KV cache element type as the tools spell it (--kv-dtype f16|bf16|fp8|f32 of memra-host,
// memra-gen and memra-bench; EngineOptions::kv_dtype).
#pragma once

#include <optional>
#include <string_view>

#include "memra/abi.h"

namespace memra::engine {

// The default: f16 (half the bytes of f32, and what llama.cpp's default cache keeps, so a
// GGUF's error stays within llama.cpp's own on the same file; bf16 measured 12 % worse on
// the BF16 GGUF fixture: docs/ARCHITECTURE.md, "KV cache element type").
inline constexpr memra_dtype kDefaultKvDtype = MEMRA_DTYPE_F16;

inline std::optional<memra_dtype> parse_kv_dtype(std::string_view text) {
  if (text == "f16") return MEMRA_DTYPE_F16;
  if (text == "f32") return MEMRA_DTYPE_F32;
  if (text == "bf16") return MEMRA_DTYPE_BF16;
  if (text == "fp8") return MEMRA_DTYPE_F8_E4M3;
  return std::nullopt;
}

inline const char* kv_dtype_name(memra_dtype dtype) {
  return dtype == MEMRA_DTYPE_F16    ? "f16"
         : dtype == MEMRA_DTYPE_BF16 ? "bf16"
         : dtype == MEMRA_DTYPE_F32  ? "f32"
         : dtype == MEMRA_DTYPE_F8_E4M3 ? "fp8"
                                     : "unsupported";
}

}  // namespace memra::engine
