// The KV cache element type as the tools spell it (--kv-dtype f32|bf16 of memra-host,
// memra-gen and memra-bench; EngineOptions::kv_dtype).
#pragma once

#include <optional>
#include <string_view>

#include "memra/abi.h"

namespace memra::engine {

inline std::optional<memra_dtype> parse_kv_dtype(std::string_view text) {
  if (text == "f32") return MEMRA_DTYPE_F32;
  if (text == "bf16") return MEMRA_DTYPE_BF16;
  return std::nullopt;
}

inline const char* kv_dtype_name(memra_dtype dtype) {
  return dtype == MEMRA_DTYPE_BF16 ? "bf16" : dtype == MEMRA_DTYPE_F32 ? "f32" : "unsupported";
}

}  // namespace memra::engine
