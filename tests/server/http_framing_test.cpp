// Request framing before routing (host/server/http_framing): where a head ends, what
// a head may hold, how its body is framed, and chunked decoding — fed whole and byte
// by byte, against the bytes that were encoded.
#include "host/server/http_framing.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace memra::server {
namespace {

std::optional<FramingError> head_of(const std::string& text, Poco::Net::HTTPRequest& out) {
  const std::size_t end = find_head_end(text);
  if (end == std::string::npos) return FramingError{0, "incomplete", ""};
  return parse_head(std::string_view(text).substr(0, end), out);
}

FramingResult framing_of(const std::string& fields, const std::string& version = "HTTP/1.1") {
  Poco::Net::HTTPRequest r;
  const auto bad = head_of("POST /v1/completions " + version + "\r\nHost: x\r\n" + fields + "\r\n", r);
  EXPECT_FALSE(bad) << bad->message;
  return body_framing(r);
}

TEST(HttpFraming, HeadEndsAtTheFirstEmptyLineFedByteByByte) {
  const std::string head = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string wire = head + "GET /ready HTTP/1.1\r\n\r\n";
  for (std::size_t n = 0; n < head.size(); ++n) EXPECT_EQ(find_head_end(wire.substr(0, n)), std::string::npos) << n;
  EXPECT_EQ(find_head_end(wire), head.size());
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\nHost: x\n\nrest"), 24u);  // bare LF line ends
  EXPECT_EQ(leading_empty_lines("\r\n\n\r\nGET"), 5u);
  EXPECT_EQ(leading_empty_lines("\rGET"), 0u);
}

TEST(HttpFraming, AWellFormedHeadParses) {
  Poco::Net::HTTPRequest r;
  ASSERT_FALSE(head_of("POST /v1/completions?x=1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       "X-Empty:\r\nAuthorization: Bearer k\t\r\n\r\n",
                       r));
  EXPECT_EQ(r.getMethod(), "POST");
  EXPECT_EQ(r.getURI(), "/v1/completions?x=1");
  EXPECT_EQ(r.getVersion(), "HTTP/1.1");
  EXPECT_EQ(r.getContentType(), "application/json");
  EXPECT_EQ(r.get("Authorization"), "Bearer k");
  ASSERT_FALSE(head_of("GET / HTTP/1.0\r\n\r\n", r));
  EXPECT_FALSE(r.getKeepAlive());
}

TEST(HttpFraming, AmbiguousOrMalformedHeadsAreRefused) {
  struct Case {
    std::string head;
    int status;
    std::string code;
  };
  const std::vector<Case> cases = {
      {"GET /health HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400, "malformed_request"},            // obs-fold
      {"POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\n", 400, "malformed_request"},         // space before colon
      {"POST / HTTP/1.1\r\nContent Length: 5\r\n\r\n", 400, "malformed_request"},          // space in the name
      {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400, "malformed_request"},
      {"GET / HTTP/1.1\r\nX: a\x01z\r\n\r\n", 400, "malformed_request"},                   // control character
      {"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400, "malformed_request"},                     // bare CR
      {"GET  / HTTP/1.1\r\n\r\n", 400, "malformed_request"},                               // two spaces
      {"GET /\r\n\r\n", 400, "malformed_request"},                                         // HTTP/0.9
      {"G(T / HTTP/1.1\r\n\r\n", 400, "malformed_request"},
      {"GET / HTTP/2.0\r\n\r\n", 505, "http_version_not_supported"},
      {"GET / FTP/1.1\r\n\r\n", 400, "malformed_request"},
      {"GET /" + std::string(17000, 'a') + " HTTP/1.1\r\n\r\n", 414, "uri_too_long"},
      {"GET / HTTP/1.1\r\nX: " + std::string(9000, 'a') + "\r\n\r\n", 431, "request_header_fields_too_large"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.head.substr(0, 60));
    Poco::Net::HTTPRequest r;
    const auto bad = head_of(c.head, r);
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, c.status) << bad->message;
    EXPECT_EQ(bad->code, c.code) << bad->message;
  }
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 101; ++i) many += "X-" + std::to_string(i) + ": y\r\n";
  Poco::Net::HTTPRequest r;
  const auto bad = head_of(many + "\r\n", r);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 431);
}

