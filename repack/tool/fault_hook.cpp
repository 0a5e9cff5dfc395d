#include "repack/tool/fault_hook.hpp"

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

namespace memra::repack {
namespace {

bool parse_int(const std::string& s, int64_t lo, int64_t hi, int64_t* out) {
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

std::function<Status(std::string_view)> fault_from_env(const std::atomic<bool>* cancel) {
  const char* env = std::getenv("MEMRA_REPACK_FAULT");
  if (!env || !*env) return {};
  const std::string spec = env;
  auto counter = std::make_shared<std::atomic<int64_t>>(0);
  return [spec, counter, cancel](std::string_view point) -> Status {
    auto injected = [&] { return make_error(ErrorCode::io, "injected failure at " + std::string(point) + " (MEMRA_REPACK_FAULT)"); };
    if (point != "tensor") return spec == point ? Status(injected()) : Status();
    const int64_t n = ++*counter;
    int64_t at = 0, ms = 0;
    if (spec.rfind("tensor:", 0) == 0 && parse_int(spec.substr(7), 1, INT64_MAX, &at) && n == at) return injected();
    if (spec.rfind("pause-tensor:", 0) == 0) {
      const std::string rest = spec.substr(13);
      const size_t colon = rest.find(':');
      if (colon != std::string::npos && parse_int(rest.substr(0, colon), 1, INT64_MAX, &at) &&
          parse_int(rest.substr(colon + 1), 0, 3600000, &ms) && n == at)
        for (int64_t t = 0; t < ms && !(cancel && cancel->load()); t += 10)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return {};
  };
}

}  // namespace memra::repack
