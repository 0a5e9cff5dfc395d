// Reads a request body under a size limit without trusting the client: a
// declared Content-Length over the limit is refused before any byte is read,
// and a chunked body is cut off as soon as it passes the limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <optional>
#include <string>

namespace memra::server {

struct BodyRead {
  enum class Kind { ok, too_large, read_error };
  Kind kind = Kind::ok;
  std::string body;
  std::string detail;          // for too_large / read_error: what happened
  bool fully_consumed = true;  // false: unread body bytes remain on the connection
};

// `content_length`: the declared length, if any. `chunked`: Transfer-Encoding:
// chunked. A request with neither has an empty body (RFC 9112 §6.3).
// After an oversized chunked body, up to `discard_budget` further bytes are read
// and dropped so a client that is still sending can read the 413.
BodyRead read_body(std::istream& in, std::optional<std::uint64_t> content_length, bool chunked,
                   std::size_t max_bytes, std::size_t discard_budget = 1 << 20);

}  // namespace memra::server
