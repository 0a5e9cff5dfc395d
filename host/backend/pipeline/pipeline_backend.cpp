#include "host/backend/pipeline/pipeline_backend.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <exception>

#include "host/ops/op_registry.hpp"

namespace memra::backend {
namespace {

constexpr uint64_t kAlign = 256;
constexpr uint64_t kElem = 4;  // every stage's activation type is F32

PipelineBackend* self(memra_backend_ctx* ctx) { return reinterpret_cast<PipelineBackend*>(ctx); }

// Every op body runs inside this: no exception ever crosses the C boundary.
template <class F>
memra_status guarded(memra_backend_ctx* ctx, F&& f) {
  try {
    return f(self(ctx));
  } catch (const std::exception& e) {
    return self(ctx)->fail(MEMRA_ERR_INTERNAL, std::string("pipeline backend: ") + e.what());
  } catch (...) {
    return self(ctx)->fail(MEMRA_ERR_INTERNAL, "pipeline backend: unknown exception");
  }
}

uint64_t numel(const memra_tensor* t) {
  uint64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= static_cast<uint64_t>(std::max<int64_t>(0, t->shape[i]));
  return n;
}

int32_t highest(uint32_t mask) {
  for (int32_t s = 31; s >= 0; --s)
    if (mask & (1u << s)) return s;
  return -1;
}

}  // namespace

PipelineBackend::PipelineBackend(std::vector<std::unique_ptr<Backend>> stages, PipelinePlan plan)
    : stages_(std::move(stages)), plan_(std::move(plan)) {
  using PB = PipelineBackend;
  ops_.struct_size = MEMRA_BACKEND_OPS_STRUCT_SIZE;
  ops_.ctx = reinterpret_cast<memra_backend_ctx*>(this);
  ops_.tensor_create = [](memra_backend_ctx* c, int32_t nd, const int64_t* s, memra_tensor* o) {
    return guarded(c, [&](PB* b) { return b->tensor_create(nd, s, o); });
  };
  ops_.embedding = [](memra_backend_ctx* c, const memra_weight* t, const memra_forward_batch* bt, float sc, memra_tensor* o) {
    return guarded(c, [&](PB* b) { return b->embedding(t, bt, sc, o); });
  };
  ops_.rms_norm = [](memra_backend_ctx* c, const memra_tensor* x, const memra_weight* w, float eps, float off, memra_tensor* o) {
    return guarded(c, [&](PB* b) { return b->rms_norm(x, w, eps, off, o); });
  };
  ops_.add_rms_norm = [](memra_backend_ctx* c, const memra_tensor* x, memra_tensor* r, const memra_weight* w, float eps,
                         float off, memra_tensor* o) {
    return guarded(c, [&](PB* b) { return b->add_rms_norm(x, r, w, eps, off, o); });
  };
  ops_.add = [](memra_backend_ctx* c, const memra_tensor* a, const memra_tensor* bb, memra_tensor* o) {
    return guarded(c, [&](PB* b) { return b->add(a, bb, o); });
  };
  ops_.matmul = [](memra_backend_ctx* c, const memra_tensor* x, const memra_weight* w, const memra_weight* bias, memra_tensor* o) {
    return guarded(c, [&](PB* b) { return b->matmul(x, w, bias, o); });
  };
  ops_.gated_activation = [](memra_backend_ctx* c, memra_activation a, const memra_tensor* g, const memra_tensor* u, memra_tensor* o) {
    return guarded(c, [&](PB* b) { return b->gated_activation(a, g, u, o); });
  };
  ops_.attention = [](memra_backend_ctx* c, const memra_attention_params* p, const memra_forward_batch* bt, memra_tensor* q,
                      memra_tensor* k, const memra_tensor* v, memra_tensor* o) {
    return guarded(c, [&](PB* b) { return b->attention(p, bt, q, k, v, o); });
  };
  ops_.gather_logit_rows = [](memra_backend_ctx* c, const memra_tensor* x, const memra_forward_batch* bt, memra_tensor* o) {
    return guarded(c, [&](PB* b) { return b->gather_logit_rows(x, bt, o); });
  };
  ops_.logits_output = [](memra_backend_ctx* c, const memra_tensor* l, const memra_forward_batch* bt) {
    return guarded(c, [&](PB* b) { return b->logits_output(l, bt); });
  };
  ops_.op_find = [](memra_backend_ctx* c, const char* name, uint32_t version, const memra_op** o) {
    return guarded(c, [&](PB* b) { return b->op_find(name, version, o); });
  };
  ops_.op_run = [](memra_backend_ctx* c, const memra_op* op, const memra_op_args* a) {
    return guarded(c, [&](PB* b) { return b->op_run(op, a); });
  };
}

Result<std::unique_ptr<PipelineBackend>> PipelineBackend::create(std::vector<std::unique_ptr<Backend>> stages, PipelinePlan plan,
                                                                 const std::vector<memra_weight>& weights) {
  if (stages.empty() || static_cast<int32_t>(stages.size()) != plan.stages())
    return make_error(ErrorCode::invalid_argument, "pipeline backend: the stage count differs from the plan's");
  std::unique_ptr<PipelineBackend> b(new PipelineBackend(std::move(stages), std::move(plan)));
  b->weights_ = weights;
  for (const memra_weight& w : weights)
    if (w.data) b->weight_masks_[w.data] |= b->plan_.weight_stages(w.name ? w.name : "");
  // Composite tensors get addresses no one can touch: a stray dereference faults
  // instead of reading some stage's memory. Address space only (no memory).
  for (uint64_t size : {uint64_t{1} << 38, uint64_t{1} << 34}) {
    void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      b->space_ = reinterpret_cast<uintptr_t>(p);
      b->space_size_ = size;
      break;
    }
  }
  if (!b->space_) return make_error(ErrorCode::internal, "pipeline backend: cannot reserve address space for its tensors (mmap failed)");
  return b;
}

