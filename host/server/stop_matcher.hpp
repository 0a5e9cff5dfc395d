// Stop strings over streamed text. The text a stop string would cut must never
// reach the client, so while generating, the longest tail of the text that
// could still become a stop string is held back; once a stop string appears,
// the output ends right before it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memra::server {

struct StopScan {
  std::optional<std::size_t> stop_at;  // where the earliest stop string starts (>= from), if any
  std::size_t safe_end = 0;            // text[from, safe_end) can be released: no stop can start there
};

// `from`: the first byte not yet released (no stop string can start before it).
StopScan scan_stops(std::string_view text, std::size_t from, const std::vector<std::string>& stops);

}  // namespace memra::server
