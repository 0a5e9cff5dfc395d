// libFuzzer target: the safetensors header parser on arbitrary bytes (a whole
// file image). Whatever it accepts must describe ranges inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "repack/checkpoint/safetensors_header.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto h = memra::safetensors::parse_header(data, size);
  if (!h.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const auto& t : h->tensors) {
    if (t.begin > t.end || t.end > size || t.begin < h->data_offset) std::abort();
    if (t.end - t.begin != t.n_elements * memra::safetensors::dtype_size(t.dtype)) std::abort();
    if (t.end > t.begin) sink = static_cast<uint8_t>(sink + data[t.begin] + data[t.end - 1]);  // ASan checks the bounds
  }
  (void)sink;
  return 0;
}
