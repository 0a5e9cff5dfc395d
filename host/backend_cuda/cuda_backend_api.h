/* The CUDA backend module's C interface (libmemra-backend-cuda.so).
 *
 * Every cu* call of memra lives inside that module; the engine, tools and tests
 * never link libcuda. They dlopen the module (host/backend_cuda/cuda_backend_loader)
 * only after dlopen("libcuda.so.1") succeeds, then call the one exported symbol
 * memra_cuda_backend_get_api() for this table. Same rules as the SDK ABI: structs
 * begin with struct_size, functions return memra_status, detail via last_error().
 */
#ifndef MEMRA_CUDA_BACKEND_API_H
#define MEMRA_CUDA_BACKEND_API_H

#include "memra/backend.h"
#include "memra/family.h"
#include "memra/host_api.h"
#include "memra/quant.h"

MEMRA_EXTERN_C_BEGIN

#define MEMRA_CUDA_BACKEND_API_VERSION 1

typedef struct memra_cuda_backend memra_cuda_backend; /* opaque */

typedef struct memra_cuda_backend_options {
  size_t struct_size;
  int32_t device_ordinal;   /* CUDA device index */
  int32_t allow_ptx_jit;    /* 1: run a module from its PTX when the fatbin has no SASS for the device (degraded) */
  int32_t use_nvrtc;        /* 1: use NVRTC shape-specialised kernels where the backend has them */
  const char* kernel_dir;   /* directory of <module>.fatbin; NULL = <module dir>/kernels */
  const char* cache_dir;    /* NVRTC cache; NULL = $MEMRA_HOME/kernel-cache (or ~/.memra/kernel-cache) */
  void (*log)(void* user, memra_log_level level, const char* message); /* NULL = stderr for WARN and above */
  void* log_user;
} memra_cuda_backend_options;
#define MEMRA_CUDA_BACKEND_OPTIONS_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_cuda_backend_options, log_user)

/* Paged KV cache geometry (uniform across layers), as the CPU backend's KvCacheConfig. */
typedef struct memra_cuda_kv_config {
  size_t struct_size;
  int64_t layers;
  int64_t kv_heads;
  int64_t head_dim;
  int64_t block_size;
  int64_t num_blocks;
  /* Appended: the element type, MEMRA_DTYPE_F32 or MEMRA_DTYPE_BF16 (K after RoPE and V
   * rounded to bf16 when written); a struct without it means F32. Others are refused. */
  memra_dtype dtype;
} memra_cuda_kv_config;
#define MEMRA_CUDA_KV_CONFIG_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_cuda_kv_config, dtype)

/* Device sampling (sample_rows): one row's parameters, the layout of
 * memra::sampling::RowParams (kernels/sampling/sampling_math.cuh). */
typedef struct memra_cuda_sample_params {
  float temperature;         /* 0: argmax */
  int32_t top_k;             /* <= 0 or >= vocab: off */
  float top_p;               /* >= 1: off */
  float min_p;               /* <= 0: off */
  float repetition_penalty;  /* 1: off */
  float presence_penalty;
  float frequency_penalty;
  uint32_t reserved;
  uint64_t seed;
  uint64_t position;         /* the draw is keyed by (seed, position) */
} memra_cuda_sample_params;

/* A token of a row's history: count = (occurrences in the output << 1) | 1 when the
 * token is in the prompt or output (memra::sampling::PenaltyEntry). Ids are unique per row. */
typedef struct memra_cuda_penalty {
  int32_t id;
  int32_t count;
} memra_cuda_penalty;

typedef struct memra_cuda_sample_request {
  size_t struct_size;
  /* Device [rows][vocab] f32 logits, or NULL for the logits tensor this step's
   * logits_output kept on the device (valid until the next begin_step). */
  const float* logits;
  int64_t vocab;                            /* with logits NULL: 0 or the kept tensor's */
  int32_t num_samples;
  const int32_t* rows;                      /* [num_samples] logits row of each sample */
  const memra_cuda_sample_params* params;   /* [num_samples] */
  const int32_t* penalty_offsets;           /* [num_samples + 1] into penalties */
  const memra_cuda_penalty* penalties;      /* [penalty_offsets[num_samples]] */
} memra_cuda_sample_request;
#define MEMRA_CUDA_SAMPLE_REQUEST_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_cuda_sample_request, penalties)

