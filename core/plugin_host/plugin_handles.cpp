// The handles and objects the host hands out. Each holds the plugin's record,
// and each plugin-created object's deleter calls the plugin's destroy slot.
#include <limits>

#include "core/plugin_host/plugin_host.hpp"
#include "core/plugin_host/plugin_record.hpp"

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

// Runs a slot that writes a string by the buffer protocol (memra/family.h): grows the
// buffer to what the plugin says it needs; a failure with no larger need is the answer.
template <class Slot>
Result<std::string> read_string(const detail::PluginRecord& rec, std::string_view op, Slot&& slot) {
  std::string buf(kFirstDescribeBuffer, '\0');
  for (int attempt = 0; attempt < 3; ++attempt) {
    size_t needed = 0;
    Status st = rec.call(op, [&] { return slot(buf.data(), buf.size(), &needed); });
    if (needed > buf.size()) {
      buf.assign(needed, '\0');
      continue;
    }
    if (!st) return st.error();
    buf.resize(needed > 0 ? needed - 1 : 0);
    return buf;
  }
  return rec.plugin_error(ErrorCode::internal, std::string(op) + " kept asking for a bigger buffer");
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

std::span<const memra_op_def> FamilyPlugin::ops() const { return record_->ops(); }

memra_plugin_ctx* FamilyPlugin::ctx() const { return record_->ctx(); }

Result<ModelPlan> FamilyPlugin::plan_create(const std::string& config_json) const {
  const memra_family_api* f = record_->family();
  memra_model_plan* raw = nullptr;
  MEMRA_TRY(record_->call("plan_create", [&] { return f->plan_create(record_->ctx(), config_json.c_str(), &raw); }));
  if (raw == nullptr) return record_->plugin_error(ErrorCode::internal, "plan_create returned OK but no plan");
  auto rec = record_;
  std::shared_ptr<memra_model_plan> plan(raw, [rec](memra_model_plan* p) {
    rec->call_noexcept("plan_destroy", [&] { rec->family()->plan_destroy(p); });
  });
  return ModelPlan(record_, std::move(plan));
}

Result<std::string> FamilyPlugin::normalize_config(const std::string& raw_json) const {
  const memra_family_api* f = record_->family();
  return read_string(*record_, "config_normalize", [&](char* buf, size_t size, size_t* needed) {
    return f->config_normalize(record_->ctx(), raw_json.c_str(), buf, size, needed);
  });
}

Result<std::optional<std::string>> FamilyPlugin::tensor_name(const std::string& format, const std::string& source_name) const {
  const memra_family_api* f = record_->family();
  char small[256];
  size_t needed = 0;
  memra_status st = MEMRA_ERR_INTERNAL;
  Status call = record_->call("tensor_name", [&] {
    st = f->tensor_name(record_->ctx(), format.c_str(), source_name.c_str(), small, sizeof small, &needed);
    return st == MEMRA_ERR_NOT_FOUND ? MEMRA_OK : st;
  });
  if (st == MEMRA_ERR_NOT_FOUND) return std::optional<std::string>();
  if (needed > sizeof small) {
    auto big = read_string(*record_, "tensor_name", [&](char* buf, size_t size, size_t* n) {
      return f->tensor_name(record_->ctx(), format.c_str(), source_name.c_str(), buf, size, n);
    });
    if (!big) return big.error();
    return std::optional<std::string>(std::move(*big));
  }
  if (!call) return call.error();
  return std::optional<std::string>(std::string(small, needed > 0 ? needed - 1 : 0));
}

Result<std::optional<std::string>> FamilyPlugin::tensor_parts(const std::string& format, const std::string& source_name) const {
  const memra_family_api* f = record_->family();
  if (!MEMRA_STRUCT_HAS(f, memra_family_api, tensor_parts) || f->tensor_parts == nullptr) return std::optional<std::string>();
  memra_status st = MEMRA_ERR_INTERNAL;
  size_t needed = 0;
  MEMRA_TRY(record_->call("tensor_parts", [&] {
    st = f->tensor_parts(record_->ctx(), format.c_str(), source_name.c_str(), nullptr, 0, &needed);
    return st == MEMRA_ERR_NOT_FOUND || st == MEMRA_ERR_INVALID_ARGUMENT ? MEMRA_OK : st;
  }));
  if (st == MEMRA_ERR_NOT_FOUND) return std::optional<std::string>();
  auto text = read_string(*record_, "tensor_parts", [&](char* buf, size_t size, size_t* n) {
    return f->tensor_parts(record_->ctx(), format.c_str(), source_name.c_str(), buf, size, n);
  });
  if (!text) return text.error();
  return std::optional<std::string>(std::move(*text));
}

const std::string& ModelPlan::plugin_name() const { return record_->info().name; }

Result<std::string> ModelPlan::describe() const {
  const memra_family_api* f = record_->family();
  return read_string(*record_, "plan_describe",
                     [&](char* buf, size_t size, size_t* needed) { return f->plan_describe(plan_.get(), buf, size, needed); });
}

Result<memra_plan_info> ModelPlan::info() const {
  memra_plan_info info{};
  info.struct_size = MEMRA_PLAN_INFO_STRUCT_SIZE;
  MEMRA_TRY(record_->call("plan_info", [&] { return record_->family()->plan_info(plan_.get(), &info); }));
  return info;
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

memra_plugin_ctx* QuantPlugin::ctx() const { return record_->ctx(); }

Result<uint64_t> QuantPlugin::weight_bytes(const std::string& scheme, int64_t rows, int64_t cols) const {
  const memra_quant_api* q = record_->quant();
  uint64_t bytes = 0;
  MEMRA_TRY(record_->call("weight_bytes", [&] { return q->weight_bytes(record_->ctx(), scheme.c_str(), rows, cols, &bytes); }));
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
    return q->quantize(record_->ctx(), scheme.c_str(), src.data(), rows, cols, dst.data(), dst.size());
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
    return q->dequantize(record_->ctx(), scheme.c_str(), src.data(), src.size(), rows, cols, dst.data());
  });
}

Status QuantPlugin::matmul(const memra_matmul_args& args) const {
  if (args.struct_size < MEMRA_MATMUL_ARGS_STRUCT_SIZE) {
    return make_error(ErrorCode::invalid_argument, "matmul: args.struct_size is not set; use MEMRA_MATMUL_ARGS_STRUCT_SIZE");
  }
  const memra_quant_api* q = record_->quant();
  return record_->call("matmul", [&] { return q->matmul(record_->ctx(), &args); });
}

}  // namespace memra::plugins
