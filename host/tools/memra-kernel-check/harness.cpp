#include "host/tools/memra-kernel-check/harness.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "core/plugin_host/plugin_host.hpp"
#include "host/backend/plugin_kernels.hpp"

namespace memra::kcheck {
namespace {

// The build's quant plugins (lib/memra/plugins beside the backend module), loaded once and
// kept for the run: every scheme's kernels are theirs (memra_quant_api.register_kernels).
struct SchemePlugins {
  std::string dir;
  std::unique_ptr<plugins::PluginHost> host;
  std::vector<plugins::QuantPlugin> quants;
};

SchemePlugins& scheme_plugins(const backend::BackendOptions& o) {
  static SchemePlugins p;
  if (p.host) return p;
  const std::string module = o.module_path.empty() ? backend::default_cuda_backend_path() : o.module_path;
  p.dir = (std::filesystem::path(module).parent_path() / "plugins").string();
  plugins::PluginHostOptions po;
  po.plugin_dirs.emplace_back(p.dir);
  po.use_env_path = false;
  po.use_install_dir = false;
  p.host = std::make_unique<plugins::PluginHost>(std::move(po));
  p.host->discover();
  for (const plugins::PluginInfo& info : p.host->plugins())
    if (info.kind == plugins::PluginKind::quant)
      if (auto q = p.host->quant(info.name)) p.quants.push_back(std::move(*q));
  return p;
}

}  // namespace

Device::Device(std::unique_ptr<backend::Backend> backend, backend::BackendOptions options)
    : b_(std::move(backend)), options_(std::move(options)), ops_(b_->ops()) {
  SchemePlugins& p = scheme_plugins(options_);
  plugin_dir_ = p.dir;
  if (p.quants.empty()) throw Failure("no quant plugins in " + p.dir + ": every scheme's kernels come from them (build them)");
  for (const std::string& line : backend::register_plugin_kernels(*b_, p.quants)) throw Failure(line);
}

std::unique_ptr<Device> Device::reopen(const std::function<void(backend::BackendOptions&)>& change) const {
  backend::BackendOptions o = options_;
  change(o);
  auto b = backend::open_backend(o);
  if (!b) throw Failure("opening a second backend: " + b.error().message);
  return std::make_unique<Device>(std::move(*b), o);
}

void Device::check(memra_status st, const std::string& what) const {
  if (st != MEMRA_OK) {
    const std::string why = !last_error_.empty() ? last_error_ : b_->last_error();
    throw Failure(what + " returned " + memra_status_name(st) + ": " + why);
  }
}

void Device::check(const Status& st, const std::string& what) const {
  if (!st) throw Failure(what + ": " + st.error().message);
}

memra_status Device::status(const Status& st) {
  if (st) return MEMRA_OK;
  last_error_ = st.error().message;
  switch (st.error().code) {
    case ErrorCode::invalid_argument: return MEMRA_ERR_INVALID_ARGUMENT;
    case ErrorCode::not_found: return MEMRA_ERR_NOT_FOUND;
    case ErrorCode::unsupported: return MEMRA_ERR_UNSUPPORTED;
    default: return MEMRA_ERR_INTERNAL;
  }
}

memra_status Device::service(memra_status st, std::string why) {
  if (st != MEMRA_OK) last_error_ = std::move(why);
  return st;
}

memra_status Device::memory_alloc(memra_memory_location location, uint64_t bytes, memra_buffer* out) {
  auto b = b_->memory_alloc(location, bytes);
  if (!b) return status(b.error());
  *out = *b;
  return MEMRA_OK;
}
void Device::memory_free(memra_buffer* buffer) { b_->memory_free(*buffer); }
memra_status Device::copy_to_device(void* dst, const void* src, uint64_t bytes) { return status(b_->copy_to_device(dst, src, bytes)); }
memra_status Device::copy_to_host(void* dst, const void* src, uint64_t bytes) { return status(b_->copy_to_host(dst, src, bytes)); }
memra_status Device::synchronize() { return status(b_->synchronize()); }
memra_status Device::allocate_kv(const backend::KvCacheConfig& kv) { return status(b_->allocate_state({kv, {}})); }
memra_status Device::sample_rows(const backend::SampleRequest& request, int32_t* tokens) {
  return status(b_->sample_rows(request, tokens));
}
memra_status Device::kernel_module_load(const char* name, memra_kernel_module** out) {
  std::string why;
  // The backend's modules (lib/memra/kernels) and the quant plugins' (lib/memra/plugins).
  return service(b_->kernel_services()->module_load(plugin_dir_, name, out, &why), why);
}
memra_status Device::kernel_module_compile(const memra_nvrtc_request* request, memra_kernel_module** out) {
  std::string why;
  return service(b_->kernel_services()->module_compile(request, out, &why), why);
}
memra_status Device::kernel_get(memra_kernel_module* module, const char* name, memra_kernel** out) {
  std::string why;
  return service(b_->kernel_services()->kernel_get(module, name, out, &why), why);
}
memra_status Device::kernel_launch(memra_kernel* kernel, const memra_launch_config* config, void** args) {
  std::string why;
  return service(b_->kernel_services()->kernel_launch(kernel, config, args, &why), why);
}

memra_tensor Device::tensor(const std::vector<int64_t>& shape) {
  memra_tensor t{};
  check(ops_->tensor_create(ctx(), static_cast<int32_t>(shape.size()), shape.data(), &t), "tensor_create");
  return t;
}

memra_tensor Device::upload(const std::vector<float>& host, const std::vector<int64_t>& shape) {
  memra_tensor t = tensor(shape);
  check(copy_to_device(t.data, host.data(), host.size() * sizeof(float)), "copy_to_device");
  return t;
}

std::vector<float> Device::download(const memra_tensor& t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t.ndim; ++i) n *= t.shape[i];
  std::vector<float> out(static_cast<size_t>(n));
  check(copy_to_host(out.data(), t.data, out.size() * sizeof(float)), "copy_to_host (or an earlier kernel)");
  return out;
}

