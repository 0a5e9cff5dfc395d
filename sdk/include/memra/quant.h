/* memra C ABI — the quant-scheme plugin table.
 *
 * A quant plugin owns a weight layout: how many bytes a matrix takes, how to
 * quantise float32 into it, the exact CPU dequantisation (the oracle), and the
 * matmul for each backend. `scheme` is one of the names in the descriptor's
 * `handles` list, so one plugin may serve a family of schemes.
 */
#ifndef MEMRA_QUANT_H
#define MEMRA_QUANT_H

#include "memra/abi.h"
#include "memra/host_api.h"

MEMRA_EXTERN_C_BEGIN

/* y[m][rows] = x[m][cols] * W[rows][cols]^T, float32 activations and outputs. */
typedef struct memra_matmul_args {
  size_t struct_size;
  const char* scheme;
  int32_t backend;          /* MEMRA_BACKEND_CPU or MEMRA_BACKEND_CUDA */
  const void* weight;       /* in this scheme's layout */
  int64_t rows;             /* output features */
  int64_t cols;             /* input features */
  int64_t m;                /* tokens */
  const float* x;
  float* y;
  void* stream;             /* CUDA stream, or NULL */
  /* 2.1: on a GPU backend, the kernel_data of the memra_kernel_desc this call serves
   * (the plugin's per-registration state: its kernel handles for that backend). */
  void* kernel_data;
} memra_matmul_args;
#define MEMRA_MATMUL_ARGS_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_matmul_args, kernel_data)

/* 2.1: a kernel a quant plugin registers in the host's kernel registry, keyed by
 * (op, weight scheme, activation format, arch) with a score; for a key the backend
 * runs the registered kernel with the highest score (the backend's built-ins
 * register the same way). Ops: "matmul". Activation formats: "f32" (float32 rows in,
 * float32 rows out). Arch: the device's memra_device_info.arch ("sm_90a", "sm_120a");
 * a registration for another arch than the registrar's device is refused. */
typedef struct memra_kernel_desc {
  size_t struct_size;
  const char* op;
  const char* scheme;       /* one of the plugin's handles */
  const char* activation;
  const char* arch;
  int32_t score;            /* >= 0 */
  /* Runs y = x W^T with device pointers (args->backend = MEMRA_BACKEND_CUDA) on the
   * backend's stream by host->kernel_launch with argument sizes, so a decode step stays
   * one captured CUDA graph. Called with args->kernel_data = kernel_data below. */
  memra_status (*matmul)(memra_plugin_ctx* ctx, const memra_matmul_args* args);
  void* kernel_data;        /* plugin-owned, lives until the plugin's shutdown */
} memra_kernel_desc;
#define MEMRA_KERNEL_DESC_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_kernel_desc, kernel_data)

typedef struct memra_kernel_registry memra_kernel_registry; /* opaque, host-owned */

/* Handed to register_kernels: the device kernels are being registered for and the
 * function that adds one (refused, with a message, for a bad op, scheme or arch). */
typedef struct memra_kernel_registrar {
  size_t struct_size;
  memra_kernel_registry* registry;
  const memra_device_info* device;
  memra_status (*add)(memra_kernel_registry* registry, const memra_kernel_desc* desc);
} memra_kernel_registrar;
#define MEMRA_KERNEL_REGISTRAR_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_kernel_registrar, add)

/* weight_bytes, quantize, dequantize and matmul are required (the host refuses a plugin
 * with a NULL one, naming it); register_kernels is optional. */
typedef struct memra_quant_api {
  size_t struct_size;
  /* Bytes a [rows][cols] matrix takes; UNSUPPORTED when cols breaks the block size. */
  memra_status (*weight_bytes)(memra_plugin_ctx* ctx, const char* scheme, int64_t rows, int64_t cols,
                               uint64_t* out);
  /* Quantise float32 rows into dst (dst_bytes from weight_bytes); memra-repack uses it. */
  memra_status (*quantize)(memra_plugin_ctx* ctx, const char* scheme, const float* src, int64_t rows,
                           int64_t cols, void* dst, uint64_t dst_bytes);
  /* Exact CPU dequantisation of whole rows: the oracle for every kernel. */
  memra_status (*dequantize)(memra_plugin_ctx* ctx, const char* scheme, const void* src, uint64_t src_bytes,
                             int64_t rows, int64_t cols, float* dst);
  memra_status (*matmul)(memra_plugin_ctx* ctx, const memra_matmul_args* args);
  /* 2.1, optional (NULL: no GPU kernels): called once per GPU backend before a model
   * whose weights use one of this plugin's schemes is loaded on it. Load modules with
   * host->kernel_module_load / kernel_module_compile and kernel_get here, then
   * registrar->add one memra_kernel_desc per (op, scheme, activation, arch) served. */
  memra_status (*register_kernels)(memra_plugin_ctx* ctx, const memra_kernel_registrar* registrar);
} memra_quant_api;
#define MEMRA_QUANT_API_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_quant_api, register_kernels)

MEMRA_EXTERN_C_END

#endif /* MEMRA_QUANT_H */
