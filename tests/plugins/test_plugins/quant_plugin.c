/* A configurable quant test plugin: one source, many deliberately different .so files.
 *
 * Macros (set per target in tests/plugins/CMakeLists.txt):
 *   PLUGIN_NAME          descriptor name (default "good-quant")
 *   PLUGIN_HANDLES       initialiser of the handles list (default "good_q", "shared_q")
 *   PLUGIN_KIND          descriptor kind (default MEMRA_PLUGIN_KIND_QUANT)
 *   SCORE_CPU/SCORE_GPU  score on the CPU / any other backend (default 10 / -1)
 *   DESC_ABI_MAJOR       descriptor abi_major (default MEMRA_ABI_MAJOR)
 *   DESC_STRUCT_SIZE     descriptor struct_size (default MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE)
 *   QUANT_API_STRUCT_SIZE the quant table's struct_size (default MEMRA_QUANT_API_STRUCT_SIZE; a
 *                        plugin built against SDK 2.0 sets the size of the 2.0 table)
 *   OMIT_QUERY/OMIT_INIT leave that entry point out
 *   INIT_FAILS           init reports INIT_FAIL_MESSAGE and returns UNSUPPORTED
 *   NO_TABLE             init succeeds but sets no quant table
 * The scheme stores float32 weights scaled by 2 (so dequantize is not a plain copy).
 */
#include <memra/memra.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef PLUGIN_NAME
#define PLUGIN_NAME "good-quant"
#endif
#ifndef PLUGIN_HANDLES
#define PLUGIN_HANDLES "good_q", "shared_q"
#endif
#ifndef PLUGIN_KIND
#define PLUGIN_KIND MEMRA_PLUGIN_KIND_QUANT
#endif
#ifndef SCORE_CPU
#define SCORE_CPU 10
#endif
#ifndef SCORE_GPU
#define SCORE_GPU (-1)
#endif
#ifndef DESC_ABI_MAJOR
#define DESC_ABI_MAJOR MEMRA_ABI_MAJOR
#endif
#ifndef DESC_STRUCT_SIZE
#define DESC_STRUCT_SIZE MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE
#endif
#ifndef INIT_FAIL_MESSAGE
#define INIT_FAIL_MESSAGE "initfail: needs AVX-512 VNNI, which this CPU lacks"
#endif

/* This plugin's state for one host. */
struct memra_plugin_ctx {
  const memra_host_api* host;
};

static const char* const k_handles[] = {PLUGIN_HANDLES, NULL};

static memra_status fail(memra_plugin_ctx* ctx, memra_status code, const char* message) {
  return ctx != NULL ? ctx->host->error_report(ctx->host->ctx, code, message) : code;
}

static int handled(const char* scheme) {
  for (size_t i = 0; scheme != NULL && k_handles[i] != NULL; ++i) {
    if (strcmp(scheme, k_handles[i]) == 0) return 1;
  }
  return 0;
}

static memra_status q_weight_bytes(memra_plugin_ctx* ctx, const char* scheme, int64_t rows, int64_t cols, uint64_t* out) {
  if (!handled(scheme)) return fail(ctx, MEMRA_ERR_UNSUPPORTED, PLUGIN_NAME ": unknown scheme");
  if (rows < 0 || cols < 0 || out == NULL) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, PLUGIN_NAME ": bad shape");
  *out = (uint64_t)rows * (uint64_t)cols * 4u;
  return MEMRA_OK;
}

static memra_status q_quantize(memra_plugin_ctx* ctx, const char* scheme, const float* src, int64_t rows, int64_t cols, void* dst,
                               uint64_t dst_bytes) {
  uint64_t bytes = 0;
  memra_status s = q_weight_bytes(ctx, scheme, rows, cols, &bytes);
  if (s != MEMRA_OK) return s;
  if (dst_bytes < bytes) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, PLUGIN_NAME ": dst too small");
  float* d = (float*)dst;
  for (int64_t i = 0; i < rows * cols; ++i) d[i] = src[i] * 2.0f;
  return MEMRA_OK;
}

