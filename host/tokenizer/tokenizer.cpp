#include "host/tokenizer/tokenizer.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "host/tokenizer/tokenizer_impl.hpp"
#include "host/tokenizer/utf8.hpp"

namespace memra::tokenizer {

using detail::AddedTokenSpec;

Result<std::unique_ptr<Tokenizer::Impl>> Tokenizer::Impl::build(detail::TokenizerSpec&& spec) {
  auto impl = std::make_unique<Impl>();

  auto pre = detail::PreTokenizer::create(spec.pre_tokenizers);
  if (!pre) return pre.error();
  impl->pre_tokenizer = std::move(*pre);
  auto norm = detail::Normalizer::create(spec.normalizers);
  if (!norm) return norm.error();
  impl->normalizer = std::move(*norm);
  auto bpe = detail::Bpe::create(spec.model, impl->pre_tokenizer.byte_level());
  if (!bpe) return bpe.error();
  impl->bpe = std::move(*bpe);
  auto dec = detail::Decoder::create(spec.decoders, spec.has_decoder);
  if (!dec) return dec.error();
  impl->decoder = std::move(*dec);

  // id -> text: the model vocabulary, overridden by added tokens; all texts in one arena.
  TokenId max_id = -1;
  std::size_t bytes = 0;
  for (const auto& [text, id] : spec.model.vocab) {
    if (id < 0) return make_error(ErrorCode::invalid_argument, "tokenizer: negative token id for \"" + text + "\"");
    max_id = std::max(max_id, id);
    bytes += text.size();
  }
  for (const auto& t : spec.added_tokens) {
    if (t.id < 0) return make_error(ErrorCode::invalid_argument, "tokenizer: negative id for added token " + t.content);
    max_id = std::max(max_id, t.id);
    bytes += t.content.size();
  }
  if (max_id < 0) return make_error(ErrorCode::invalid_argument, "tokenizer: the vocabulary is empty");
  const auto n = static_cast<std::size_t>(max_id) + 1;
  std::vector<std::pair<std::size_t, std::size_t>> spans(n, {0, 0});  // offset, length in arena
  impl->arena.reserve(bytes);
  auto put = [&](TokenId id, const std::string& text) {
    spans[id] = {impl->arena.size(), text.size()};
    impl->arena += text;
  };
  for (const auto& [text, id] : spec.model.vocab) put(id, text);
  impl->special.assign(n, 0);
  for (const auto& t : spec.added_tokens) {
    put(t.id, t.content);
    if (t.special) impl->special[t.id] = 1;
  }
  for (TokenId id : spec.extra_special_ids)
    if (id >= 0 && static_cast<std::size_t>(id) < n) impl->special[id] = 1;
  impl->id_to_token.resize(n);
  impl->token_to_id.reserve(n);
  for (std::size_t id = 0; id < n; ++id) {
    impl->id_to_token[id] = std::string_view(impl->arena.data() + spans[id].first, spans[id].second);
    if (spans[id].second != 0) impl->token_to_id.insert(impl->id_to_token[id], static_cast<TokenId>(id));
  }
  // Added tokens win a text -> id lookup.
  for (const auto& t : spec.added_tokens) impl->token_to_id.assign(impl->id_to_token[t.id], t.id);

  std::vector<const AddedTokenSpec*> raw, normalized;
  for (const auto& t : spec.added_tokens) (t.normalized ? normalized : raw).push_back(&t);
  impl->raw_matcher = detail::AddedTokenMatcher(raw);
  impl->normalized_matcher = detail::AddedTokenMatcher(normalized);

  impl->prefix_ids = std::move(spec.prefix_ids);
  impl->suffix_ids = std::move(spec.suffix_ids);
  for (TokenId id : impl->prefix_ids)
    if (id < 0 || static_cast<std::size_t>(id) >= impl->id_to_token.size())
      return make_error(ErrorCode::invalid_argument, "tokenizer: post-processor token id " + std::to_string(id) +
                                                         " is outside the vocabulary");
  impl->bos_id = spec.bos_id;
  impl->eos_id = spec.eos_id;
  impl->pad_id = spec.pad_id;
  impl->unk_id = spec.unk_id;
  impl->clean_up_default = spec.clean_up_tokenization_spaces;
  impl->chat_template = std::move(spec.chat_template);
  if (!impl->bpe->fuses_unknown()) {
    for (std::string_view t : impl->id_to_token) impl->max_token_bytes = std::max(impl->max_token_bytes, t.size());
    impl->max_token_bytes = std::max<std::size_t>(impl->max_token_bytes, 4);  // an unknown character is one token
  }
  return impl;
}

void Tokenizer::Impl::encode_words(std::string_view text, bool at_start, std::vector<TokenId>& out,
                                   std::size_t limit) const {
  pre_tokenizer.run(text, at_start, [&](std::string_view word) {
    if (out.size() > limit) return;
    // A word that cannot fit is not encoded at all (a huge word costs its length in memory).
    if (cannot_fit(word.size(), out.size(), limit)) {
      out.resize(limit + 1, 0);
      return;
    }
    bpe->encode(word, out);
  });
}

void Tokenizer::Impl::encode_section(std::string_view text, bool at_start, std::vector<TokenId>& out,
                                     std::size_t limit) const {
  std::string normalized;
  std::string_view norm_text = text;
  if (!normalizer.empty()) {
    normalized = normalizer.apply(text);
    norm_text = normalized;
  }
  if (norm_text.empty()) return;
  // Past the limit on length alone (each token covers at most max_token_bytes of the words,
  // which hold the whole section unless the pre-tokenizer drops text): no more work.
  if (!pre_tokenizer.drops_text() && cannot_fit(norm_text.size(), out.size(), limit)) {
    out.resize(std::max(out.size(), limit + 1), 0);
    return;
  }
  if (normalized_matcher.empty()) {
    encode_words(norm_text, at_start, out, limit);
    return;
  }
  std::vector<detail::Segment> segs;
  normalized_matcher.split(norm_text, segs);
  for (const auto& s : segs) {
    if (out.size() > limit) return;
    if (s.id >= 0) out.push_back(s.id);
    else encode_words(norm_text.substr(s.begin, s.end - s.begin), at_start && s.begin == 0, out, limit);
  }
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::shared_ptr<const Tokenizer>> TokenizerFactory::create(detail::TokenizerSpec&& spec) {
  auto impl = Tokenizer::Impl::build(std::move(spec));
  if (!impl) return impl.error();
  return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(*impl)));
}

