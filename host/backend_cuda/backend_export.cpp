// The module's one exported symbol: the memra_cuda_backend_api table. Every entry
// catches everything, makes the backend's context current and returns a status.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "host/backend_cuda/cuda_backend.hpp"

using memra::backend::cuda::CudaBackend;

struct memra_cuda_backend {
  CudaBackend impl;
  explicit memra_cuda_backend(const memra_cuda_backend_options& o) : impl(o) {}
};

namespace {

CudaBackend* self(memra_backend_ctx* c) { return reinterpret_cast<CudaBackend*>(c); }

template <class F>
memra_status guarded(CudaBackend* b, F&& f) {
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
  return guarded(self(c), [&](CudaBackend* b) { return b->tensor_create(nd, s, o); });
}
memra_status op_embedding(memra_backend_ctx* c, const memra_weight* t, const memra_forward_batch* bt, float sc, memra_tensor* o) {
  return guarded(self(c), [&](CudaBackend* b) { return b->embedding(t, bt, sc, o); });
}
memra_status op_rms_norm(memra_backend_ctx* c, const memra_tensor* x, const memra_weight* w, float eps, float off, memra_tensor* o) {
  return guarded(self(c), [&](CudaBackend* b) { return b->rms_norm(x, w, eps, off, o); });
}
memra_status op_add_rms_norm(memra_backend_ctx* c, const memra_tensor* x, memra_tensor* r, const memra_weight* w, float eps,
                             float off, memra_tensor* o) {
  return guarded(self(c), [&](CudaBackend* b) { return b->add_rms_norm(x, r, w, eps, off, o); });
}
memra_status op_add(memra_backend_ctx* c, const memra_tensor* a, const memra_tensor* bb, memra_tensor* o) {
  return guarded(self(c), [&](CudaBackend* b) { return b->add(a, bb, o); });
}
memra_status op_matmul(memra_backend_ctx* c, const memra_tensor* x, const memra_weight* w, const memra_weight* bias, memra_tensor* o) {
  return guarded(self(c), [&](CudaBackend* b) { return b->matmul(x, w, bias, o); });
}
memra_status op_gated(memra_backend_ctx* c, memra_activation a, const memra_tensor* g, const memra_tensor* u, memra_tensor* o) {
  return guarded(self(c), [&](CudaBackend* b) { return b->gated_activation(a, g, u, o); });
}
memra_status op_attention(memra_backend_ctx* c, const memra_attention_params* p, const memra_forward_batch* bt, memra_tensor* q,
                          memra_tensor* k, const memra_tensor* v, memra_tensor* o) {
  return guarded(self(c), [&](CudaBackend* b) { return b->attention(p, bt, q, k, v, o); });
}
memra_status op_gather(memra_backend_ctx* c, const memra_tensor* x, const memra_forward_batch* bt, memra_tensor* o) {
  return guarded(self(c), [&](CudaBackend* b) { return b->gather_logit_rows(x, bt, o); });
}
memra_status op_logits(memra_backend_ctx* c, const memra_tensor* l, const memra_forward_batch* bt) {
  return guarded(self(c), [&](CudaBackend* b) { return b->logits_output(l, bt); });
}
// Ops by name: none on CUDA yet (host/ops/op_registry.hpp marks each op's backends, so
// the engine refuses a plan needing one at load, before a step could reach these).
memra_status op_find(memra_backend_ctx* c, const char* name, uint32_t version, const memra_op** out) {
  if (out) *out = nullptr;
  return guarded(self(c), [&](CudaBackend* b) {
    return b->fail(MEMRA_ERR_UNSUPPORTED, std::string("op_find: the CUDA backend does not implement op '") + (name ? name : "") +
                                              "' v" + std::to_string(version));
  });
}
memra_status op_run(memra_backend_ctx* c, const memra_op*, const memra_op_args*) {
  return guarded(self(c), [&](CudaBackend* b) { return b->fail(MEMRA_ERR_INVALID_ARGUMENT, "op_run: not an op of the CUDA backend"); });
}

void copy_error(char* err, size_t size, const std::string& msg) {
  if (!err || size == 0) return;
  std::snprintf(err, size, "%s", msg.c_str());
}

memra_status api_create(const memra_cuda_backend_options* o, memra_cuda_backend** out, char* err, size_t err_size) {
  if (out) *out = nullptr;
  if (!out || !MEMRA_STRUCT_HAS(o, memra_cuda_backend_options, log_user)) {
    copy_error(err, err_size, "create: bad options (struct_size)");
    return MEMRA_ERR_INVALID_ARGUMENT;
  }
  try {
    auto* b = new memra_cuda_backend(*o);
    auto s = b->impl.open();
    if (!s) {
      copy_error(err, err_size, s.error().message);
      const memra_status code = s.error().code == memra::ErrorCode::unsupported ? MEMRA_ERR_UNSUPPORTED : MEMRA_ERR_DEVICE;
      delete b;
      return code;
    }
    *out = b;
    return MEMRA_OK;
  } catch (const std::exception& e) {
    copy_error(err, err_size, std::string("CUDA backend create: ") + e.what());
    return MEMRA_ERR_INTERNAL;
  } catch (...) {
    copy_error(err, err_size, "CUDA backend create: unknown exception");
    return MEMRA_ERR_INTERNAL;
  }
}

void api_destroy(memra_cuda_backend* b) {
  try {
    delete b;
  } catch (...) {
  }
}

const char* api_last_error(memra_cuda_backend* b) { return b ? b->impl.last_error().c_str() : ""; }

#define MEMRA_GUARD(b, body) \
  (b) ? guarded(&(b)->impl, [&](CudaBackend * impl) { return impl->body; }) : MEMRA_ERR_INVALID_ARGUMENT

memra_status api_device_info(memra_cuda_backend* b, memra_device_info* out) { return MEMRA_GUARD(b, device_info(out)); }
memra_status api_upload(memra_cuda_backend* b, const memra_weight_set* w) { return MEMRA_GUARD(b, upload_weights(w)); }
memra_status api_kv(memra_cuda_backend* b, const memra_cuda_kv_config* kv) { return MEMRA_GUARD(b, allocate_kv(kv)); }
const memra_backend_ops* api_ops(memra_cuda_backend* b) { return b ? b->impl.ops() : nullptr; }
memra_status api_begin_step(memra_cuda_backend* b) { return MEMRA_GUARD(b, begin_step()); }
memra_status api_copy_kv(memra_cuda_backend* b, int32_t f, int32_t t) { return MEMRA_GUARD(b, copy_kv_block(f, t)); }
memra_status api_alloc(memra_cuda_backend* b, memra_memory_location l, uint64_t n, memra_buffer* o) {
  return MEMRA_GUARD(b, memory_alloc(l, n, o));
}
void api_free(memra_cuda_backend* b, memra_buffer* buf) {
  if (b) guarded(&b->impl, [&](CudaBackend* impl) { impl->memory_free(buf); return MEMRA_OK; });
}
memra_status api_h2d(memra_cuda_backend* b, void* d, const void* s, uint64_t n) { return MEMRA_GUARD(b, copy_to_device(d, s, n)); }
memra_status api_d2h(memra_cuda_backend* b, void* d, const void* s, uint64_t n) { return MEMRA_GUARD(b, copy_to_host(d, s, n)); }
memra_status api_sync(memra_cuda_backend* b) { return MEMRA_GUARD(b, synchronize()); }
memra_status api_module_load(memra_cuda_backend* b, const char* n, memra_kernel_module** o) {
  return MEMRA_GUARD(b, kernel_module_load(n, o));
}
memra_status api_module_compile(memra_cuda_backend* b, const memra_nvrtc_request* r, memra_kernel_module** o) {
  return MEMRA_GUARD(b, kernel_module_compile(r, o));
}
memra_status api_kernel_get(memra_cuda_backend* b, memra_kernel_module* m, const char* n, memra_kernel** o) {
  return MEMRA_GUARD(b, kernel_get(m, n, o));
}
memra_status api_kernel_launch(memra_cuda_backend* b, memra_kernel* k, const memra_launch_config* c, void** a) {
  return MEMRA_GUARD(b, kernel_launch(k, c, a));
}
int32_t api_cache_hit(memra_cuda_backend* b) { return b && b->impl.nvrtc_last_cache_hit() ? 1 : 0; }
memra_status api_copy_from_backend(memra_cuda_backend* to, void* dst, memra_cuda_backend* from, const void* src, uint64_t n) {
  if (!from) return MEMRA_ERR_INVALID_ARGUMENT;
  return MEMRA_GUARD(to, copy_from_backend(from->impl, reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), n));
}
memra_status api_prepare_batch(memra_cuda_backend* b, const memra_forward_batch* batch) {
  return MEMRA_GUARD(b, prepare_batch(batch));
}

