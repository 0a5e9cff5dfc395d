// Device sampling (kernels/sampling/sampling.cu): the canonical sampler on the rows
// of the logits tensor this step kept on the device, so a decode step copies one
// int32 per row to the host instead of a vocab-sized float row.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "host/backend/cuda/cu_error.hpp"
#include "host/backend/cuda/cuda_backend.hpp"
#include "kernels/sampling/sampling_math.cuh"

namespace memra::backend::cuda {
namespace {

using sampling::PenaltyEntry;
using sampling::RowParams;

uint64_t align256(uint64_t n) { return (n + 255) & ~uint64_t{255}; }

}  // namespace

memra_status CudaBackend::sample_rows(const SampleRequest& request, int32_t* tokens) {
  if (!tokens) return fail(MEMRA_ERR_INVALID_ARGUMENT, "sample_rows: no token output");
  const auto n = static_cast<int32_t>(request.rows.size());
  if (n <= 0) return MEMRA_OK;
  if (request.params.size() != request.rows.size() || request.penalty_offsets.size() != request.rows.size() + 1)
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "sample_rows: one params entry per row and rows + 1 penalty offsets are required");
  struct {
    const float* logits;
    int64_t vocab;
    const int32_t* rows;
    const RowParams* params;
    const int32_t* penalty_offsets;
    const PenaltyEntry* penalties;
  } req_view{request.logits, request.vocab, request.rows.data(), request.params.data(), request.penalty_offsets.data(),
      request.penalties.data()};
  const auto* req = &req_view;
  CUdeviceptr logits = reinterpret_cast<CUdeviceptr>(req->logits);
  int64_t vocab = req->vocab, rows = INT64_MAX;
  if (!logits) {
    if (!kept_logits_)
      return fail(MEMRA_ERR_INVALID_ARGUMENT,
                  "sample_rows: this step kept no logits on the device (run the forward pass with batch->logits NULL first)");
    if (vocab != 0 && vocab != kept_vocab_) return fail(MEMRA_ERR_INVALID_ARGUMENT, "sample_rows: vocab differs from the kept logits'");
    logits = kept_logits_;
    vocab = kept_vocab_;
    rows = kept_rows_;
  }
  if (vocab <= 0 || vocab > INT32_MAX) return fail(MEMRA_ERR_INVALID_ARGUMENT, "sample_rows: bad vocab size");
  if (req->penalty_offsets[0] != 0) return fail(MEMRA_ERR_INVALID_ARGUMENT, "sample_rows: penalty_offsets must start at 0");
  for (int32_t i = 0; i < n; ++i) {
    if (req->rows[i] < 0 || req->rows[i] >= rows) return fail(MEMRA_ERR_INVALID_ARGUMENT, "sample_rows: row out of range");
    if (req->penalty_offsets[i + 1] < req->penalty_offsets[i]) return fail(MEMRA_ERR_INVALID_ARGUMENT, "sample_rows: penalty_offsets decrease");
  }
  const int32_t num_pen = req->penalty_offsets[n];
  if (num_pen < 0 || static_cast<size_t>(num_pen) > request.penalties.size())
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "sample_rows: fewer penalties than the offsets name");
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;  // eager from here

  // One upload: params, rows, penalty offsets, penalties.
  const uint64_t params_bytes = align256(static_cast<uint64_t>(n) * sizeof(RowParams));
  const uint64_t rows_bytes = align256(static_cast<uint64_t>(n) * 4u);
  const uint64_t offsets_bytes = align256(static_cast<uint64_t>(n + 1) * 4u);
  const uint64_t pen_bytes = align256(static_cast<uint64_t>(std::max(num_pen, 1)) * sizeof(PenaltyEntry));
  const uint64_t upload = params_bytes + rows_bytes + offsets_bytes + pen_bytes;
  auto host = staging_->alloc(upload);
  if (!host) return fail(host.error());
  auto* h = static_cast<uint8_t*>(*host);
  std::memcpy(h, req->params, static_cast<size_t>(n) * sizeof(RowParams));
  std::memcpy(h + params_bytes, req->rows, static_cast<size_t>(n) * 4u);
  std::memcpy(h + params_bytes + rows_bytes, req->penalty_offsets, static_cast<size_t>(n + 1) * 4u);
  if (num_pen > 0) std::memcpy(h + params_bytes + rows_bytes + offsets_bytes, req->penalties, static_cast<size_t>(num_pen) * sizeof(PenaltyEntry));
  const bool any_penalty = num_pen > 0;
  const int64_t cap = (vocab + sampling::kLanes - 1) / sampling::kLanes * sampling::kLanes;
  const uint64_t v_bytes = any_penalty ? align256(static_cast<uint64_t>(n) * static_cast<uint64_t>(vocab) * 4u) : 0;
  const uint64_t list_bytes = align256(static_cast<uint64_t>(n) * static_cast<uint64_t>(cap) * 4u);
  const uint64_t tok_bytes = align256(static_cast<uint64_t>(n) * 4u);
  auto dev = arena_->alloc(upload + v_bytes + 2 * list_bytes + tok_bytes);
  if (!dev) return fail(MEMRA_ERR_OUT_OF_MEMORY, dev.error().message);
  const CUdeviceptr d_params = *dev, d_rows = d_params + params_bytes, d_offsets = d_rows + rows_bytes,
                    d_pen = d_offsets + offsets_bytes, d_v = d_pen + pen_bytes, d_q = d_v + v_bytes,
                    d_ids = d_q + list_bytes, d_tokens = d_ids + list_bytes;
  CUresult r = cuMemcpyHtoDAsync(d_params, h, upload, ctx_.stream());
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "sample_rows upload"));
  const memra_status st = launch("sampling", "memra_sample_rows", static_cast<unsigned>(n), 1, sampling::kLanes, 0, logits,
                                 vocab, d_rows, d_params, d_offsets, d_pen, any_penalty ? d_v : CUdeviceptr{0}, d_q, d_ids,
                                 cap, d_tokens);
  if (st != MEMRA_OK) return st;
  auto out = staging_->alloc(static_cast<uint64_t>(n) * 4u);
  if (!out) return fail(out.error());
  // A slot step: the tokens arrive with wait_logits(slot); the host does not wait here.
  if (async_logits_) return queue_to_host(*out, d_tokens, tokens, static_cast<uint64_t>(n) * 4u);
  r = cuMemcpyDtoHAsync(*out, d_tokens, static_cast<uint64_t>(n) * 4u, ctx_.stream());
  if (r == CUDA_SUCCESS) r = cuStreamSynchronize(ctx_.stream());
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "sample_rows (or an earlier kernel of this step)"));
  std::memcpy(tokens, *out, static_cast<size_t>(n) * 4u);
  return MEMRA_OK;
}