namespace {

Result<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::not_found, "cannot open " + path.string() + "; check the path");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) return make_error(ErrorCode::io, "cannot read " + path.string());
  return ss.str();
}

}  // namespace

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_hf_json(std::string_view tokenizer_json,
                                                                 std::string_view tokenizer_config_json) {
  auto spec = detail::spec_from_hf_json(tokenizer_json, tokenizer_config_json);
  if (!spec) return spec.error();
  return TokenizerFactory::create(std::move(*spec));
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_hf_files(const std::filesystem::path& tokenizer_json,
                                                                  const std::filesystem::path& tokenizer_config) {
  auto json = read_file(tokenizer_json);
  if (!json) return json.error();
  std::string config;
  if (!tokenizer_config.empty()) {
    auto c = read_file(tokenizer_config);
    if (!c) return c.error();
    config = std::move(*c);
  }
  auto tok = from_hf_json(*json, config);
  if (!tok) return make_error(tok.error().code, tokenizer_json.string() + ": " + tok.error().message);
  return tok;
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_hf_dir(const std::filesystem::path& dir) {
  auto json = dir / "tokenizer.json";
  if (!std::filesystem::exists(json))
    return make_error(ErrorCode::not_found, dir.string() + " has no tokenizer.json; pass a Hugging Face model directory");
  auto config = dir / "tokenizer_config.json";
  return from_hf_files(json, std::filesystem::exists(config) ? config : std::filesystem::path());
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_gguf_vocab(const GgufVocab& vocab) {
  auto spec = detail::spec_from_gguf_vocab(vocab);
  if (!spec) return spec.error();
  return TokenizerFactory::create(std::move(*spec));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return *encode_at_most(text, add_special_tokens, SIZE_MAX);
}

std::optional<std::vector<TokenId>> Tokenizer::encode_at_most(std::string_view text, bool add_special_tokens,
                                                             std::size_t max_tokens) const {
  std::string clean;
  if (!detail::is_valid_utf8(text)) {
    clean = detail::sanitize_utf8(text);
    text = clean;
  }
  std::vector<TokenId> ids;
  ids.reserve(std::min(text.size() / 3, max_tokens) + 4);
  if (add_special_tokens) ids = impl_->prefix_ids;
  // Room for the suffix: the limit is on the whole result.
  const std::size_t suffix = add_special_tokens ? impl_->suffix_ids.size() : 0;
  const std::size_t limit = max_tokens == SIZE_MAX ? SIZE_MAX : (max_tokens >= suffix ? max_tokens - suffix : 0);
  std::vector<detail::Segment> segs;
  impl_->raw_matcher.split(text, segs);
  for (const auto& s : segs) {
    if (ids.size() > limit) return std::nullopt;
    if (s.id >= 0) ids.push_back(s.id);
    else impl_->encode_section(text.substr(s.begin, s.end - s.begin), s.begin == 0, ids, limit);
  }
  if (ids.size() > limit) return std::nullopt;
  if (add_special_tokens) ids.insert(ids.end(), impl_->suffix_ids.begin(), impl_->suffix_ids.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, const DecodeOptions& options) const {
  std::vector<std::string_view> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids)
    if (!impl_->skipped(id, options.skip_special_tokens)) tokens.push_back(impl_->id_to_token[id]);
  return impl_->decoder.decode(tokens, options.clean_up_tokenization_spaces.value_or(impl_->clean_up_default));
}

std::string Tokenizer::decode_bytes(std::span<const TokenId> ids, const DecodeOptions& options) const {
  std::vector<std::string_view> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids)
    if (!impl_->skipped(id, options.skip_special_tokens)) tokens.push_back(impl_->id_to_token[id]);
  return impl_->decoder.decode_bytes(tokens);
}

std::size_t Tokenizer::vocab_size() const { return impl_->id_to_token.size(); }

std::string_view Tokenizer::token_text(TokenId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->id_to_token.size()) return {};
  return impl_->id_to_token[id];
}

std::optional<TokenId> Tokenizer::token_id(std::string_view text) const {
  const TokenId* id = impl_->token_to_id.find(text);
  if (!id) return std::nullopt;
  return *id;
}

bool Tokenizer::is_special(TokenId id) const {
  return id >= 0 && static_cast<std::size_t>(id) < impl_->special.size() && impl_->special[id];
}

std::optional<TokenId> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<TokenId> Tokenizer::eos_id() const { return impl_->eos_id; }
std::optional<TokenId> Tokenizer::pad_id() const { return impl_->pad_id; }
std::optional<TokenId> Tokenizer::unk_id() const { return impl_->unk_id; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace memra::tokenizer
