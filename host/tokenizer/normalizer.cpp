#include "host/tokenizer/normalizer.hpp"

#include <unicode/bytestream.h>
#include <unicode/casemap.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include "host/tokenizer/unicode_props.hpp"
#include "host/tokenizer/utf8.hpp"

namespace memra::tokenizer::detail {

bool is_numeric(char32_t c) {
  auto t = u_charType(static_cast<UChar32>(c));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  auto u = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL)) return true;
  auto m = U_GET_GC_MASK(u);
  return (m & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

namespace {

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
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

}  // namespace

Result<Normalizer> Normalizer::create(const std::vector<NormalizerStep>& steps) {
  Normalizer n;
  for (const auto& s : steps) {
    Step step{s, nullptr, nullptr};
    UErrorCode err = U_ZERO_ERROR;
    switch (s.kind) {
      case NormalizerStep::Kind::nfc: step.icu = icu::Normalizer2::getNFCInstance(err); break;
      case NormalizerStep::Kind::nfd: step.icu = icu::Normalizer2::getNFDInstance(err); break;
      case NormalizerStep::Kind::nfkc: step.icu = icu::Normalizer2::getNFKCInstance(err); break;
      case NormalizerStep::Kind::nfkd: step.icu = icu::Normalizer2::getNFKDInstance(err); break;
      case NormalizerStep::Kind::replace:
        if (s.pattern.is_regex) {
          auto re = Regex::compile_hf(s.pattern.text);
          if (!re) return re.error();
          step.regex = *re;
        }
        break;
      default: break;
    }
    if (U_FAILURE(err))
      return make_error(ErrorCode::internal, std::string("ICU normalizer unavailable: ") + u_errorName(err) +
                                                 "; check the libicu installation");
    n.steps_.push_back(std::move(step));
  }
  return n;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string cur(text);
  for (const auto& step : steps_) {
    switch (step.spec.kind) {
      case NormalizerStep::Kind::nfc:
      case NormalizerStep::Kind::nfd:
      case NormalizerStep::Kind::nfkc:
      case NormalizerStep::Kind::nfkd: {
        if (is_ascii(cur)) break;  // every form leaves ASCII unchanged
        auto* norm = static_cast<const icu::Normalizer2*>(step.icu);
        UErrorCode err = U_ZERO_ERROR;
        if (norm->isNormalizedUTF8(cur, err) && U_SUCCESS(err)) break;
        err = U_ZERO_ERROR;
        std::string out;
        icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(cur.size()));
        norm->normalizeUTF8(0, cur, sink, nullptr, err);
        if (U_SUCCESS(err)) cur = std::move(out);
        break;
      }
      case NormalizerStep::Kind::lowercase: {
        std::string out;
        icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(cur.size()));
        UErrorCode err = U_ZERO_ERROR;
        icu::CaseMap::utf8ToLower("", 0, cur, sink, nullptr, err);
        if (U_SUCCESS(err)) cur = std::move(out);
        break;
      }
      case NormalizerStep::Kind::replace: {
        if (!step.regex) {
          cur = replace_all(cur, step.spec.pattern.text, step.spec.content);
          break;
        }
        std::string out;
        std::size_t pos = 0, b = 0, e = 0;
        while (pos <= cur.size() && step.regex->find(cur, pos, b, e)) {
          out.append(cur, pos, b - pos);
          out.append(step.spec.content);
          if (e == b) {  // empty match: copy one character and move on
            if (b >= cur.size()) {
              pos = cur.size() + 1;
              break;
            }
            std::size_t n = utf8_length(static_cast<unsigned char>(cur[b]));
            out.append(cur, b, n);
            pos = b + n;
          } else {
            pos = e;
          }
        }
        if (pos < cur.size()) out.append(cur, pos, std::string::npos);
        cur = std::move(out);
        break;
      }
      case NormalizerStep::Kind::prepend:
        if (!cur.empty()) cur.insert(0, step.spec.content);
        break;
      case NormalizerStep::Kind::strip: {
        std::size_t begin = 0, end = cur.size();
        if (step.spec.strip_left) {
          while (begin < end) {
            std::size_t i = begin;
            if (!is_white_space(next_codepoint(cur, i))) break;
            begin = i;
          }
        }
        if (step.spec.strip_right) {
          while (end > begin) {
            std::size_t j = end - 1;
            while (j > begin && (static_cast<unsigned char>(cur[j]) & 0xC0) == 0x80) --j;
            std::size_t i = j;
            if (!is_white_space(next_codepoint(cur, i))) break;
            end = j;
          }
        }
        cur = cur.substr(begin, end - begin);
        break;
      }
    }
  }
  return cur;
}

}  // namespace memra::tokenizer::detail