memra_status CudaBackend::logits_rows_to_host(const int32_t* rows, int32_t n, float* dst) {
  if (n <= 0) return MEMRA_OK;
  if (!rows || !dst) return fail(MEMRA_ERR_INVALID_ARGUMENT, "logits_rows_to_host: NULL argument");
  if (!kept_logits_) return fail(MEMRA_ERR_INVALID_ARGUMENT, "logits_rows_to_host: this step kept no logits on the device");
  if (async_logits_) return fail(MEMRA_ERR_INVALID_ARGUMENT, "logits_rows_to_host: not in a slot step (pass batch->logits instead)");
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  const uint64_t row_bytes = static_cast<uint64_t>(kept_vocab_) * 4u;
  auto host = staging_->alloc(row_bytes * static_cast<uint64_t>(n));
  if (!host) return fail(host.error());
  CUresult r = CUDA_SUCCESS;
  for (int32_t i = 0; i < n && r == CUDA_SUCCESS; ++i) {
    if (rows[i] < 0 || rows[i] >= kept_rows_) return fail(MEMRA_ERR_INVALID_ARGUMENT, "logits_rows_to_host: row out of range");
    r = cuMemcpyDtoHAsync(static_cast<uint8_t*>(*host) + row_bytes * static_cast<uint64_t>(i),
                          kept_logits_ + row_bytes * static_cast<uint64_t>(rows[i]), row_bytes, ctx_.stream());
  }
  if (r == CUDA_SUCCESS) r = cuStreamSynchronize(ctx_.stream());
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "logits rows copy (or an earlier kernel of this step)"));
  std::memcpy(dst, *host, row_bytes * static_cast<uint64_t>(n));
  return MEMRA_OK;
}

}  // namespace memra::backend::cuda