PipelineBackend::~PipelineBackend() {
  if (space_) munmap(reinterpret_cast<void*>(space_), space_size_);
}

memra_status PipelineBackend::fail(memra_status code, std::string message) {
  last_error_ = std::move(message);
  return code;
}

Error PipelineBackend::stage_error(int32_t s, const Error& e) const {
  return make_error(e.code, "pipeline stage " + std::to_string(s) + " (" + stage(s).name() + "): " + e.message);
}

std::string PipelineBackend::name() const {
  std::string n = "pipeline(";
  for (int32_t s = 0; s < num_stages(); ++s) n += (s ? "," : "") + stage(s).name();
  return n + ")";
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
    mine.kv.layers = static_cast<int64_t>(count);
    mine.recurrent.layer_bytes.clear();
    for (size_t l = first; l < first + count && l < state.recurrent.layer_bytes.size(); ++l)
      mine.recurrent.layer_bytes.push_back(state.recurrent.layer_bytes[l]);
    if (auto st = stage(s).allocate_state(mine); !st) return stage_error(s, st.error());
  }
  return {};
}

bool PipelineBackend::defers_slot_logits() const {
  for (int32_t s = 0; s < num_stages(); ++s)
    if (stage(s).defers_slot_logits()) return true;
  return false;
}

