#include "repack/checkpoint/gguf_tokenizer.hpp"

namespace memra::gguf {
namespace {

Error bad(const std::string& key, const std::string& what) {
  return make_error(ErrorCode::corrupt, "GGUF tokenizer: '" + key + "' " + what);
}

Status read_string_array(const File& f, const std::string& key, bool required, std::vector<std::string>* out) {
  const Value* v = f.find(key);
  if (!v) return required ? Status(bad(key, "is missing; this GGUF has no usable embedded tokenizer")) : Status();
  const Array* a = v->as_array();
  if (!a || a->elem_type != ValueType::string) return bad(key, "is not an array of strings");
  *out = a->strings;
  return {};
}

Status read_optional_id(const File& f, const std::string& key, size_t vocab, std::optional<int64_t>* out) {
  const Value* v = f.find(key);
  if (!v) return {};
  const auto id = v->as_int();
  if (!id) return bad(key, std::string("has type ") + value_type_name(v->type) + ", expected an integer");
  if (*id < 0 || static_cast<uint64_t>(*id) >= vocab)
    return bad(key, "is " + std::to_string(*id) + ", outside the " + std::to_string(vocab) + "-token vocabulary");
  *out = *id;
  return {};
}

Status read_optional_bool(const File& f, const std::string& key, std::optional<bool>* out) {
  const Value* v = f.find(key);
  if (!v) return {};
  const auto b = v->as_bool();
  if (!b) return bad(key, "is not a BOOL");
  *out = *b;
  return {};
}

}  // namespace

Result<EmbeddedTokenizer> read_tokenizer(const File& f) {
  EmbeddedTokenizer t;
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) return bad("tokenizer.ggml.model", "is missing or not a string; this GGUF has no usable embedded tokenizer");
  t.model = *model;
  if (const Value* v = f.find("tokenizer.ggml.pre")) {
    if (!v->as_string()) return bad("tokenizer.ggml.pre", "is not a string");
    t.pre = *v->as_string();
  }
  MEMRA_TRY(read_string_array(f, "tokenizer.ggml.tokens", true, &t.tokens));
  const size_t vocab = t.tokens.size();
  if (vocab == 0) return bad("tokenizer.ggml.tokens", "is empty");

  if (const Value* v = f.find("tokenizer.ggml.scores")) {
    const Array* a = v->as_array();
    if (!a || a->elem_type != ValueType::f32) return bad("tokenizer.ggml.scores", "is not an array of FLOAT32");
    if (a->count != vocab) return bad("tokenizer.ggml.scores", "has " + std::to_string(a->count) + " entries for " + std::to_string(vocab) + " tokens");
    t.scores.reserve(vocab);
    for (uint64_t i = 0; i < a->count; ++i) t.scores.push_back(static_cast<float>(*a->float_at(i)));
  }
  if (const Value* v = f.find("tokenizer.ggml.token_type")) {
    const Array* a = v->as_array();
    if (!a || a->elem_type != ValueType::i32) return bad("tokenizer.ggml.token_type", "is not an array of INT32");
    if (a->count != vocab) return bad("tokenizer.ggml.token_type", "has " + std::to_string(a->count) + " entries for " + std::to_string(vocab) + " tokens");
    t.token_types.reserve(vocab);
    for (uint64_t i = 0; i < a->count; ++i) t.token_types.push_back(static_cast<int32_t>(*a->int_at(i)));
  }
  MEMRA_TRY(read_string_array(f, "tokenizer.ggml.merges", false, &t.merges));

  MEMRA_TRY(read_optional_id(f, "tokenizer.ggml.bos_token_id", vocab, &t.bos_id));
  MEMRA_TRY(read_optional_id(f, "tokenizer.ggml.eos_token_id", vocab, &t.eos_id));
  MEMRA_TRY(read_optional_id(f, "tokenizer.ggml.eot_token_id", vocab, &t.eot_id));
  MEMRA_TRY(read_optional_id(f, "tokenizer.ggml.eom_token_id", vocab, &t.eom_id));
  MEMRA_TRY(read_optional_id(f, "tokenizer.ggml.unknown_token_id", vocab, &t.unk_id));
  MEMRA_TRY(read_optional_id(f, "tokenizer.ggml.seperator_token_id", vocab, &t.sep_id));  // sic: llama.cpp's spelling
  MEMRA_TRY(read_optional_id(f, "tokenizer.ggml.padding_token_id", vocab, &t.pad_id));
  MEMRA_TRY(read_optional_id(f, "tokenizer.ggml.mask_token_id", vocab, &t.mask_id));
  MEMRA_TRY(read_optional_bool(f, "tokenizer.ggml.add_bos_token", &t.add_bos));
  MEMRA_TRY(read_optional_bool(f, "tokenizer.ggml.add_eos_token", &t.add_eos));
  MEMRA_TRY(read_optional_bool(f, "tokenizer.ggml.add_space_prefix", &t.add_space_prefix));
  if (const Value* v = f.find("tokenizer.chat_template")) {
    if (!v->as_string()) return bad("tokenizer.chat_template", "is not a string");
    t.chat_template = *v->as_string();
  }
  return t;
}

}  // namespace memra::gguf
