#include "core/common/tensor_shape.hpp"
#include "host/backend/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <tuple>

#include "kernels/activation/gated_activation_ref.hpp"
#include "kernels/attention/attention_ref.hpp"
#include "kernels/matmul/matmul_ref.hpp"
#include "kernels/norm/rms_norm_ref.hpp"
#include "kernels/rope/rope_ref.hpp"

namespace memra::backend {
namespace {

int64_t rows(const memra_tensor* t) { return tensor_numel(t) / std::max<int64_t>(1, tensor_last_dim(t)); }
float* f32(const memra_tensor* t) { return static_cast<float*>(t->data); }

CpuBackend* self(memra_backend_ctx* ctx) { return reinterpret_cast<CpuBackend*>(ctx); }

// Every op body runs inside this: no exception ever crosses the C boundary.
template <class F>
memra_status guarded(memra_backend_ctx* ctx, F&& f) {
  try {
    return f(self(ctx));
  } catch (const std::exception& e) {
    return self(ctx)->fail(MEMRA_ERR_INTERNAL, std::string("CPU backend: ") + e.what());
  } catch (...) {
    return self(ctx)->fail(MEMRA_ERR_INTERNAL, "CPU backend: unknown exception");
  }
}

}  // namespace

CpuBackend::CpuBackend(QuantLookup quant_lookup) : quant_lookup_(std::move(quant_lookup)) {
  ops_.struct_size = MEMRA_BACKEND_OPS_STRUCT_SIZE;
  ops_.ctx = reinterpret_cast<memra_backend_ctx*>(this);
  ops_.tensor_create = [](memra_backend_ctx* c, int32_t nd, const int64_t* s, memra_tensor* o) {
    return guarded(c, [&](CpuBackend* b) { return b->tensor_create(nd, s, o); });
  };
  ops_.embedding = [](memra_backend_ctx* c, const memra_weight* t, const memra_forward_batch* bt, float sc,
                      memra_tensor* o) { return guarded(c, [&](CpuBackend* b) { return b->embedding(t, bt, sc, o); }); };
  ops_.rms_norm = [](memra_backend_ctx* c, const memra_tensor* x, const memra_weight* w, float eps, float off,
                     memra_tensor* o) { return guarded(c, [&](CpuBackend* b) { return b->rms_norm(x, w, eps, off, o); }); };
  ops_.add_rms_norm = [](memra_backend_ctx* c, const memra_tensor* x, memra_tensor* r, const memra_weight* w,
                         float eps, float off, memra_tensor* o) {
    return guarded(c, [&](CpuBackend* b) { return b->add_rms_norm(x, r, w, eps, off, o); });
  };
  ops_.add = [](memra_backend_ctx* c, const memra_tensor* a, const memra_tensor* bb, memra_tensor* o) {
    return guarded(c, [&](CpuBackend* b) { return b->add(a, bb, o); });
  };
  ops_.matmul = [](memra_backend_ctx* c, const memra_tensor* x, const memra_weight* w, const memra_weight* bias,
                   memra_tensor* o) { return guarded(c, [&](CpuBackend* b) { return b->matmul(x, w, bias, o); }); };
  ops_.gated_activation = [](memra_backend_ctx* c, memra_activation a, const memra_tensor* g, const memra_tensor* u,
                             memra_tensor* o) { return guarded(c, [&](CpuBackend* b) { return b->gated_activation(a, g, u, o); }); };
  ops_.attention = [](memra_backend_ctx* c, const memra_attention_params* p, const memra_forward_batch* bt,
                      memra_tensor* q, memra_tensor* k, const memra_tensor* v, memra_tensor* o) {
    return guarded(c, [&](CpuBackend* b) { return b->attention(p, bt, q, k, v, o); });
  };
  ops_.gather_logit_rows = [](memra_backend_ctx* c, const memra_tensor* x, const memra_forward_batch* bt,
                              memra_tensor* o) { return guarded(c, [&](CpuBackend* b) { return b->gather_logit_rows(x, bt, o); }); };
  ops_.logits_output = [](memra_backend_ctx* c, const memra_tensor* l, const memra_forward_batch* bt) {
    return guarded(c, [&](CpuBackend* b) { return b->logits_output(l, bt); });
  };
  ops_.op_find = [](memra_backend_ctx* c, const char* name, uint32_t version, const memra_op** o) {
    return guarded(c, [&](CpuBackend* b) { return b->op_find(name, version, o); });
  };
  ops_.op_run = [](memra_backend_ctx* c, const memra_op* op, const memra_op_args* a) {
    return guarded(c, [&](CpuBackend* b) { return b->op_run(op, a); });
  };
  ops_.rows_input = [](memra_backend_ctx* c, const memra_forward_batch* bt, memra_tensor* o) {
    return guarded(c, [&](CpuBackend* b) { return b->rows_input(bt, o); });
  };
  ops_.rows_output = [](memra_backend_ctx* c, const memra_tensor* x, const memra_forward_batch* bt) {
    return guarded(c, [&](CpuBackend* b) { return b->rows_output(x, bt); });
  };
}

memra_device_info CpuBackend::device_info() const {
  memra_device_info d{};
  d.struct_size = MEMRA_DEVICE_INFO_STRUCT_SIZE;
  d.backend = MEMRA_BACKEND_CPU;
  d.arch = "cpu";
  d.name = "CPU reference";
  return d;
}

// The system's memory (/proc/meminfo): the KV cache and state of the CPU backend are host memory.
MemoryInfo CpuBackend::memory_info() const {
  MemoryInfo m;
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemTotal:") m.total = kib << 10;
    if (key == "MemAvailable:") m.free = kib << 10;
  }
  if (m.free > m.total) m.free = m.total;
  return m;
}

