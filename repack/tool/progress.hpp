// Progress display for memra-repack: a redrawn bar (bytes, rate, ETA) when stderr is a
// terminal, a plain line per tenth otherwise. Runs on its own thread, polling the
// pipeline's counters.
#pragma once

#include <atomic>
#include <thread>

#include "repack/tool/repack.hpp"

namespace memra::repack {

class ProgressPrinter {
 public:
  ProgressPrinter(const Progress& progress, bool quiet);
  ~ProgressPrinter();  // stop()
  void stop();         // final redraw and newline

 private:
  void run();
  void draw(bool final);

  const Progress& p_;
  bool quiet_;
  bool tty_;
  std::atomic<bool> stop_{false};
  int last_tenth_ = -1;
  std::chrono::steady_clock::time_point start_;
  std::thread thread_;
};

// "1.23 GB", "512 MB", "12 KB".
std::string human_bytes(double bytes);

}  // namespace memra::repack
