// The body of a /v1/embeddings answer, exactly OpenAI's shape:
// {"object":"list","data":[{"object":"embedding","index":i,"embedding":[...] | "<base64>"}],
//  "model":...,"usage":{"prompt_tokens":N,"total_tokens":N}}.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace memra::server {

// The vector's float32 values as little-endian bytes, base64 (encoding_format "base64").
std::string float32_base64(std::span<const float> values);

std::string embeddings_body(const std::string& model, const std::vector<std::vector<float>>& vectors, bool base64,
                            std::int64_t prompt_tokens);

}  // namespace memra::server
