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
} memra_matmul_args;
#define MEMRA_MATMUL_ARGS_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_matmul_args, stream)

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
} memra_quant_api;
#define MEMRA_QUANT_API_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_quant_api, matmul)

MEMRA_EXTERN_C_END

#endif /* MEMRA_QUANT_H */
