#include "registry/cli/table.hpp"

#include <algorithm>
#include <cstdio>

namespace memra::registry::cli {

std::size_t display_width(const std::string& text) {
  std::size_t n = 0;
  for (unsigned char ch : text)
    if ((ch & 0xC0) != 0x80) ++n;  // count lead bytes only
  return n;
}

std::string ellipsize(const std::string& text, std::size_t width) {
  if (display_width(text) <= width || width < 4) return text;
  std::size_t keep = width - 3, seen = 0, i = 0;
  for (; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (seen == keep) break;  // cut only before a lead byte
      ++seen;
    }
  }
  return text.substr(0, i) + "...";
}


void Table::print(std::ostream& out) const {
  std::vector<std::size_t> widths(headers_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i)
      widths[i] = std::max(widths[i], display_width(row[i]));
  };
  measure(headers_);
  for (const auto& r : rows_) measure(r);
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      line += cell;
      if (i + 1 < widths.size()) line += std::string(widths[i] - display_width(cell) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  };
  emit(headers_);
  for (const auto& r : rows_) emit(r);
}

}  // namespace memra::registry::cli
