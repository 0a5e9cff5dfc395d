// Byte sizes of tensors per scheme: the plain element types, the GGUF block layouts and
// memra's fp8 layout v1. Shared by the writer (planning) and the reader (validation).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memra::format {

// Bytes a tensor of this shape (outermost first) takes in `scheme` at `layout`, or
// nullopt when the scheme/layout is unknown or the shape breaks its block size.
std::optional<uint64_t> tensor_bytes(std::string_view scheme, uint32_t layout, const std::vector<uint64_t>& shape);

// Elements per block along the innermost dimension (1 for plain types); 0 if unknown.
uint64_t scheme_block_elements(std::string_view scheme);

// Lower-case scheme name of a ggml type ("q4_k"), or "" when memra has no name for it.
std::string scheme_of_ggml_type(uint32_t ggml_type);

// True for f32, f16, bf16 (plain floats the engine takes as is).
bool is_float_scheme(std::string_view scheme);

}  // namespace memra::format
