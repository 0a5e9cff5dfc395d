// Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3"):
// a counter-based generator, so a draw is a pure function of (key, counter). The
// sampler keys it by (seed, sequence position): the token at a position gets the
// same random number however the step that produced it was batched, chunked or
// speculated (ARCHITECTURE.md, exactness clause 3).
#pragma once

#include <array>
#include <cstdint>

namespace memra::engine {

inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return ctr;
}

// A uniform float in [0, 1) for (seed, position, stream): 24 random bits.
inline float philox_uniform(uint64_t seed, uint64_t position, uint32_t stream = 0) {
  const auto r = philox4x32_10({static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32), stream, 0},
                               {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  return static_cast<float>(r[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace memra::engine