Status CpuBackend::allocate_state(const StateConfig& state) {
  if (!state.kv.valid()) return make_error(ErrorCode::invalid_argument, "allocate_state: bad KV cache geometry");
  for (const KvLayerConfig& l : state.kv.layers)
    if (l.kv_heads > 0 && kv_element_bytes(l.dtype) == 0)
      return make_error(ErrorCode::unsupported, "KV cache dtype " + std::to_string(l.dtype) +
                                                    " is not supported (MEMRA_DTYPE_F16, MEMRA_DTYPE_BF16, MEMRA_DTYPE_F8_E4M3 or MEMRA_DTYPE_F32)");
  kv_ = state.kv;
  state_ = state.recurrent;
  // Zeroed: +0.0 in every element type (and fp8 scales of 0).
  k_cache_.assign(static_cast<size_t>(kv_.bytes()), 0);
  v_cache_.assign(static_cast<size_t>(kv_.bytes()), 0);
  state_cache_.clear();
  for (uint64_t b : state_.layer_bytes) state_cache_.emplace_back(static_cast<size_t>(b * static_cast<uint64_t>(state_.slots)), 0);
  return {};
}

uint8_t* CpuBackend::state_block(int32_t layer, int32_t slot) {
  if (layer < 0 || static_cast<size_t>(layer) >= state_cache_.size() || slot < 0 || slot >= state_.slots) return nullptr;
  const uint64_t b = state_.layer_bytes[static_cast<size_t>(layer)];
  if (b == 0) return nullptr;
  return state_cache_[static_cast<size_t>(layer)].data() + b * static_cast<uint64_t>(slot);
}

Status CpuBackend::copy_state_slot(int32_t from, int32_t to) {
  if (from < 0 || to < 0 || from >= state_.slots || to >= state_.slots)
    return make_error(ErrorCode::invalid_argument, "copy_state_slot: slot out of range");
  for (size_t l = 0; l < state_cache_.size(); ++l) {
    const uint64_t b = state_.layer_bytes[l];
    if (b && from != to) std::memcpy(state_cache_[l].data() + b * to, state_cache_[l].data() + b * from, b);
  }
  return {};
}

