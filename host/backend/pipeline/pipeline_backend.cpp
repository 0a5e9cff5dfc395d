#include "host/backend/pipeline/pipeline_backend.hpp"
#include "host/backend/plugin_kernels.hpp"

#include <algorithm>

namespace memra::backend {
namespace {

constexpr uint64_t kActivationBytes = 4;  // carried tensors are f32 activations

uint64_t tensor_bytes(const memra_tensor& t) {
  uint64_t n = kActivationBytes;
  for (int32_t i = 0; i < t.ndim; ++i) n *= static_cast<uint64_t>(std::max<int64_t>(0, t.shape[i]));
  return n;
}

}  // namespace

PipelineBackend::PipelineBackend(std::vector<std::unique_ptr<Backend>> stages, PipelinePlan plan)
    : stages_(std::move(stages)), plan_(std::move(plan)) {}

Result<std::unique_ptr<PipelineBackend>> PipelineBackend::create(std::vector<std::unique_ptr<Backend>> stages, PipelinePlan plan) {
  if (stages.empty() || static_cast<int32_t>(stages.size()) != plan.stages())
    return make_error(ErrorCode::invalid_argument, "pipeline backend: the stage count differs from the plan's");
  return std::unique_ptr<PipelineBackend>(new PipelineBackend(std::move(stages), std::move(plan)));
}

Error PipelineBackend::stage_error(int32_t s, const Error& e) const {
  return make_error(e.code, "pipeline stage " + std::to_string(s) + " (" + stage(s).name() + "): " + e.message);
}

Status PipelineBackend::fail(Error e) {
  last_error_ = e.message;
  return e;
}

std::string PipelineBackend::name() const {
  std::string n = "pipeline(";
  for (int32_t s = 0; s < num_stages(); ++s) n += (s ? "," : "") + stage(s).name();
  return n + ")";
}

std::vector<const memra_backend_ops*> PipelineBackend::op_tables() const {
  std::vector<const memra_backend_ops*> t;
  for (int32_t s = 0; s < num_stages(); ++s) t.push_back(stage(s).ops());
  return t;
}

Status PipelineBackend::register_kernels(const std::string& plugin, memra_plugin_ctx* ctx, RegisterKernelsFn fn, int32_t* added) {
  int32_t total = 0;
  for (int32_t s = 0; s < num_stages(); ++s) {
    int32_t n = 0;
    if (auto st = stage(s).register_kernels(plugin, ctx, fn, &n); !st) return stage_error(s, st.error());
    total += n;
  }
  if (added) *added = total;
  return {};
}

Status PipelineBackend::register_ops(std::span<const ops::PluginOp> ops, std::vector<std::string>* refused) {
  for (int32_t s = 0; s < num_stages(); ++s)
    for (std::string& line : register_plugin_ops(stage(s), ops))
      if (refused) refused->push_back(std::move(line));
  return {};
}

Status PipelineBackend::upload_weights(const memra_weight_set& set) {
  for (int32_t s = 0; s < num_stages(); ++s) {
    std::vector<memra_weight> mine;
    for (size_t i = 0; i < set.count; ++i)
      if (plan_.weight_stages(set.weights[i].name ? set.weights[i].name : "") & (1u << s)) mine.push_back(set.weights[i]);
    const memra_weight_set part{MEMRA_WEIGHT_SET_STRUCT_SIZE, mine.size(), mine.data()};
    if (auto st = stage(s).upload_weights(part); !st) return stage_error(s, st.error());
  }
  return {};
}

Status PipelineBackend::allocate_state(const StateConfig& state) {
  for (int32_t s = 0; s < num_stages(); ++s) {
    const auto first = static_cast<size_t>(plan_.first_layer[static_cast<size_t>(s)]);
    const auto count = static_cast<size_t>(plan_.num_layers[static_cast<size_t>(s)]);
    StateConfig mine = state;
    mine.kv.layers.assign(state.kv.layers.begin() + static_cast<int64_t>(std::min(first, state.kv.layers.size())),
                          state.kv.layers.begin() + static_cast<int64_t>(std::min(first + count, state.kv.layers.size())));
    mine.kv.first_layer = state.kv.first_layer + static_cast<int64_t>(first);
    mine.recurrent.layer_bytes.clear();
    for (size_t l = first; l < first + count && l < state.recurrent.layer_bytes.size(); ++l)
      mine.recurrent.layer_bytes.push_back(state.recurrent.layer_bytes[l]);
    if (auto st = stage(s).allocate_state(mine); !st) return stage_error(s, st.error());
  }
  return {};
}

Status PipelineBackend::forward(const memra_forward_batch& batch, const ForwardFn& fn) {
  std::vector<memra_tensor> carry;  // on the stage about to run
  for (int32_t s = 0; s < num_stages(); ++s) {
    const auto k = static_cast<size_t>(s);
    memra_forward_batch b = batch;
    b.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
    b.layer_begin = static_cast<int32_t>(plan_.first_layer[k]);
    b.layer_end = static_cast<int32_t>(plan_.first_layer[k] + plan_.num_layers[k]);
    b.carry_in = carry.empty() ? nullptr : carry.data();
    b.num_carry_in = static_cast<int32_t>(carry.size());
    memra_tensor out[MEMRA_MAX_CARRY] = {};
    int32_t num_out = 0;
    b.carry_out = out;
    b.num_carry_out = &num_out;
    // A stage sees the batch before its first op (its matmuls pick the prompt-row path by it).
    if (auto st = stage(s).prepare_batch(b); !st) return fail(stage_error(s, st.error()));
    if (auto st = fn(k, b); !st) {
      std::string why = st.error().message;
      if (const std::string e = stage(s).last_error(); !e.empty()) why += " (" + e + ")";
      return fail(stage_error(s, make_error(st.error().code, why)));
    }
    if (s + 1 == num_stages()) break;
    if (num_out <= 0 || num_out > MEMRA_MAX_CARRY)
      return fail(stage_error(s, make_error(ErrorCode::invalid_argument, "the family plugin's layer range left " + std::to_string(num_out) +
                                                                              " carried tensors (1 to " + std::to_string(MEMRA_MAX_CARRY) + " expected)")));
    // The hand-off: each carried tensor into the next stage's step scratch.
    Backend& next = stage(s + 1);
    const memra_backend_ops& o = *next.ops();
    carry.assign(static_cast<size_t>(num_out), memra_tensor{});
    for (int32_t i = 0; i < num_out; ++i) {
      const memra_tensor& src = out[i];
      memra_tensor& dst = carry[static_cast<size_t>(i)];
      if (src.ndim < 1 || src.ndim > 4 || o.tensor_create(o.ctx, src.ndim, src.shape, &dst) != MEMRA_OK)
        return fail(stage_error(s + 1, make_error(ErrorCode::internal, "tensor_create for a hand-off: " + next.last_error())));
      const uint64_t bytes = tensor_bytes(src);
      if (auto st = next.copy_from(stage(s), dst.data, src.data, bytes); !st) return fail(stage_error(s + 1, st.error()));
      ++handoffs_;
      handoff_bytes_ += bytes;
    }
  }
  return {};
}

Status PipelineBackend::begin_step(int32_t slot) {
  Status first;
  for (int32_t s = 0; s < num_stages(); ++s) {
    // Every stage, even after a failure: each waits for its work.
    Status st = stage(s).begin_step(slot);
    if (!st && first) first = stage_error(s, st.error());
  }
  handoffs_ = 0;
  handoff_bytes_ = 0;
  last_error_.clear();
  return first;
}

Status PipelineBackend::wait_logits(int32_t slot) {
  for (int32_t s = 0; s < num_stages(); ++s)
    if (auto st = stage(s).wait_logits(slot); !st) return stage_error(s, st.error());
  return {};
}

bool PipelineBackend::defers_slot_logits() const {
  for (int32_t s = 0; s < num_stages(); ++s)
    if (stage(s).defers_slot_logits()) return true;
  return false;
}

Status PipelineBackend::copy_kv_block(int32_t pool, int32_t from, int32_t to) {
  for (int32_t s = 0; s < num_stages(); ++s)
    if (auto st = stage(s).copy_kv_block(pool, from, to); !st) return stage_error(s, st.error());
  return {};
}

Status PipelineBackend::copy_state_slot(int32_t from, int32_t to) {
  for (int32_t s = 0; s < num_stages(); ++s)
    if (auto st = stage(s).copy_state_slot(from, to); !st) return stage_error(s, st.error());
  return {};
}

Status PipelineBackend::reset_state_slot(int32_t slot) {
  for (int32_t s = 0; s < num_stages(); ++s)
    if (auto st = stage(s).reset_state_slot(slot); !st) return stage_error(s, st.error());
  return {};
}

Status PipelineBackend::sample_rows(const SampleRequest& request, int32_t* tokens) {
  const int32_t last = num_stages() - 1;
  if (auto st = stage(last).sample_rows(request, tokens); !st) return stage_error(last, st.error());
  return {};
}

Status PipelineBackend::logits_rows_to_host(std::span<const int32_t> rows, float* dst) {
  const int32_t last = num_stages() - 1;
  if (auto st = stage(last).logits_rows_to_host(rows, dst); !st) return stage_error(last, st.error());
  return {};
}

BackendStats PipelineBackend::stats() const {
  BackendStats t;
  for (int32_t s = 0; s < num_stages(); ++s) {
    const BackendStats x = stage(s).stats();
    t.graph_replays += x.graph_replays;
    t.graph_captures += x.graph_captures;
    t.plugin_matmuls += x.plugin_matmuls;
    t.plugin_launches_replayed += x.plugin_launches_replayed;
    t.plugin_launches_captured += x.plugin_launches_captured;
    t.plugin_launches_eager += x.plugin_launches_eager;
    t.nvrtc_cache_hits += x.nvrtc_cache_hits;
  }
  t.handoffs = handoffs_;
  t.handoff_bytes = handoff_bytes_;
  return t;
}

}  // namespace memra::backend
