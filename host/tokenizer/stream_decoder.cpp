// StreamDecoder: the decode() stages run incrementally. Each stage only releases text that no later token
// can change: the UTF-8 assembler holds an incomplete sequence, a ByteFallback run is held until it ends
// (the Rust decoder turns an invalid run into one U+FFFD per byte, so its text depends on its end), Strip
// holds trailing strippable characters, and clean-up holds a tail that a rule could still rewrite.
#include "host/tokenizer/tokenizer.hpp"
#include "host/tokenizer/tokenizer_impl.hpp"

namespace memra::tokenizer {

struct StreamDecoder::State {
  const Tokenizer::Impl* impl;
  DecodeOptions options;
  bool clean_up;
  std::size_t index = 0;  // tokens decoded so far (after skipping)
  std::string run;        // pending fallback bytes
  detail::Utf8StreamDecoder utf8;
  detail::StripStream strip;
  detail::CleanupStream cleanup;
  detail::DecodedPiece piece;

  State(const Tokenizer::Impl* i, DecodeOptions o)
      : impl(i),
        options(o),
        clean_up(o.clean_up_tokenization_spaces.value_or(i->clean_up_default)),
        strip(i->decoder.strip_content(), i->decoder.strip_start(), i->decoder.strip_stop()) {}

  // Passes newly assembled text through the whole-text stages.
  void emit(const std::string& text, std::string& out) {
    if (text.empty()) return;
    if (!clean_up) {
      strip.push(text, out);
      return;
    }
    std::string stripped;
    strip.push(text, stripped);
    cleanup.push(stripped, out);
  }
};

StreamDecoder::StreamDecoder(std::shared_ptr<const Tokenizer> tokenizer, DecodeOptions options)
    : tokenizer_(std::move(tokenizer)), state_(std::make_unique<State>(tokenizer_->impl_.get(), options)) {}
StreamDecoder::~StreamDecoder() = default;
StreamDecoder::StreamDecoder(StreamDecoder&&) noexcept = default;
StreamDecoder& StreamDecoder::operator=(StreamDecoder&&) noexcept = default;

std::string StreamDecoder::push(TokenId id) {
  State& st = *state_;
  std::string out;
  if (st.impl->skipped(id, st.options.skip_special_tokens)) return out;
  st.impl->decoder.piece(st.impl->id_to_token[id], st.index++, st.piece);
  if (st.piece.is_fallback_byte) {
    st.run.push_back(static_cast<char>(st.piece.byte));
    return out;
  }
  std::string text;
  detail::flush_fallback_run(st.run, st.utf8, text);
  st.utf8.feed(st.piece.text, text);
  st.emit(text, out);
  return out;
}

std::string StreamDecoder::push(std::span<const TokenId> ids) {
  std::string out;
  for (TokenId id : ids) out += push(id);
  return out;
}

std::string StreamDecoder::finish() {
  State& st = *state_;
  std::string text, out;
  detail::flush_fallback_run(st.run, st.utf8, text);
  st.utf8.flush(text);
  st.emit(text, out);
  if (st.clean_up) {
    std::string tail;
    st.strip.finish(tail);
    st.cleanup.push(tail, out);
    st.cleanup.finish(out);
  } else {
    st.strip.finish(out);
  }
  reset();
  return out;
}

void StreamDecoder::reset() {
  auto options = state_->options;
  state_ = std::make_unique<State>(tokenizer_->impl_.get(), options);
}

}  // namespace memra::tokenizer
