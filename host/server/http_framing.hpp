// Where one HTTP/1.1 request ends on the wire (RFC 9112), decided before any route
// sees it: the header block (Poco's parser, after a strict scan of the raw lines),
// the body's framing (one Content-Length, or chunked, never both or an ambiguous
// mix), and an incremental chunked decoder. Pure functions over bytes, so the
// connection loop (http_frontend.cpp) can read without blocking and tests can feed
// requests byte by byte.
#pragma once

#include <Poco/Net/HTTPRequest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace memra::server {

// A request the server refuses before routing: status (400, 408, 413, 431, 501,
// 505), an error code and what was wrong.
struct FramingError {
  int status = 400;
  std::string code;
  std::string message;
};

// Bytes of leading empty lines (CRLF or LF) at the start of `buf`: RFC 9112 §2.2 lets a
// server skip them before a request line (clients send a stray CRLF after a body).
std::size_t leading_empty_lines(std::string_view buf);

// The length of the header block (request line, fields and the empty line) at the
// start of `buf`, or npos while it is incomplete. Ends at CRLF CRLF or LF LF.
std::size_t find_head_end(std::string_view buf);

// Parses a complete header block into `out`. Refuses what Poco's parser would take
// ambiguously: folded lines (obs-fold), a field name with spaces or other non-token
// characters ("Content-Length : 5"), control characters in values, and versions
// other than HTTP/1.0 and HTTP/1.1.
std::optional<FramingError> parse_head(std::string_view head, Poco::Net::HTTPRequest& out);

struct BodyFraming {
  enum class Kind { none, length, chunked };
  Kind kind = Kind::none;
  std::uint64_t length = 0;  // Kind::length
};

// The body's framing (RFC 9112 §6.3). Errors: Content-Length and Transfer-Encoding
// together, Content-Length values that disagree or are not a plain decimal number,
// a transfer coding other than exactly "chunked", Transfer-Encoding on HTTP/1.0.
struct FramingResult {
  BodyFraming framing;
  std::optional<FramingError> error;
};
FramingResult body_framing(const Poco::Net::HTTPRequest& request);

// Decodes a chunked body as its bytes arrive. Strict: chunk-size lines and the
// CRLF after each chunk's data must be exact; chunk extensions and trailer fields
// are skipped (bounded in size).
class ChunkedDecoder {
 public:
  enum class Step { need_more, done, error };

  // Consumes from the front of `in` and returns how many bytes it took. Data goes
  // to `out` while out.size() stays within `limit`; past it the data is dropped and
  // counted in overflow() (the caller answers 413 once the body ends or its discard
  // budget is spent).
  std::size_t feed(std::string_view in, std::string& out, std::size_t limit);
  Step step() const { return step_; }
  std::uint64_t overflow() const { return overflow_; }
  // The data bytes the chunk-size lines so far announce (the current chunk's included):
  // the caller can refuse a body past its limit before the data arrives.
  std::uint64_t declared() const { return declared_; }
  const std::string& error() const { return error_; }

 private:
  enum class State { size_line, data, data_end, trailer, finished };
  std::size_t fail(std::string message, std::size_t consumed);

  State state_ = State::size_line;
  Step step_ = Step::need_more;
  std::string line_;             // the current size or trailer line so far
  std::uint64_t remaining_ = 0;  // data bytes left in the current chunk
  std::uint64_t trailer_bytes_ = 0;
  std::uint64_t overflow_ = 0;
  std::uint64_t declared_ = 0;
  std::string error_;
};

}  // namespace memra::server
