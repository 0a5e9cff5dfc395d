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

#include "host/backend_cuda/cuda_backend_api.h"

namespace memra::kcheck {

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Device {
 public:
  Device(const memra_cuda_backend_api* api, memra_cuda_backend* backend);
  const memra_cuda_backend_api& api() const { return *api_; }
  memra_cuda_backend* backend() const { return b_; }
  const memra_backend_ops& ops() const { return *ops_; }
  memra_backend_ctx* ctx() const { return ops_->ctx; }

  // Throws Failure naming `what` and the backend's last error when st != OK.
  void check(memra_status st, const std::string& what) const;
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
  const memra_cuda_backend_api* api_;
  memra_cuda_backend* b_;
  const memra_backend_ops* ops_;
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