Status CpuBackend::reset_state_slot(int32_t slot) {
  if (slot < 0 || slot >= state_.slots) return make_error(ErrorCode::invalid_argument, "reset_state_slot: slot out of range");
  for (size_t l = 0; l < state_cache_.size(); ++l)
    if (const uint64_t b = state_.layer_bytes[l]) std::memset(state_cache_[l].data() + b * slot, 0, b);
  return {};
}

Status CpuBackend::begin_step(int32_t) {
  scratch_.clear();
  last_error_.clear();
  prompt_flags_.clear();
  logits_rows_.clear();
  return {};
}

Status CpuBackend::copy_to_host(void* dst, const void* src, uint64_t bytes) {
  std::memcpy(dst, src, bytes);
  return {};
}

Status CpuBackend::copy_to_device(void* dst, const void* src, uint64_t bytes) {
  std::memcpy(dst, src, bytes);
  return {};
}

Result<memra_buffer> CpuBackend::memory_alloc(memra_memory_location location, uint64_t bytes) {
  memra_buffer b{};
  b.struct_size = MEMRA_BUFFER_STRUCT_SIZE;
  b.location = location;
  b.bytes = bytes;
  b.ptr = std::calloc(1, bytes ? bytes : 1);
  if (!b.ptr) return make_error(ErrorCode::internal, "out of host memory (" + std::to_string(bytes) + " bytes)");
  return b;
}

void CpuBackend::memory_free(memra_buffer& buffer) {
  std::free(buffer.ptr);
  buffer.ptr = nullptr;
}

Status CpuBackend::prepare_batch(const memra_forward_batch& batch) {
  note_batch(&batch);
  return {};
}

void CpuBackend::note_batch(const memra_forward_batch* b) {
  prompt_flags_.clear();
  logits_rows_.clear();
  if (!b || !MEMRA_STRUCT_HAS(b, memra_forward_batch, prompt_tokens) || !b->prompt_tokens || b->num_tokens <= 0) return;
  prompt_flags_.assign(b->prompt_tokens, b->prompt_tokens + b->num_tokens);
  if (b->logits_rows && b->num_logits > 0) logits_rows_.assign(b->logits_rows, b->logits_rows + b->num_logits);
}

// Which of a matmul's m rows are prompt rows (1) — the CUDA backend's rule
// (ops_matmul.cpp, matmul_split): the batch's token rows when m is its token count, its
// gathered logits rows when m is its logits count; empty (all generated) otherwise or
// without flags.
std::vector<uint8_t> CpuBackend::matmul_row_kinds(int64_t m) const {
  if (prompt_flags_.empty()) return {};
  if (m == static_cast<int64_t>(prompt_flags_.size())) return prompt_flags_;
  if (!logits_rows_.empty() && m == static_cast<int64_t>(logits_rows_.size())) {
    std::vector<uint8_t> kinds(static_cast<size_t>(m));
    for (size_t i = 0; i < kinds.size(); ++i) {
      const int32_t r = logits_rows_[i];
      kinds[i] = r >= 0 && r < static_cast<int32_t>(prompt_flags_.size()) ? prompt_flags_[static_cast<size_t>(r)] : 0;
    }
    return kinds;
  }
  return {};
}

memra_status CpuBackend::fail(memra_status code, std::string message) {
  last_error_ = std::move(message);
  return code;
}

Status CpuBackend::copy_kv_block(int32_t pool, int32_t from, int32_t to) {
  if (pool < 0 || pool >= kv_.num_pools() || from < 0 || to < 0 || from >= kv_.pool_blocks[static_cast<size_t>(pool)] ||
      to >= kv_.pool_blocks[static_cast<size_t>(pool)])
    return make_error(ErrorCode::invalid_argument, "copy_kv_block: pool or block out of range");
  for (size_t l = 0; l < kv_.layers.size(); ++l) {
    if (kv_.layers[l].kv_heads <= 0 || kv_.layers[l].pool != pool) continue;
    const uint64_t base = kv_.layer_offset(l), block = kv_.block_bytes(l);
    for (std::vector<uint8_t>* c : {&k_cache_, &v_cache_})
      std::copy_n(c->begin() + static_cast<int64_t>(base + static_cast<uint64_t>(from) * block), block,
                  c->begin() + static_cast<int64_t>(base + static_cast<uint64_t>(to) * block));
  }
  return {};
}

