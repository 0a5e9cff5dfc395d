#include "host/backend/cuda/nvrtc_compiler.hpp"

#include <dlfcn.h>
#include <nvrtc.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace memra::backend::cuda {
namespace {

struct NvrtcFns {
  decltype(&nvrtcVersion) version = nullptr;
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcGetErrorString) error_string = nullptr;
  int major = 0, minor = 0;
};

NvrtcFns g_nvrtc;
bool g_loaded = false;

bool load_nvrtc(std::string& reason) {
  if (g_loaded) return true;
  void* h = nullptr;
  // The loader's search path first, then the toolkit's usual places.
  std::vector<std::string> names = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* root = std::getenv(env); root && *root) names.push_back(std::string(root) + "/lib64/libnvrtc.so.13");
  names.push_back("/usr/local/cuda/lib64/libnvrtc.so.13");
  for (const std::string& name : names) {
    h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) break;
  }
  if (!h) {
    reason = "libnvrtc.so.13 not found (install the CUDA toolkit's NVRTC or add it to LD_LIBRARY_PATH)";
    return false;
  }
  auto sym = [&](const char* n) { return dlsym(h, n); };
  g_nvrtc.version = reinterpret_cast<decltype(g_nvrtc.version)>(sym("nvrtcVersion"));
  g_nvrtc.create = reinterpret_cast<decltype(g_nvrtc.create)>(sym("nvrtcCreateProgram"));
  g_nvrtc.compile = reinterpret_cast<decltype(g_nvrtc.compile)>(sym("nvrtcCompileProgram"));
  g_nvrtc.log_size = reinterpret_cast<decltype(g_nvrtc.log_size)>(sym("nvrtcGetProgramLogSize"));
  g_nvrtc.log = reinterpret_cast<decltype(g_nvrtc.log)>(sym("nvrtcGetProgramLog"));
  g_nvrtc.cubin_size = reinterpret_cast<decltype(g_nvrtc.cubin_size)>(sym("nvrtcGetCUBINSize"));
  g_nvrtc.cubin = reinterpret_cast<decltype(g_nvrtc.cubin)>(sym("nvrtcGetCUBIN"));
  g_nvrtc.destroy = reinterpret_cast<decltype(g_nvrtc.destroy)>(sym("nvrtcDestroyProgram"));
  g_nvrtc.error_string = reinterpret_cast<decltype(g_nvrtc.error_string)>(sym("nvrtcGetErrorString"));
  if (!g_nvrtc.version || !g_nvrtc.create || !g_nvrtc.compile || !g_nvrtc.log_size || !g_nvrtc.log ||
      !g_nvrtc.cubin_size || !g_nvrtc.cubin || !g_nvrtc.destroy || !g_nvrtc.error_string) {
    reason = "libnvrtc lacks an expected symbol (too old?)";
    return false;
  }
  g_nvrtc.version(&g_nvrtc.major, &g_nvrtc.minor);
  g_loaded = true;
  return true;
}

constexpr const char* kCacheMagic = "MEMRA-NVRTC-CUBIN 1\n";

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string safe_name(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return out.empty() ? "kernel" : out.substr(0, 64);
}

}  // namespace

uint64_t fnv1a64(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool NvrtcCompiler::available() {
  if (!tried_) {
    tried_ = true;
    load_nvrtc(unavailable_reason_);
  }
  return g_loaded;
}

std::string NvrtcCompiler::version() const {
  return g_loaded ? std::to_string(g_nvrtc.major) + "." + std::to_string(g_nvrtc.minor) : "unavailable";
}

Result<std::vector<char>> NvrtcCompiler::compile(const NvrtcRequest& req) {
  last_cache_hit_ = false;
  if (!available()) return make_error(ErrorCode::unsupported, "NVRTC unavailable: " + unavailable_reason_);
  std::vector<std::string> opts = {"--gpu-architecture=" + arch_, "--std=c++17", "--fmad=false"};
  for (const std::string& o : req.options) opts.push_back(o);

  // The key: everything that changes the CUBIN.
  std::string key = "source:" + hex64(fnv1a64(req.source)) + ":" + std::to_string(req.source.size()) + "\n";
  for (const std::string& o : opts) key += "option:" + o + "\n";
  key += "nvrtc:" + version() + "\n";
  const std::filesystem::path file =
      std::filesystem::path(cache_dir_) / (safe_name(req.name) + "-" + arch_ + "-" + hex64(fnv1a64(key + req.source)) + ".cubin");

  if (!cache_dir_.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string data = ss.str();
      const std::string header = std::string(kCacheMagic) + key;
      if (data.size() > header.size() + 8 && data.compare(0, header.size(), header) == 0 && data[header.size()] == '\0') {
        last_cache_hit_ = true;
        return std::vector<char>(data.begin() + static_cast<std::ptrdiff_t>(header.size()) + 1, data.end());
      }
    }
  }

  nvrtcProgram prog = nullptr;
  nvrtcResult r = g_nvrtc.create(&prog, req.source.c_str(), (req.name + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return make_error(ErrorCode::internal, std::string("nvrtcCreateProgram: ") + g_nvrtc.error_string(r));
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  r = g_nvrtc.compile(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  g_nvrtc.log_size(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) g_nvrtc.log(prog, log.data());
  if (r != NVRTC_SUCCESS) {
    g_nvrtc.destroy(&prog);
    return make_error(ErrorCode::invalid_argument, "NVRTC could not compile " + req.name + " for " + arch_ + ": " + g_nvrtc.error_string(r) + "\n" + log);
  }
  size_t size = 0;
  g_nvrtc.cubin_size(prog, &size);
  std::vector<char> cubin(size);
  g_nvrtc.cubin(prog, cubin.data());
  g_nvrtc.destroy(&prog);

  if (!cache_dir_.empty()) {
    // Write-then-rename so a concurrent reader never sees half a file.
    std::error_code ec;
    std::filesystem::create_directories(cache_dir_, ec);
    const std::filesystem::path tmp = file.string() + ".tmp" + std::to_string(::getpid());
    std::ofstream out(tmp, std::ios::binary);
    if (out) {
      out << kCacheMagic << key << '\0';
      out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
      out.close();
      if (out) std::filesystem::rename(tmp, file, ec);
      if (ec || !out) std::filesystem::remove(tmp, ec);
    }
  }
  return cubin;
}

}  // namespace memra::backend::cuda