TEST(HttpFraming, OneClearBodyFramingOrA400) {
  EXPECT_EQ(framing_of("").framing.kind, BodyFraming::Kind::none);
  auto r = framing_of("Content-Length: 42\r\n");
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.framing.kind, BodyFraming::Kind::length);
  EXPECT_EQ(r.framing.length, 42u);
  // The same length repeated (two fields, or a list) is one length (RFC 9112 §6.3).
  for (const char* same : {"Content-Length: 7\r\nContent-Length: 7\r\n", "Content-Length: 7, 7\r\n"}) {
    r = framing_of(same);
    ASSERT_FALSE(r.error) << same;
    EXPECT_EQ(r.framing.length, 7u);
  }
  r = framing_of("Transfer-Encoding: chunked\r\n");
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.framing.kind, BodyFraming::Kind::chunked);
  r = framing_of("transfer-encoding: CHUNKED\r\n");
  EXPECT_EQ(r.framing.kind, BodyFraming::Kind::chunked);

  struct Case {
    std::string fields;
    int status;
    std::string code;
  };
  const std::vector<Case> cases = {
      {"Content-Length: abc\r\n", 400, "invalid_content_length"},
      {"Content-Length: -1\r\n", 400, "invalid_content_length"},
      {"Content-Length: +5\r\n", 400, "invalid_content_length"},
      {"Content-Length: 0x10\r\n", 400, "invalid_content_length"},
      {"Content-Length: 5 5\r\n", 400, "invalid_content_length"},
      {"Content-Length:\r\n", 400, "invalid_content_length"},
      {"Content-Length: 99999999999999999999\r\n", 400, "invalid_content_length"},
      {"Content-Length: 5\r\nContent-Length: 6\r\n", 400, "conflicting_content_length"},
      {"Content-Length: 5, 6\r\n", 400, "conflicting_content_length"},
      {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400, "conflicting_framing"},
      {"Transfer-Encoding: gzip, chunked\r\n", 501, "unsupported_transfer_encoding"},
      {"Transfer-Encoding: chunked, chunked\r\n", 501, "unsupported_transfer_encoding"},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", 501, "unsupported_transfer_encoding"},
      {"Transfer-Encoding: identity\r\n", 501, "unsupported_transfer_encoding"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fields);
    r = framing_of(c.fields);
    ASSERT_TRUE(r.error);
    EXPECT_EQ(r.error->status, c.status) << r.error->message;
    EXPECT_EQ(r.error->code, c.code) << r.error->message;
  }
  r = framing_of("Transfer-Encoding: chunked\r\n", "HTTP/1.0");
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->code, "invalid_transfer_encoding");
}

// Random data in random chunk sizes (with extensions and a trailer) decodes to itself,
// whether fed at once or a byte at a time, and leaves the next request's bytes alone.
TEST(HttpFraming, ChunkedBodiesDecodeToWhatWasEncoded) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::string data(std::uniform_int_distribution<int>(0, 5000)(rng), '\0');
    for (char& ch : data) ch = static_cast<char>(rng());
    std::string wire;
    for (std::size_t at = 0; at < data.size();) {
      const std::size_t n = std::min<std::size_t>(data.size() - at, std::uniform_int_distribution<int>(1, 700)(rng));
      char size[32];
      std::snprintf(size, sizeof size, trial % 2 ? "%zX" : "%zx", n);
      wire += size;
      if (trial % 3 == 0) wire += ";name=value";
      wire += "\r\n" + data.substr(at, n) + "\r\n";
      at += n;
    }
    wire += trial % 4 == 0 ? "0\r\nX-Trailer: t\r\n\r\n" : "0\r\n\r\n";
    const std::string next = "GET /health HTTP/1.1\r\n\r\n";

    ChunkedDecoder whole;
    std::string out;
    const std::size_t used = whole.feed(wire + next, out, 1 << 20);
    ASSERT_EQ(whole.step(), ChunkedDecoder::Step::done) << whole.error();
    EXPECT_EQ(used, wire.size());
    EXPECT_EQ(out, data);

    ChunkedDecoder bytewise;
    std::string out2;
    std::size_t fed = 0;
    for (; fed < wire.size() && bytewise.step() == ChunkedDecoder::Step::need_more; ++fed)
      ASSERT_EQ(bytewise.feed(std::string_view(wire).substr(fed, 1), out2, 1 << 20), 1u);
    EXPECT_EQ(fed, wire.size());
    EXPECT_EQ(bytewise.step(), ChunkedDecoder::Step::done);
    EXPECT_EQ(out2, data);
    EXPECT_EQ(bytewise.feed(next, out2, 1 << 20), 0u);
  }
}

TEST(HttpFraming, ChunkedBodiesPastTheLimitAreCountedNotKept) {
  ChunkedDecoder d;
  std::string out;
  d.feed("a\r\n0123456789\r\n5\r\nabcde\r\n0\r\n\r\n", out, 12);
  EXPECT_EQ(d.step(), ChunkedDecoder::Step::done);
  EXPECT_EQ(out, "0123456789ab");
  EXPECT_EQ(d.overflow(), 3u);
}

TEST(HttpFraming, MalformedChunksAreRefused) {
  for (const std::string& bad : std::vector<std::string>{"zz\r\n", "5\r\nabcdef\r\n", "5\nabcde\r\n", "5\r\nabcde\n0\r\n\r\n",
                                "12345678901234567\r\n", "5 x\r\nabcde\r\n", "\r\n",
                                "0\r\n" + std::string(9000, 'a') + "\r\n\r\n"}) {
    SCOPED_TRACE(bad.substr(0, 30));
    ChunkedDecoder d;
    std::string out;
    d.feed(bad, out, 1 << 20);
    EXPECT_EQ(d.step(), ChunkedDecoder::Step::error);
    EXPECT_FALSE(d.error().empty());
  }
  ChunkedDecoder line;
  std::string out;
  line.feed("5" + std::string(5000, ' '), out, 100);  // a size line that never ends
  EXPECT_EQ(line.step(), ChunkedDecoder::Step::error);
}

}  // namespace
}  // namespace memra::server
