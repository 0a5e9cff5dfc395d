#include "host/server/http_framing.hpp"

#include <Poco/Exception.h>
#include <Poco/String.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <sstream>
#include <vector>

namespace memra::server {
namespace {

// Poco's own parser limits (private in its headers), checked first so they get a clear answer.
constexpr std::size_t kMaxFields = 100;
constexpr std::size_t kMaxMethod = 32;
constexpr std::size_t kMaxTarget = 16384;
constexpr std::size_t kMaxFieldName = 256;
constexpr std::size_t kMaxFieldValue = 8192;
constexpr std::size_t kMaxChunkLine = 4096;      // a size line with its extensions
constexpr std::uint64_t kMaxTrailerBytes = 8192;

FramingError bad(std::string code, std::string message) { return {400, std::move(code), std::move(message)}; }

bool is_tchar(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

// A field value may hold visible characters, spaces, tabs and obs-text, nothing else.
bool is_field_value(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c == '\t' || c >= 0x20 ? c != 0x7f : false;
  });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The lines of a header block without their line ends; false on a bare CR inside one.
bool split_lines(std::string_view head, std::vector<std::string_view>& lines) {
  while (!head.empty()) {
    const std::size_t nl = head.find('\n');
    std::string_view line = head.substr(0, nl);
    head.remove_prefix(nl == std::string_view::npos ? head.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\r') != std::string_view::npos) return false;
    if (line.empty()) break;  // the blank line that ends the block
    lines.push_back(line);
  }
  return true;
}

// Every value of a (case-insensitive) field, comma lists split, elements trimmed.
std::vector<std::string> list_values(const Poco::Net::HTTPRequest& request, const std::string& name) {
  std::vector<std::string> out;
  for (auto it = request.find(name); it != request.end() && Poco::icompare(it->first, name) == 0; ++it) {
    std::string_view v = it->second;
    while (true) {
      const std::size_t comma = v.find(',');
      const std::string_view item = trim(v.substr(0, comma));
      if (!item.empty()) out.emplace_back(item);
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
    if (trim(it->second).empty()) out.emplace_back();  // an empty value is not a length either
  }
  return out;
}

std::optional<std::uint64_t> parse_decimal(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
  return v;
}

}  // namespace

std::size_t leading_empty_lines(std::string_view buf) {
  std::size_t i = 0;
  while (i < buf.size()) {
    if (buf[i] == '\n') {
      ++i;
    } else if (buf[i] == '\r' && i + 1 < buf.size() && buf[i + 1] == '\n') {
      i += 2;
    } else {
      break;
    }
  }
  return i;
}

std::size_t find_head_end(std::string_view buf) {
  for (std::size_t i = buf.find('\n'); i != std::string_view::npos; i = buf.find('\n', i + 1)) {
    if (i + 1 < buf.size() && buf[i + 1] == '\n') return i + 2;
    if (i + 2 < buf.size() && buf[i + 1] == '\r' && buf[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

std::optional<FramingError> parse_head(std::string_view head, Poco::Net::HTTPRequest& out) {
  std::vector<std::string_view> lines;
  if (!split_lines(head, lines) || lines.empty())
    return bad("malformed_request", "the request head has a bare CR or no request line");
  // The request line: method SP target SP version, single spaces.
  const std::string_view line = lines.front();
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos || sp2 == sp1 + 1)
    return bad("malformed_request", "the request line is not 'METHOD TARGET HTTP/1.1'");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method) || method.size() > kMaxMethod)
    return bad("malformed_request", "the request method is not a token");
  if (target.size() > kMaxTarget)
    return FramingError{414, "uri_too_long", "the request target is over " +
                                                 std::to_string(kMaxTarget) + " bytes"};
  if (!is_field_value(target) || target.find_first_of(" \t") != std::string_view::npos)
    return bad("malformed_request", "the request target holds control characters");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    if (version.rfind("HTTP/", 0) == 0)
      return FramingError{505, "http_version_not_supported",
                          "HTTP version '" + std::string(version) + "' is not supported; use HTTP/1.1"};
    return bad("malformed_request", "the request line does not end in an HTTP version");
  }
  if (lines.size() - 1 > kMaxFields)
    return FramingError{431, "request_header_fields_too_large",
                        "the request has more than " + std::to_string(kMaxFields) + " header fields"};
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string_view field = lines[i];
    if (field.front() == ' ' || field.front() == '\t')
      return bad("malformed_request", "a header field is folded over lines (obsolete line folding is refused)");
    const std::size_t colon = field.find(':');
    if (colon == std::string_view::npos || !is_token(field.substr(0, colon)))
      return bad("malformed_request", "header line " + std::to_string(i) + " is not 'Name: value' (a field name is a "
                                      "token, with no space before the colon)");
    if (colon > kMaxFieldName || trim(field.substr(colon + 1)).size() > kMaxFieldValue)
      return FramingError{431, "request_header_fields_too_large",
                          "header field '" + std::string(field.substr(0, std::min<std::size_t>(colon, 64))) +
                              "' is over the size limit"};
    if (!is_field_value(field.substr(colon + 1)))
      return bad("malformed_request", "header field '" + std::string(field.substr(0, colon)) +
                                          "' holds control characters");
  }
  try {
    std::istringstream in{std::string(head)};
    out.read(in);
  } catch (const Poco::Exception& e) {
    return bad("malformed_request", "the request head cannot be parsed: " + e.displayText());
  }
  return std::nullopt;
}

FramingResult body_framing(const Poco::Net::HTTPRequest& request) {
  FramingResult r;
  const std::vector<std::string> lengths = list_values(request, "Content-Length");
  const std::vector<std::string> codings = list_values(request, "Transfer-Encoding");
  const bool has_te = request.has("Transfer-Encoding");
  if (!lengths.empty() && has_te) {
    r.error = bad("conflicting_framing", "the request has both Content-Length and Transfer-Encoding; send one");
    return r;
  }
  if (has_te) {
    if (request.getVersion() == Poco::Net::HTTPMessage::HTTP_1_0) {
      r.error = bad("invalid_transfer_encoding", "Transfer-Encoding is not allowed in an HTTP/1.0 request");
      return r;
    }
    if (codings.size() != 1 || Poco::icompare(codings.front(), "chunked") != 0) {
      std::string list;
      for (const auto& c : codings) list += (list.empty() ? "" : ", ") + c;
      r.error = FramingError{501, "unsupported_transfer_encoding",
                             "Transfer-Encoding '" + list + "' is not supported; send the body with Content-Length "
                             "or 'Transfer-Encoding: chunked' alone"};
      return r;
    }
    r.framing.kind = BodyFraming::Kind::chunked;
    return r;
  }
  if (lengths.empty()) return r;
  std::optional<std::uint64_t> first;
  for (const std::string& text : lengths) {
    const auto value = parse_decimal(text);
    if (!value) {
      r.error = bad("invalid_content_length", "Content-Length '" + text + "' is not a decimal number of bytes");
      return r;
    }
    if (first && *first != *value) {
      r.error = bad("conflicting_content_length", "the request has Content-Length headers that disagree (" +
                                                      std::to_string(*first) + ", " + text + "); send one");
      return r;
    }
    first = value;
  }
  r.framing.kind = BodyFraming::Kind::length;
  r.framing.length = *first;
  return r;
}

std::size_t ChunkedDecoder::fail(std::string message, std::size_t consumed) {
  step_ = Step::error;
  error_ = std::move(message);
  return consumed;
}

std::size_t ChunkedDecoder::feed(std::string_view in, std::string& out, std::size_t limit) {
  std::size_t i = 0;
  while (i < in.size() && step_ == Step::need_more) {
    switch (state_) {
      case State::size_line:
      case State::trailer: {
        const std::size_t nl = in.find('\n', i);
        const std::size_t take = (nl == std::string_view::npos ? in.size() : nl + 1) - i;
        line_.append(in.substr(i, take));
        i += take;
        if (state_ == State::trailer) {
          trailer_bytes_ += take;
          if (trailer_bytes_ > kMaxTrailerBytes) return fail("the chunked body's trailer is over 8192 bytes", i);
        } else if (line_.size() > kMaxChunkLine) {
          return fail("a chunk-size line is over 4096 bytes", i);
        }
        if (nl == std::string_view::npos) break;
        if (line_.size() < 2 || line_[line_.size() - 2] != '\r') return fail("a chunk line does not end with CRLF", i);
        line_.resize(line_.size() - 2);
        if (state_ == State::trailer) {
          if (line_.empty()) {
            state_ = State::finished;
            step_ = Step::done;
          }
          line_.clear();
          break;
        }
        // chunk-size [ BWS ";" chunk-ext ]
        std::size_t digits = 0;
        std::uint64_t size = 0;
        while (digits < line_.size() && std::isxdigit(static_cast<unsigned char>(line_[digits]))) {
          if (digits == 16) return fail("a chunk size is over 16 hex digits", i);
          const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(line_[digits])));
          size = size * 16 + static_cast<std::uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
          ++digits;
        }
        const std::string_view rest = trim(std::string_view(line_).substr(digits));
        if (digits == 0 || (!rest.empty() && rest.front() != ';') || !is_field_value(rest))
          return fail("a chunk size is not a hexadecimal number", i);
        line_.clear();
        if (size == 0) {
          state_ = State::trailer;
        } else {
          remaining_ = size;
          declared_ = size > UINT64_MAX - declared_ ? UINT64_MAX : declared_ + size;
          state_ = State::data;
        }
        break;
      }
      case State::data: {
        const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, in.size() - i));
        const std::size_t room = out.size() < limit ? limit - out.size() : 0;
        const std::size_t keep = overflow_ > 0 ? 0 : std::min(take, room);
        out.append(in.substr(i, keep));
        overflow_ += take - keep;
        i += take;
        remaining_ -= take;
        if (remaining_ == 0) state_ = State::data_end;
        break;
      }
      case State::data_end: {
        line_ += in[i++];
        if (line_ == "\r") break;
        if (line_ != "\r\n") return fail("a chunk's data is not followed by CRLF (its size is wrong)", i);
        line_.clear();
        state_ = State::size_line;
        break;
      }
      case State::finished:
        return i;
    }
  }
  return i;
}

}  // namespace memra::server
