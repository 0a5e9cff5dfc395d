// Elementwise, norm, embedding and row ops of the CUDA backend.
#include <algorithm>
#include <cstring>

#include "core/common/tensor_shape.hpp"
#include "host/backend/cuda/cu_error.hpp"
#include "host/backend/cuda/cuda_backend.hpp"

namespace memra::backend::cuda {
namespace {

CUdeviceptr dptr(const memra_tensor* t) { return reinterpret_cast<CUdeviceptr>(t->data); }
unsigned elementwise_grid(int64_t n) { return static_cast<unsigned>(std::clamp<int64_t>((n + 255) / 256, 1, 8192)); }

}  // namespace

memra_status CudaBackend::tensor_create(int32_t ndim, const int64_t* shape, memra_tensor* out) {
  if (ndim < 1 || ndim > 4 || !shape || !out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "tensor_create: bad rank");
  int64_t n = 1;
  for (int32_t i = 0; i < ndim; ++i) {
    if (shape[i] <= 0) return fail(MEMRA_ERR_INVALID_ARGUMENT, "tensor_create: non-positive dimension");
    n *= shape[i];
  }
  auto p = arena_->alloc(static_cast<uint64_t>(n) * 4u);
  if (!p) return fail(MEMRA_ERR_OUT_OF_MEMORY, p.error().message);
  *out = memra_tensor{};
  out->struct_size = MEMRA_TENSOR_STRUCT_SIZE;
  out->dtype = MEMRA_DTYPE_F32;
  out->ndim = ndim;
  for (int32_t i = 0; i < ndim; ++i) out->shape[i] = shape[i];
  out->data = reinterpret_cast<void*>(*p);
  return MEMRA_OK;
}

memra_status CudaBackend::embedding(const memra_weight* table, const memra_forward_batch* batch, float scale,
                                    memra_tensor* out) {
  memra_status st = MEMRA_OK;
  const CUdeviceptr w = resolve(table, &st);
  if (st != MEMRA_OK) return st;
  auto s = scheme(table);
  if (!s) return fail(s.error());
  if (!s->dev || s->embedding.empty())
    return fail(MEMRA_ERR_UNSUPPORTED, "embedding: " + s->entry->provider + " registers no embedding gather for scheme '" + s->scheme +
                                           "' on this device (requantize token_embd.weight to a scheme that has one)");
  const int64_t vocab = table->shape[0];
  const int64_t dim = table->shape[1];
  for (int32_t t = 0; t < batch->num_tokens; ++t)
    if (batch->token_ids[t] < 0 || batch->token_ids[t] >= vocab) return fail(MEMRA_ERR_INVALID_ARGUMENT, "embedding: token id out of range");
  auto b = device_batch(batch);
  if (!b) return fail(b.error());
  const int64_t row_bytes = static_cast<int64_t>(s->row_bytes);
  return launch_in(s->module, s->embedding, static_cast<unsigned>(batch->num_tokens), 1, 256, 0, w, row_bytes, dim, (*b)->ids, scale,
                   dptr(out));
}

memra_status CudaBackend::rms_norm(const memra_tensor* x, const memra_weight* w, float eps, float unit_offset,
                                   memra_tensor* out) {
  if (w->dtype != MEMRA_DTYPE_F32) return fail(MEMRA_ERR_INVALID_ARGUMENT, "rms_norm: weight must be F32");
  memra_status st = MEMRA_OK;
  const CUdeviceptr wd = resolve(w, &st);
  if (st != MEMRA_OK) return st;
  const int64_t dim = tensor_last_dim(x);
  const int64_t rows = tensor_numel(x) / dim;
  if (w->shape[0] != dim) return fail(MEMRA_ERR_INVALID_ARGUMENT, "rms_norm: weight length differs from the row length");
  CUdeviceptr xd = dptr(x), od = dptr(out);
  if (Kernel* k = nvrtc_rms_norm(dim)) {
    CUdeviceptr wv = wd;
    void* argv[] = {&xd, &wv, &eps, &unit_offset, &od};
    const memra_status s2 = launch_raw(k, static_cast<unsigned>(rows), 1, 128, 0, argv);
    return s2 != MEMRA_OK ? s2 : after_op("rms_norm (nvrtc)");
  }
  return launch("norm", "memra_rms_norm", static_cast<unsigned>(rows), 1, 256, 0, xd, wd, dim, eps, unit_offset, od);
}

memra_status CudaBackend::add_rms_norm(const memra_tensor* x, memra_tensor* residual, const memra_weight* w, float eps,
                                       float unit_offset, memra_tensor* out) {
  if (w->dtype != MEMRA_DTYPE_F32) return fail(MEMRA_ERR_INVALID_ARGUMENT, "add_rms_norm: weight must be F32");
  memra_status st = MEMRA_OK;
  const CUdeviceptr wd = resolve(w, &st);
  if (st != MEMRA_OK) return st;
  const int64_t dim = tensor_last_dim(x);
  const int64_t rows = tensor_numel(x) / dim;
  // Rows of float4s up to 16384 elements: the wide kernel, its thread count from dim
  // alone (rms_norm.cu); others the 256-thread one.
  const bool wide = dim % 4 == 0 && dim <= 16384 && ((dptr(x) | dptr(residual) | dptr(out) | wd) & 15u) == 0;
  const auto wide_threads = static_cast<unsigned>(std::min<int64_t>(1024, (dim / 4 + 31) / 32 * 32));
  auto f = fused_act_format(rows, dim);
  if (!f) return fail(f.error());
  // int8x32 from both register paths (the wide one needs dim % 128 == 0); the fp8 rows
  // from the wide one (a warp per 128-group), else memra_prepare_act_fp8_rows at the matmul.
  const char* fused = *f == ActFormat::int8x32 && (wide ? dim % 128 == 0 : dim <= 8192)
                          ? (wide ? "memra_add_rms_norm_wide_q8" : "memra_add_rms_norm_q8")
                          : *f == ActFormat::bf16s128 && wide ? "memra_add_rms_norm_wide_fp8" : nullptr;
  if (fused) {
    auto q = fused_act_rows(*f, dptr(out), rows, dim);
    if (!q) return fail(q.error());
    const memra_status st = launch("norm", fused, static_cast<unsigned>(rows), 1, wide ? wide_threads : 256u, 0, dptr(x), dptr(residual), wd,
                                   dim, eps, unit_offset, dptr(out), (*q)->q, (*q)->meta);
    if (st == MEMRA_OK) fused_act_rows_done(**q);
    return st;
  }
  return launch("norm", wide ? "memra_add_rms_norm_wide" : "memra_add_rms_norm", static_cast<unsigned>(rows), 1, wide ? wide_threads : 256u, 0,
                dptr(x), dptr(residual), wd, dim, eps, unit_offset, dptr(out));
}

// The activation rows a producer of m rows of `cols` also writes for the next matmul:
// the prepared format the model's weights with rows of `cols` take (int8x32 first, else
// bf16s128; upload_weights), at most 64 rows and no prompt rows in the step (prompt rows
// take the GEMM), so prefill pays nothing. none: no fusion (BackendOptions::fuse_decode
// off, MEMRA_CUDA_FUSE=0: the matmul prepares them itself, the same bits).
Result<CudaBackend::ActFormat> CudaBackend::fused_act_format(int64_t m, int64_t cols) {
  if (!options_.fuse_decode || m <= 0 || m > 64) return ActFormat::none;
  const auto it = act_format_by_cols_.find(cols);
  const ActFormat f = it == act_format_by_cols_.end() ? ActFormat::none : it->second;
  if (f == ActFormat::none) return f;
  auto r = matmul_split(m);
  if (!r) return r.error();
  if (*r && (*r)->prompt > 0) return ActFormat::none;
  return f;
}

// The buffers of format f for m rows at `out`. The values are the ones quantized_rows
// would compute from out (the same arithmetic on the same floats: kernels/common/
// quantize_q8.cuh, kernels/matmul/fp8_act.cuh), so the next matmul over out reuses them.
Result<const CudaBackend::QuantizedRows*> CudaBackend::fused_act_rows(ActFormat f, CUdeviceptr out, int64_t m, int64_t cols) {
  auto rows = alloc_act_rows(f, out, 0, m, cols);
  if (!rows) return rows.error();
  fused_pending_ = *rows;
  return &fused_pending_;
}

void CudaBackend::fused_act_rows_done(const QuantizedRows& rows) {
  act_rows_ = rows;
  ++fused_act_quantisations_;
  act_rows_.epoch = write_epoch_;  // the producer's launch was the last write
}

memra_status CudaBackend::add(const memra_tensor* a, const memra_tensor* b, memra_tensor* out) {
  const int64_t n = tensor_numel(a);
  return launch("activation", "memra_add", elementwise_grid(n), 1, 256, 0, dptr(a), dptr(b), n, dptr(out));
}

memra_status CudaBackend::gated_activation(memra_activation act, const memra_tensor* gate, const memra_tensor* up,
                                           memra_tensor* out) {
  const int64_t n = tensor_numel(gate);
  const char* k = act == MEMRA_ACTIVATION_SILU ? "memra_silu_mul" : act == MEMRA_ACTIVATION_GELU_TANH ? "memra_gelu_tanh_mul" : nullptr;
  if (!k) return fail(MEMRA_ERR_UNSUPPORTED, "gated_activation: unknown activation");
  const int64_t cols = tensor_last_dim(gate);
  auto f = fused_act_format(n / std::max<int64_t>(cols, 1), cols);
  if (!f) return fail(f.error());
  // The fp8 rows' entries take float4s (a thread per 4 elements, a warp per 128-group).
  const bool aligned = ((dptr(gate) | dptr(up) | dptr(out)) & 15u) == 0;
  if (*f == ActFormat::int8x32 || (*f == ActFormat::bf16s128 && aligned)) {
    auto q = fused_act_rows(*f, dptr(out), n / cols, cols);
    if (!q) return fail(q.error());
    const bool fp8 = *f == ActFormat::bf16s128;
    const std::string kq = std::string(k) + (fp8 ? "_fp8" : "_q8");
    const memra_status st = launch("activation", kq.c_str(), elementwise_grid(fp8 ? n / 4 : n), 1, 256, 0, dptr(gate), dptr(up), n,
                                   dptr(out), (*q)->q, (*q)->meta);
    if (st == MEMRA_OK) fused_act_rows_done(**q);
    return st;
  }
  return launch("activation", k, elementwise_grid(n), 1, 256, 0, dptr(gate), dptr(up), n, dptr(out));
}

memra_status CudaBackend::gather_logit_rows(const memra_tensor* x, const memra_forward_batch* batch, memra_tensor* out) {
  if (batch->num_logits <= 0) return MEMRA_OK;
  for (int32_t i = 0; i < batch->num_logits; ++i)
    if (batch->logits_rows[i] < 0 || batch->logits_rows[i] >= batch->num_tokens)
      return fail(MEMRA_ERR_INVALID_ARGUMENT, "gather_logit_rows: row out of range");
  auto b = device_batch(batch);
  if (!b) return fail(b.error());
  return launch("gather", "memra_gather_rows", static_cast<unsigned>(batch->num_logits), 1, 256, 0, dptr(x), tensor_last_dim(x),
                (*b)->logits_rows, dptr(out));
}

memra_status CudaBackend::logits_output(const memra_tensor* logits, const memra_forward_batch* batch) {
  const uint64_t bytes = static_cast<uint64_t>(tensor_numel(logits)) * 4u;
  // Kept on the device for sample_rows / logits_rows_to_host (ops_sampling.cpp).
  kept_logits_ = dptr(logits);
  kept_vocab_ = tensor_last_dim(logits);
  kept_rows_ = tensor_numel(logits) / std::max<int64_t>(1, kept_vocab_);
  if (!batch->logits && !async_logits_) {
    // No host copy wanted (the engine samples on the device): end the step without a wait.
    return recording() ? run_step_graph() : MEMRA_OK;
  }
  // A slot step (pipeline stages): queue the copy, wait_logits(slot) collects it; with
  // no host logits wanted, they stay on the device for sample_rows.
  if (async_logits_) {
    if (recording())
      if (const memra_status g = run_step_graph(); g != MEMRA_OK) return g;  // the step, then the copy
    return batch->logits ? queue_logits(dptr(logits), batch->logits, bytes) : MEMRA_OK;
  }
  if (recording() && !staging_->fits(bytes))
    if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  auto host = staging_->alloc(bytes);
  if (!host) return fail(host.error());
  CUresult r = CUDA_SUCCESS;
  if (recording()) {
    // The step's end: run it as a graph (replayed or captured), then wait.
    (void)record_copy(dptr(logits), *host, bytes, false);
    if (const memra_status g = run_step_graph(); g != MEMRA_OK) return g;
  } else {
    r = cuMemcpyDtoHAsync(*host, dptr(logits), bytes, ctx_.stream());
  }
  if (r == CUDA_SUCCESS) r = cuStreamSynchronize(ctx_.stream());
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "logits copy (or an earlier kernel of this step)"));
  std::memcpy(batch->logits, *host, bytes);
  deliver_rows();
  return MEMRA_OK;
}

