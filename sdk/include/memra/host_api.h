/* memra C ABI — the services the host offers to plugins.
 *
 * The host owns the device context, streams and memory pools; plugins ask for
 * memory and kernels through this table and never call the driver themselves.
 * A NULL slot means "not available on this host" (e.g. kernel services on the
 * CPU reference backend); plugins must check before calling.
 */
#ifndef MEMRA_HOST_API_H
#define MEMRA_HOST_API_H

#include "memra/abi.h"

MEMRA_EXTERN_C_BEGIN

typedef struct memra_host_ctx memra_host_ctx;           /* opaque, host-owned */
typedef struct memra_kernel_module memra_kernel_module; /* opaque, host-owned, lives until host exit */
typedef struct memra_kernel memra_kernel;               /* opaque, owned by its module */

/* Which backend a device is driven by. */
typedef int32_t memra_backend_kind;
#define MEMRA_BACKEND_CPU 0
#define MEMRA_BACKEND_CUDA 1

typedef struct memra_device_info {
  size_t struct_size;
  memra_backend_kind backend;
  int32_t compute_major;      /* 9 for sm_90a, 12 for sm_120a; 0 on CPU */
  int32_t compute_minor;
  int32_t multiprocessor_count;
  uint64_t total_memory_bytes;
  const char* arch;           /* "sm_90a", "sm_120a", "cpu"; host-owned, valid while the host lives */
  const char* name;           /* e.g. "NVIDIA H200" or "CPU reference" */
} memra_device_info;
#define MEMRA_DEVICE_INFO_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_device_info, name)

/* Where a buffer lives. */
typedef int32_t memra_memory_location;
#define MEMRA_MEMORY_HOST 0
#define MEMRA_MEMORY_DEVICE 1
#define MEMRA_MEMORY_HOST_PINNED 2

typedef struct memra_buffer {
  size_t struct_size;
  memra_memory_location location;
  uint64_t bytes;
  void* ptr;          /* host pointer, or the device address cast to a pointer */
  void* host_handle;  /* host bookkeeping; plugins must not touch it */
} memra_buffer;
#define MEMRA_BUFFER_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_buffer, host_handle)

typedef struct memra_launch_config {
  size_t struct_size;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  void* stream;       /* NULL = the host's current stream for this call */
  /* 2.1: the kernel's parameters as `num_args` values of `arg_sizes[i]` bytes at args[i].
   * With them the CUDA backend records the launch into the decode step's CUDA graph
   * (it checks them against the kernel's own parameter layout); a launch without them
   * ends the step's recording and runs eagerly. */
  uint32_t num_args;
  const size_t* arg_sizes;
} memra_launch_config;
#define MEMRA_LAUNCH_CONFIG_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_launch_config, arg_sizes)

/* A source to compile with NVRTC for the current device; the host caches the
 * CUBIN on disk keyed by (source hash, options, compute capability, NVRTC version). */
typedef struct memra_nvrtc_request {
  size_t struct_size;
  const char* name;                 /* for logs and the cache file name */
  const char* source;
  const char* const* options;       /* extra NVRTC options; the host adds the architecture */
  size_t num_options;
} memra_nvrtc_request;
#define MEMRA_NVRTC_REQUEST_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_nvrtc_request, num_options)

typedef struct memra_host_api {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  memra_host_ctx* ctx;  /* pass back as the first argument of every call */

  /* Logging; the host prefixes the plugin's name. */
  void (*log)(memra_host_ctx* ctx, memra_log_level level, const char* message);
  /* Report the detail of a failure; the host copies `message`. Returns `code`
   * so plugins can write `return host->error_report(host->ctx, code, "...")`. */
  memra_status (*error_report)(memra_host_ctx* ctx, memra_status code, const char* message);
  /* Look up a host configuration value (flags, env, model options) by key. Copies
   * at most buf_size bytes including the NUL; *needed gets the full size. */
  memra_status (*config_get)(memra_host_ctx* ctx, const char* key, char* buf, size_t buf_size,
                             size_t* needed);
  memra_status (*device_info_get)(memra_host_ctx* ctx, memra_device_info* out);

  /* Memory from the host's pools; free through memory_free only. */
  memra_status (*memory_alloc)(memra_host_ctx* ctx, memra_memory_location location, uint64_t bytes,
                               uint64_t alignment, memra_buffer* out);
  void (*memory_free)(memra_host_ctx* ctx, memra_buffer* buffer);

  /* Kernel modules: by name, <name>.fatbin from the calling plugin's own directory,
   * else from lib/memra/kernels (SASS picked by compute capability), or compiled from
   * source with NVRTC. They act on the CUDA backend the plugin is registering kernels
   * for: call the first three inside memra_quant_api.register_kernels, kernel_launch
   * inside a registered kernel's matmul (other times: MEMRA_ERR_UNSUPPORTED). */
  memra_status (*kernel_module_load)(memra_host_ctx* ctx, const char* module_name,
                                     memra_kernel_module** out);
  memra_status (*kernel_module_compile)(memra_host_ctx* ctx, const memra_nvrtc_request* request,
                                        memra_kernel_module** out);
  memra_status (*kernel_get)(memra_host_ctx* ctx, memra_kernel_module* module,
                             const char* kernel_name, memra_kernel** out);
  memra_status (*kernel_launch)(memra_host_ctx* ctx, memra_kernel* kernel,
                                const memra_launch_config* config, void** args);
} memra_host_api;
#define MEMRA_HOST_API_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_host_api, kernel_launch)

MEMRA_EXTERN_C_END

#endif /* MEMRA_HOST_API_H */
