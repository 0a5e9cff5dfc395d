// The SDK promise end to end: install only the `sdk` component to a fresh prefix,
// build sdk/examples/quant-example out of tree against that prefix alone, load the
// resulting .so through PluginHost and check its matmul against a reference.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/plugin_host/plugin_host.hpp"
#include "tests/sdk/sdk_test_util.hpp"

namespace memra::sdk_test {
namespace {

namespace fs = std::filesystem;

// The first `name` on PATH, or "".
std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SdkExample : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cmake_ = on_path("cmake");
    if (cmake_.empty()) return;
    tmp_ = new TempDir();
    prefix_ = tmp_->path() / "prefix";
    build_ = tmp_->path() / "build";
    // 1. Only the sdk component of this build.
    memra::testing::CommandResult install = run(sh_quote(cmake_) + " --install " + sh_quote(MEMRA_BINARY_ROOT) +
                            " --component sdk --prefix " + sh_quote(prefix_.string()));
    log_ += "$ cmake --install (sdk)\n" + install.out;
    if (install.exit_code != 0) return;
    // 2. Configure and build the example against that prefix only.
    memra::testing::CommandResult configure = run(sh_quote(cmake_) + " -S " +
                              sh_quote((fs::path(MEMRA_SOURCE_ROOT) / "sdk/examples/quant-example").string()) +
                              " -B " + sh_quote(build_.string()) + " -DCMAKE_BUILD_TYPE=Release" +
                              " -DCMAKE_C_COMPILER=" + sh_quote(MEMRA_C_COMPILER) +
                              " -DCMAKE_PREFIX_PATH=" + sh_quote(prefix_.string()));
    log_ += "$ cmake -S quant-example\n" + configure.out;
    if (configure.exit_code != 0) return;
    memra::testing::CommandResult build = run(sh_quote(cmake_) + " --build " + sh_quote(build_.string()));
    log_ += "$ cmake --build\n" + build.out;
    if (build.exit_code != 0) return;
    // 3. The example family (its own op) the same way.
    family_build_ = tmp_->path() / "family-build";
    memra::testing::CommandResult fconfigure = run(sh_quote(cmake_) + " -S " +
                              sh_quote((fs::path(MEMRA_SOURCE_ROOT) / "sdk/examples/family-example").string()) +
                              " -B " + sh_quote(family_build_.string()) + " -DCMAKE_BUILD_TYPE=Release" +
                              " -DCMAKE_C_COMPILER=" + sh_quote(MEMRA_C_COMPILER) +
                              " -DCMAKE_PREFIX_PATH=" + sh_quote(prefix_.string()));
    log_ += "$ cmake -S family-example\n" + fconfigure.out;
    if (fconfigure.exit_code != 0) return;
    memra::testing::CommandResult fbuild = run(sh_quote(cmake_) + " --build " + sh_quote(family_build_.string()));
    log_ += "$ cmake --build (family)\n" + fbuild.out;
    if (fbuild.exit_code != 0) return;
    // 4. The full-speed scheme example (device kernels on int8x32 rows) the same way.
    int8_build_ = tmp_->path() / "int8-build";
    memra::testing::CommandResult iconfigure = run(sh_quote(cmake_) + " -S " +
                              sh_quote((fs::path(MEMRA_SOURCE_ROOT) / "sdk/examples/quant-int8-example").string()) +
                              " -B " + sh_quote(int8_build_.string()) + " -DCMAKE_BUILD_TYPE=Release" +
                              " -DCMAKE_C_COMPILER=" + sh_quote(MEMRA_C_COMPILER) +
                              " -DCMAKE_PREFIX_PATH=" + sh_quote(prefix_.string()));
    log_ += "$ cmake -S quant-int8-example\n" + iconfigure.out;
    if (iconfigure.exit_code != 0) return;
    memra::testing::CommandResult ibuild = run(sh_quote(cmake_) + " --build " + sh_quote(int8_build_.string()));
    log_ += "$ cmake --build (int8)\n" + ibuild.out;
    built_ = ibuild.exit_code == 0;
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  void SetUp() override {
    if (cmake_.empty()) GTEST_SKIP() << "cmake is not on PATH; the out-of-tree SDK build cannot be checked";
    ASSERT_TRUE(built_) << log_;
  }

