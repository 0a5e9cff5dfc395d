// The layout the C++ compiler used, in the same order as abi_layout_c.c reports C's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace memra::sdk_test {

struct LayoutEntry {
  std::string type;
  std::string what;  // field name, "sizeof", or *_STRUCT_SIZE macro name
  size_t value;
};

std::vector<LayoutEntry> cxx_layout();

}  // namespace memra::sdk_test
