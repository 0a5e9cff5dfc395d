/* What abi_layout_c.c (compiled as C) reports about the layout it saw. */
#ifndef MEMRA_TEST_ABI_LAYOUT_C_H
#define MEMRA_TEST_ABI_LAYOUT_C_H

#include <stddef.h>

#include <memra/abi.h>

MEMRA_EXTERN_C_BEGIN

typedef struct memra_c_layout_entry {
  const char* type;
  const char* what; /* a field name, "sizeof", or a *_STRUCT_SIZE macro name */
  size_t value;     /* offset or size as the C compiler laid it out */
} memra_c_layout_entry;

size_t memra_test_c_layout_count(void);
const memra_c_layout_entry* memra_test_c_layout(size_t i);
const char* memra_test_c_status_name(memra_status s);

MEMRA_EXTERN_C_END

#endif