  static inline std::string cmake_;
  static inline TempDir* tmp_ = nullptr;
  static inline fs::path prefix_, build_, family_build_, int8_build_;
  static inline std::string log_;
  static inline bool built_ = false;
};

TEST_F(SdkExample, InstallsOnlyTheHeadersAndBuildsAgainstThem) {
  EXPECT_TRUE(fs::exists(prefix_ / "include/memra/memra.h"));
  EXPECT_TRUE(fs::exists(prefix_ / "include/memra/plugin.h"));
  EXPECT_FALSE(fs::exists(prefix_ / "bin")) << "the sdk component must not carry binaries";
  // The example found the headers in the prefix, not in the source tree.
  std::string cache = read_file(build_ / "CMakeCache.txt");
  EXPECT_THAT(cache, ::testing::HasSubstr("MEMRA_INCLUDE_DIR:PATH=" + (prefix_ / "include").string() + "\n"));
  EXPECT_TRUE(fs::exists(build_ / "libmemra-quant-example.so"));
}

TEST_F(SdkExample, BuildsItsCudaKernelAsAFatbinWhereNvccExists) {
  const bool nvcc = !on_path("nvcc").empty() || fs::exists("/usr/local/cuda/bin/nvcc");
  if (!nvcc) GTEST_SKIP() << "no nvcc: the example builds its CPU part only";
  const fs::path fatbin = build_ / "example_i8.fatbin";
  ASSERT_TRUE(fs::exists(fatbin)) << log_;
  // A fatbin container starts with its magic 0xBA55ED50 (little endian).
  std::ifstream in(fatbin, std::ios::binary);
  unsigned char magic[4] = {};
  in.read(reinterpret_cast<char*>(magic), 4);
  EXPECT_EQ(magic[0], 0x50);
  EXPECT_EQ(magic[1], 0xED);
  EXPECT_EQ(magic[2], 0x55);
  EXPECT_EQ(magic[3], 0xBA);
}

TEST_F(SdkExample, LoadsThroughThePluginHostAndMatchesTheReferenceMatmul) {
  std::vector<std::string> lines;
  plugins::PluginHostOptions o;
  o.plugin_dirs = {build_};
  o.use_env_path = false;
  o.use_install_dir = false;
  o.services.log = [&lines](memra_log_level, std::string_view line) { lines.emplace_back(line); };
  plugins::PluginHost host(std::move(o));
  ASSERT_EQ(host.discover(), 1u) << ::testing::PrintToString(lines);
  EXPECT_TRUE(host.refusals().empty());

  auto q = host.quant_for("example_i8", host.device_info());
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q->info().name, "example-i8");
  EXPECT_NE(q->api().register_kernels, nullptr);

  const int64_t rows = 7, cols = 68, m = 3;  // odd row count, more than two 32-lane strides
  std::vector<float> w(rows * cols), x(m * cols);
  for (int64_t i = 0; i < rows * cols; ++i) w[i] = float((i * 37) % 23) / 7.0f - 1.5f;
  for (int64_t i = 0; i < m * cols; ++i) x[i] = float((i * 11) % 17) / 5.0f - 1.0f;
  EXPECT_FALSE(q->weight_bytes("example_i8", rows, 66).ok()) << "66 columns break the 4-column rule";

