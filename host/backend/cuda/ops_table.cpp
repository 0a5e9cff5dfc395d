// The CUDA backend's op table (memra_backend_ops, the SDK ABI family plugins call):
// C trampolines into a CudaBackend. Every entry makes the backend's context current
// and catches everything, so no exception crosses the C boundary.
#include <exception>
#include <string>

#include "host/backend/cuda/cuda_backend.hpp"

namespace memra::backend::cuda {
namespace {

CudaBackend* self(memra_backend_ctx* c) { return reinterpret_cast<CudaBackend*>(c); }

template <class F>
memra_status guarded_op(CudaBackend* b, F&& f) {
  try {
    if (const memra_status st = b->make_current(); st != MEMRA_OK) return st;
    return f(b);
  } catch (const std::exception& e) {
    return b->fail(MEMRA_ERR_INTERNAL, std::string("CUDA backend: ") + e.what());
  } catch (...) {
    return b->fail(MEMRA_ERR_INTERNAL, "CUDA backend: unknown exception");
  }
}

memra_status op_tensor_create(memra_backend_ctx* c, int32_t nd, const int64_t* s, memra_tensor* o) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->tensor_create(nd, s, o); });
}
memra_status op_embedding(memra_backend_ctx* c, const memra_weight* t, const memra_forward_batch* bt, float sc, memra_tensor* o) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->embedding(t, bt, sc, o); });
}
memra_status op_rms_norm(memra_backend_ctx* c, const memra_tensor* x, const memra_weight* w, float eps, float off, memra_tensor* o) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->rms_norm(x, w, eps, off, o); });
}
memra_status op_add_rms_norm(memra_backend_ctx* c, const memra_tensor* x, memra_tensor* r, const memra_weight* w, float eps,
                             float off, memra_tensor* o) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->add_rms_norm(x, r, w, eps, off, o); });
}
memra_status op_add(memra_backend_ctx* c, const memra_tensor* a, const memra_tensor* bb, memra_tensor* o) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->add(a, bb, o); });
}
memra_status op_matmul(memra_backend_ctx* c, const memra_tensor* x, const memra_weight* w, const memra_weight* bias, memra_tensor* o) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->matmul(x, w, bias, o); });
}
memra_status op_gated(memra_backend_ctx* c, memra_activation a, const memra_tensor* g, const memra_tensor* u, memra_tensor* o) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->gated_activation(a, g, u, o); });
}
memra_status op_attention(memra_backend_ctx* c, const memra_attention_params* p, const memra_forward_batch* bt, memra_tensor* q,
                          memra_tensor* k, const memra_tensor* v, memra_tensor* o) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->attention(p, bt, q, k, v, o); });
}
memra_status op_gather(memra_backend_ctx* c, const memra_tensor* x, const memra_forward_batch* bt, memra_tensor* o) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->gather_logit_rows(x, bt, o); });
}
memra_status op_logits(memra_backend_ctx* c, const memra_tensor* l, const memra_forward_batch* bt) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->logits_output(l, bt); });
}
memra_status op_rows_input(memra_backend_ctx* c, const memra_forward_batch* bt, memra_tensor* o) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->rows_input(bt, o); });
}
memra_status op_rows_output(memra_backend_ctx* c, const memra_tensor* x, const memra_forward_batch* bt) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->rows_output(x, bt); });
}
memra_status op_find(memra_backend_ctx* c, const char* name, uint32_t version, const memra_op** out) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->op_find(name, version, out); });
}
memra_status op_run(memra_backend_ctx* c, const memra_op* op, const memra_op_args* a) {
  return guarded_op(self(c), [&](CudaBackend* b) { return b->op_run(op, a); });
}

}  // namespace

void fill_ops(memra_backend_ops& ops, memra_backend_ctx* ctx) {
  ops.struct_size = MEMRA_BACKEND_OPS_STRUCT_SIZE;
  ops.ctx = ctx;
  ops.tensor_create = op_tensor_create;
  ops.embedding = op_embedding;
  ops.rms_norm = op_rms_norm;
  ops.add_rms_norm = op_add_rms_norm;
  ops.add = op_add;
  ops.matmul = op_matmul;
  ops.gated_activation = op_gated;
  ops.attention = op_attention;
  ops.gather_logit_rows = op_gather;
  ops.logits_output = op_logits;
  ops.op_find = op_find;
  ops.op_run = op_run;
  ops.rows_input = op_rows_input;
  ops.rows_output = op_rows_output;
}
}  // namespace memra::backend::cuda