memra_status CpuBackend::tensor_create(int32_t ndim, const int64_t* shape, memra_tensor* out) {
  if (ndim < 1 || ndim > 4 || !shape || !out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "tensor_create: bad rank");
  int64_t n = 1;
  for (int32_t i = 0; i < ndim; ++i) {
    if (shape[i] <= 0) return fail(MEMRA_ERR_INVALID_ARGUMENT, "tensor_create: non-positive dimension");
    n *= shape[i];
  }
  scratch_.emplace_back(static_cast<size_t>(n), 0.0f);
  *out = memra_tensor{};
  out->struct_size = MEMRA_TENSOR_STRUCT_SIZE;
  out->dtype = MEMRA_DTYPE_F32;
  out->ndim = ndim;
  for (int32_t i = 0; i < ndim; ++i) out->shape[i] = shape[i];
  out->data = scratch_.back().data();
  return MEMRA_OK;
}

memra_status CpuBackend::embedding(const memra_weight* table, const memra_forward_batch* batch, float scale,
                                   memra_tensor* out) {
  note_batch(batch);
  const QuantTable qt = quant_lookup_(table->quant);
  const memra_quant_api* q = qt.api;
  if (!q) return fail(MEMRA_ERR_UNSUPPORTED, std::string("embedding: no quant plugin for scheme ") + table->quant);
  const int64_t vocab = table->shape[0];
  const int64_t dim = table->shape[1];
  uint64_t row_bytes = 0;
  if (q->weight_bytes(qt.ctx, table->quant, 1, dim, &row_bytes) != MEMRA_OK)
    return fail(MEMRA_ERR_UNSUPPORTED, "embedding: scheme cannot size a row");
  const auto* base = static_cast<const uint8_t*>(table->data);
  for (int32_t t = 0; t < batch->num_tokens; ++t) {
    const int32_t id = batch->token_ids[t];
    if (id < 0 || id >= vocab) return fail(MEMRA_ERR_INVALID_ARGUMENT, "embedding: token id out of range");
    float* row = f32(out) + static_cast<int64_t>(t) * dim;
    if (q->dequantize(qt.ctx, table->quant, base + row_bytes * static_cast<uint64_t>(id), row_bytes, 1, dim, row) != MEMRA_OK)
      return fail(MEMRA_ERR_INTERNAL, "embedding: dequantize failed");
    if (scale != 1.0f)
      for (int64_t i = 0; i < dim; ++i) row[i] *= scale;
  }
  return MEMRA_OK;
}

memra_status CpuBackend::rms_norm(const memra_tensor* x, const memra_weight* w, float eps, float unit_offset,
                                  memra_tensor* out) {
  if (w->dtype != MEMRA_DTYPE_F32) return fail(MEMRA_ERR_INVALID_ARGUMENT, "rms_norm: weight must be F32");
  ref::rms_norm(f32(x), static_cast<const float*>(w->data), rows(x), tensor_last_dim(x), eps, unit_offset, f32(out));
  return MEMRA_OK;
}

memra_status CpuBackend::add_rms_norm(const memra_tensor* x, memra_tensor* residual, const memra_weight* w,
                                      float eps, float unit_offset, memra_tensor* out) {
  if (w->dtype != MEMRA_DTYPE_F32) return fail(MEMRA_ERR_INVALID_ARGUMENT, "add_rms_norm: weight must be F32");
  ref::add_rms_norm(f32(x), f32(residual), static_cast<const float*>(w->data), rows(x), tensor_last_dim(x), eps,
                    unit_offset, f32(out));
  return MEMRA_OK;
}

memra_status CpuBackend::add(const memra_tensor* a, const memra_tensor* b, memra_tensor* out) {
  const int64_t n = tensor_numel(a);
  for (int64_t i = 0; i < n; ++i) f32(out)[i] = f32(a)[i] + f32(b)[i];
  return MEMRA_OK;
}

