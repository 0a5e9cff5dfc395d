#include "host/tokenizer/decoder.hpp"

#include <array>

#include "host/tokenizer/bpe.hpp"

namespace memra::tokenizer::detail {
namespace {

Error unsupported_decoder(const std::string& why) {
  return make_error(ErrorCode::unsupported, "tokenizer decoder: " + why + "; this decoder chain is not supported yet");
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  std::size_t pos = 0;
  while (true) {
    std::size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

// Inverse of the GPT-2 byte -> character table (-1: not a byte character).
const std::array<int, 0x144>& unicode_to_byte() {
  static const std::array<int, 0x144> table = [] {
    std::array<int, 0x144> t{};
    t.fill(-1);
    const auto& b2u = byte_to_unicode();
    for (int b = 0; b < 256; ++b) t[b2u[b]] = b;
    return t;
  }();
  return table;
}

char32_t single_char(std::string_view s) {
  std::size_t i = 0;
  return s.empty() ? U' ' : next_codepoint(s, i);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Start of the last character of s (s non-empty).
std::size_t last_char_start(std::string_view s) {
  std::size_t j = s.size() - 1;
  while (j > 0 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) --j;
  return j;
}

}  // namespace

Result<Decoder> Decoder::create(const std::vector<DecoderStep>& steps, bool has_decoder) {
  Decoder d;
  if (!has_decoder) {
    d.join_with_space_ = true;
    return d;
  }
  enum class Phase { per_token, after_fallback, fused } phase = Phase::per_token;
  for (const auto& s : steps) {
    using K = DecoderStep::Kind;
    switch (phase) {
      case Phase::per_token:
        switch (s.kind) {
          case K::replace:
            if (s.pattern.is_regex) return unsupported_decoder("Replace with a Regex pattern");
            d.per_token_.push_back(s);
            break;
          case K::strip:
          case K::metaspace: d.per_token_.push_back(s); break;
          case K::byte_level:
            d.byte_level_ = true;
            phase = Phase::fused;
            break;
          case K::byte_fallback:
            d.byte_fallback_ = true;
            phase = Phase::after_fallback;
            break;
          case K::fuse: phase = Phase::fused; break;
        }
        break;
      case Phase::after_fallback:
        if (s.kind != K::fuse) return unsupported_decoder("a step other than Fuse right after ByteFallback");
        phase = Phase::fused;
        break;
      case Phase::fused:
        if (s.kind == K::fuse) break;
        if (s.kind != K::strip || d.strip_start_ != 0 || d.strip_stop_ != 0)
          return unsupported_decoder("a step other than one Strip after Fuse/ByteLevel");
        d.strip_content_ = single_char(s.content);
        d.strip_start_ = s.start;
        d.strip_stop_ = s.stop;
        break;
    }
  }
  return d;
}

void Decoder::piece(std::string_view token, std::size_t index, DecodedPiece& out) const {
  out.is_fallback_byte = false;
  out.text.assign(token);
  for (const auto& step : per_token_) {
    switch (step.kind) {
      case DecoderStep::Kind::replace: out.text = replace_all(out.text, step.pattern.text, step.content); break;
      case DecoderStep::Kind::strip:
        out.text = strip_text(out.text, single_char(step.content), step.start, step.stop);
        break;
      case DecoderStep::Kind::metaspace:
        // Rust: in the first token every replacement character is dropped (unless prepend_scheme is never).
        out.text = replace_all(out.text, step.replacement,
                               index == 0 && step.prepend_scheme != PrependScheme::never ? "" : " ");
        break;
      default: break;
    }
  }
  if (join_with_space_ && index > 0) out.text.insert(0, " ");
  if (byte_level_) {
    // Characters of the byte alphabet become their bytes; a token with any other character stays as it is.
    const auto& u2b = unicode_to_byte();
    std::string bytes;
    bytes.reserve(out.text.size());
    std::size_t i = 0;
    bool all = true;
    while (i < out.text.size()) {
      char32_t c = next_codepoint(out.text, i);
      if (c >= u2b.size() || u2b[c] < 0) {
        all = false;
        break;
      }
      bytes.push_back(static_cast<char>(u2b[c]));
    }
    if (all) out.text = std::move(bytes);
    return;
  }
  if (byte_fallback_ && out.text.size() == 6 && out.text.compare(0, 3, "<0x") == 0 && out.text[5] == '>') {
    int hi = hex_value(out.text[3]), lo = hex_value(out.text[4]);
    if (hi >= 0 && lo >= 0) {
      out.is_fallback_byte = true;
      out.byte = static_cast<unsigned char>(hi * 16 + lo);
    }
  }
}

void flush_fallback_run(std::string& run, Utf8StreamDecoder& utf8, std::string& out) {
  if (run.empty()) return;
  if (is_valid_utf8(run)) {
    utf8.feed(run, out);
  } else {
    for (std::size_t i = 0; i < run.size(); ++i) utf8.feed(kReplacementUtf8, out);
  }
  run.clear();
}

std::string Decoder::decode(const std::vector<std::string_view>& tokens, bool clean_up) const {
  std::string text, run;
  Utf8StreamDecoder utf8;
  DecodedPiece p;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    piece(tokens[i], i, p);
    if (p.is_fallback_byte) {
      run.push_back(static_cast<char>(p.byte));
      continue;
    }
    flush_fallback_run(run, utf8, text);
    utf8.feed(p.text, text);
  }
  flush_fallback_run(run, utf8, text);
  utf8.flush(text);
  if (strip_start_ > 0 || strip_stop_ > 0) text = strip_text(text, strip_content_, strip_start_, strip_stop_);
  if (clean_up) text = clean_up_tokenization(text);
  return text;
}

std::string Decoder::decode_bytes(const std::vector<std::string_view>& tokens) const {
  std::string bytes;
  DecodedPiece p;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    piece(tokens[i], i, p);
    if (p.is_fallback_byte) bytes.push_back(static_cast<char>(p.byte));
    else bytes += p.text;
  }
  if (strip_start_ > 0 || strip_stop_ > 0) bytes = strip_text(bytes, strip_content_, strip_start_, strip_stop_);
  return bytes;
}

std::string strip_text(std::string_view text, char32_t content, int start, int stop) {
  std::size_t begin = 0;
  for (int k = 0; k < start && begin < text.size(); ++k) {
    std::size_t i = begin;
    if (next_codepoint(text, i) != content) break;
    begin = i;
  }
  std::size_t end = text.size();
  for (int k = 0; k < stop && end > 0; ++k) {
    std::size_t j = last_char_start(text.substr(0, end));
    std::size_t i = j;
    if (next_codepoint(text, i) != content) break;
    end = j;
  }
  if (end < begin) end = begin;
  return std::string(text.substr(begin, end - begin));
}

std::string clean_up_tokenization(std::string_view text) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
  };
  std::string cur(text);
  if (cur.find(' ') == std::string::npos) return cur;
  for (const auto& [from, to] : kRules) {
    if (cur.find(from) != std::string::npos) cur = replace_all(cur, from, to);
  }
  return cur;
}

