// Stop strings over streamed text, against std::string::find on the text seen so
// far as the oracle: what is released, chunk by chunk, is exactly the text
// before the stop string that ends generation, and never a byte of it or past it.
#include "host/server/stop_matcher.hpp"

#include <gtest/gtest.h>

#include <random>

namespace memra::server {
namespace {

// Feeds `text` in chunks of `sizes`, releasing what scan_stops allows; returns the output.
std::string stream(const std::string& text, const std::vector<std::size_t>& sizes, const std::vector<std::string>& stops,
                   bool* stopped) {
  std::string seen, out;
  std::size_t released = 0, at = 0;
  *stopped = false;
  for (std::size_t k = 0; at < text.size(); ++k) {
    seen += text.substr(at, sizes[k % sizes.size()]);
    at += sizes[k % sizes.size()];
    const bool last = at >= text.size();
    const StopScan scan = scan_stops(seen, released, stops);
    std::size_t to = last ? seen.size() : scan.safe_end;
    if (scan.stop_at) {
      to = *scan.stop_at;
      *stopped = true;
    }
    EXPECT_GE(to, released);
    out += seen.substr(released, to - released);
    released = to;
    if (*stopped) break;
  }
  return out;
}

// Generation stops at the first chunk boundary where the text so far holds a
// stop string; the answer is what precedes the earliest one in it.
std::string oracle(const std::string& text, const std::vector<std::size_t>& sizes,
                   const std::vector<std::string>& stops, bool* stopped) {
  std::size_t end = 0;
  for (std::size_t k = 0; end < text.size(); ++k) {
    end = std::min(text.size(), end + sizes[k % sizes.size()]);
    const std::string seen = text.substr(0, end);
    std::size_t first = std::string::npos;
    for (const auto& s : stops) first = std::min(first, seen.find(s));
    if (first != std::string::npos) {
      *stopped = true;
      return text.substr(0, first);
    }
  }
  *stopped = false;
  return text;
}

TEST(ServerStops, Examples) {
  bool stopped = false;
  EXPECT_EQ(stream("Hello world. Bye", {1}, {"."}, &stopped), "Hello world");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(stream("abcabd", {1}, {"abd"}, &stopped), "abc");
  EXPECT_EQ(stream("no stop here", {3}, {"xyz", "q"}, &stopped), "no stop here");
  EXPECT_FALSE(stopped);
  // A tail that could start a stop string is held back, then released when it cannot.
  const StopScan held = scan_stops("the end</", 0, {"</s>"});
  EXPECT_FALSE(held.stop_at);
  EXPECT_EQ(held.safe_end, 7u);
  const StopScan free = scan_stops("the end</x", 0, {"</s>"});
  EXPECT_EQ(free.safe_end, 10u);
  // A stop string is only searched from the first unreleased byte.
  EXPECT_FALSE(scan_stops("ab.cd", 3, {"."}).stop_at);
  // The earliest of several wins.
  EXPECT_EQ(scan_stops("xxBBxAA", 0, {"AA", "BB"}).stop_at.value_or(99), 2u);
  // Multi-byte UTF-8 stop.
  EXPECT_EQ(stream("café au lait", {1}, {"é"}, &stopped), "caf");
}

TEST(ServerStops, RandomTextsMatchTheOracle) {
  std::mt19937 rng(1234);
  const std::string alphabet = "ab.\n";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text;
    const int len = static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    std::vector<std::string> stops;
    const int count = 1 + static_cast<int>(rng() % 4);
    for (int s = 0; s < count; ++s) {
      std::string stop;
      const int slen = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < slen; ++i) stop += alphabet[rng() % alphabet.size()];
      stops.push_back(stop);
    }
    std::vector<std::size_t> sizes;
    for (int i = 0; i < 3; ++i) sizes.push_back(1 + rng() % 5);
    bool got_stop = false, want_stop = false;
    const std::string got = stream(text, sizes, stops, &got_stop);
    const std::string want = oracle(text, sizes, stops, &want_stop);
    ASSERT_EQ(got, want) << "text " << ::testing::PrintToString(text) << " stops " << ::testing::PrintToString(stops) << " sizes " << ::testing::PrintToString(sizes);
    ASSERT_EQ(got_stop, want_stop) << text;
  }
}

}  // namespace
}  // namespace memra::server