memra_status CpuBackend::matmul(const memra_tensor* x, const memra_weight* w, const memra_weight* bias,
                                memra_tensor* out) {
  if (tensor_last_dim(x) != w->shape[1]) return fail(MEMRA_ERR_INVALID_ARGUMENT, std::string("matmul: x width does not match ") + w->name);
  const int64_t m = rows(x);
  if (const memra_status st = matmul_rows(f32(x), m, w, matmul_row_kinds(m), f32(out)); st != MEMRA_OK) return st;
  if (bias) {
    const auto* bv = static_cast<const float*>(bias->data);
    float* y = f32(out);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < w->shape[0]; ++c) y[r * w->shape[0] + c] += bv[c];
  }
  return MEMRA_OK;
}

memra_status CpuBackend::matmul_rows(const float* x, int64_t m, const memra_weight* w, const std::vector<uint8_t>& kinds,
                                     float* y) {
  const QuantTable qt = quant_lookup_(w->quant);
  const memra_quant_api* q = qt.api;
  if (!q || !q->matmul) return fail(MEMRA_ERR_UNSUPPORTED, std::string("matmul: no quant plugin for scheme ") + w->quant);
  memra_matmul_args args{};
  args.struct_size = MEMRA_MATMUL_ARGS_STRUCT_SIZE;
  args.scheme = w->quant;
  args.backend = 0;  // MEMRA_BACKEND_CPU
  args.weight = w->data;
  args.rows = w->shape[0];
  args.cols = w->shape[1];
  args.m = m;
  args.x = x;
  args.y = y;
  // Generated rows take the plugin's matmul (its own activation format); prompt rows of
  // a scheme whose prompt numerics round the weights (memra_scheme_info.prompt) take
  // bf16-rounded weights on bf16 activations (docs/ARCHITECTURE.md, "Per-scheme numerics").
  memra_scheme_info info{};
  info.struct_size = MEMRA_SCHEME_INFO_STRUCT_SIZE;
  const bool rounds = MEMRA_STRUCT_HAS(q, memra_quant_api, scheme_info) && q->scheme_info &&
                      q->scheme_info(qt.ctx, w->quant, &info) == MEMRA_OK && info.prompt == MEMRA_PROMPT_ROUNDED_WEIGHTS;
  const bool prompt_rows = rounds && std::find(kinds.begin(), kinds.end(), uint8_t{1}) != kinds.end();
  const memra_status st = prompt_rows ? matmul_prompt_rows_bf16(qt, args, kinds) : q->matmul(qt.ctx, &args);
  if (st != MEMRA_OK) return fail(st, std::string("matmul failed for ") + w->name + " (" + w->quant + ")");
  return MEMRA_OK;
}