bool PipelineBackend::samples_on_device() const {
  for (int32_t s = 0; s < num_stages(); ++s)
    if (!stage(s).samples_on_device()) return false;
  return true;
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

Status PipelineBackend::wait_logits(int32_t slot) {
  for (int32_t s = 0; s < num_stages(); ++s)
    if (auto st = stage(s).wait_logits(slot); !st)
      return make_error(st.error().code, "pipeline stage " + std::to_string(s) + " (" + stage(s).name() + "): " + st.error().message);
  return {};
}

Status PipelineBackend::begin_step(int32_t slot) {
  Status first;
  for (int32_t s = 0; s < num_stages(); ++s) {
    // Every stage, even after a failure: each waits for its work.
    Status st = stage(s).begin_step(slot);
    if (!st && first) first = make_error(st.error().code, "pipeline stage " + std::to_string(s) + ": " + st.error().message);
  }
  records_.clear();
  space_used_ = 0;
  batch_ = nullptr;
  logits_stage_ = -1;
  prepared_ = 0;
  deferred_.clear();
  handoffs_ = 0;
  handoff_bytes_ = 0;
  last_error_.clear();
  return first;
}

Status PipelineBackend::copy_state_slot(int32_t from, int32_t to) {
  for (int32_t s = 0; s < num_stages(); ++s)
    if (auto st = stage(s).copy_state_slot(from, to); !st)
      return make_error(st.error().code, "pipeline stage " + std::to_string(s) + ": " + st.error().message);
  return {};
}

Status PipelineBackend::reset_state_slot(int32_t slot) {
  for (int32_t s = 0; s < num_stages(); ++s)
    if (auto st = stage(s).reset_state_slot(slot); !st)
      return make_error(st.error().code, "pipeline stage " + std::to_string(s) + ": " + st.error().message);
  return {};
}

Status PipelineBackend::copy_kv_block(int32_t from, int32_t to) {
  for (int32_t s = 0; s < num_stages(); ++s)
    if (auto st = stage(s).copy_kv_block(from, to); !st)
      return make_error(st.error().code, "pipeline stage " + std::to_string(s) + ": " + st.error().message);
  return {};
}

memra_status PipelineBackend::tensor_create(int32_t ndim, const int64_t* shape, memra_tensor* out) {
  if (ndim < 1 || ndim > 4 || !shape || !out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "tensor_create: bad rank");
  uint64_t n = 1;
  for (int32_t i = 0; i < ndim; ++i) {
    if (shape[i] <= 0) return fail(MEMRA_ERR_INVALID_ARGUMENT, "tensor_create: non-positive dimension");
    n *= static_cast<uint64_t>(shape[i]);
  }
  const uint64_t bytes = n * kElem;
  const uint64_t span = (bytes + kAlign - 1) / kAlign * kAlign;
  if (space_used_ + span > space_size_)
    return fail(MEMRA_ERR_OUT_OF_MEMORY, "tensor_create: the pipeline's tensor address space is exhausted this step (" +
                                             std::to_string(space_size_ >> 30) + " GiB); use smaller batches");
  Record r;
  r.base = space_ + space_used_;
  r.bytes = bytes;
  r.ndim = ndim;
  std::copy(shape, shape + ndim, r.shape);
  r.storage.assign(stages_.size(), nullptr);
  space_used_ += span;
  records_.push_back(std::move(r));
  *out = memra_tensor{};
  out->struct_size = MEMRA_TENSOR_STRUCT_SIZE;
  out->dtype = MEMRA_DTYPE_F32;
  out->ndim = ndim;
  std::copy(shape, shape + ndim, out->shape);
  out->data = reinterpret_cast<void*>(records_.back().base);
  return MEMRA_OK;
}

PipelineBackend::Record* PipelineBackend::find(const void* data, uint64_t* offset) {
  const auto p = reinterpret_cast<uintptr_t>(data);
  auto it = std::upper_bound(records_.begin(), records_.end(), p, [](uintptr_t v, const Record& r) { return v < r.base; });
  if (it == records_.begin()) return nullptr;
  --it;
  if (p >= it->base + it->bytes) return nullptr;
  *offset = p - it->base;
  return &*it;
}

memra_status PipelineBackend::ensure_storage(Record& r, int32_t s) {
  if (r.storage[static_cast<size_t>(s)]) return MEMRA_OK;
  const memra_backend_ops& o = *stage(s).ops();
  memra_tensor t{};
  t.struct_size = MEMRA_TENSOR_STRUCT_SIZE;
  const memra_status st = o.tensor_create(o.ctx, r.ndim, r.shape, &t);
  if (st != MEMRA_OK) return fail(st, "pipeline stage " + std::to_string(s) + " tensor_create: " + stage(s).last_error());
  if (t.dtype != MEMRA_DTYPE_F32)
    return fail(MEMRA_ERR_UNSUPPORTED, "pipeline stage " + std::to_string(s) + " has a non-F32 activation type; stages must be F32");
  r.storage[static_cast<size_t>(s)] = t.data;
  return MEMRA_OK;
}

memra_status PipelineBackend::make_current(Record& r, int32_t s) {
  const uint32_t bit = 1u << s;
  if (r.valid & bit) return MEMRA_OK;
  if (const memra_status st = ensure_storage(r, s); st != MEMRA_OK) return st;
  if (r.valid == 0) return MEMRA_OK;  // never written: nothing to hand over
  // The nearest earlier stage holding it (the pipeline's direction), else any.
  int32_t src = highest(r.valid & (bit - 1));
  if (src < 0) src = highest(r.valid);
  const Status c = stage(s).copy_from(stage(src), r.storage[static_cast<size_t>(s)], r.storage[static_cast<size_t>(src)], r.bytes);
  if (!c) return fail(MEMRA_ERR_DEVICE, "pipeline hand-off from stage " + std::to_string(src) + " to stage " + std::to_string(s) + ": " + c.error().message);
  r.valid |= bit;
  ++handoffs_;
  handoff_bytes_ += r.bytes;
  return MEMRA_OK;
}

int32_t PipelineBackend::inputs_stage(const Arg* args, size_t n) {
  int32_t s = -1;
  for (size_t i = 0; i < n; ++i) {
    if (args[i].use == Use::out || !args[i].t) continue;
    uint64_t off = 0;
    if (const Record* r = find(args[i].t->data, &off)) s = std::max(s, highest(r->valid));
  }
  return s;
}

int32_t PipelineBackend::weight_stage(const memra_weight* w, int32_t from) const {
  uint32_t mask = 0;
  if (w) {
    auto it = weight_masks_.find(w->data);
    mask = it != weight_masks_.end() ? it->second : plan_.weight_stages(w->name ? w->name : "");
  }
  if (mask == 0) return std::max(from, 0);
  for (int32_t s = std::max(from, 0); s < num_stages(); ++s)
    if (mask & (1u << s)) return s;
  return highest(mask);
}

memra_status PipelineBackend::bind(int32_t s, const Arg* args, size_t n, Record** recs, memra_tensor* local) {
  std::vector<uint64_t> offs(n);
  for (size_t i = 0; i < n; ++i) {
    if (!args[i].t) return fail(MEMRA_ERR_INVALID_ARGUMENT, "pipeline backend: NULL tensor");
    recs[i] = find(args[i].t->data, &offs[i]);
    if (!recs[i])
      return fail(MEMRA_ERR_INVALID_ARGUMENT, "pipeline backend: a tensor that this step's tensor_create did not make");
    if (offs[i] + numel(args[i].t) * kElem > recs[i]->bytes)
      return fail(MEMRA_ERR_INVALID_ARGUMENT, "pipeline backend: a view reaches past the end of its tensor");
  }
  // Inputs (and partially written outputs) are brought to s; whole outputs only need room there.
  for (size_t i = 0; i < n; ++i) {
    const bool whole = offs[i] == 0 && numel(args[i].t) * kElem == recs[i]->bytes;
    const memra_status st = args[i].use == Use::out && whole ? ensure_storage(*recs[i], s) : make_current(*recs[i], s);
    if (st != MEMRA_OK) return st;
  }
  // The batch after the hand-offs: a CUDA receiver that has recorded nothing yet keeps
  // recording its step graph across a hand-off; the batch upload would be a recorded op.
  if (batch_ && !(prepared_ & (1u << s))) {
    if (const Status b = stage(s).prepare_batch(*batch_); !b)
      return fail(MEMRA_ERR_DEVICE, "pipeline stage " + std::to_string(s) + ": " + b.error().message);
    prepared_ |= 1u << s;
  }
  for (size_t i = 0; i < n; ++i) {
    local[i] = *args[i].t;
    local[i].data = static_cast<uint8_t*>(recs[i]->storage[static_cast<size_t>(s)]) + offs[i];
  }
  return MEMRA_OK;
}

memra_status PipelineBackend::finish(int32_t s, memra_status st, const Arg* args, size_t n, Record** recs) {
  if (st != MEMRA_OK) return fail(st, "pipeline stage " + std::to_string(s) + " (" + stage(s).name() + "): " + stage(s).last_error());
  for (size_t i = 0; i < n; ++i)
    if (args[i].use != Use::in) recs[i]->valid = 1u << s;
  return MEMRA_OK;
}

template <size_t N, class F>
memra_status PipelineBackend::run(int32_t s, const Arg (&args)[N], F&& call) {
  Record* recs[N];
  memra_tensor local[N];
  if (const memra_status st = bind(s, args, N, recs, local); st != MEMRA_OK) return st;
  const memra_backend_ops& o = *stage(s).ops();
  return finish(s, call(o, local), args, N, recs);
}

memra_status PipelineBackend::note_batch(const memra_forward_batch* batch) {
  if (!batch) return fail(MEMRA_ERR_INVALID_ARGUMENT, "pipeline backend: NULL batch");
  if (batch != batch_) {
    batch_ = batch;
    prepared_ = 0;
  }
  return MEMRA_OK;
}

memra_status PipelineBackend::embedding(const memra_weight* table, const memra_forward_batch* batch, float scale,
                                        memra_tensor* out) {
  if (const memra_status st = note_batch(batch); st != MEMRA_OK) return st;
  const Arg args[] = {{out, Use::out}};
  return run(weight_stage(table, 0), args, [&](const memra_backend_ops& o, memra_tensor* l) {
    return o.embedding(o.ctx, table, batch, scale, &l[0]);
  });
}

memra_status PipelineBackend::rms_norm(const memra_tensor* x, const memra_weight* w, float eps, float unit_offset,
                                       memra_tensor* out) {
  const Arg args[] = {{x, Use::in}, {out, Use::out}};
  return run(weight_stage(w, inputs_stage(args, 2)), args, [&](const memra_backend_ops& o, memra_tensor* l) {
    return o.rms_norm(o.ctx, &l[0], w, eps, unit_offset, &l[1]);
  });
}

memra_status PipelineBackend::add_rms_norm(const memra_tensor* x, memra_tensor* residual, const memra_weight* w, float eps,
                                           float unit_offset, memra_tensor* out) {
  const Arg args[] = {{x, Use::in}, {residual, Use::inout}, {out, Use::out}};
  return run(weight_stage(w, inputs_stage(args, 3)), args, [&](const memra_backend_ops& o, memra_tensor* l) {
    return o.add_rms_norm(o.ctx, &l[0], &l[1], w, eps, unit_offset, &l[2]);
  });
}

memra_status PipelineBackend::add(const memra_tensor* a, const memra_tensor* b, memra_tensor* out) {
  const Arg args[] = {{a, Use::in}, {b, Use::in}, {out, Use::out}};
  return run(std::max(0, inputs_stage(args, 3)), args, [&](const memra_backend_ops& o, memra_tensor* l) {
    return o.add(o.ctx, &l[0], &l[1], &l[2]);
  });
}

memra_status PipelineBackend::matmul(const memra_tensor* x, const memra_weight* w, const memra_weight* bias, memra_tensor* out) {
  const Arg args[] = {{x, Use::in}, {out, Use::out}};
  const int32_t s = weight_stage(w, inputs_stage(args, 2));
  if (bias && weight_stage(bias, s) != s)
    return fail(MEMRA_ERR_INVALID_ARGUMENT, std::string("pipeline backend: bias ") + (bias->name ? bias->name : "?") +
                                                " is not on the stage of its matrix " + (w && w->name ? w->name : "?"));
  return run(s, args, [&](const memra_backend_ops& o, memra_tensor* l) { return o.matmul(o.ctx, &l[0], w, bias, &l[1]); });
}

memra_status PipelineBackend::gated_activation(memra_activation act, const memra_tensor* gate, const memra_tensor* up,
                                               memra_tensor* out) {
  const Arg args[] = {{gate, Use::in}, {up, Use::in}, {out, Use::out}};
  return run(std::max(0, inputs_stage(args, 3)), args, [&](const memra_backend_ops& o, memra_tensor* l) {
    return o.gated_activation(o.ctx, act, &l[0], &l[1], &l[2]);
  });
}

memra_status PipelineBackend::attention(const memra_attention_params* p, const memra_forward_batch* batch, memra_tensor* q,
                                        memra_tensor* k, const memra_tensor* v, memra_tensor* out) {
  if (!MEMRA_STRUCT_HAS(p, memra_attention_params, rope)) return fail(MEMRA_ERR_ABI_MISMATCH, "attention: params struct too small");
  if (p->layer < 0 || p->layer >= plan_.layers) return fail(MEMRA_ERR_INVALID_ARGUMENT, "attention: layer out of range");
  if (const memra_status st = note_batch(batch); st != MEMRA_OK) return st;
  const int32_t s = plan_.layer_stage[static_cast<size_t>(p->layer)];
  memra_attention_params local = *p;  // the stage's KV cache holds only its layers
  local.layer = static_cast<int32_t>(p->layer - plan_.first_layer[static_cast<size_t>(s)]);
  const Arg args[] = {{q, Use::inout}, {k, Use::inout}, {v, Use::in}, {out, Use::out}};
  return run(s, args, [&](const memra_backend_ops& o, memra_tensor* l) {
    return o.attention(o.ctx, &local, batch, &l[0], &l[1], &l[2], &l[3]);
  });
}

memra_status PipelineBackend::gather_logit_rows(const memra_tensor* x, const memra_forward_batch* batch, memra_tensor* out) {
  if (const memra_status st = note_batch(batch); st != MEMRA_OK) return st;
  const Arg args[] = {{x, Use::in}, {out, Use::out}};
  return run(std::max(0, inputs_stage(args, 2)), args, [&](const memra_backend_ops& o, memra_tensor* l) {
    return o.gather_logit_rows(o.ctx, &l[0], batch, &l[1]);
  });
}

memra_status PipelineBackend::logits_output(const memra_tensor* logits, const memra_forward_batch* batch) {
  if (const memra_status st = note_batch(batch); st != MEMRA_OK) return st;
  const Arg args[] = {{logits, Use::in}};
  const int32_t s = std::max(0, inputs_stage(args, 1));
  logits_stage_ = s;
  return run(s, args, [&](const memra_backend_ops& o, memra_tensor* l) {
    if (!defer_logits_) return o.logits_output(o.ctx, &l[0], batch);
    deferred_.push_back({s, l[0], batch});  // the stage's storage lives until the next begin_step
    return MEMRA_OK;
  });
}

Status PipelineBackend::sample_rows(const SampleRequest& request, int32_t* tokens) {
  if (logits_stage_ < 0) return make_error(ErrorCode::invalid_argument, "pipeline sample_rows: no logits this step");
  if (auto st = stage(logits_stage_).sample_rows(request, tokens); !st) return stage_error(logits_stage_, st.error());
  return {};
}

Status PipelineBackend::logits_rows_to_host(std::span<const int32_t> rows, float* dst) {
  if (logits_stage_ < 0) return make_error(ErrorCode::invalid_argument, "pipeline logits_rows_to_host: no logits this step");
  if (auto st = stage(logits_stage_).logits_rows_to_host(rows, dst); !st) return stage_error(logits_stage_, st.error());
  return {};
}

Status PipelineBackend::flush_logits() {
  std::vector<DeferredLogits> pending;
  pending.swap(deferred_);
  for (const DeferredLogits& d : pending) {
    const memra_backend_ops& o = *stage(d.stage).ops();
    const memra_status st = o.logits_output(o.ctx, &d.local, d.batch);
    if (st != MEMRA_OK)
      return make_error(ErrorCode::internal, "pipeline stage " + std::to_string(d.stage) + " logits_output: " + stage(d.stage).last_error());
  }
  return {};
}

}  // namespace memra::backend

