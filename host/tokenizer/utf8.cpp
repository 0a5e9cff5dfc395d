#include "host/tokenizer/utf8.hpp"

namespace memra::tokenizer::detail {

char32_t next_codepoint(std::string_view s, std::size_t& i) {
  auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = utf8_length(b);
  if (n == 1 || i + n > s.size()) {
    ++i;
    return b;
  }
  char32_t cp = n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

void Utf8StreamDecoder::feed(std::string_view bytes, std::string& out) {
  // Fast path: nothing held and plain ASCII.
  std::size_t i = 0;
  while (i < bytes.size()) {
    auto b = static_cast<unsigned char>(bytes[i]);
    if (needed_ == 0) {
      if (b < 0x80) {
        // copy the ASCII run at once
        std::size_t j = i + 1;
        while (j < bytes.size() && static_cast<unsigned char>(bytes[j]) < 0x80) ++j;
        out.append(bytes.data() + i, j - i);
        i = j;
        continue;
      }
      if (b >= 0xC2 && b <= 0xDF) {
        needed_ = 1;
      } else if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) lower_ = 0xA0;
        if (b == 0xED) upper_ = 0x9F;
        needed_ = 2;
      } else if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) lower_ = 0x90;
        if (b == 0xF4) upper_ = 0x8F;
        needed_ = 3;
      } else {
        out.append(kReplacementUtf8);
        ++i;
        continue;
      }
      held_.assign(1, static_cast<char>(b));
      ++i;
      continue;
    }
    if (b < lower_ || b > upper_) {
      // The held prefix is a maximal subpart: one U+FFFD, and the byte is processed again.
      reset();
      out.append(kReplacementUtf8);
      continue;
    }
    lower_ = 0x80;
    upper_ = 0xBF;
    held_.push_back(static_cast<char>(b));
    ++i;
    if (++seen_ == needed_) {
      out.append(held_);
      reset();
    }
  }
}

void Utf8StreamDecoder::flush(std::string& out) {
  if (needed_ != 0) {
    reset();
    out.append(kReplacementUtf8);
  }
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  Utf8StreamDecoder d;
  d.feed(s, out);
  d.flush(out);
  return out;
}

bool is_valid_utf8(std::string_view s) {
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    int need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      need = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      need = 2;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      need = 3;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + static_cast<std::size_t>(need) >= n) return false;
    for (int k = 1; k <= need; ++k) {
      auto c = static_cast<unsigned char>(s[i + k]);
      if (c < lo || c > hi) return false;
      lo = 0x80;
      hi = 0xBF;
    }
    i += need + 1;
  }
  return true;
}

}  // namespace memra::tokenizer::detail
