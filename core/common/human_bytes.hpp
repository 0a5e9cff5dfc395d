// Byte counts for people: "312 B", "1.5 GiB" (binary units, one decimal). The registry's
// tables and the memory plan's block print sizes with it.
#pragma once

#include <cstdio>
#include <string>

namespace memra {

inline std::string human_bytes(unsigned long long bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", bytes);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace memra
