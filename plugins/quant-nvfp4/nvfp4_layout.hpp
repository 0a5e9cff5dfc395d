// memra's nvfp4 layout v1 (NVIDIA's NVFP4: e2m1 codes with an e4m3 scale per 16 elements and
// a float32 scale per tensor, as ModelOpt exports it), stored row by row in blocks of 256
// elements, 148 bytes each (4-byte aligned):
//   bytes   0..3    float32 g: the second-level scale (ModelOpt's weight_scale_2; the
//                   importer writes the tensor's one value in every block, the quantiser its
//                   row's)
//   bytes   4..19   16 e4m3fn scales s[j], one per 16 elements (ModelOpt's weight_scale)
//   bytes  20..147  128 bytes of codes, two a byte as published: element 2i in the low
//                   nibble of byte i, 2i + 1 in the high; code = sign (bit 3) | e2m1
//                   magnitude index (bits 0-2) into {0, 0.5, 1, 1.5, 2, 3, 4, 6}
// value = (e2m1(code) * float(s[j])) * g in float32: the first product is exact (2 and 4
// significant bits), the second rounds once. Shared by the CPU reference (nvfp4_ref.cpp)
// and the device units (nvfp4_units.cuh), which compute it the same way.
#pragma once

#include <cstdint>

namespace memra::nvfp4 {

constexpr int64_t kBlockElems = 256;
constexpr int64_t kBlockBytes = 148;
constexpr int64_t kSubBlock = 16;  // elements per e4m3 scale
constexpr int64_t kScalesAt = 4, kCodesAt = 20;

// e2m1 magnitudes by index.
constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

}  // namespace memra::nvfp4
