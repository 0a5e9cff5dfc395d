/* example-i8: a complete memra quant plugin in C11 with its own CUDA kernel.
 *
 * Scheme "example_i8" (layout and arithmetic: example_i8.h) stores each weight row as
 * an f32 scale and int8 codes. The plugin owns all of it: weight_bytes, the quantiser
 * memra-repack uses, the exact CPU dequantisation, a CPU matmul, and on a GPU the
 * kernel of example_i8.cu, which it registers in the host's kernel registry
 * (register_kernels) and launches through the host's kernel services with argument
 * sizes, so the CUDA backend records it into the decode step's CUDA graph.
 *
 * Build it out of tree against the installed SDK headers (CMakeLists.txt here,
 * docs/PLUGINS.md), then put libmemra-quant-example.so and example_i8.fatbin in a
 * plugin directory (--plugin-dir, MEMRA_PLUGIN_PATH or <prefix>/lib/memra/plugins).
 */
#include <memra/memra.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_i8.h"

/* The kernel handle for one GPU backend: register_kernels runs once per backend, and
 * each registration's matmul gets its own record back as args->kernel_data. */
typedef struct kernel_record {
  memra_kernel* gemv;
  struct kernel_record* next;
} kernel_record;

/* This plugin's state for one host: made by memra_plugin_init, passed to every table
 * function, freed by shutdown. Nothing lives in globals. */
struct memra_plugin_ctx {
  const memra_host_api* host; /* valid from init until shutdown */
  kernel_record* records;     /* freed at shutdown */
};

static memra_status fail(memra_plugin_ctx* ctx, memra_status code, const char* message) {
  if (ctx != NULL && ctx->host->error_report != NULL) return ctx->host->error_report(ctx->host->ctx, code, message);
  return code;
}

static int is_our_scheme(const char* scheme) { return scheme != NULL && strcmp(scheme, EXAMPLE_I8_SCHEME) == 0; }

/* Archs example_i8.fatbin holds SASS for (CMakeLists.txt's -gencode list). */
static int has_sass_for(const char* arch) {
  return arch != NULL && (strcmp(arch, "sm_90a") == 0 || strcmp(arch, "sm_120a") == 0);
}

static memra_status check_shape(memra_plugin_ctx* ctx, const char* scheme, int64_t rows, int64_t cols) {
  if (!is_our_scheme(scheme)) return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example-i8 only handles scheme example_i8");
  if (rows < 0 || cols <= 0) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "example-i8: bad shape");
  if (cols % 4 != 0) return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example-i8: rows must hold a multiple of 4 columns");
  if ((uint64_t)rows > UINT64_MAX / (uint64_t)EXAMPLE_I8_ROW_BYTES(cols)) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "example-i8: too large");
  return MEMRA_OK;
}

static memra_status example_weight_bytes(memra_plugin_ctx* ctx, const char* scheme, int64_t rows, int64_t cols, uint64_t* out) {
  memra_status s = check_shape(ctx, scheme, rows, cols);
  if (s != MEMRA_OK) return s;
  if (out == NULL) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "weight_bytes: out is NULL");
  *out = (uint64_t)rows * (uint64_t)EXAMPLE_I8_ROW_BYTES(cols);
  return MEMRA_OK;
}

static memra_status example_quantize(memra_plugin_ctx* ctx, const char* scheme, const float* src, int64_t rows, int64_t cols, void* dst,
                                     uint64_t dst_bytes) {
  uint64_t bytes = 0;
  memra_status s = example_weight_bytes(ctx, scheme, rows, cols, &bytes);
  if (s != MEMRA_OK) return s;
  if (dst_bytes < bytes) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "quantize: dst is smaller than weight_bytes");
  if (bytes != 0 && (src == NULL || dst == NULL)) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "quantize: NULL buffer");
  for (int64_t r = 0; r < rows; ++r) {
    const float* w = src + r * cols;
    unsigned char* rec = (unsigned char*)dst + r * EXAMPLE_I8_ROW_BYTES(cols);
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      if (!isfinite(w[c])) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "quantize: weight is not finite");
      if (fabsf(w[c]) > amax) amax = fabsf(w[c]);
    }
    const float scale = amax / 127.0f;
    memcpy(rec, &scale, 4);
    signed char* q = (signed char*)(rec + 4);
    for (int64_t c = 0; c < cols; ++c) {
      float v = scale > 0.0f ? nearbyintf(w[c] / scale) : 0.0f;
      if (v > 127.0f) v = 127.0f;
      if (v < -127.0f) v = -127.0f;
      q[c] = (signed char)v;
    }
  }
  return MEMRA_OK;
}

