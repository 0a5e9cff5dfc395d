// memra::tokenizer — Hugging Face compatible tokenizer (byte-level BPE and SentencePiece-style BPE).
//
// One implementation, fed either from a Hugging Face tokenizer.json (+ tokenizer_config.json) or from the
// vocabulary arrays a GGUF file embeds (tokenizer.ggml.*). Encoding follows the Hugging Face `tokenizers`
// library (Rust): added/special tokens are split out first, then normalizer -> pre-tokenizer -> BPE ->
// post-processor. Decoding follows it too; `clean_up_tokenization_spaces` is the transformers option.
//
// Text is UTF-8. Invalid UTF-8 in the input to encode() is replaced by U+FFFD first (what a caller that
// decodes bytes lossily would pass; JSON lone surrogates arrive the same way).
//
// Thread safety: a Tokenizer is immutable after creation; encode()/decode() may run concurrently (the
// internal BPE word cache is sharded and locked). A StreamDecoder belongs to one sequence / one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"

namespace memra::tokenizer {

using TokenId = std::int32_t;

// GGUF / llama.cpp token types (tokenizer.ggml.token_type values).
enum class TokenType : std::int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,       // special added token (<|im_start|>, <bos>): split out before BPE; skippable in decode
  user_defined = 4,  // non-special added token: split out before BPE, kept in decode
  unused = 5,
  byte = 6,  // <0xNN> byte-fallback token
};

// A vocabulary as GGUF stores it (tokenizer.ggml.*). The GGUF reader fills this; tests build it from
// tokenizer.json. Arrays are indexed by token id.
struct GgufVocab {
  std::string model;  // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece BPE)
  // tokenizer.ggml.pre: the pre-tokenizer of a "gpt2" model: "qwen2", "llama-bpe" (alias "llama3"),
  // "gpt-2"/"default". Ignored for "llama".
  std::string pre;
  std::vector<std::string> tokens;       // tokenizer.ggml.tokens
  std::vector<std::string> merges;       // tokenizer.ggml.merges, "left right"; may be empty for "llama"
  std::vector<float> scores;             // tokenizer.ggml.scores; ranks merges when `merges` is empty
  std::vector<TokenType> token_types;    // tokenizer.ggml.token_type; empty = all normal
  std::optional<TokenId> bos_id;         // tokenizer.ggml.bos_token_id
  std::optional<TokenId> eos_id;         // tokenizer.ggml.eos_token_id
  std::optional<TokenId> unk_id;         // tokenizer.ggml.unknown_token_id
  std::optional<TokenId> pad_id;         // tokenizer.ggml.padding_token_id
  std::optional<bool> add_bos;           // tokenizer.ggml.add_bos_token (default: "llama" true, "gpt2" false)
  std::optional<bool> add_eos;           // tokenizer.ggml.add_eos_token (default false)
  std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix ("llama"; default true)
  std::string chat_template;             // tokenizer.chat_template, passed through
};

struct DecodeOptions {
  bool skip_special_tokens = false;
  // transformers' clean_up_tokenization_spaces (" ." -> "." etc.). Unset: the tokenizer_config.json value
  // (false when the key is absent, as in transformers >= 4.45); false for GGUF vocabularies.
  std::optional<bool> clean_up_tokenization_spaces;
};

class StreamDecoder;

class Tokenizer {
 public:
  // A directory holding tokenizer.json and (optionally) tokenizer_config.json.
  static Result<std::shared_ptr<const Tokenizer>> from_hf_dir(const std::filesystem::path& dir);
  // tokenizer_config may be empty (no config: no extra flags, transformers defaults).
  static Result<std::shared_ptr<const Tokenizer>> from_hf_files(const std::filesystem::path& tokenizer_json,
                                                                const std::filesystem::path& tokenizer_config);
  // The two files' contents; tokenizer_config_json may be empty.
  static Result<std::shared_ptr<const Tokenizer>> from_hf_json(std::string_view tokenizer_json,
                                                               std::string_view tokenizer_config_json);
  // From already-parsed GGUF-style arrays.
  static Result<std::shared_ptr<const Tokenizer>> from_gguf_vocab(const GgufVocab& vocab);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special_tokens: apply the post-processor (BOS/EOS per tokenizer.json's post_processor, or per
  // tokenizer_config.json's add_bos_token/add_eos_token for Llama/Gemma tokenizer classes, or per GGUF
  // add_bos/add_eos). Special-token strings inside `text` are always matched as special tokens.
  std::vector<TokenId> encode(std::string_view text, bool add_special_tokens = true) const;
  // encode(), or nullopt as soon as the ids would be more than `max_tokens`: a text that
  // cannot fit (a prompt past the context) costs about max_tokens' worth of work and memory,
  // not its whole length.
  std::optional<std::vector<TokenId>> encode_at_most(std::string_view text, bool add_special_tokens,
                                                     std::size_t max_tokens) const;

  // Out-of-range ids decode to nothing.
  std::string decode(std::span<const TokenId> ids, const DecodeOptions& options = {}) const;
  // The bytes decode() would give before its UTF-8 repair (no clean-up): what a token
  // that is part of a character stands for (OpenAI's logprobs `bytes`).
  std::string decode_bytes(std::span<const TokenId> ids, const DecodeOptions& options = {}) const;

  std::size_t vocab_size() const;                      // one past the largest id
  std::string_view token_text(TokenId id) const;       // the vocabulary string ("" when out of range)
  std::optional<TokenId> token_id(std::string_view token_text) const;
  bool is_special(TokenId id) const;                   // a special added token (skipped by skip_special_tokens)
  std::optional<TokenId> bos_id() const;
  std::optional<TokenId> eos_id() const;
  std::optional<TokenId> pad_id() const;
  std::optional<TokenId> unk_id() const;
  // The default chat template from tokenizer_config.json / GGUF ("" when none).
  const std::string& chat_template() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class StreamDecoder;
  friend struct TokenizerFactory;
};

// Incremental detokenizer for streaming: push ids as they are generated and append what each call returns.
// It never returns a partial UTF-8 sequence, and the concatenation of every push() plus finish() equals
// decode(all ids, same options).
class StreamDecoder {
 public:
  explicit StreamDecoder(std::shared_ptr<const Tokenizer> tokenizer, DecodeOptions options = {});
  ~StreamDecoder();
  StreamDecoder(StreamDecoder&&) noexcept;
  StreamDecoder& operator=(StreamDecoder&&) noexcept;

  std::string push(TokenId id);
  std::string push(std::span<const TokenId> ids);
  // End of the sequence: returns whatever was held back (an incomplete UTF-8 tail becomes U+FFFD).
  std::string finish();
  // Start a new sequence with the same tokenizer and options.
  void reset();

  struct State;

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<State> state_;
};

}  // namespace memra::tokenizer
