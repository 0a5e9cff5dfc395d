#include "repack/tool/progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace memra::repack {

std::string human_bytes(double b) {
  char buf[32];
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f KB", b / 1e3);
  return buf;
}

ProgressPrinter::ProgressPrinter(const Progress& progress, bool quiet)
    : p_(progress), quiet_(quiet), tty_(::isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()) {
  if (!quiet_) thread_ = std::thread([this] { run(); });
}

ProgressPrinter::~ProgressPrinter() { stop(); }

void ProgressPrinter::stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  thread_.join();
  draw(true);
}

void ProgressPrinter::run() {
  while (!stop_.load()) {
    draw(false);
    for (int i = 0; i < 10 && !stop_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void ProgressPrinter::draw(bool final) {
  const int phase = p_.phase.load();
  if (phase == 0) return;  // validation is quick and silent
  const double total = static_cast<double>(p_.total_bytes.load());
  const double done = static_cast<double>(p_.done_bytes.load());
  const double frac = total > 0 ? std::min(1.0, done / total) : 1.0;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = secs > 0 ? done / secs : 0;
  const double eta = rate > 0 ? (total - done) / rate : 0;
  // Bytes are counted twice (the source digest and the tensor writes): show source bytes.
  const std::string amount = human_bytes(done / 2) + " / " + human_bytes(total / 2);
  if (tty_) {
    constexpr int kWidth = 28;
    const int filled = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '-');
    const char* what = phase >= 2 ? "syncing" : "writing";
    std::fprintf(stderr, "\r\033[K%s [%s] %3d%%  %s  %s/s  ETA %.0fs", what, bar.c_str(), static_cast<int>(frac * 100),
                 amount.c_str(), human_bytes(rate / 2).c_str(), final ? 0.0 : eta);
    if (final) std::fputc('\n', stderr);
    std::fflush(stderr);
    return;
  }
  const int tenth = static_cast<int>(frac * 10);
  if (tenth != last_tenth_ && (tenth > last_tenth_ || final)) {
    last_tenth_ = tenth;
    std::fprintf(stderr, "memra-repack: %3d%%  %s  (%llu/%llu tensors)\n", tenth * 10, amount.c_str(),
                 static_cast<unsigned long long>(p_.tensors_done.load()), static_cast<unsigned long long>(p_.tensors_total.load()));
  }
}

}  // namespace memra::repack
