#include "host/server/memory_return.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace memra::server {

void configure_allocator() {
#if defined(__GLIBC__)
  mallopt(M_ARENA_MAX, 8);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // setting a threshold turns glibc's moving thresholds off
  mallopt(M_TRIM_THRESHOLD, 16 << 20);
#endif
}

void return_memory_after(std::size_t body_bytes) {
#if defined(__GLIBC__)
  if (body_bytes >= kTrimAfterBodyBytes) malloc_trim(0);
#else
  (void)body_bytes;
#endif
}

}  // namespace memra::server