// ---- streaming stages -------------------------------------------------------

namespace {

// Every form (in the text before clean-up) that the clean-up rules can rewrite, chains included:
// " ' " -> "'" can complete " n't" / " 'm" / ... out of " n ' t" / "  ' m" / ...
constexpr std::string_view kCleanupForms[] = {
    " .",  " ?",     " !",   " ,",    " ' ",  " n't",   " n ' t", " 'm",
    "  ' m", " 's", "  ' s", " 've", "  ' ve", " 're", "  ' re",
};

// The largest cut such that no rewritable form spans it or could still be completed after it: clean-up of
// the text before the cut is then final.
std::size_t cleanup_safe_cut(std::string_view t) {
  std::size_t p = t.size();
  bool changed = true;
  while (changed) {
    changed = false;
    std::size_t lo = p >= 6 ? p - 6 : 0;
    for (std::size_t q = lo; q < p && !changed; ++q) {
      if (t[q] != ' ') continue;
      std::string_view rest = t.substr(q);
      for (auto f : kCleanupForms) {
        bool hold = rest.size() <= f.size() ? f.substr(0, rest.size()) == rest
                                            : (rest.substr(0, f.size()) == f && q + f.size() > p);
        if (hold) {
          p = q;
          changed = true;
          break;
        }
      }
    }
  }
  return p;
}

}  // namespace

void CleanupStream::push(std::string_view text, std::string& out) {
  if (text.empty()) return;
  pending_.append(text);
  std::size_t cut = cleanup_safe_cut(pending_);
  if (cut == 0) return;
  out += clean_up_tokenization(std::string_view(pending_).substr(0, cut));
  pending_.erase(0, cut);
}

void CleanupStream::finish(std::string& out) {
  out += clean_up_tokenization(pending_);
  pending_.clear();
}

void StripStream::push(std::string_view t, std::string& out) {
  while (start_left_ > 0 && !t.empty()) {
    std::size_t i = 0;
    if (next_codepoint(t, i) != content_) {
      start_left_ = 0;
      break;
    }
    t.remove_prefix(i);
    --start_left_;
  }
  if (t.empty()) return;
  start_left_ = 0;
  if (stop_ == 0) {
    out.append(t);
    return;
  }
  std::string combined = held_;
  combined.append(t);
  std::size_t end = combined.size();
  int k = 0;
  while (k < stop_ && end > 0) {
    std::size_t j = last_char_start(std::string_view(combined).substr(0, end));
    std::size_t i = j;
    if (next_codepoint(combined, i) != content_) break;
    end = j;
    ++k;
  }
  out.append(combined, 0, end);
  held_ = combined.substr(end);
}

void StripStream::finish(std::string& out) {
  (void)out;  // held trailing characters are exactly what Strip removes at the end
  held_.clear();
}

}  // namespace memra::tokenizer::detail
