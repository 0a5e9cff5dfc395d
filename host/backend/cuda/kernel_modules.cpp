#include "host/backend/cuda/kernel_modules.hpp"

#include <fstream>
#include <sstream>

#include "host/backend/cuda/cu_error.hpp"
#include "host/backend/cuda/fatbin_info.hpp"

namespace memra::backend::cuda {

KernelModules::KernelModules(std::string kernel_dir, int major, int minor, bool allow_ptx_jit, LogFn log)
    : kernel_dir_(std::move(kernel_dir)), major_(major), minor_(minor), allow_ptx_jit_(allow_ptx_jit), log_(std::move(log)) {}

KernelModules::~KernelModules() {
  for (auto& [name, m] : modules_)
    if (m->library) cuLibraryUnload(m->library);
  for (auto& m : compiled_)
    if (m->library) cuLibraryUnload(m->library);
}

Result<Module*> KernelModules::from_image(const std::string& name, const void* image, bool degraded) {
  auto m = std::make_unique<Module>();
  m->name = name;
  m->degraded = degraded;
  const CUresult r = cuLibraryLoadData(&m->library, image, nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (r != CUDA_SUCCESS) return make_error(ErrorCode::internal, cu_error(r, ("cuLibraryLoadData(" + name + ")").c_str()));
  Module* raw = m.get();
  modules_[name] = std::move(m);
  return raw;
}

Result<Module*> KernelModules::load(const std::string& name) {
  auto it = modules_.find(name);
  if (it != modules_.end()) return it->second.get();
  const std::string path = kernel_dir_ + "/" + name + ".fatbin";
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(ErrorCode::not_found, "kernel module " + path + " not found; build with MEMRA_CUDA=ON (target memra_kernel_modules) or set the kernel directory");
  return load_stream(name, path, in);
}

Result<Module*> KernelModules::load_file(const std::string& path) {
  // Keyed by the path, so it never collides with a kernel directory module's name.
  auto it = modules_.find(path);
  if (it != modules_.end()) return it->second.get();
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::not_found, "kernel module " + path + " not found");
  return load_stream(path, path, in);
}

Result<Module*> KernelModules::load_stream(const std::string& name, const std::string& path, std::istream& in) {
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  std::vector<FatbinEntry> entries;
  std::string err;
  if (!parse_fatbin(data.data(), data.size(), entries, err)) return make_error(ErrorCode::corrupt, path + ": " + err);
  const uint32_t cc = static_cast<uint32_t>(major_ * 10 + minor_);
  bool degraded = false;
  if (!fatbin_has_sass(entries, cc)) {
    const std::string what = path + " has no SASS for this device (sm_" + std::to_string(cc) + "); it holds " + fatbin_describe(entries);
    if (!fatbin_has_ptx_for(entries, cc))
      return make_error(ErrorCode::unsupported, what + " and no PTX it could run; rebuild with MEMRA_CUDA_ARCHS including this architecture");
    if (!allow_ptx_jit_)
      return make_error(ErrorCode::unsupported, what + ". Running it would JIT the PTX and silently lose the architecture-specific paths; "
                                                       "rebuild with MEMRA_CUDA_ARCHS including this architecture, or allow PTX JIT (degraded)");
    degraded = true;
    if (log_) log_(MEMRA_LOG_WARN, "DEGRADED: " + what + "; running it through PTX JIT (slower, no architecture-specific paths)");
  }
  // The driver keeps its own copy of the image.
  return from_image(name, data.data(), degraded);
}

Result<Module*> KernelModules::compile(NvrtcCompiler& nvrtc, const NvrtcRequest& request) {
  auto cubin = nvrtc.compile(request);
  if (!cubin) return cubin.error();
  auto m = std::make_unique<Module>();
  m->name = "nvrtc:" + request.name;
  const CUresult r = cuLibraryLoadData(&m->library, cubin->data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (r != CUDA_SUCCESS) return make_error(ErrorCode::internal, cu_error(r, ("cuLibraryLoadData(" + m->name + ")").c_str()));
  compiled_.push_back(std::move(m));
  return compiled_.back().get();
}

Result<Kernel*> KernelModules::get(Module* module, const std::string& kernel_name) {
  auto it = module->kernels.find(kernel_name);
  if (it != module->kernels.end()) return it->second.get();
  auto k = std::make_unique<Kernel>();
  k->name = kernel_name;
  CUresult r = cuLibraryGetKernel(&k->kernel, module->library, kernel_name.c_str());
  if (r != CUDA_SUCCESS)
    return make_error(ErrorCode::not_found, cu_error(r, ("kernel " + kernel_name + " in module " + module->name).c_str()));
  r = cuKernelGetFunction(&k->function, k->kernel);
  if (r != CUDA_SUCCESS) return make_error(ErrorCode::internal, cu_error(r, "cuKernelGetFunction"));
  // The backend's modules whose every kernel is PDL-aware; a quant plugin's GEMV entries
  // say so in their registration (memra_matmul_kernels.pdl, CudaBackend::scheme_kernel).
  const std::string& mn = module->name;
  k->pdl = mn == "norm" || mn == "activation" || mn == "rope" || mn == "attention" || mn.rfind("matmul8_", 0) == 0 || mn.rfind("nvrtc:rms_norm_dim", 0) == 0;
  Kernel* raw = k.get();
  module->kernels[kernel_name] = std::move(k);
  return raw;
}

Result<Kernel*> KernelModules::kernel(const std::string& module_name, const std::string& kernel_name) {
  auto m = load(module_name);
  if (!m) return m.error();
  return get(*m, kernel_name);
}

}  // namespace memra::backend::cuda