namespace memra::backend {

// A named op's handle on the pipeline is its registry entry; each stage's own handle is
// found when the op first runs there.
memra_status PipelineBackend::op_find(const char* name, uint32_t attrs_version, const memra_op** out) {
  if (!name || !out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_find: NULL argument");
  *out = nullptr;
  const ops::OpSpec* spec = ops::find_op(name, attrs_version);
  if (!spec) return fail(MEMRA_ERR_NOT_FOUND, "op_find: no op '" + std::string(name) + "' v" + std::to_string(attrs_version));
  // Every stage must run it: the plan's layers may land on any of them.
  for (int32_t s = 0; s < num_stages(); ++s) {
    const memra_op* local = nullptr;
    const memra_backend_ops& o = *stage(s).ops();
    if (!MEMRA_STRUCT_HAS(&o, memra_backend_ops, op_run) || !o.op_find)
      return fail(MEMRA_ERR_UNSUPPORTED, "op_find: pipeline stage " + std::to_string(s) + " (" + stage(s).name() + ") has no ops by name");
    if (const memra_status st = o.op_find(o.ctx, name, attrs_version, &local); st != MEMRA_OK)
      return fail(st, "op_find: pipeline stage " + std::to_string(s) + " (" + stage(s).name() + "): " + stage(s).last_error());
    stage_ops_[{spec, s}] = local;
  }
  *out = reinterpret_cast<const memra_op*>(spec);
  return MEMRA_OK;
}

// Routing, the same for every named op: the stage of args->layer (renumbered to that
// stage's layers, as attention's), else the stage of its first weight, else where its
// inputs are; tensors hand off as for the fixed ops.
memra_status PipelineBackend::op_run(const memra_op* handle, const memra_op_args* a) {
  const auto* spec = reinterpret_cast<const ops::OpSpec*>(handle);
  if (!MEMRA_STRUCT_HAS(a, memra_op_args, batch)) return fail(MEMRA_ERR_ABI_MISMATCH, "op_run: args struct too small");
  if (a->num_inputs < 0 || a->num_outputs < 0 || a->num_weights < 0 || (a->num_inputs && !a->inputs) ||
      (a->num_outputs && !a->outputs) || (a->num_weights && !a->weights))
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_run: bad tensor or weight arrays");
  if (a->batch)
    if (const memra_status st = note_batch(a->batch); st != MEMRA_OK) return st;
  std::vector<Arg> args;
  for (int32_t i = 0; i < a->num_inputs; ++i) args.push_back({a->inputs[i], Use::in});
  for (int32_t i = 0; i < a->num_outputs; ++i) args.push_back({a->outputs[i], Use::inout});  // may alias an input
  int32_t s = 0;
  memra_op_args local_args = *a;
  if (a->layer >= 0) {
    if (a->layer >= plan_.layers) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_run: layer out of range");
    s = plan_.layer_stage[static_cast<size_t>(a->layer)];
    local_args.layer = static_cast<int32_t>(a->layer - plan_.first_layer[static_cast<size_t>(s)]);
  } else {
    const int32_t from = inputs_stage(args.data(), static_cast<size_t>(a->num_inputs));
    s = a->num_weights > 0 ? weight_stage(a->weights[0], from) : std::max(0, from);
  }
  auto it = stage_ops_.find({spec, s});
  if (it == stage_ops_.end()) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_run: an op this pipeline's op_find did not return");
  std::vector<Record*> recs(args.size());
  std::vector<memra_tensor> local(args.size());
  if (const memra_status st = bind(s, args.data(), args.size(), recs.data(), local.data()); st != MEMRA_OK) return st;
  std::vector<const memra_tensor*> ins;
  std::vector<memra_tensor*> outs;
  for (int32_t i = 0; i < a->num_inputs; ++i) ins.push_back(&local[static_cast<size_t>(i)]);
  for (int32_t i = 0; i < a->num_outputs; ++i) outs.push_back(&local[static_cast<size_t>(a->num_inputs + i)]);
  local_args.inputs = ins.data();
  local_args.outputs = outs.data();
  const memra_backend_ops& o = *stage(s).ops();
  return finish(s, o.op_run(o.ctx, it->second, &local_args), args.data(), args.size(), recs.data());
}

}  // namespace memra::backend