  auto bytes = q->weight_bytes("example_i8", rows, cols);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  ASSERT_EQ(*bytes, uint64_t(rows * (4 + cols)));
  std::vector<std::byte> packed(*bytes);
  ASSERT_TRUE(q->quantize("example_i8", w, rows, cols, packed).ok());
  std::vector<float> back(rows * cols);
  ASSERT_TRUE(q->dequantize("example_i8", packed, rows, cols, back).ok());
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::abs(w[r * cols + c]));
    for (int64_t c = 0; c < cols; ++c)  // round to nearest: at most half a step off
      EXPECT_LE(std::abs(back[r * cols + c] - w[r * cols + c]), amax / 127.0f * 0.5f * (1 + 1e-6f)) << r << "," << c;
  }

  std::vector<float> y(m * rows, 1e30f);
  memra_matmul_args args{};
  args.struct_size = MEMRA_MATMUL_ARGS_STRUCT_SIZE;
  args.scheme = "example_i8";
  args.backend = MEMRA_BACKEND_CPU;
  args.weight = packed.data();
  args.rows = rows;
  args.cols = cols;
  args.m = m;
  args.x = x.data();
  args.y = y.data();
  auto st = q->matmul(args);
  ASSERT_TRUE(st.ok()) << st.error().message;
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double ref = 0;  // y = x · dequant(W)ᵀ in double
      for (int64_t c = 0; c < cols; ++c) ref += double(x[t * cols + c]) * double(back[r * cols + c]);
      EXPECT_NEAR(y[t * rows + r], ref, 1e-5 * (1.0 + std::abs(ref))) << "t=" << t << " r=" << r;
    }
  }
  // Batch invariance: each token alone gives the same bits.
  for (int64_t t = 0; t < m; ++t) {
    std::vector<float> one(rows);
    memra_matmul_args a1 = args;
    a1.m = 1;
    a1.x = x.data() + t * cols;
    a1.y = one.data();
    ASSERT_TRUE(q->matmul(a1).ok());
    for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(one[r], y[t * rows + r]);
  }

  // On a GPU backend without a registered kernel it says so (no silent CPU run).
  args.backend = MEMRA_BACKEND_CUDA;
  auto cuda = q->matmul(args);
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.error().code, ErrorCode::unsupported);
  EXPECT_EQ(q->last_error(), "example-i8: no registered kernel for this backend");
}

TEST_F(SdkExample, IsSelectedOnGpusItsFatbinRunsOnOnly) {
  plugins::PluginHostOptions o;
  o.plugin_dirs = {build_};
  o.use_env_path = false;
  o.use_install_dir = false;
  o.services.log = [](memra_log_level, std::string_view) {};
  plugins::PluginHost host(std::move(o));
  ASSERT_EQ(host.discover(), 1u);
  memra_device_info gpu{};
  gpu.struct_size = MEMRA_DEVICE_INFO_STRUCT_SIZE;
  gpu.backend = MEMRA_BACKEND_CUDA;
  gpu.name = "test GPU";
  for (const char* arch : {"sm_90a", "sm_120a"}) {
    gpu.arch = arch;
    EXPECT_TRUE(host.quant_for("example_i8", gpu).ok()) << arch;
  }
  gpu.arch = "sm_80";
  auto q = host.quant_for("example_i8", gpu);
  ASSERT_FALSE(q.ok());
  EXPECT_THAT(q.error().message, ::testing::HasSubstr("example-i8 (score -1)"));
}

TEST_F(SdkExample, TheExampleFamilyBringsItsOwnOpBuiltAgainstTheSdkAlone) {
  EXPECT_THAT(read_file(family_build_ / "CMakeCache.txt"),
              ::testing::HasSubstr("MEMRA_INCLUDE_DIR:PATH=" + (prefix_ / "include").string() + "\n"));
  const bool nvcc = !on_path("nvcc").empty() || fs::exists("/usr/local/cuda/bin/nvcc");
  if (nvcc) EXPECT_TRUE(fs::exists(family_build_ / "example_scan.fatbin")) << log_;
  std::vector<std::string> lines;
  plugins::PluginHostOptions o;
  o.plugin_dirs = {family_build_};
  o.use_env_path = false;
  o.use_install_dir = false;
  o.services.log = [&lines](memra_log_level, std::string_view line) { lines.emplace_back(line); };
  plugins::PluginHost host(std::move(o));
  ASSERT_EQ(host.discover(), 1u) << ::testing::PrintToString(lines);
  auto f = host.family("example");
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_EQ(f->ops().size(), 1u);
  const memra_op_def& op = f->ops()[0];
  EXPECT_STREQ(op.name, "example.decay_scan");
  EXPECT_EQ(op.version, 1u);
  EXPECT_NE(op.run_cpu, nullptr);
  EXPECT_NE(op.run_cuda, nullptr);
  // Its kernel-check cases: well formed, and NOT_FOUND after the last.
  int32_t cases = 0;
  for (;; ++cases) {
    memra_op_example e{};
    e.struct_size = MEMRA_OP_EXAMPLE_STRUCT_SIZE;
    const memra_status st = op.example(f->ctx(), cases, &e);
    if (st == MEMRA_ERR_NOT_FOUND) break;
    ASSERT_EQ(st, MEMRA_OK);
    EXPECT_EQ(e.num_inputs, 1);
    EXPECT_GT(e.state_bytes, 0u);
  }
  EXPECT_GE(cases, 2);
}

