// memra-kernel-check: every CUDA kernel against its CPU reference, plus the
// batch-invariance bit checks. One line per check, then ALL GREEN or exit 1.
// Without a driver or GPU it prints a SKIPPED line and exits 0.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "host/backend/backend.hpp"
#include "host/tools/memra-kernel-check/checks.hpp"

namespace {

void usage() {
  std::printf(
      "usage: memra-kernel-check [options]\n"
      "Runs every CUDA kernel of memra against its CPU reference on random and adversarial inputs\n"
      "(large magnitudes, zeros, denormals, long rows) with a per-op error bound (normalised MSE),\n"
      "and checks batch invariance bit for bit. Prints one line per check and ALL GREEN, or exits 1.\n"
      "Without an NVIDIA driver or GPU it prints SKIPPED and exits 0.\n\n"
      "  --module PATH      libmemra-backend-cuda.so (default: $MEMRA_CUDA_BACKEND or <exe>/../lib/memra/)\n"
      "  --kernel-dir DIR   the kernel modules (default: <module dir>/kernels)\n"
      "  --device N         CUDA device index (default 0)\n"
      "  --seed N           random seed (default 1234)\n"
      "  --filter TEXT      only checks whose name contains TEXT (with --bench: only the schemes)\n"
      "  --quick            smaller shapes\n"
      "  --no-nvrtc         do not use NVRTC-specialised kernels in the ops\n"
      "  --plugin-dir DIR   also check the kernels the quant plugins in DIR register and the ops the family\n"
      "                     plugins in DIR bring (repeatable; default for ops: plugins/ and test-plugins/ beside the module)\n"
      "  --bench            instead of the checks: time the int8-activation GEMVs against today's\n"
      "                     GEMVs on the Qwen3-8B decode shapes (GB/s, %% of the copy bandwidth)\n"
      "  --bench-bf16       instead of the checks: time the bf16 GEMVs (the tensor-core kernel in\n"
      "                     several ring/warp shapes, the warp-per-row kernel it replaced) likewise\n"
      "  --bench-fp8        instead of the checks: time the fp8 tensor-core GEMV on prepared\n"
      "                     activations in several unroll/warp shapes, the preparation kernel,\n"
      "                     and the per-block scaling of x it replaced, likewise\n"
      "  --help             this text\n");
}

}  // namespace

int main(int argc, char** argv) {
  memra::backend::BackendOptions open;
  open.kind = MEMRA_BACKEND_CUDA;
  memra::kcheck::CheckOptions opts;
  std::string filter;
  bool bench = false, bench_bf16 = false, bench_fp8 = false;
  std::vector<std::string> plugin_dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "memra-kernel-check: %s needs a value (see --help)\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a == "--module") open.module_path = value("--module");
    else if (a == "--kernel-dir") open.kernel_dir = value("--kernel-dir");
    else if (a == "--device") open.device = std::atoi(value("--device").c_str());
    else if (a == "--seed") opts.seed = std::strtoull(value("--seed").c_str(), nullptr, 10);
    else if (a == "--filter") filter = value("--filter");
    else if (a == "--quick") opts.quick = true;
    else if (a == "--no-nvrtc") open.use_nvrtc = false;
    else if (a == "--bench") bench = true;
    else if (a == "--bench-bf16") bench = bench_bf16 = true;
    else if (a == "--bench-fp8") bench = bench_fp8 = true;
    else if (a == "--plugin-dir") plugin_dirs.push_back(value("--plugin-dir"));
    else {
      std::fprintf(stderr, "memra-kernel-check: unknown option %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (open.module_path.empty()) open.module_path = memra::backend::default_cuda_backend_path();
  if (open.kernel_dir.empty()) open.kernel_dir = (std::filesystem::path(open.module_path).parent_path() / "kernels").string();

  open.apply_environment();  // once, here: the checks' second backends copy these options
  auto backend = memra::backend::open_backend(open);
  if (!backend) {
    const std::string& m = backend.error().message;
    const bool no_driver = m.rfind("no NVIDIA driver", 0) == 0;
    const bool no_gpu = m.find("cuInit") != std::string::npos || m.find("(0 visible)") != std::string::npos;
    std::printf("%s: %s\n", no_driver ? "SKIPPED" : no_gpu ? "SKIPPED (no usable GPU)" : "FAILED", m.c_str());
    return no_driver || no_gpu ? 0 : 1;
  }
  const memra_device_info info = (*backend)->device_info();
  std::printf("device: %s (%s, %d SMs, %.1f GiB), kernels from %s\n", info.name, info.arch, info.multiprocessor_count,
              static_cast<double>(info.total_memory_bytes) / (1ull << 30), open.kernel_dir.c_str());

  opts.kernel_dir = open.kernel_dir;
  opts.temp_dir = (std::filesystem::temp_directory_path() / ("memra-kernel-check-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(opts.temp_dir);

  memra::kcheck::Device device(std::move(*backend), open);
  if (bench) {
    int rc = 0;
    try {
      memra::kcheck::bench_int8_gemv(device, {opts.seed, open.device, bench_bf16, bench_fp8, filter});
    } catch (const std::exception& e) {
      std::printf("FAILED: bench: %s\n", e.what());
      rc = 1;
    }
    std::error_code bec;
    std::filesystem::remove_all(opts.temp_dir, bec);
    return rc;
  }
  memra::kcheck::Report report([](const memra::kcheck::CheckLine& l) {
    std::printf("%s  %s: %s\n", l.pass ? "PASS" : "FAIL", l.name.c_str(), l.detail.c_str());
    std::fflush(stdout);
  });
  report.filter = filter;
  memra::kcheck::run_all_checks(device, report, opts);
  memra::kcheck::check_plugin_kernels(device, report, opts, plugin_dirs);
  // Family plugins' ops: the --plugin-dir ones, else the installed plugins and the build's
  // test plugins beside the module (the SDK example family).
  std::vector<std::string> op_dirs = plugin_dirs;
  if (op_dirs.empty())
    for (const char* sub : {"plugins", "test-plugins"})
      if (const auto dir = std::filesystem::path(open.module_path).parent_path() / sub; std::filesystem::is_directory(dir))
        op_dirs.push_back(dir.string());
  memra::kcheck::check_plugin_ops(device, report, opts, op_dirs);
  std::error_code ec;
  std::filesystem::remove_all(opts.temp_dir, ec);

  size_t failed = 0;
  for (const auto& l : report.lines()) failed += !l.pass;
  if (report.lines().empty()) {
    std::printf("FAILED: no check matched the filter\n");
    return 1;
  }
  if (failed) {
    std::printf("FAILED: %zu of %zu checks\n", failed, report.lines().size());
    return 1;
  }
  std::printf("ALL GREEN (%zu checks)\n", report.lines().size());
  return 0;
}
