// C++20 side of the ABI layout check: every header, every struct, every field,
// compiled with -std=c++20 -Wall -Wextra -pedantic -Werror (no gtest in this TU).
#include <memra/abi.h>
#include <memra/backend.h>
#include <memra/family.h>
#include <memra/host_api.h>
#include <memra/memra.h>
#include <memra/plugin.h>
#include <memra/quant.h>

#include <cstddef>
#include <type_traits>

#include "abi_layout_c.h"
#include "abi_layout_cxx.hpp"
#include "abi_layout_table.h"

static_assert(sizeof(void*) == 8 && sizeof(size_t) == 8, "these values are for x86_64 LP64");

#define CHECK_OFFSET(T, field, off) static_assert(offsetof(T, field) == (off), #T "." #field " moved");
MEMRA_ABI_OFFSETS(CHECK_OFFSET)

// C++ adds one more property the ABI relies on: the structs are plain C data.
#define CHECK_SIZE(T, size, macro, macro_value)                                     \
  static_assert(sizeof(T) == (size), "sizeof(" #T ") changed");                     \
  static_assert((macro) == (macro_value), #macro " changed");                       \
  static_assert(std::is_standard_layout_v<T> && std::is_trivially_copyable_v<T>, #T " is not plain data");
MEMRA_ABI_SIZES(CHECK_SIZE)

static_assert(std::is_same_v<memra_status, int32_t>, "memra_status is int32_t");
static_assert(MEMRA_ABI_MAJOR == 2, "this table describes ABI 2.x");

namespace memra::sdk_test {

std::vector<LayoutEntry> cxx_layout() {
  std::vector<LayoutEntry> out;
#define CXX_OFFSET_ROW(T, field, off) out.push_back({#T, #field, offsetof(T, field)});
  MEMRA_ABI_OFFSETS(CXX_OFFSET_ROW)
#define CXX_SIZE_ROW(T, size, macro, macro_value) \
  out.push_back({#T, "sizeof", sizeof(T)});       \
  out.push_back({#T, #macro, (macro)});
  MEMRA_ABI_SIZES(CXX_SIZE_ROW)
  return out;
}

}  // namespace memra::sdk_test
