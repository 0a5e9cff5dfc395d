// memra-kernel-check's device harness: tensors and weights on the CUDA backend
// through its C table, comparisons against the CPU references, and the report.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <memory>

#include "core/plugin_host/kernel_services.hpp"
#include "host/backend/backend.hpp"

namespace memra::kcheck {

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A CUDA backend under test (opened with `options`) and what the checks do on it.
class Device {
 public:
  Device(std::unique_ptr<backend::Backend> backend, backend::BackendOptions options);
  backend::Backend& backend() const { return *b_; }
  const backend::BackendOptions& options() const { return options_; }
  const memra_backend_ops& ops() const { return *ops_; }
  memra_backend_ctx* ctx() const { return ops_->ctx; }
  // Another backend on the same device with changed options (settings are fixed at open:
  // eager vs graph steps, precise vs fast prefill). Throws Failure when it cannot open.
  std::unique_ptr<Device> reopen(const std::function<void(backend::BackendOptions&)>& change) const;

  // Throws Failure naming `what` and the backend's last error when st != OK.
  void check(memra_status st, const std::string& what) const;
  void check(const Status& st, const std::string& what) const;

  // The backend's memory and kernel services, as status codes (the detail: last_error()).
  memra_status memory_alloc(memra_memory_location location, uint64_t bytes, memra_buffer* out);
  void memory_free(memra_buffer* buffer);
  memra_status copy_to_device(void* dst, const void* src, uint64_t bytes);
  memra_status copy_to_host(void* dst, const void* src, uint64_t bytes);
  memra_status synchronize();
  memra_status kernel_module_load(const char* name, memra_kernel_module** out);
  memra_status kernel_module_compile(const memra_nvrtc_request* request, memra_kernel_module** out);
  memra_status kernel_get(memra_kernel_module* module, const char* name, memra_kernel** out);
  memra_status kernel_launch(memra_kernel* kernel, const memra_launch_config* config, void** args);
  memra_status allocate_kv(const backend::KvCacheConfig& kv);
  memra_status sample_rows(const backend::SampleRequest& request, int32_t* tokens);
  memra_device_info device_info() const { return b_->device_info(); }
  const std::string& last_error() const { return last_error_; }
  memra_tensor tensor(const std::vector<int64_t>& shape);
  memra_tensor upload(const std::vector<float>& host, const std::vector<int64_t>& shape);
  std::vector<float> download(const memra_tensor& t);
  // Host bytes registered as a model weight (uploaded at once; kept alive for the run,
  // so no later buffer reuses the host address the backend maps from).
  const memra_weight* weight(const std::string& name, const std::string& quant, memra_dtype dtype,
                             const std::vector<int64_t>& shape, std::vector<uint8_t> bytes);
  const memra_weight* f32_weight(const std::string& name, const std::vector<float>& values);
  void begin_step();

 private:
  memra_status status(const Status& st);
  memra_status service(memra_status st, std::string why);
  std::unique_ptr<backend::Backend> b_;
  backend::BackendOptions options_;
  const memra_backend_ops* ops_;
  std::string plugin_dir_;  // the quant plugins' directory (their kernel modules)
  std::string last_error_;
  std::deque<std::vector<uint8_t>> bytes_;
  std::deque<std::string> strings_;
  std::deque<memra_weight> weights_;
};

struct Comparison {
  double nmse = 0;          // sum (out - ref)^2 / sum ref^2 over finite refs (0/0 -> 0 when out is zero too)
  double max_abs = 0;
  bool bitwise = true;      // every element's bits equal
  size_t nonfinite_mismatch = 0;  // ref non-finite but out differs in class (or out non-finite where ref is not)
};
Comparison compare(const std::vector<float>& out, const std::vector<float>& ref);

// Random inputs. Flavours: "random" N(0,1), "large" N(0,1)*3e4, "zeros", "denormal"
// (subnormal floats mixed with small normals).
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  std::vector<float> floats(size_t n, const std::string& flavour = "random");
  float normal() { return dist_(gen_); }
  uint32_t bits() { return static_cast<uint32_t>(gen_()); }
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen_); }
  std::mt19937_64& engine() { return gen_; }

 private:
  std::mt19937_64 gen_;
  std::normal_distribution<float> dist_{0.0f, 1.0f};
};

// Block tables of `seqs` sequences, max_blocks each, over seqs * max_blocks physical
// blocks in shuffled order (the KV checks' caches exercise the paging).
std::vector<std::vector<int32_t>> scattered_block_tables(int32_t seqs, int32_t max_blocks, Rng& rng);

struct CheckLine {
  std::string name;
  bool pass = false;
  std::string detail;
};

// Collects lines; print() is called for each as it completes.
class Report {
 public:
  explicit Report(std::function<void(const CheckLine&)> print) : print_(std::move(print)) {}
  void add(const std::string& name, bool pass, const std::string& detail);
  // "nmse 1.2e-14 <= 1e-09" and pass/fail from a comparison and a bound.
  void nmse(const std::string& name, const Comparison& c, double bound);
  void bitwise(const std::string& name, const Comparison& c);
  // Runs f; an exception becomes a FAIL line named `name`.
  void guard(const std::string& name, const std::function<void()>& f);
  const std::vector<CheckLine>& lines() const { return lines_; }
  bool all_pass() const;
  bool wants(const std::string& name) const { return filter.empty() || name.find(filter) != std::string::npos; }
  std::string filter;

 private:
  std::function<void(const CheckLine&)> print_;
  std::vector<CheckLine> lines_;
};

std::string fmt(double v);

}  // namespace memra::kcheck
