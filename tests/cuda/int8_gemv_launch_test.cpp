// The int8 GEMV launch table (plugins/quant-common/gemv_int8_launch.hpp) without a GPU: every
// token count gets an entry the matmul8_<scheme> modules define (the tensor-core Q4_K
// kernel q4_km<W> with 16 rows per block and 128 * W threads, no 16-token tile for W = 4;
// the dp4a kernels R = 1, 2, 4 with 128 threads). The table only picks speed: every entry
// computes the reference's bits (memra-kernel-check holds each one bitwise on the GPU).
#include <gtest/gtest.h>

#include <string>

#include "plugins/quant-common/gemv_int8_launch.hpp"

namespace {

using memra::ref::int8_gemv_block_threads;
using memra::ref::int8_gemv_launch;

TEST(Int8GemvLaunch, BlockThreadsFollowTheKernelName) {
  EXPECT_EQ(int8_gemv_block_threads("q4_k"), 128);
  EXPECT_EQ(int8_gemv_block_threads("q4_k2"), 128);
  EXPECT_EQ(int8_gemv_block_threads("q8_0"), 128);
  EXPECT_EQ(int8_gemv_block_threads("q4_0"), 128);
  EXPECT_EQ(int8_gemv_block_threads("q4_km1"), 128);
  EXPECT_EQ(int8_gemv_block_threads("q4_km2"), 256);
  EXPECT_EQ(int8_gemv_block_threads("q4_km4"), 512);
  static_assert(int8_gemv_block_threads("q4_km2") == 256, "usable at compile time");
}

TEST(Int8GemvLaunch, EveryTokenCountGetsAnEntryThatExists) {
  for (const std::string scheme : {"q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "iq4_xs"})
    for (int64_t m = 1; m <= 40; ++m) {
      const auto l = int8_gemv_launch(scheme.c_str(), m);
      const std::string k = l.kernel;
      ASSERT_GE(l.blocks_per_sm, 0);
      if (k.rfind("q4_km", 0) == 0) {
        EXPECT_EQ(scheme, "q4_k");
        EXPECT_EQ(l.rows_per_block, 16) << k;
        EXPECT_TRUE(k == "q4_km1" || k == "q4_km2" || k == "q4_km4") << k;
        if (k == "q4_km4") {
          EXPECT_LE(m, 8) << "q4_km4 has no 16-token tile";
        }
      } else {
        EXPECT_TRUE(k == scheme || (scheme == "q4_k" && k == "q4_k2") || (scheme == "q5_k" && k == "q5_k2"))
            << scheme << " m=" << m << ": " << k;
        EXPECT_TRUE(l.rows_per_block == 1 || l.rows_per_block == 2 || l.rows_per_block == 4) << k;
        EXPECT_EQ(int8_gemv_block_threads(l.kernel), 128);
      }
    }
}

}  // namespace
