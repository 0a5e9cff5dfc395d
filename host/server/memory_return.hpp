// Memory a large request used goes back to the system when it ends. glibc's defaults keep
// it: each thread allocates from one of up to 8 x cores arenas, an arena's free top is
// trimmed only past a threshold that grows (up to 64 MB) with every large block freed, and
// malloc_trim() releases free chunks but never a thread arena's top. So an 8 MiB body, its
// parse and its prompt stayed resident, ~11 MB per arena, whichever worker served it.
// Fixed settings bound that: at most 8 arenas, blocks under 32 MB from the arenas (reused
// without faulting pages in again), an arena's top trimmed once it passes 16 MB; and after
// a large request, malloc_trim() for the free chunks inside the arenas.
#pragma once

#include <cstddef>

namespace memra::server {

// Requests whose body is at least this large trim the allocator after their answer.
inline constexpr std::size_t kTrimAfterBodyBytes = 256 * 1024;

// Once at start, before any thread: the settings above.
void configure_allocator();
// After a request with a body of `body_bytes`: returns free arena memory to the system
// (malloc_trim) when the body was large.
void return_memory_after(std::size_t body_bytes);

}  // namespace memra::server
