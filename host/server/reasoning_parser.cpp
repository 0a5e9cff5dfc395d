#include "host/server/reasoning_parser.hpp"

#include <algorithm>

namespace memra::server {
namespace {

// The length of the longest suffix of `text` that is a proper prefix of `marker`.
std::size_t partial_suffix(std::string_view text, std::string_view marker) {
  for (std::size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

bool only_ws(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

}  // namespace

std::optional<ReasoningMarkers> reasoning_markers(std::string_view source) {
  if (source.find("[THINK]") != std::string_view::npos) return ReasoningMarkers{"[THINK]", "[/THINK]"};
  if (source.find("<think>") != std::string_view::npos || source.find("</think>") != std::string_view::npos)
    return ReasoningMarkers{"<think>", "</think>"};
  return std::nullopt;
}

bool prompt_opens_reasoning(std::string_view prompt, const ReasoningMarkers& m) {
  const auto end = prompt.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return false;
  const std::string_view body = prompt.substr(0, end + 1);
  return body.size() >= m.open.size() && body.substr(body.size() - m.open.size()) == m.open;
}

bool prompt_closes_reasoning(std::string_view prompt, const ReasoningMarkers& m) {
  const auto end = prompt.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return false;
  const std::string_view body = prompt.substr(0, end + 1);
  return body.size() >= m.close.size() && body.substr(body.size() - m.close.size()) == m.close;
}

ReasoningSplitter::ReasoningSplitter(ReasoningMarkers markers, bool starts_inside)
    : state_(starts_inside ? State::reasoning : State::before), m_(std::move(markers)) {
  reasoning_started_ = starts_inside;
}

ReasoningSplitter::Split ReasoningSplitter::push(std::string_view text) {
  Split out;
  held_.append(text);
  fed_ += text.size();
  while (true) {
    if (state_ == State::before) {
      // Leading whitespace, then either the open marker or the answer itself.
      const std::size_t start = held_.find_first_not_of(" \t\r\n");
      if (start == std::string::npos) return out;
      const std::string_view rest = std::string_view(held_).substr(start);
      if (rest.size() < m_.open.size() && m_.open.compare(0, rest.size(), rest) == 0) return out;  // maybe the marker
      if (rest.substr(0, m_.open.size()) == m_.open) {
        held_.erase(0, start + m_.open.size());
        state_ = State::reasoning;
        reasoning_started_ = true;
        reasoning_end_ = fed_ - held_.size();
        continue;
      }
      state_ = State::content;
      continue;
    }
    if (state_ == State::reasoning) {
      const std::size_t close = held_.find(m_.close);
      const bool closed = close != std::string::npos;
      const std::size_t take = closed ? close : held_.size() - partial_suffix(held_, m_.close);
      std::string body = pending_newlines_ + held_.substr(0, take);
      pending_newlines_.clear();
      if (emitted_ == 0) body.erase(0, std::min(body.find_first_not_of("\r\n"), body.size()));
      // Trailing newlines wait: they are dropped if the close marker follows.
      const std::size_t last = body.find_last_not_of("\r\n");
      if (!closed) pending_newlines_ = last == std::string::npos ? body : body.substr(last + 1);
      body.resize(last == std::string::npos ? 0 : last + 1);
      out.reasoning += body;
      emitted_ += body.size();
      held_.erase(0, closed ? close + m_.close.size() : take);
      reasoning_end_ = fed_ - (closed ? held_.size() : 0);
      if (!closed) return out;
      state_ = State::content;
      strip_content_ws_ = true;
      continue;
    }
    // content
    if (strip_content_ws_) {
      const std::size_t start = held_.find_first_not_of(" \t\r\n");
      if (start == std::string::npos) {
        held_.clear();
        return out;
      }
      held_.erase(0, start);
      strip_content_ws_ = false;
    }
    out.content += held_;
    held_.clear();
    return out;
  }
}

ReasoningSplitter::Split ReasoningSplitter::finish() {
  Split out;
  if (state_ == State::reasoning) {
    std::string body = pending_newlines_ + held_;
    while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
    if (emitted_ == 0) body.erase(0, std::min(body.find_first_not_of("\r\n"), body.size()));
    out.reasoning = std::move(body);
    reasoning_end_ = fed_;
  } else if (state_ == State::before) {
    if (!only_ws(held_)) out.content = held_;
  } else if (!strip_content_ws_) {
    out.content = held_;
  }
  held_.clear();
  pending_newlines_.clear();
  return out;
}

}  // namespace memra::server
