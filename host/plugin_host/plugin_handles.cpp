// The handles and objects the host hands out. Each holds the plugin's record,
// and each plugin-created object's deleter calls the plugin's destroy slot.
#include <limits>

#include "host/plugin_host/plugin_host.hpp"
#include "host/plugin_host/plugin_record.hpp"

namespace memra::plugins {

namespace {

constexpr size_t kFirstDescribeBuffer = 4096;

bool element_count(int64_t rows, int64_t cols, size_t* out) {
  if (rows < 0 || cols < 0) return false;
  if (cols != 0 && static_cast<uint64_t>(rows) > std::numeric_limits<size_t>::max() / static_cast<uint64_t>(cols)) {
    return false;
  }
  *out = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  return true;
}

}  // namespace

// ---- PluginHandle ---------------------------------------------------------

PluginHandle::PluginHandle(std::shared_ptr<const detail::PluginRecord> record) : record_(std::move(record)) {}

const PluginInfo& PluginHandle::info() const { return record_->info(); }

int32_t PluginHandle::score(const memra_device_info& device, const std::string& handled_name) const {
  return record_->score(device, handled_name.c_str());
}

std::string PluginHandle::last_error() const { return record_->services().last_error(); }

// ---- family ---------------------------------------------------------------

const memra_family_api& FamilyPlugin::api() const { return *record_->family(); }

Result<ModelPlan> FamilyPlugin::plan_create(const std::string& config_json) const {
  const memra_family_api* f = record_->family();
  memra_model_plan* raw = nullptr;
  MEMRA_TRY(record_->call("plan_create", [&] { return f->plan_create(config_json.c_str(), &raw); }));
  if (raw == nullptr) return record_->plugin_error(ErrorCode::internal, "plan_create returned OK but no plan");
  auto rec = record_;
  std::shared_ptr<memra_model_plan> plan(raw, [rec](memra_model_plan* p) {
    rec->call_noexcept("plan_destroy", [&] { rec->family()->plan_destroy(p); });
  });
  return ModelPlan(record_, std::move(plan));
}

const std::string& ModelPlan::plugin_name() const { return record_->info().name; }

Result<std::string> ModelPlan::describe() const {
  const memra_family_api* f = record_->family();
  std::string buf(kFirstDescribeBuffer, '\0');
  // Grow once or twice if the plan is bigger than the first buffer.
  for (int attempt = 0; attempt < 3; ++attempt) {
    size_t needed = 0;
    Status st = record_->call("plan_describe", [&] {
      return f->plan_describe(plan_.get(), buf.data(), buf.size(), &needed);
    });
    if (needed > buf.size()) {
      buf.assign(needed, '\0');
      continue;
    }
    if (!st) return st.error();
    buf.resize(needed > 0 ? needed - 1 : 0);
    return buf;
  }
  return record_->plugin_error(ErrorCode::internal, "plan_describe kept asking for a bigger buffer");
}

Result<Model> ModelPlan::create_model(const memra_weight_set& weights, const memra_backend_ops* ops) const {
  const memra_family_api* f = record_->family();
  memra_model* raw = nullptr;
  MEMRA_TRY(record_->call("model_create", [&] { return f->model_create(plan_.get(), &weights, ops, &raw); }));
  if (raw == nullptr) return record_->plugin_error(ErrorCode::internal, "model_create returned OK but no model");
  auto rec = record_;
  auto plan = plan_;  // the model may refer to its plan: keep it alive
  std::shared_ptr<memra_model> model(raw, [rec, plan](memra_model* m) {
    rec->call_noexcept("model_destroy", [&] { rec->family()->model_destroy(m); });
  });
  return Model(record_, std::move(model));
}

const std::string& Model::plugin_name() const { return record_->info().name; }

Status Model::forward(const memra_forward_batch& batch) const {
  const memra_family_api* f = record_->family();
  return record_->call("model_forward", [&] { return f->model_forward(model_.get(), &batch); });
}

// ---- quant ----------------------------------------------------------------

const memra_quant_api& QuantPlugin::api() const { return *record_->quant(); }

Result<uint64_t> QuantPlugin::weight_bytes(const std::string& scheme, int64_t rows, int64_t cols) const {
  const memra_quant_api* q = record_->quant();
  uint64_t bytes = 0;
  MEMRA_TRY(record_->call("weight_bytes", [&] { return q->weight_bytes(scheme.c_str(), rows, cols, &bytes); }));
  return bytes;
}

Status QuantPlugin::quantize(const std::string& scheme, std::span<const float> src, int64_t rows, int64_t cols,
                             std::span<std::byte> dst) const {
  size_t n = 0;
  if (!element_count(rows, cols, &n) || src.size() < n) {
    return make_error(ErrorCode::invalid_argument, "quantize: src holds " + std::to_string(src.size()) +
                                                       " floats, fewer than rows*cols for the given shape");
  }
  const memra_quant_api* q = record_->quant();
  return record_->call("quantize", [&] {
    return q->quantize(scheme.c_str(), src.data(), rows, cols, dst.data(), dst.size());
  });
}

Status QuantPlugin::dequantize(const std::string& scheme, std::span<const std::byte> src, int64_t rows,
                               int64_t cols, std::span<float> dst) const {
  size_t n = 0;
  if (!element_count(rows, cols, &n) || dst.size() < n) {
    return make_error(ErrorCode::invalid_argument, "dequantize: dst holds " + std::to_string(dst.size()) +
                                                       " floats, fewer than rows*cols for the given shape");
  }
  const memra_quant_api* q = record_->quant();
  return record_->call("dequantize", [&] {
    return q->dequantize(scheme.c_str(), src.data(), src.size(), rows, cols, dst.data());
  });
}

Status QuantPlugin::matmul(const memra_matmul_args& args) const {
  if (args.struct_size < MEMRA_MATMUL_ARGS_STRUCT_SIZE) {
    return make_error(ErrorCode::invalid_argument, "matmul: args.struct_size is not set; use MEMRA_MATMUL_ARGS_STRUCT_SIZE");
  }
  const memra_quant_api* q = record_->quant();
  return record_->call("matmul", [&] { return q->matmul(&args); });
}

}  // namespace memra::plugins
