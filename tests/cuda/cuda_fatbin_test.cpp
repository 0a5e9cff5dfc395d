// The kernel modules the build produced carry what the CUDA backend needs: SASS for
// every MEMRA_CUDA_ARCHS entry (sm_90a, sm_120a) and compute_90 PTX. Runs without a
// GPU (it reads the files); skips when this build has no CUDA kernels.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "host/backend/cuda/fatbin_info.hpp"
#include "tests/support/cuda_env.hpp"

namespace fs = std::filesystem;

// The backend's modules (lib/memra/kernels) and the plugins' (lib/memra/plugins: every
// quant plugin's scheme kernels, the families' ops).
TEST(CudaFatbin, EveryModuleHasSassForEachArchAndPtx) {
  const fs::path dir = memra::cuda_test::kernel_dir();
  if (!fs::exists(dir / "norm.fatbin")) GTEST_SKIP() << "no kernel modules in " << dir << " (build without CUDA toolkit)";
  int counts[2] = {0, 0};
  const fs::path dirs[2] = {dir, dir.parent_path() / "plugins"};
  for (int d = 0; d < 2; ++d) {
    for (const auto& f : fs::directory_iterator(dirs[d])) {
      if (f.path().extension() != ".fatbin") continue;
      ++counts[d];
      std::ifstream in(f.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string data = ss.str();
      std::vector<memra::backend::FatbinEntry> entries;
      std::string err;
      ASSERT_TRUE(memra::backend::parse_fatbin(data.data(), data.size(), entries, err)) << f.path() << ": " << err;
      EXPECT_TRUE(memra::backend::fatbin_has_sass(entries, 90)) << f.path() << ": " << memra::backend::fatbin_describe(entries);
      EXPECT_TRUE(memra::backend::fatbin_has_sass(entries, 120)) << f.path() << ": " << memra::backend::fatbin_describe(entries);
      EXPECT_TRUE(memra::backend::fatbin_has_ptx_for(entries, 90)) << f.path() << ": " << memra::backend::fatbin_describe(entries);
      // An sm_89 device would find no SASS (the backend then refuses or runs degraded).
      EXPECT_FALSE(memra::backend::fatbin_has_sass(entries, 89));
    }
  }
  EXPECT_GE(counts[0], 10) << dirs[0];
  EXPECT_GE(counts[1], 14) << dirs[1] << ": the quant plugins' scheme modules";
}

TEST(CudaFatbin, RejectsGarbage) {
  std::vector<memra::backend::FatbinEntry> entries;
  std::string err;
  const std::string junk = "definitely not a fatbin, just text padding it out";
  EXPECT_FALSE(memra::backend::parse_fatbin(junk.data(), junk.size(), entries, err));
  EXPECT_FALSE(err.empty());
}

TEST(CudaBackendLoader, ExplainsWhyItCannotLoad) {
  // Without a driver the loader says so (and never crashes); with one, a missing
  // module path is reported by name.
  memra::backend::BackendOptions o;
  o.kind = MEMRA_BACKEND_CUDA;
  o.module_path = "/nonexistent/libmemra-backend-cuda.so";
  auto b = memra::backend::open_backend(o);
  ASSERT_FALSE(b.ok());
  const std::string& m = b.error().message;
  EXPECT_TRUE(m.find("no NVIDIA driver") != std::string::npos || m.find("/nonexistent/libmemra-backend-cuda.so") != std::string::npos) << m;
}
