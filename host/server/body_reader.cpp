#include "host/server/body_reader.hpp"

#include <array>

namespace memra::server {
namespace {

constexpr std::size_t kChunk = 64 * 1024;

// Reads and drops up to `budget` bytes; true when the stream ended within it.
bool discard(std::istream& in, std::size_t budget) {
  std::array<char, kChunk> scratch{};
  std::size_t dropped = 0;
  while (dropped <= budget) {
    in.read(scratch.data(), static_cast<std::streamsize>(scratch.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    dropped += got;
    if (!in) return !in.bad();
  }
  return false;
}

}  // namespace

BodyRead read_body(std::istream& in, std::optional<std::uint64_t> content_length, bool chunked,
                   std::size_t max_bytes, std::size_t discard_budget) {
  BodyRead out;
  if (content_length && !chunked) {
    if (*content_length > max_bytes) {
      out.kind = BodyRead::Kind::too_large;
      out.detail = "declares Content-Length " + std::to_string(*content_length) + ", over";
      out.fully_consumed = *content_length == 0;
      return out;
    }
    const auto size = static_cast<std::size_t>(*content_length);
    out.body.resize(size);
    in.read(out.body.data(), static_cast<std::streamsize>(size));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got != size || in.bad()) {
      out.kind = BodyRead::Kind::read_error;
      out.detail = "the body ended after " + std::to_string(got) + " of the " + std::to_string(size) +
                   " bytes that Content-Length declares";
      out.fully_consumed = false;
      out.body.clear();
    }
    return out;
  }
  if (!chunked) return out;  // no Content-Length, not chunked: empty body

  std::array<char, kChunk> buffer{};
  while (true) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (out.body.size() + got > max_bytes) {
      out.kind = BodyRead::Kind::too_large;
      out.detail = "(chunked) goes past";
      out.body.clear();
      out.fully_consumed = discard(in, discard_budget);
      return out;
    }
    out.body.append(buffer.data(), got);
    if (in.bad()) {
      out.kind = BodyRead::Kind::read_error;
      out.detail = "the chunked body is malformed or the connection broke after " +
                   std::to_string(out.body.size()) + " bytes";
      out.fully_consumed = false;
      out.body.clear();
      return out;
    }
    if (!in) return out;  // eof: the last chunk was read
  }
}

}  // namespace memra::server
