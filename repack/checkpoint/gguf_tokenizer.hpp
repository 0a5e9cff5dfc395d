// The tokenizer a GGUF file embeds (tokenizer.ggml.* and tokenizer.chat_template),
// copied out into plain containers for the tokenizer module.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "repack/checkpoint/gguf.hpp"

namespace memra::gguf {

// llama.cpp's token_type values (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

struct EmbeddedTokenizer {
  std::string model;                  // tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama" (SPM), ...
  std::string pre;                    // tokenizer.ggml.pre: pre-tokenizer name ("qwen2", "llama-bpe"); may be empty
  std::vector<std::string> tokens;    // tokenizer.ggml.tokens, index = token id
  std::vector<float> scores;          // tokenizer.ggml.scores; empty when absent
  std::vector<int32_t> token_types;   // tokenizer.ggml.token_type (TokenType values); empty when absent
  std::vector<std::string> merges;    // tokenizer.ggml.merges ("a b" pairs); empty when absent
  std::optional<int64_t> bos_id, eos_id, eot_id, eom_id, unk_id, sep_id, pad_id, mask_id;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::string chat_template;          // tokenizer.chat_template; empty when absent
};

// Reads and validates (array types, lengths matching the vocabulary, ids in range).
Result<EmbeddedTokenizer> read_tokenizer(const File& file);

}  // namespace memra::gguf
