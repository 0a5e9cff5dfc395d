// POST /v1/embeddings' body (OpenAI's Embeddings API): parsed and checked before any
// model is looked at, so a malformed request is a precise 400 naming the field. What
// depends on the model (an embedding model at all, the vocabulary, the context, the
// width `dimensions` may cut to) is the route's check (routes_embeddings.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "host/server/request_validation.hpp"

namespace memra::server {

inline constexpr std::size_t kMaxEmbeddingInputs = 2048;  // OpenAI's limit on `input` items

struct EmbeddingsRequest {
  std::string model;
  std::vector<PromptInput> inputs;       // each non-empty: a text or token ids
  bool base64 = false;                   // encoding_format "base64": little-endian float32 bytes
  std::optional<std::int64_t> dimensions;  // >= 1 here; at most the model's width (the route)
};

Parsed<EmbeddingsRequest> parse_embeddings_body(std::string_view body);
// Each top-level field the route knows and what it does with it (docs/SERVING.md).
std::vector<std::pair<std::string, std::string>> embeddings_field_policies();

}  // namespace memra::server