// The full-speed scheme example (sdk/examples/quant-int8-example): built against the SDK
// alone, loaded by the plugin host; its CPU matmul (the arithmetic its INT8 GEMV runs on the
// backend's int8x32 rows) against the float64 product of its exactly dequantised weights
// and the unquantised x, within the int8 activation rounding (|y - ref| <= 2e-2 of
// sum |w||x|); each token's row is the same bits whatever else shares the call; its scheme
// info states the prompt-row numerics; its fatbin is built where nvcc exists.
TEST_F(SdkExample, TheInt8ExampleMatchesTheDequantisedProduct) {
  plugins::PluginHostOptions o;
  o.plugin_dirs = {int8_build_};
  o.use_env_path = false;
  o.use_install_dir = false;
  plugins::PluginHost host(std::move(o));
  ASSERT_EQ(host.discover(), 1u);
  auto q = host.quant_for("example_q8x", host.device_info());
  ASSERT_TRUE(q.ok()) << q.error().message;
  const int64_t rows = 8, cols = 512, m = 3;
  std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(m * cols));
  uint64_t s = 7;
  auto next = [&s] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<int64_t>(s >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
  };
  for (float& v : w) v = 0.05f * next();
  for (float& v : x) v = next();
  auto bytes = q->weight_bytes("example_q8x", rows, cols);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, static_cast<uint64_t>(rows * (cols + cols / 16)));
  std::vector<std::byte> packed(*bytes);
  ASSERT_TRUE(q->quantize("example_q8x", w, rows, cols, packed).ok());
  std::vector<float> deq(w.size());
  ASSERT_TRUE(q->dequantize("example_q8x", packed, rows, cols, deq).ok());
  for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(deq[i], w[i], 0.05 / 127 * 0.51 + 1e-6) << i;
  auto matmul = [&](const float* xs, int64_t mm, float* y) {
    memra_matmul_args a{};
    a.struct_size = MEMRA_MATMUL_ARGS_STRUCT_SIZE;
    a.scheme = "example_q8x";
    a.backend = MEMRA_BACKEND_CPU;
    a.weight = packed.data();
    a.rows = rows, a.cols = cols, a.m = mm;
    a.x = xs, a.y = y;
    return q->matmul(a);
  };
  std::vector<float> y(static_cast<size_t>(m * rows));
  ASSERT_TRUE(matmul(x.data(), m, y.data()).ok());
  for (int64_t t = 0; t < m; ++t) {
    std::vector<float> alone(static_cast<size_t>(rows));
    ASSERT_TRUE(matmul(x.data() + t * cols, 1, alone.data()).ok());
    for (int64_t r = 0; r < rows; ++r) {
      double ref = 0, mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        ref += static_cast<double>(deq[r * cols + c]) * x[t * cols + c];
        mag += std::fabs(static_cast<double>(deq[r * cols + c]) * x[t * cols + c]);
      }
      EXPECT_LE(std::fabs(y[t * rows + r] - ref), 2e-2 * mag) << "token " << t << ", row " << r;
      EXPECT_EQ(std::memcmp(&alone[r], &y[t * rows + r], 4), 0) << "token " << t << ", row " << r << " depends on the batch";
    }
  }
  memra_scheme_info si{};
  si.struct_size = MEMRA_SCHEME_INFO_STRUCT_SIZE;
  ASSERT_EQ(q->api().scheme_info(q->ctx(), "example_q8x", &si), MEMRA_OK);
  EXPECT_EQ(si.prompt, MEMRA_PROMPT_ROUNDED_WEIGHTS);
  EXPECT_EQ(si.block_elems, 256);
  const bool nvcc = !on_path("nvcc").empty() || fs::exists("/usr/local/cuda/bin/nvcc");
  if (nvcc) EXPECT_TRUE(fs::exists(int8_build_ / "example_q8x.fatbin")) << log_;
}

}  // namespace
}  // namespace memra::sdk_test