static memra_status example_dequantize(memra_plugin_ctx* ctx, const char* scheme, const void* src, uint64_t src_bytes, int64_t rows,
                                       int64_t cols, float* dst) {
  uint64_t bytes = 0;
  memra_status s = example_weight_bytes(ctx, scheme, rows, cols, &bytes);
  if (s != MEMRA_OK) return s;
  if (src_bytes < bytes) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "dequantize: src is smaller than weight_bytes");
  if (bytes != 0 && (src == NULL || dst == NULL)) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "dequantize: NULL buffer");
  for (int64_t r = 0; r < rows; ++r) {
    const unsigned char* rec = (const unsigned char*)src + r * EXAMPLE_I8_ROW_BYTES(cols);
    float scale;
    memcpy(&scale, rec, 4);
    const signed char* q = (const signed char*)(rec + 4);
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = (float)q[c] * scale;
  }
  return MEMRA_OK;
}

/* One output element exactly as a warp of example_i8.cu computes it (example_i8.h). */
static float row_dot(const unsigned char* rec, const float* x, int64_t cols) {
  float scale;
  memcpy(&scale, rec, 4);
  const signed char* q = (const signed char*)(rec + 4);
  float lane[EXAMPLE_I8_LANES];
  for (int l = 0; l < EXAMPLE_I8_LANES; ++l) {
    float acc = 0.0f;
    for (int64_t c = l; c < cols; c += EXAMPLE_I8_LANES) {
      const float p = (float)q[c] * x[c];
      acc = acc + p;
    }
    lane[l] = acc;
  }
  for (int off = 16; off > 0; off >>= 1)
    for (int l = 0; l < off; ++l) lane[l] = lane[l] + lane[l + off];
  return lane[0] * scale;
}

static memra_status launch_gemv(memra_plugin_ctx* ctx, const memra_matmul_args* a) {
  const kernel_record* k = (const kernel_record*)a->kernel_data;
  if (k == NULL || ctx->host->kernel_launch == NULL) return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example-i8: no registered kernel for this backend");
  if (a->rows > (int64_t)UINT32_MAX * EXAMPLE_I8_ROWS_PER_BLOCK || a->m > 65535) return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example-i8: grid too large");
  const void* w = a->weight;
  long long rows = a->rows, cols = a->cols;
  const float* x = a->x;
  float* y = a->y;
  void* args[] = {&w, &rows, &cols, &x, &y};
  /* The sizes let the backend record the launch into the step's CUDA graph. */
  static const size_t sizes[] = {sizeof w, sizeof rows, sizeof cols, sizeof x, sizeof y};
  memra_launch_config c;
  memset(&c, 0, sizeof c);
  c.struct_size = MEMRA_LAUNCH_CONFIG_STRUCT_SIZE;
  c.grid[0] = (uint32_t)((a->rows + EXAMPLE_I8_ROWS_PER_BLOCK - 1) / EXAMPLE_I8_ROWS_PER_BLOCK);
  c.grid[1] = (uint32_t)a->m;
  c.grid[2] = 1;
  c.block[0] = 32 * EXAMPLE_I8_ROWS_PER_BLOCK;
  c.block[1] = c.block[2] = 1;
  c.stream = a->stream; /* NULL: the backend's stream */
  c.num_args = 5;
  c.arg_sizes = sizes;
  return ctx->host->kernel_launch(ctx->host->ctx, k->gemv, &c, args);
}

static memra_status example_matmul(memra_plugin_ctx* ctx, const memra_matmul_args* a) {
  if (a == NULL || a->struct_size < MEMRA_STRUCT_SIZE(memra_matmul_args, stream))
    return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "matmul: args NULL or struct_size too small");
  memra_status s = check_shape(ctx, a->scheme, a->rows, a->cols);
  if (s != MEMRA_OK) return s;
  if (a->m < 0) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "matmul: negative m");
  if (a->m == 0 || a->rows == 0) return MEMRA_OK;
  if (a->weight == NULL || a->x == NULL || a->y == NULL) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "matmul: NULL weight, x or y");
  if (a->backend == MEMRA_BACKEND_CUDA) {
    if (!MEMRA_STRUCT_HAS(a, memra_matmul_args, kernel_data)) return fail(ctx, MEMRA_ERR_ABI_MISMATCH, "example-i8: host predates ABI 2.1");
    return launch_gemv(ctx, a);
  }
  if (a->backend != MEMRA_BACKEND_CPU) return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example-i8: unknown backend");
  for (int64_t t = 0; t < a->m; ++t)
    for (int64_t r = 0; r < a->rows; ++r)
      a->y[t * a->rows + r] = row_dot((const unsigned char*)a->weight + r * EXAMPLE_I8_ROW_BYTES(a->cols), a->x + t * a->cols, a->cols);
  return MEMRA_OK;
}

/* The arch to register for: the device's, unless the host config names another
 * ("example_i8.arch", a test hook that shows the host refusing a kernel for an arch
 * the device cannot run). */
static const char* registration_arch(memra_plugin_ctx* ctx, const memra_device_info* device, char* buf, size_t size) {
  size_t needed = 0;
  if (ctx->host->config_get != NULL && ctx->host->config_get(ctx->host->ctx, "example_i8.arch", buf, size, &needed) == MEMRA_OK) return buf;
  return device->arch;
}