// A matmul with prompt rows of a block scheme: the generated rows through the
// plugin's matmul on their own, the prompt rows on bf16 operands (each weight row
// dequantised by the plugin and rounded to bf16, x rounded to bf16, ref::dot_f32).
memra_status CpuBackend::matmul_prompt_rows_bf16(const QuantTable& qt, const memra_matmul_args& a, const std::vector<uint8_t>& kinds) {
  const int64_t cols = a.cols, rows = a.rows;
  std::vector<int64_t> generated;
  for (int64_t i = 0; i < a.m; ++i)
    if (!kinds[static_cast<size_t>(i)]) generated.push_back(i);
  if (!generated.empty()) {
    const auto n = static_cast<int64_t>(generated.size());
    std::vector<float> xg(static_cast<size_t>(n * cols)), yg(static_cast<size_t>(n * rows));
    for (int64_t j = 0; j < n; ++j) std::copy_n(a.x + generated[static_cast<size_t>(j)] * cols, cols, xg.data() + j * cols);
    memra_matmul_args g = a;
    g.m = n;
    g.x = xg.data();
    g.y = yg.data();
    if (const memra_status st = qt.api->matmul(qt.ctx, &g); st != MEMRA_OK) return st;
    for (int64_t j = 0; j < n; ++j) std::copy_n(yg.data() + j * rows, rows, a.y + generated[static_cast<size_t>(j)] * rows);
  }
  uint64_t row_bytes = 0;
  if (qt.api->weight_bytes(qt.ctx, a.scheme, 1, cols, &row_bytes) != MEMRA_OK) return fail(MEMRA_ERR_UNSUPPORTED, "matmul: scheme cannot size a row");
  std::vector<float> wr(static_cast<size_t>(cols));
  const std::vector<float> xb = ref::bf16_rounded(a.x, a.m * cols);
  const auto* base = static_cast<const uint8_t*>(a.weight);
  for (int64_t r = 0; r < rows; ++r) {
    if (qt.api->dequantize(qt.ctx, a.scheme, base + row_bytes * static_cast<uint64_t>(r), row_bytes, 1, cols, wr.data()) != MEMRA_OK)
      return fail(MEMRA_ERR_INTERNAL, "matmul: dequantize failed");
    const std::vector<float> wb = ref::bf16_rounded(wr.data(), cols);
    for (int64_t t = 0; t < a.m; ++t)
      if (kinds[static_cast<size_t>(t)]) a.y[t * rows + r] = ref::dot_f32(xb.data() + t * cols, wb.data(), cols);
  }
  return MEMRA_OK;
}

memra_status CpuBackend::gated_activation(memra_activation act, const memra_tensor* gate, const memra_tensor* up,
                                          memra_tensor* out) {
  const int64_t n = tensor_numel(gate);
  if (act == MEMRA_ACTIVATION_SILU) ref::silu_mul(f32(gate), f32(up), n, f32(out));
  else if (act == MEMRA_ACTIVATION_GELU_TANH) ref::gelu_tanh_mul(f32(gate), f32(up), n, f32(out));
  else return fail(MEMRA_ERR_UNSUPPORTED, "gated_activation: unknown activation");
  return MEMRA_OK;
}

memra_status CpuBackend::attention(const memra_attention_params* p, const memra_forward_batch* batch,
                                   memra_tensor* q, memra_tensor* k, const memra_tensor* v, memra_tensor* out) {
  note_batch(batch);
  if (k_cache_.empty()) return fail(MEMRA_ERR_INVALID_ARGUMENT, "attention: the KV cache is not allocated");
  std::string why;
  const KvLayerConfig* geometry = kv_.attention_layer(*p, &why);  // the cache holds layers from first_layer on
  if (!geometry) return fail(MEMRA_ERR_INVALID_ARGUMENT, why);
  const auto local = static_cast<size_t>(p->layer - kv_.first_layer);
  ref::PagedKvLayer layer;
  layer.k = k_cache_.data() + kv_.layer_offset(local);
  layer.v = v_cache_.data() + kv_.layer_offset(local);
  layer.element = geometry->dtype == MEMRA_DTYPE_F16       ? ref::KvElement::f16
                  : geometry->dtype == MEMRA_DTYPE_BF16    ? ref::KvElement::bf16
                  : geometry->dtype == MEMRA_DTYPE_F8_E4M3 ? ref::KvElement::fp8
                                                           : ref::KvElement::f32;
  layer.block_size = kv_.block_size;
  layer.kv_heads = geometry->kv_heads;
  layer.head_dim = geometry->head_dim;
  ref::RopeTable rope;
  if (p->rope) rope = ref::rope_table(*p->rope);
  const int64_t qw = static_cast<int64_t>(p->num_heads) * p->head_dim;
  const int64_t kw = static_cast<int64_t>(p->num_kv_heads) * p->head_dim;
  // Per-head q/k norms (2.4), the rms_norm op's arithmetic over [tokens * heads][head_dim].
  if (MEMRA_STRUCT_HAS(p, memra_attention_params, qk_norm_eps)) {
    for (const auto& [w, t, heads] : {std::tuple{p->q_norm, q, p->num_heads}, std::tuple{p->k_norm, k, p->num_kv_heads}}) {
      if (!w) continue;
      if (w->dtype != MEMRA_DTYPE_F32 || w->ndim < 1 || w->shape[0] != p->head_dim)
        return fail(MEMRA_ERR_INVALID_ARGUMENT, std::string("attention: q/k norm weight ") + (w->name ? w->name : "?") + " is not head_dim F32 floats");
      ref::rms_norm(f32(t), static_cast<const float*>(w->data), static_cast<int64_t>(batch->num_tokens) * heads, p->head_dim,
                    p->qk_norm_eps, 0.0f, f32(t));
    }
  }
  // RoPE and the KV write for every token first, so later tokens of a sequence see earlier ones.
  for (int32_t t = 0; t < batch->num_tokens; ++t) {
    if (std::string e = kv_.token_blocks_error(*batch, *geometry, t, p->sliding_window); !e.empty())
      return fail(MEMRA_ERR_INVALID_ARGUMENT, std::move(e));
    const int64_t pos = batch->positions[t];
    const int32_t* table = KvCacheConfig::block_table(*batch, *geometry, batch->seq_index[t]);
    if (p->rope) {
      ref::rope_apply(rope, *p->rope, pos, f32(q) + t * qw, p->num_heads, p->head_dim);
      ref::rope_apply(rope, *p->rope, pos, f32(k) + t * kw, p->num_kv_heads, p->head_dim);
    }
    ref::paged_kv_write(layer, table, pos, f32(k) + t * kw, f32(v) + t * kw);
  }
  for (int32_t t = 0; t < batch->num_tokens; ++t) {
    const int32_t* table = KvCacheConfig::block_table(*batch, *geometry, batch->seq_index[t]);
    ref::paged_attention(layer, table, batch->positions[t], f32(q) + t * qw, p->num_heads, p->scale,
                         p->sliding_window, p->logit_softcap, f32(out) + t * qw);
  }
  return MEMRA_OK;
}

