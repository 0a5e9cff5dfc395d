// libFuzzer target: jsonio::parse (every JSON text a client sends) on arbitrary bytes.
// Oracle: nlohmann's own parse. Whatever jsonio accepts, nlohmann accepts to the same
// document; whatever nlohmann accepts within the limits, jsonio accepts. A depth the
// limits refuse is never handed to a consumer (dump, copy, compare run on what it returns).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "host/json/bounded_parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ojson = nlohmann::ordered_json;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  memra::jsonio::Limits limits;
  limits.max_depth = 16;  // small limits, so inputs of a few KB reach them
  limits.max_object_keys = 64;
  limits.max_array_items = 256;
  limits.max_memory_bytes = 1 << 20;
  memra::jsonio::ParseError error;
  const auto got = memra::jsonio::parse(text, limits, &error);
  const ojson want = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (got) {
    if (want.is_discarded() || *got != want || got->dump() != want.dump()) std::abort();
    ojson copy = *got;  // consumers copy, compare and dump what the parse returns
    (void)copy.dump(2);
  } else if (error.kind == memra::jsonio::ParseError::Kind::syntax) {
    if (!want.is_discarded()) std::abort();  // a syntax error nlohmann does not see
    if (error.message.empty()) std::abort();
  } else if (error.message.empty()) {
    std::abort();  // a limit (the text may be invalid further on: the parse stopped first)
  }
  return 0;
}