void CudaBackend::deliver_rows() {
  for (const RowsCopy& c : pending_rows_) std::memcpy(c.dst, c.staging, c.bytes);
  pending_rows_.clear();
}

memra_status CudaBackend::rows_input(const memra_forward_batch* batch, memra_tensor* out) {
  if (batch->struct_size < MEMRA_STRUCT_SIZE(memra_forward_batch, hidden_out) || !batch->hidden_in ||
      tensor_numel(out) != static_cast<int64_t>(batch->num_tokens) * tensor_last_dim(out))
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "rows_input: the batch has no hidden_in rows, or out is not [num_tokens][width]");
  const uint64_t bytes = static_cast<uint64_t>(tensor_numel(out)) * 4u;
  if (recording() && !staging_->fits(bytes))
    if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  auto host = staging_->alloc(bytes);
  if (!host) return fail(host.error());
  std::memcpy(*host, batch->hidden_in, bytes);
  if (recording()) return record_copy(dptr(out), *host, bytes, true);
  const CUresult r = cuMemcpyHtoDAsync(dptr(out), *host, bytes, ctx_.stream());
  return r == CUDA_SUCCESS ? MEMRA_OK : fail(MEMRA_ERR_DEVICE, cu_error(r, "rows_input copy"));
}

memra_status CudaBackend::rows_output(const memra_tensor* x, const memra_forward_batch* batch) {
  if (batch->struct_size < MEMRA_STRUCT_SIZE(memra_forward_batch, hidden_out) || !batch->hidden_out ||
      tensor_numel(x) != static_cast<int64_t>(batch->num_tokens) * tensor_last_dim(x))
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "rows_output: the batch has no hidden_out buffer, or x is not [num_tokens][width]");
  if (async_logits_) return fail(MEMRA_ERR_UNSUPPORTED, "rows_output: not in a rolling (slot) step");
  const uint64_t bytes = static_cast<uint64_t>(tensor_numel(x)) * 4u;
  if (recording() && !staging_->fits(bytes))
    if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  auto host = staging_->alloc(bytes);
  if (!host) return fail(host.error());
  pending_rows_.push_back({*host, batch->hidden_out, bytes});
  if (recording()) return record_copy(dptr(x), *host, bytes, false);
  const CUresult r = cuMemcpyDtoHAsync(*host, dptr(x), bytes, ctx_.stream());
  return r == CUDA_SUCCESS ? MEMRA_OK : fail(MEMRA_ERR_DEVICE, cu_error(r, "rows_output copy"));
}

}  // namespace memra::backend::cuda