const memra_weight* Device::weight(const std::string& name, const std::string& quant, memra_dtype dtype,
                                   const std::vector<int64_t>& shape, std::vector<uint8_t> bytes) {
  bytes_.push_back(std::move(bytes));
  strings_.push_back(name);
  const char* n = strings_.back().c_str();
  strings_.push_back(quant);
  memra_weight w{};
  w.struct_size = MEMRA_WEIGHT_STRUCT_SIZE;
  w.name = n;
  w.quant = strings_.back().c_str();
  w.dtype = dtype;
  w.ndim = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) w.shape[i] = shape[i];
  w.bytes = bytes_.back().size();
  w.data = bytes_.back().data();
  weights_.push_back(w);
  const memra_weight_set set{MEMRA_WEIGHT_SET_STRUCT_SIZE, 1, &weights_.back()};
  check(b_->upload_weights(set), "upload_weights(" + name + ")");
  return &weights_.back();
}

const memra_weight* Device::f32_weight(const std::string& name, const std::vector<float>& values) {
  std::vector<uint8_t> b(values.size() * 4);
  std::memcpy(b.data(), values.data(), b.size());
  return weight(name, "f32", MEMRA_DTYPE_F32, {static_cast<int64_t>(values.size())}, std::move(b));
}

void Device::begin_step() { check(b_->begin_step(-1), "begin_step"); }

Comparison compare(const std::vector<float>& out, const std::vector<float>& ref) {
  Comparison c;
  if (out.size() != ref.size()) {
    c.bitwise = false;
    c.nonfinite_mismatch = 1;
    c.nmse = INFINITY;
    return c;
  }
  double se = 0, sr = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &out[i], 4);
    std::memcpy(&b, &ref[i], 4);
    if (a != b) c.bitwise = false;
    if (!std::isfinite(ref[i]) || !std::isfinite(out[i])) {
      const bool same = (std::isnan(ref[i]) && std::isnan(out[i])) || a == b;
      if (!same) ++c.nonfinite_mismatch;
      continue;
    }
    const double d = static_cast<double>(out[i]) - static_cast<double>(ref[i]);
    se += d * d;
    sr += static_cast<double>(ref[i]) * ref[i];
    c.max_abs = std::max(c.max_abs, std::fabs(d));
  }
  c.nmse = sr > 0 ? se / sr : (se > 0 ? INFINITY : 0.0);
  return c;
}

std::vector<float> Rng::floats(size_t n, const std::string& flavour) {
  std::vector<float> v(n);
  if (flavour == "zeros") return v;
  for (size_t i = 0; i < n; ++i) {
    float x = dist_(gen_);
    if (flavour == "large") x *= 3e4f;
    if (flavour == "denormal") x = (i % 2) ? x * 1e-39f : x * 1e-3f;
    v[i] = x;
  }
  return v;
}

std::vector<std::vector<int32_t>> scattered_block_tables(int32_t seqs, int32_t max_blocks, Rng& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(seqs) * static_cast<size_t>(max_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng.engine());
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(seqs));
  for (int32_t s = 0; s < seqs; ++s) tables[static_cast<size_t>(s)].assign(ids.begin() + s * max_blocks, ids.begin() + (s + 1) * max_blocks);
  return tables;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

void Report::add(const std::string& name, bool pass, const std::string& detail) {
  lines_.push_back({name, pass, detail});
  if (print_) print_(lines_.back());
}

void Report::nmse(const std::string& name, const Comparison& c, double bound) {
  const bool ok = c.nonfinite_mismatch == 0 && c.nmse <= bound;
  add(name, ok, "nmse " + fmt(c.nmse) + " <= " + fmt(bound) + ", max abs diff " + fmt(c.max_abs) +
                    (c.nonfinite_mismatch ? ", " + std::to_string(c.nonfinite_mismatch) + " non-finite mismatches" : ""));
}

void Report::bitwise(const std::string& name, const Comparison& c) {
  add(name, c.bitwise, c.bitwise ? "bitwise equal" : "differs: max abs diff " + fmt(c.max_abs) + ", nmse " + fmt(c.nmse));
}

void Report::guard(const std::string& name, const std::function<void()>& f) {
  if (!wants(name)) return;
  try {
    f();
  } catch (const std::exception& e) {
    add(name, false, std::string("error: ") + e.what());
  }
}

bool Report::all_pass() const {
  for (const CheckLine& l : lines_)
    if (!l.pass) return false;
  return !lines_.empty();
}

}  // namespace memra::kcheck