/* Counters of one backend (stats). */
typedef struct memra_cuda_backend_stats {
  size_t struct_size;
  int64_t graph_replays;             /* steps issued as a replayed step graph */
  int64_t graph_captures;            /* steps captured into a new (or updated) graph */
  int64_t plugin_matmuls;            /* matmul ops served by a plugin's registered kernel */
  int64_t plugin_launches_replayed;  /* kernel_launch launches that ran inside a replayed graph */
  int64_t plugin_launches_captured;  /* ... inside a newly captured graph */
  int64_t plugin_launches_eager;     /* ... outside any graph */
} memra_cuda_backend_stats;
#define MEMRA_CUDA_BACKEND_STATS_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_cuda_backend_stats, plugin_launches_eager)

/* A quant plugin's memra_quant_api.register_kernels, as register_plugin_kernels takes it. */
typedef memra_status (*memra_cuda_register_kernels_fn)(memra_plugin_ctx* ctx, const memra_kernel_registrar* registrar);

typedef struct memra_cuda_backend_api {
  size_t struct_size;
  uint32_t version; /* MEMRA_CUDA_BACKEND_API_VERSION */

  /* On failure *out is NULL and the reason is copied into err (may be NULL). */
  memra_status (*create)(const memra_cuda_backend_options* options, memra_cuda_backend** out, char* err,
                         size_t err_size);
  void (*destroy)(memra_cuda_backend* b);
  /* Detail of the last failure on this backend ("" when none); valid until the next call. */
  const char* (*last_error)(memra_cuda_backend* b);
  memra_status (*device_info)(memra_cuda_backend* b, memra_device_info* out);

  /* Model lifetime: upload every weight once (weights' data are host addresses; ops
   * given those descriptors later resolve them to the device copies), then the KV cache. */
  memra_status (*upload_weights)(memra_cuda_backend* b, const memra_weight_set* weights);
  memra_status (*allocate_kv)(memra_cuda_backend* b, const memra_cuda_kv_config* kv);
  const memra_backend_ops* (*ops)(memra_cuda_backend* b);
  /* Waits for the previous step and reclaims its scratch; call before each model_forward. */
  memra_status (*begin_step)(memra_cuda_backend* b);
  memra_status (*copy_kv_block)(memra_cuda_backend* b, int32_t from, int32_t to);

  /* Device memory for tools and tests (tensor data pointers of the ops are device addresses). */
  memra_status (*memory_alloc)(memra_cuda_backend* b, memra_memory_location location, uint64_t bytes,
                               memra_buffer* out);
  void (*memory_free)(memra_cuda_backend* b, memra_buffer* buffer);
  memra_status (*copy_to_device)(memra_cuda_backend* b, void* dst, const void* src, uint64_t bytes);
  memra_status (*copy_to_host)(memra_cuda_backend* b, void* dst, const void* src, uint64_t bytes);
  memra_status (*synchronize)(memra_cuda_backend* b);

  /* Kernel services behind memra_host_api's kernel slots. */
  memra_status (*kernel_module_load)(memra_cuda_backend* b, const char* module_name, memra_kernel_module** out);
  memra_status (*kernel_module_compile)(memra_cuda_backend* b, const memra_nvrtc_request* request,
                                        memra_kernel_module** out);
  memra_status (*kernel_get)(memra_cuda_backend* b, memra_kernel_module* module, const char* kernel_name,
                             memra_kernel** out);
  memra_status (*kernel_launch)(memra_cuda_backend* b, memra_kernel* kernel, const memra_launch_config* config,
                                void** args);
  /* 1 when the last kernel_module_compile was served from the on-disk cache. */
  int32_t (*nvrtc_last_cache_hit)(memra_cuda_backend* b);

  /* Appended (check with MEMRA_STRUCT_HAS before use; older modules lack them). */

  /* Pipeline hand-off: copies `bytes` from `src`, a device address of backend `from`
   * (a tensor of its ops), to `dst`, one of backend `to`. Asynchronous and stream
   * ordered: the copy runs on `to`'s stream after everything queued on `from` so far,
   * and `from`'s later work waits for it (so `from` may reuse src). The two may share
   * a device (a device-to-device copy) or not (cuMemcpyPeerAsync, peer access enabled
   * where the devices allow it). The sender's recorded step ops are launched first
   * (as its step graph); a receiver that has recorded nothing yet keeps recording. */
  memra_status (*copy_from_backend)(memra_cuda_backend* to, void* dst, memra_cuda_backend* from, const void* src,
                                    uint64_t bytes);
  /* Uploads this step's batch arrays now (otherwise done by the first op that takes the
   * batch). Ops without a batch argument (matmul) take which rows are prompt rows from
   * the last batch the backend saw this step, so a pipeline stage whose first op is a
   * matmul calls this first to compute exactly what a single backend would. */
  memra_status (*prepare_batch)(memra_cuda_backend* b, const memra_forward_batch* batch);
  /* Step slots (0 or 1), for a pipeline that keeps two groups of sequences in flight.
   * begin_step_slot instead of begin_step: waits only for this slot's previous step
   * (the other slot's may still run) and reclaims only its scratch. Each slot keeps its
   * own step graph; a slot step's logits_output only queues the copy; wait_logits
   * waits for the slot's queued logits copies and writes them to their batches'
   * host logits. The stream runs all work in the order it was issued. */
  memra_status (*begin_step_slot)(memra_cuda_backend* b, int32_t slot);
  memra_status (*wait_logits)(memra_cuda_backend* b, int32_t slot);
  /* Device sampling (kernels/sampling; docs/ARCHITECTURE.md "Sampling"): the canonical
   * sampler on each requested row, one int32 token per sample written to `tokens`
   * (host memory), bit-identical to the CPU reference. A step whose batch->logits is
   * NULL copies nothing in logits_output and keeps the logits tensor on the device for
   * this call and logits_rows_to_host (until the next begin_step). In a slot step
   * (begin_step_slot) sample_rows only queues its work: `tokens` is written by
   * wait_logits(slot) and must stay valid until then; logits_rows_to_host is not for
   * slot steps. */
  memra_status (*sample_rows)(memra_cuda_backend* b, const memra_cuda_sample_request* request, int32_t* tokens);
  /* Copies rows of that kept logits tensor to host memory: dst is [n][vocab] floats. */
  memra_status (*logits_rows_to_host)(memra_cuda_backend* b, const int32_t* rows, int32_t n, float* dst);
  /* Kernel registry (docs/PLUGINS.md "Writing a scheme with GPU kernels"): calls
   * `fn(ctx, registrar)` with a registrar that adds the plugin's kernels to this
   * backend's registry under `plugin_name`; *added = how many it accepted. A refused
   * descriptor fails the call with the reason in last_error. */
  memra_status (*register_plugin_kernels)(memra_cuda_backend* b, const char* plugin_name, memra_plugin_ctx* ctx,
                                          memra_cuda_register_kernels_fn fn, int32_t* added);
  /* A fatbin by path (a plugin's own module); same SASS/PTX rules as kernel_module_load. */
  memra_status (*kernel_module_load_file)(memra_cuda_backend* b, const char* path, memra_kernel_module** out);
  memra_status (*stats)(memra_cuda_backend* b, memra_cuda_backend_stats* out);
} memra_cuda_backend_api;
#define MEMRA_CUDA_BACKEND_API_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_cuda_backend_api, stats)
/* The smallest table a host accepts (the first API 1 modules); later entries are optional. */
#define MEMRA_CUDA_BACKEND_API_MIN_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_cuda_backend_api, nvrtc_last_cache_hit)

typedef const memra_cuda_backend_api* (*memra_cuda_backend_get_api_fn)(void);
#define MEMRA_CUDA_BACKEND_GET_API_SYMBOL "memra_cuda_backend_get_api"

MEMRA_EXTERN_C_END

#endif /* MEMRA_CUDA_BACKEND_API_H */
