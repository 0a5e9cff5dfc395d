// tokenizer.gguf.json: the vocabulary a GGUF source embeds (tokenizer.ggml.* and
// tokenizer.chat_template), saved in a .memra directory so the tokenizer can be rebuilt
// exactly (tokenizer::Tokenizer::from_gguf_vocab) without the source file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/common/result.hpp"
#include "repack/checkpoint/gguf_tokenizer.hpp"

namespace memra::format {

inline constexpr std::string_view kGgufTokenizerFile = "tokenizer.gguf.json";

// Tokens that are not valid UTF-8 are written as {"hex": "..."}; every other field
// keeps its GGUF key's name without the "tokenizer.ggml." prefix.
std::string gguf_tokenizer_to_json(const gguf::EmbeddedTokenizer& t);
Result<gguf::EmbeddedTokenizer> gguf_tokenizer_from_json(std::string_view text);
// Reads <dir>/tokenizer.gguf.json.
Result<gguf::EmbeddedTokenizer> read_gguf_tokenizer(const std::filesystem::path& memra_dir);

}  // namespace memra::format