static memra_status example_register_kernels(memra_plugin_ctx* ctx, const memra_kernel_registrar* reg) {
  if (reg == NULL || reg->struct_size < MEMRA_KERNEL_REGISTRAR_STRUCT_SIZE || reg->device == NULL || reg->add == NULL)
    return fail(ctx, MEMRA_ERR_ABI_MISMATCH, "register_kernels: registrar too small");
  if (!has_sass_for(reg->device->arch)) return MEMRA_OK; /* nothing for this device: the host says the scheme has no kernel */
  if (ctx->host->kernel_module_load == NULL || ctx->host->kernel_get == NULL)
    return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example-i8: the host has no kernel services");
  memra_kernel_module* module = NULL;
  memra_status s = ctx->host->kernel_module_load(ctx->host->ctx, EXAMPLE_I8_MODULE, &module);
  if (s != MEMRA_OK) return s; /* the host reported why (e.g. example_i8.fatbin missing) */
  kernel_record* rec = (kernel_record*)calloc(1, sizeof *rec);
  if (rec == NULL) return fail(ctx, MEMRA_ERR_OUT_OF_MEMORY, "example-i8: out of memory");
  rec->next = ctx->records;
  ctx->records = rec;
  s = ctx->host->kernel_get(ctx->host->ctx, module, EXAMPLE_I8_KERNEL, &rec->gemv);
  if (s != MEMRA_OK) return s;
  char arch[32];
  memra_kernel_desc d;
  memset(&d, 0, sizeof d);
  d.struct_size = MEMRA_KERNEL_DESC_STRUCT_SIZE;
  d.op = "matmul";
  d.scheme = EXAMPLE_I8_SCHEME;
  d.activation = "f32";
  d.arch = registration_arch(ctx, reg->device, arch, sizeof arch);
  d.score = 50;
  d.matmul = example_matmul;
  d.kernel_data = rec;
  return reg->add(reg->registry, &d);
}

/* CPU: always; CUDA: where example_i8.fatbin has SASS. */
static int32_t example_score(const memra_device_info* device, const char* handled_name) {
  if (device == NULL || !is_our_scheme(handled_name)) return -1;
  if (device->backend == MEMRA_BACKEND_CPU) return 1;
  return device->backend == MEMRA_BACKEND_CUDA && has_sass_for(device->arch) ? 1 : -1;
}

static void example_shutdown(memra_plugin_ctx* ctx) {
  while (ctx->records != NULL) {
    kernel_record* next = ctx->records->next;
    free(ctx->records);
    ctx->records = next;
  }
  free(ctx);
}

static const char* const k_handles[] = {EXAMPLE_I8_SCHEME, NULL};

static const memra_plugin_descriptor k_descriptor = {
    MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE,
    MEMRA_ABI_MAJOR,
    MEMRA_ABI_MINOR,
    MEMRA_PLUGIN_KIND_QUANT,
    "example-i8",
    "2.1.0",
    "SDK example: per-row int8 weights with an f32 scale; CPU matmul and its own CUDA GEMV",
    k_handles,
    example_score,
};

static const memra_quant_api k_quant_api = {
    MEMRA_QUANT_API_STRUCT_SIZE, example_weight_bytes, example_quantize, example_dequantize, example_matmul, example_register_kernels,
};

MEMRA_EXPORT const memra_plugin_descriptor* memra_plugin_query(void) { return &k_descriptor; }

MEMRA_EXPORT memra_status memra_plugin_init(const memra_host_api* host, memra_plugin_api* out) {
  if (host == NULL || host->struct_size < MEMRA_HOST_API_STRUCT_SIZE || host->abi_major != MEMRA_ABI_MAJOR) {
    return MEMRA_ERR_ABI_MISMATCH; /* no usable error_report: the host sees the status only */
  }
  if (out == NULL || out->struct_size < MEMRA_PLUGIN_API_STRUCT_SIZE) {
    return host->error_report(host->ctx, MEMRA_ERR_ABI_MISMATCH, "memra_plugin_api from the host is smaller than v2.0");
  }
  memra_plugin_ctx* ctx = (memra_plugin_ctx*)calloc(1, sizeof *ctx);
  if (ctx == NULL) return host->error_report(host->ctx, MEMRA_ERR_OUT_OF_MEMORY, "example-i8: out of memory");
  ctx->host = host;
  out->kind = MEMRA_PLUGIN_KIND_QUANT;
  out->ctx = ctx;
  out->family = NULL;
  out->quant = &k_quant_api;
  out->shutdown = example_shutdown;
  if (host->log != NULL) host->log(host->ctx, MEMRA_LOG_DEBUG, "example-i8 ready (CPU matmul, CUDA GEMV where registered)");
  return MEMRA_OK;
}