memra_status CpuBackend::gather_logit_rows(const memra_tensor* x, const memra_forward_batch* batch,
                                           memra_tensor* out) {
  const int64_t d = tensor_last_dim(x);
  for (int32_t i = 0; i < batch->num_logits; ++i) {
    const int32_t r = batch->logits_rows[i];
    if (r < 0 || r >= batch->num_tokens) return fail(MEMRA_ERR_INVALID_ARGUMENT, "gather_logit_rows: row out of range");
    std::memcpy(f32(out) + i * d, f32(x) + static_cast<int64_t>(r) * d, static_cast<size_t>(d) * sizeof(float));
  }
  return MEMRA_OK;
}

memra_status CpuBackend::logits_output(const memra_tensor* logits, const memra_forward_batch* batch) {
  std::memcpy(batch->logits, logits->data, static_cast<size_t>(tensor_numel(logits)) * sizeof(float));
  return MEMRA_OK;
}

memra_status CpuBackend::rows_input(const memra_forward_batch* batch, memra_tensor* out) {
  if (batch->struct_size < MEMRA_STRUCT_SIZE(memra_forward_batch, hidden_out) || !batch->hidden_in ||
      tensor_numel(out) != static_cast<int64_t>(batch->num_tokens) * tensor_last_dim(out))
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "rows_input: the batch has no hidden_in rows, or out is not [num_tokens][width]");
  std::memcpy(out->data, batch->hidden_in, static_cast<size_t>(tensor_numel(out)) * sizeof(float));
  return MEMRA_OK;
}

memra_status CpuBackend::rows_output(const memra_tensor* x, const memra_forward_batch* batch) {
  if (batch->struct_size < MEMRA_STRUCT_SIZE(memra_forward_batch, hidden_out) || !batch->hidden_out ||
      tensor_numel(x) != static_cast<int64_t>(batch->num_tokens) * tensor_last_dim(x))
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "rows_output: the batch has no hidden_out buffer, or x is not [num_tokens][width]");
  std::memcpy(batch->hidden_out, x->data, static_cast<size_t>(tensor_numel(x)) * sizeof(float));
  return MEMRA_OK;
}

}  // namespace memra::backend