static memra_status q_dequantize(memra_plugin_ctx* ctx, const char* scheme, const void* src, uint64_t src_bytes, int64_t rows,
                                 int64_t cols, float* dst) {
  uint64_t bytes = 0;
  memra_status s = q_weight_bytes(ctx, scheme, rows, cols, &bytes);
  if (s != MEMRA_OK) return s;
  if (src_bytes < bytes) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, PLUGIN_NAME ": src too small");
  const float* q = (const float*)src;
  for (int64_t i = 0; i < rows * cols; ++i) dst[i] = q[i] * 0.5f;
  return MEMRA_OK;
}

static memra_status q_matmul(memra_plugin_ctx* ctx, const memra_matmul_args* a) {
  if (a == NULL || a->struct_size < MEMRA_MATMUL_ARGS_STRUCT_SIZE) {
    return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, PLUGIN_NAME ": matmul args too small");
  }
  if (!handled(a->scheme)) return fail(ctx, MEMRA_ERR_UNSUPPORTED, PLUGIN_NAME ": unknown scheme");
  if (a->backend != MEMRA_BACKEND_CPU) return fail(ctx, MEMRA_ERR_UNSUPPORTED, PLUGIN_NAME ": CPU only");
  const float* w = (const float*)a->weight;
  for (int64_t t = 0; t < a->m; ++t) {
    for (int64_t r = 0; r < a->rows; ++r) {
      float acc = 0.0f;
      for (int64_t c = 0; c < a->cols; ++c) acc += a->x[t * a->cols + c] * (w[r * a->cols + c] * 0.5f);
      a->y[t * a->rows + r] = acc;
    }
  }
  return MEMRA_OK;
}

static int32_t q_score(const memra_device_info* device, const char* handled_name) {
  (void)handled_name;
  return device->backend == MEMRA_BACKEND_CPU ? SCORE_CPU : SCORE_GPU;
}

#ifndef QUANT_API_STRUCT_SIZE
#define QUANT_API_STRUCT_SIZE MEMRA_QUANT_API_STRUCT_SIZE
#endif
/* The 2.1 slot register_kernels stays NULL; a 2.0-sized table never has it read. */
static const memra_quant_api k_quant = {QUANT_API_STRUCT_SIZE, q_weight_bytes, q_quantize, q_dequantize, q_matmul,
                                        NULL};

static const memra_plugin_descriptor k_desc = {
    DESC_STRUCT_SIZE, DESC_ABI_MAJOR, MEMRA_ABI_MINOR, PLUGIN_KIND, PLUGIN_NAME, "0.1.0",
    "test quant plugin", k_handles, q_score,
};

#ifndef OMIT_QUERY
MEMRA_EXPORT const memra_plugin_descriptor* memra_plugin_query(void) { return &k_desc; }
#endif

#ifndef OMIT_INIT
static void q_shutdown(memra_plugin_ctx* ctx) { free(ctx); }

MEMRA_EXPORT memra_status memra_plugin_init(const memra_host_api* host, memra_plugin_api* out) {
#ifdef INIT_FAILS
  (void)out;
  return host->error_report(host->ctx, MEMRA_ERR_UNSUPPORTED, INIT_FAIL_MESSAGE);
#else
  memra_plugin_ctx* ctx = (memra_plugin_ctx*)malloc(sizeof *ctx);
  if (ctx == NULL) return MEMRA_ERR_OUT_OF_MEMORY;
  ctx->host = host;
  out->kind = MEMRA_PLUGIN_KIND_QUANT;
  out->ctx = ctx;
  out->shutdown = q_shutdown;
#ifdef NO_TABLE
  out->quant = NULL;
#else
  out->quant = &k_quant;
#endif
  return MEMRA_OK;
#endif
}
#endif

/* Keeps unused-function warnings quiet in the variants that leave entry points out. */
const void* quant_test_plugin_tables[] = {&k_quant, &k_desc};
