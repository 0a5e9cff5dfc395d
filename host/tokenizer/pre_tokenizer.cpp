#include "host/tokenizer/pre_tokenizer.hpp"

#include "host/tokenizer/unicode_props.hpp"
#include "host/tokenizer/utf8.hpp"

namespace memra::tokenizer::detail {
namespace {

// The GPT-2 pattern the ByteLevel pre-tokenizer uses when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Span {
  std::size_t begin, end;
  bool is_match;
};

// Applies a split behaviour to the (match / non-match) spans covering a piece (Hugging Face
// NormalizedString::split), passing the non-empty resulting pieces to `emit`.
template <class Emit>
void split_by_behavior(const PreToken& in, std::vector<Span>& spans, SplitBehavior behavior, bool invert,
                       const Emit& emit) {
  if (invert)
    for (auto& s : spans) s.is_match = !s.is_match;
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  switch (behavior) {
    case SplitBehavior::removed:
      for (const auto& s : spans)
        if (!s.is_match) pieces.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::isolated:
      for (const auto& s : spans) pieces.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::merged_with_previous: {
      bool prev_match = false;
      for (const auto& s : spans) {
        if (s.is_match && !prev_match && !pieces.empty()) pieces.back().second = s.end;
        else pieces.emplace_back(s.begin, s.end);
        prev_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::merged_with_next: {
      bool prev_match = false;
      std::vector<std::pair<std::size_t, std::size_t>> rev;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !prev_match && !rev.empty()) rev.back().first = it->begin;
        else rev.emplace_back(it->begin, it->end);
        prev_match = it->is_match;
      }
      pieces.assign(rev.rbegin(), rev.rend());
      break;
    }
    case SplitBehavior::contiguous: {
      bool prev_match = false;
      bool first = true;
      for (const auto& s : spans) {
        if (!first && s.is_match == prev_match) pieces.back().second = s.end;
        else pieces.emplace_back(s.begin, s.end);
        prev_match = s.is_match;
        first = false;
      }
      break;
    }
  }
  for (auto [b, e] : pieces) {
    if (b == e) continue;
    emit(PreToken{in.text.substr(b, e - b), in.at_start && b == 0});
  }
}

// Isolated / Removed splitting by a regex, streamed: each piece is emitted as soon as it is matched.
template <class Emit>
void regex_split_streaming(const Regex& re, const PreToken& in, bool keep_matches, const Emit& emit) {
  std::string_view text = in.text;
  std::size_t prev = 0, pos = 0, b = 0, e = 0;
  auto piece = [&](std::size_t from, std::size_t to) {
    if (from != to) emit(PreToken{text.substr(from, to - from), in.at_start && from == 0});
  };
  while (pos <= text.size() && re.find(text, pos, b, e)) {
    piece(prev, b);
    if (keep_matches) piece(b, e);
    prev = e;
    if (e == b) {
      if (b >= text.size()) break;
      pos = b + utf8_length(static_cast<unsigned char>(text[b]));
    } else {
      pos = e;
    }
  }
  piece(prev, text.size());
}

// Match / non-match spans of a regex over `text`.
void regex_spans(const Regex& re, std::string_view text, std::vector<Span>& spans) {
  spans.clear();
  std::size_t prev = 0, pos = 0, b = 0, e = 0;
  while (pos <= text.size() && re.find(text, pos, b, e)) {
    if (prev != b) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
    if (e == b) {
      if (b >= text.size()) break;
      pos = b + utf8_length(static_cast<unsigned char>(text[b]));
    } else {
      pos = e;
    }
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
}

// Spans where each character for which `pred` holds is a one-character match.
template <class Pred>
void char_spans(std::string_view text, Pred pred, std::vector<Span>& spans) {
  spans.clear();
  std::size_t prev = 0, i = 0;
  while (i < text.size()) {
    std::size_t start = i;
    char32_t c = next_codepoint(text, i);
    if (pred(c)) {
      if (prev != start) spans.push_back({prev, start, false});
      spans.push_back({start, i, true});
      prev = i;
    }
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
}

}  // namespace

Result<PreTokenizer> PreTokenizer::create(const std::vector<PreTokenizerStep>& steps) {
  PreTokenizer pt;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    Step step{s, nullptr};
    if (s.kind == PreTokenizerStep::Kind::whitespace_split ||
        (s.kind == PreTokenizerStep::Kind::split && s.behavior == SplitBehavior::removed))
      pt.drops_text_ = true;
    if (s.kind == PreTokenizerStep::Kind::split) {
      auto re = s.pattern.is_regex ? Regex::compile_hf(s.pattern.text) : Regex::compile(quote_literal(s.pattern.text));
      if (!re) return re.error();
      step.regex = *re;
    } else if (s.kind == PreTokenizerStep::Kind::byte_level) {
      if (i + 1 != steps.size())
        return make_error(ErrorCode::unsupported,
                          "tokenizer: a ByteLevel pre-tokenizer followed by other pre-tokenizers is not supported");
      pt.byte_level_ = true;
      if (s.use_regex) {
        auto re = Regex::compile_hf(kGpt2Pattern);
        if (!re) return re.error();
        step.regex = *re;
      }
    }
    pt.steps_.push_back(std::move(step));
  }
  return pt;
}

void PreTokenizer::run(std::string_view text, bool at_start, const Sink& sink) const {
  apply(0, PreToken{text, at_start}, sink);
}

void PreTokenizer::apply(std::size_t index, const PreToken& in, const Sink& sink) const {
  if (index == steps_.size()) {
    if (!in.text.empty()) sink(in.text);
    return;
  }
  const Step& step = steps_[index];
  const auto& s = step.spec;
  auto next = [&](const PreToken& piece) { apply(index + 1, piece, sink); };
  std::vector<Span> spans;
  switch (s.kind) {
    case PreTokenizerStep::Kind::split:
      if (!s.invert && (s.behavior == SplitBehavior::isolated || s.behavior == SplitBehavior::removed)) {
        regex_split_streaming(*step.regex, in, s.behavior == SplitBehavior::isolated, next);
        return;
      }
      regex_spans(*step.regex, in.text, spans);
      split_by_behavior(in, spans, s.behavior, s.invert, next);
      return;
    case PreTokenizerStep::Kind::byte_level: {
      if (s.add_prefix_space && (in.text.empty() || in.text.front() != ' ')) {
        std::string prefixed = " " + std::string(in.text);
        PreToken piece{prefixed, in.at_start};
        if (step.regex) regex_split_streaming(*step.regex, piece, true, next);
        else next(piece);
        return;
      }
      if (step.regex) regex_split_streaming(*step.regex, in, true, next);
      else next(in);
      return;
    }
    case PreTokenizerStep::Kind::metaspace: {
      std::string t;
      t.reserve(in.text.size() + 8);
      for (char c : in.text) {
        if (c == ' ') t += s.replacement;
        else t += c;
      }
      bool starts_with_rep = t.compare(0, s.replacement.size(), s.replacement) == 0;
      if (!starts_with_rep && (s.prepend_scheme == PrependScheme::always ||
                               (s.prepend_scheme == PrependScheme::first && in.at_start)))
        t.insert(0, s.replacement);
      PreToken piece{t, in.at_start};
      if (!s.split) {
        next(piece);
        return;
      }
      // split on the replacement, MergedWithNext
      std::size_t prev = 0, pos = 0;
      std::string_view txt = piece.text;
      while ((pos = txt.find(s.replacement, pos)) != std::string_view::npos) {
        if (prev != pos) spans.push_back({prev, pos, false});
        spans.push_back({pos, pos + s.replacement.size(), true});
        pos += s.replacement.size();
        prev = pos;
      }
      if (prev != txt.size()) spans.push_back({prev, txt.size(), false});
      split_by_behavior(piece, spans, SplitBehavior::merged_with_next, false, next);
      return;
    }
    case PreTokenizerStep::Kind::digits:
      char_spans(in.text, [](char32_t c) { return is_numeric(c); }, spans);
      split_by_behavior(in, spans, s.individual_digits ? SplitBehavior::isolated : SplitBehavior::contiguous, false,
                        next);
      return;
    case PreTokenizerStep::Kind::whitespace_split:
      char_spans(in.text, [](char32_t c) { return is_white_space(c); }, spans);
      split_by_behavior(in, spans, SplitBehavior::removed, false, next);
      return;
  }
}

}  // namespace memra::tokenizer::detail
