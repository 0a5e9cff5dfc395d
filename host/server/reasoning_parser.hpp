// Splits a chat answer's text into the model's thinking and its answer, as the text
// streams: `<think>…</think>` (Qwen3, DeepSeek-R1, QwQ, GLM and most open reasoning
// models) or `[THINK]…[/THINK]` (Magistral). The thinking never reaches `content`:
// text that could be the start of a marker is held back until it cannot be.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace memra::server {

struct ReasoningMarkers {
  std::string open, close;
};

// The markers a chat template's model thinks in (found in the template's text), or
// nullopt for a model that does not reason.
std::optional<ReasoningMarkers> reasoning_markers(std::string_view template_source);
// Whether a rendered prompt leaves the model inside its thinking (it ends with the open
// marker, as DeepSeek-R1's and Qwen3-Thinking-2507's templates write it).
bool prompt_opens_reasoning(std::string_view prompt, const ReasoningMarkers& markers);
// Whether a rendered prompt ends with the thinking closed (the empty block a template writes
// for enable_thinking false): the model answers at once.
bool prompt_closes_reasoning(std::string_view prompt, const ReasoningMarkers& markers);

class ReasoningSplitter {
 public:
  ReasoningSplitter(ReasoningMarkers markers, bool starts_inside);
  struct Split {
    std::string reasoning, content;
  };
  // The next released text of the answer; returns what is now safe to hand out.
  Split push(std::string_view text);
  // The end of the answer: whatever was held back.
  Split finish();
  // Bytes of the fed text up to the end of the close marker (the whole text while the
  // thinking is still open); 0 when the answer did not think.
  std::size_t reasoning_bytes() const { return reasoning_end_; }

 private:
  enum class State { before, reasoning, content } state_;
  ReasoningMarkers m_;
  std::string held_;             // undecided bytes
  std::string pending_newlines_;  // reasoning's trailing newlines, dropped before the close marker
  bool reasoning_started_ = false;
  std::size_t emitted_ = 0;  // reasoning bytes handed out
  std::size_t fed_ = 0, reasoning_end_ = 0;
  bool strip_content_ws_ = false;  // just after the close marker
};

}  // namespace memra::server