memra_status api_begin_step_slot(memra_cuda_backend* b, int32_t slot) { return MEMRA_GUARD(b, begin_step_slot(slot)); }
memra_status api_wait_logits(memra_cuda_backend* b, int32_t slot) { return MEMRA_GUARD(b, wait_logits(slot)); }
memra_status api_sample_rows(memra_cuda_backend* b, const memra_cuda_sample_request* r, int32_t* tokens) {
  return MEMRA_GUARD(b, sample_rows(r, tokens));
}
memra_status api_logits_rows(memra_cuda_backend* b, const int32_t* rows, int32_t n, float* dst) {
  return MEMRA_GUARD(b, logits_rows_to_host(rows, n, dst));
}

memra_status api_register_plugin_kernels(memra_cuda_backend* b, const char* plugin, memra_plugin_ctx* ctx,
                                         memra_cuda_register_kernels_fn fn, int32_t* added) {
  return MEMRA_GUARD(b, register_plugin_kernels(plugin, ctx, fn, added));
}
memra_status api_module_load_file(memra_cuda_backend* b, const char* path, memra_kernel_module** o) {
  return MEMRA_GUARD(b, kernel_module_load_file(path, o));
}
memra_status api_stats(memra_cuda_backend* b, memra_cuda_backend_stats* o) { return b ? b->impl.stats(o) : MEMRA_ERR_INVALID_ARGUMENT; }

const memra_cuda_backend_api kApi = {
    MEMRA_CUDA_BACKEND_API_STRUCT_SIZE, MEMRA_CUDA_BACKEND_API_VERSION,
    api_create, api_destroy, api_last_error, api_device_info, api_upload, api_kv, api_ops, api_begin_step, api_copy_kv,
    api_alloc, api_free, api_h2d, api_d2h, api_sync, api_module_load, api_module_compile, api_kernel_get,
    api_kernel_launch, api_cache_hit, api_copy_from_backend, api_prepare_batch, api_begin_step_slot, api_wait_logits,
    api_sample_rows, api_logits_rows, api_register_plugin_kernels, api_module_load_file, api_stats,
};

}  // namespace

namespace memra::backend::cuda {
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
}
}  // namespace memra::backend::cuda

MEMRA_EXPORT const memra_cuda_backend_api* memra_cuda_backend_get_api(void) { return &kApi; }
