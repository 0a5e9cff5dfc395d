// Aligned plain-text tables for the CLI's human output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/common/human_bytes.hpp"

namespace memra::registry::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  // Columns separated by two spaces; the last column is not padded.
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// Display width of UTF-8 text (code points; good enough for paths and names).
std::size_t display_width(const std::string& text);
// Shortens text to at most `width` code points, ending in "..." when cut.
std::string ellipsize(const std::string& text, std::size_t width);
using memra::human_bytes;  // core/common/human_bytes.hpp

}  // namespace memra::registry::cli
