/* C11 side of the ABI layout check: every header, every struct, every field.
 * Compiled with -std=c11 -Wall -Wextra -pedantic -Werror. It also reports the
 * layout C actually used, so the C++ test can compare both at run time. */
#include <memra/abi.h>
#include <memra/backend.h>
#include <memra/family.h>
#include <memra/host_api.h>
#include <memra/memra.h>
#include <memra/plugin.h>
#include <memra/quant.h>

#include <stddef.h>
#include <string.h>

#include "abi_layout_table.h"
#include "abi_layout_c.h"

_Static_assert(sizeof(void*) == 8 && sizeof(size_t) == 8, "these values are for x86_64 LP64");

#define CHECK_OFFSET(T, field, off) _Static_assert(offsetof(T, field) == (off), #T "." #field " moved");
MEMRA_ABI_OFFSETS(CHECK_OFFSET)

#define CHECK_SIZE(T, size, macro, macro_value)                              \
  _Static_assert(sizeof(T) == (size), "sizeof(" #T ") changed");             \
  _Static_assert((macro) == (macro_value), #macro " changed");
MEMRA_ABI_SIZES(CHECK_SIZE)

/* Fixed-width ABI scalars. */
_Static_assert(sizeof(memra_status) == 4, "memra_status is int32_t");
_Static_assert(sizeof(memra_dtype) == 4 && sizeof(memra_log_level) == 4, "int32_t typedefs");
_Static_assert(sizeof(memra_plugin_kind) == 4 && sizeof(memra_memory_location) == 4, "int32_t typedefs");
_Static_assert(MEMRA_ABI_MAJOR == 2, "this table describes ABI 2.x");

#define C_OFFSET_ROW(T, field, off) {#T, #field, offsetof(T, field)},
static const memra_c_layout_entry k_offsets[] = {MEMRA_ABI_OFFSETS(C_OFFSET_ROW)};

#define C_SIZE_ROW(T, size, macro, macro_value) {#T, "sizeof", sizeof(T)}, {#T, #macro, (macro)},
static const memra_c_layout_entry k_sizes[] = {MEMRA_ABI_SIZES(C_SIZE_ROW)};

size_t memra_test_c_layout_count(void) {
  return sizeof k_offsets / sizeof k_offsets[0] + sizeof k_sizes / sizeof k_sizes[0];
}

const memra_c_layout_entry* memra_test_c_layout(size_t i) {
  size_t n_offsets = sizeof k_offsets / sizeof k_offsets[0];
  if (i < n_offsets) return &k_offsets[i];
  i -= n_offsets;
  return i < sizeof k_sizes / sizeof k_sizes[0] ? &k_sizes[i] : NULL;
}

const char* memra_test_c_status_name(memra_status s) { return memra_status_name(s); }
