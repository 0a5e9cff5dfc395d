/* example-f32: a complete, tiny memra quant plugin in C11.
 *
 * Scheme "example_f32" stores a [rows][cols] weight matrix as plain row-major
 * float32, so quantize and dequantize are copies and matmul is the textbook
 * y[m][rows] = x[m][cols] * W[rows][cols]^T on the CPU. A real scheme (q4_k,
 * fp8, ...) has the same shape: a layout, an exact CPU dequantisation and
 * kernels per backend.
 *
 * Build it out of tree against the installed SDK headers (see CMakeLists.txt
 * here and docs/PLUGINS.md), then put libmemra-quant-example.so in a plugin
 * directory (--plugin-dir, MEMRA_PLUGIN_PATH or <prefix>/lib/memra/plugins).
 */
#include <memra/memra.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXAMPLE_SCHEME "example_f32"

/* This plugin's state for one host: made by memra_plugin_init, passed to every
 * table function, freed by shutdown. Nothing lives in globals, so two hosts in one
 * process each get their own. */
struct memra_plugin_ctx {
  const memra_host_api* host; /* valid from init until shutdown */
};

/* Reports a failure through the host (which copies the text) and returns `code`. */
static memra_status fail(memra_plugin_ctx* ctx, memra_status code, const char* message) {
  if (ctx != NULL && ctx->host->error_report != NULL) return ctx->host->error_report(ctx->host->ctx, code, message);
  return code;
}

static int is_our_scheme(const char* scheme) { return scheme != NULL && strcmp(scheme, EXAMPLE_SCHEME) == 0; }

/* rows*cols*4 without overflow; 0 on success. */
static int matrix_bytes(int64_t rows, int64_t cols, uint64_t* out) {
  if (rows < 0 || cols < 0) return 1;
  if (cols != 0 && (uint64_t)rows > UINT64_MAX / 4u / (uint64_t)cols) return 1;
  *out = (uint64_t)rows * (uint64_t)cols * 4u;
  return 0;
}

static memra_status example_weight_bytes(memra_plugin_ctx* ctx, const char* scheme, int64_t rows, int64_t cols, uint64_t* out) {
  if (!is_our_scheme(scheme)) return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example-f32 only handles scheme example_f32");
  if (out == NULL) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "weight_bytes: out is NULL");
  if (matrix_bytes(rows, cols, out) != 0) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "weight_bytes: bad shape");
  return MEMRA_OK;
}

static memra_status example_quantize(memra_plugin_ctx* ctx, const char* scheme, const float* src, int64_t rows, int64_t cols, void* dst,
                                     uint64_t dst_bytes) {
  uint64_t bytes = 0;
  memra_status s = example_weight_bytes(ctx, scheme, rows, cols, &bytes);
  if (s != MEMRA_OK) return s;
  if (dst_bytes < bytes) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "quantize: dst is smaller than weight_bytes");
  if (bytes != 0 && (src == NULL || dst == NULL)) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "quantize: NULL buffer");
  if (bytes != 0) memcpy(dst, src, (size_t)bytes);
  return MEMRA_OK;
}

static memra_status example_dequantize(memra_plugin_ctx* ctx, const char* scheme, const void* src, uint64_t src_bytes, int64_t rows,
                                       int64_t cols, float* dst) {
  uint64_t bytes = 0;
  memra_status s = example_weight_bytes(ctx, scheme, rows, cols, &bytes);
  if (s != MEMRA_OK) return s;
  if (src_bytes < bytes) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "dequantize: src is smaller than weight_bytes");
  if (bytes != 0 && (src == NULL || dst == NULL)) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "dequantize: NULL buffer");
  if (bytes != 0) memcpy(dst, src, (size_t)bytes);
  return MEMRA_OK;
}

static memra_status example_matmul(memra_plugin_ctx* ctx, const memra_matmul_args* a) {
  /* A reader checks struct_size before trusting any field. */
  if (a == NULL || a->struct_size < MEMRA_MATMUL_ARGS_STRUCT_SIZE) {
    return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "matmul: args NULL or struct_size too small");
  }
  if (!is_our_scheme(a->scheme)) return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example-f32 only handles scheme example_f32");
  if (a->backend != MEMRA_BACKEND_CPU) {
    return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example-f32 has only a CPU matmul; its score is negative on other backends");
  }
  if (a->rows < 0 || a->cols < 0 || a->m < 0) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "matmul: negative dimension");
  if (a->m > 0 && a->rows > 0 && (a->y == NULL || (a->cols > 0 && (a->x == NULL || a->weight == NULL)))) {
    return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "matmul: NULL weight, x or y");
  }
  const float* w = (const float*)a->weight;
  for (int64_t t = 0; t < a->m; ++t) {
    const float* x = a->x + t * a->cols;
    float* y = a->y + t * a->rows;
    for (int64_t r = 0; r < a->rows; ++r) {
      const float* wr = w + r * a->cols;
      float acc = 0.0f; /* fixed order: the result never depends on m (batch invariance) */
      for (int64_t c = 0; c < a->cols; ++c) acc += x[c] * wr[c];
      y[r] = acc;
    }
  }
  return MEMRA_OK;
}

/* Runs on the CPU reference backend only; the host picks the highest score. */
static int32_t example_score(const memra_device_info* device, const char* handled_name) {
  if (device == NULL || !is_our_scheme(handled_name)) return -1;
  return device->backend == MEMRA_BACKEND_CPU ? 1 : -1;
}

static void example_shutdown(memra_plugin_ctx* ctx) { free(ctx); }

static const char* const k_handles[] = {EXAMPLE_SCHEME, NULL};

static const memra_plugin_descriptor k_descriptor = {
    MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE,
    MEMRA_ABI_MAJOR,
    MEMRA_ABI_MINOR,
    MEMRA_PLUGIN_KIND_QUANT,
    "example-f32",
    "1.0.0",
    "SDK example: float32 weights, copy quantisation, CPU matmul",
    k_handles,
    example_score,
};

static const memra_quant_api k_quant_api = {
    MEMRA_QUANT_API_STRUCT_SIZE, example_weight_bytes, example_quantize, example_dequantize, example_matmul,
};

MEMRA_EXPORT const memra_plugin_descriptor* memra_plugin_query(void) { return &k_descriptor; }

MEMRA_EXPORT memra_status memra_plugin_init(const memra_host_api* host, memra_plugin_api* out) {
  if (host == NULL || host->struct_size < MEMRA_HOST_API_STRUCT_SIZE || host->abi_major != MEMRA_ABI_MAJOR) {
    return MEMRA_ERR_ABI_MISMATCH; /* no usable error_report: the host sees the status only */
  }
  if (out == NULL || out->struct_size < MEMRA_PLUGIN_API_STRUCT_SIZE) {
    return host->error_report(host->ctx, MEMRA_ERR_ABI_MISMATCH, "memra_plugin_api from the host is smaller than v2.0");
  }
  memra_plugin_ctx* ctx = (memra_plugin_ctx*)malloc(sizeof *ctx);
  if (ctx == NULL) return host->error_report(host->ctx, MEMRA_ERR_OUT_OF_MEMORY, "example-f32: out of memory");
  ctx->host = host;
  out->kind = MEMRA_PLUGIN_KIND_QUANT;
  out->ctx = ctx;
  out->family = NULL;
  out->quant = &k_quant_api;
  out->shutdown = example_shutdown;
  if (host->log != NULL) host->log(host->ctx, MEMRA_LOG_DEBUG, "example-f32 ready (CPU matmul)");
  return MEMRA_OK;
}
