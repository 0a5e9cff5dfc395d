#include "host/server/stop_matcher.hpp"

#include <algorithm>

namespace memra::server {

StopScan scan_stops(std::string_view text, std::size_t from, const std::vector<std::string>& stops) {
  StopScan scan;
  scan.safe_end = text.size();
  if (from > text.size()) from = text.size();
  for (const auto& stop : stops) {
    if (stop.empty()) continue;
    const auto at = text.find(stop, from);
    if (at != std::string_view::npos && (!scan.stop_at || at < *scan.stop_at)) scan.stop_at = at;
  }
  if (scan.stop_at) {
    scan.safe_end = *scan.stop_at;
    return scan;
  }
  // Hold back the longest tail of text[from, end) that is a proper prefix of a stop string.
  const std::string_view tail = text.substr(from);
  std::size_t hold = 0;
  for (const auto& stop : stops) {
    const std::size_t longest = std::min(tail.size(), stop.size() - 1);
    for (std::size_t k = longest; k > hold; --k) {
      if (tail.substr(tail.size() - k) == std::string_view(stop).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  scan.safe_end = text.size() - hold;
  return scan;
}

}  // namespace memra::server
