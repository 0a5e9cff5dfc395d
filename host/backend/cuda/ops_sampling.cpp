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
  // Step 0: biases and masks (checked like the penalties: the kernel trusts them).
  const bool any_bias = !request.bias_offsets.empty(), any_mask = !request.mask_offsets.empty();
  const int64_t mask_words = (vocab + 63) / 64;
  if (any_bias) {
    if (request.bias_offsets.size() != request.rows.size() + 1 || request.bias_offsets[0] != 0 ||
        request.bias_offsets[static_cast<size_t>(n)] < 0 ||
        static_cast<size_t>(request.bias_offsets[static_cast<size_t>(n)]) > request.biases.size())
      return fail(MEMRA_ERR_INVALID_ARGUMENT, "sample_rows: bias_offsets must be rows + 1 offsets from 0 into biases");
    for (int32_t i = 0; i < n; ++i)
      if (request.bias_offsets[static_cast<size_t>(i) + 1] < request.bias_offsets[static_cast<size_t>(i)])
        return fail(MEMRA_ERR_INVALID_ARGUMENT, "sample_rows: bias_offsets decrease");
  }
  if (any_mask) {
    if (request.mask_offsets.size() != request.rows.size())
      return fail(MEMRA_ERR_INVALID_ARGUMENT, "sample_rows: one mask offset per row is required");
    for (const int64_t o : request.mask_offsets)
      if (o < -1 || (o >= 0 && static_cast<uint64_t>(o + mask_words) > request.masks.size()))
        return fail(MEMRA_ERR_INVALID_ARGUMENT, "sample_rows: a mask offset points past the masks");
  }
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;  // eager from here

  // One upload: params, rows, penalty offsets, penalties.
  const uint64_t params_bytes = align256(static_cast<uint64_t>(n) * sizeof(RowParams));
  const uint64_t rows_bytes = align256(static_cast<uint64_t>(n) * 4u);
  const uint64_t offsets_bytes = align256(static_cast<uint64_t>(n + 1) * 4u);
  const uint64_t pen_bytes = align256(static_cast<uint64_t>(std::max(num_pen, 1)) * sizeof(PenaltyEntry));
  const int32_t num_bias = any_bias ? request.bias_offsets[static_cast<size_t>(n)] : 0;
  const uint64_t bias_off_bytes = any_bias ? align256(static_cast<uint64_t>(n + 1) * 4u) : 0;
  const uint64_t bias_bytes = any_bias ? align256(static_cast<uint64_t>(std::max(num_bias, 1)) * sizeof(sampling::BiasEntry)) : 0;
  const uint64_t mask_off_bytes = any_mask ? align256(static_cast<uint64_t>(n) * 8u) : 0;
  const uint64_t masks_bytes = any_mask ? align256(std::max<uint64_t>(request.masks.size(), 1) * 8u) : 0;
  const uint64_t upload = params_bytes + rows_bytes + offsets_bytes + pen_bytes + bias_off_bytes + bias_bytes +
                          mask_off_bytes + masks_bytes;
  auto host = staging_->alloc(upload);
  if (!host) return fail(host.error());
  auto* h = static_cast<uint8_t*>(*host);
  std::memcpy(h, req->params, static_cast<size_t>(n) * sizeof(RowParams));
  std::memcpy(h + params_bytes, req->rows, static_cast<size_t>(n) * 4u);
  std::memcpy(h + params_bytes + rows_bytes, req->penalty_offsets, static_cast<size_t>(n + 1) * 4u);
  if (num_pen > 0) std::memcpy(h + params_bytes + rows_bytes + offsets_bytes, req->penalties, static_cast<size_t>(num_pen) * sizeof(PenaltyEntry));
  uint8_t* h_adjust = h + params_bytes + rows_bytes + offsets_bytes + pen_bytes;
  if (any_bias) {
    std::memcpy(h_adjust, request.bias_offsets.data(), static_cast<size_t>(n + 1) * 4u);
    if (num_bias > 0) std::memcpy(h_adjust + bias_off_bytes, request.biases.data(), static_cast<size_t>(num_bias) * sizeof(sampling::BiasEntry));
  }
  if (any_mask) {
    std::memcpy(h_adjust + bias_off_bytes + bias_bytes, request.mask_offsets.data(), static_cast<size_t>(n) * 8u);
    if (!request.masks.empty())
      std::memcpy(h_adjust + bias_off_bytes + bias_bytes + mask_off_bytes, request.masks.data(), request.masks.size() * 8u);
  }
  // A row copy (scratch_v) for rows whose values change before the draw.
  const bool copy_row = num_pen > 0 || any_bias || any_mask;
  const int64_t cap = (vocab + sampling::kLanes - 1) / sampling::kLanes * sampling::kLanes;
  const uint64_t v_bytes = copy_row ? align256(static_cast<uint64_t>(n) * static_cast<uint64_t>(vocab) * 4u) : 0;
  const uint64_t list_bytes = align256(static_cast<uint64_t>(n) * static_cast<uint64_t>(cap) * 4u);
  const uint64_t tok_bytes = align256(static_cast<uint64_t>(n) * 4u);
  auto dev = arena_->alloc(upload + v_bytes + 2 * list_bytes + tok_bytes);
  if (!dev) return fail(MEMRA_ERR_OUT_OF_MEMORY, dev.error().message);
  const CUdeviceptr d_params = *dev, d_rows = d_params + params_bytes, d_offsets = d_rows + rows_bytes,
                    d_pen = d_offsets + offsets_bytes, d_bias_off = d_pen + pen_bytes, d_bias = d_bias_off + bias_off_bytes,
                    d_mask_off = d_bias + bias_bytes, d_masks = d_mask_off + mask_off_bytes, d_v = d_params + upload,
                    d_q = d_v + v_bytes,
                    d_ids = d_q + list_bytes, d_tokens = d_ids + list_bytes;
  CUresult r = cuMemcpyHtoDAsync(d_params, h, upload, ctx_.stream());
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "sample_rows upload"));
  const memra_status st = launch("sampling", "memra_sample_rows", static_cast<unsigned>(n), 1, sampling::kLanes, 0, logits,
                                 vocab, d_rows, d_params, d_offsets, d_pen, any_bias ? d_bias_off : CUdeviceptr{0}, d_bias,
                                 any_mask ? d_mask_off : CUdeviceptr{0}, d_masks, copy_row ? d_v : CUdeviceptr{0}, d_q,
                                 d_ids, cap, d_tokens);
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
