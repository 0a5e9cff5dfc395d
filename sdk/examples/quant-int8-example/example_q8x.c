/* example-q8x: a quant plugin in C11 whose GPU kernels the backend launches itself (SDK
 * 2.10 device kernels) on memra's int8x32 activation rows: the out-of-tree form of a
 * full-speed scheme, built against the installed SDK headers only (docs/PLUGINS.md).
 *
 * Scheme "example_q8x" (example_q8x.h: q8_0's arithmetic in a 16-byte-aligned layout).
 * The plugin owns the layout (weight_bytes), the quantiser memra-repack uses, the exact
 * CPU dequantisation, a CPU matmul that is the kernels' arithmetic bit for bit (the
 * activation rows quantised as the backend does, the same sums in the same order), the
 * prompt-row numerics (scheme_info: weights rounded to bf16, as the backend's GEMM), and
 * on a GPU the kernels of example_q8x.cu, registered as memra_matmul_kernels: the INT8
 * GEMV for generated rows (decode, speculative verify), the dequantiser of the prompt
 * GEMM. The backend then gives them what its own schemes get: activations prepared once
 * per row set or by the producing norm, one launch for q/k/v and gate/up, bias, the
 * tensor-core GEMM for prompts, step graphs.
 *
 * Put libmemra-quant-q8x.so and example_q8x.fatbin in a plugin directory. */
#include <memra/memra.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_q8x.h"

struct memra_plugin_ctx {
  const memra_host_api* host;
};

static memra_status fail(memra_plugin_ctx* ctx, memra_status code, const char* message) {
  if (ctx != NULL && ctx->host->error_report != NULL) return ctx->host->error_report(ctx->host->ctx, code, message);
  return code;
}

static int ours(const char* scheme) { return scheme != NULL && strcmp(scheme, EXAMPLE_Q8X_SCHEME) == 0; }
static int has_sass_for(const char* arch) { return arch != NULL && (strcmp(arch, "sm_90a") == 0 || strcmp(arch, "sm_120a") == 0); }

/* float16 <-> float32, exactly (round to nearest even on the way down). */
static float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) bits = sign;
    else {
      float f = ldexpf((float)man, -24);
      memcpy(&bits, &f, 4);
      bits |= sign;
    }
  } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
  else bits = sign | ((exp + 112u) << 23) | (man << 13);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
static uint16_t float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const float a = fabsf(f);
  if (a >= 65520.0f) return (uint16_t)(sign | 0x7c00u);
  if (a < ldexpf(1.0f, -14)) { /* subnormal: multiples of 2^-24 */
    const float q = nearbyintf(a * ldexpf(1.0f, 24));
    return (uint16_t)(sign | (uint32_t)q);
  }
  int e;
  const float m = frexpf(a, &e); /* a = m 2^e, m in [0.5, 1) */
  float q = nearbyintf(m * 2048.0f); /* 11 significant bits */
  if (q == 2048.0f) q = 1024.0f, ++e;
  return (uint16_t)(sign | ((uint32_t)(e + 14) << 10) | ((uint32_t)q - 1024u));
}

static memra_status check_shape(memra_plugin_ctx* ctx, const char* scheme, int64_t rows, int64_t cols) {
  if (!ours(scheme)) return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example-q8x only handles scheme example_q8x");
  if (rows < 0 || cols <= 0) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "example-q8x: bad shape");
  if (cols % 256 != 0) return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example-q8x: rows must hold a multiple of 256 columns");
  return MEMRA_OK;
}

static memra_status q8x_weight_bytes(memra_plugin_ctx* ctx, const char* scheme, int64_t rows, int64_t cols, uint64_t* out) {
  memra_status s = check_shape(ctx, scheme, rows, cols);
  if (s != MEMRA_OK) return s;
  if (out == NULL) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "weight_bytes: out is NULL");
  *out = (uint64_t)rows * (uint64_t)EXAMPLE_Q8X_ROW_BYTES(cols);
  return MEMRA_OK;
}

/* Per 32 weights: scale = f16(max|w| / 127), codes round(w / scale) clamped to +-127. */
static memra_status q8x_quantize(memra_plugin_ctx* ctx, const char* scheme, const float* src, int64_t rows, int64_t cols, void* dst,
                                 uint64_t dst_bytes) {
  uint64_t bytes = 0;
  memra_status s = q8x_weight_bytes(ctx, scheme, rows, cols, &bytes);
  if (s != MEMRA_OK) return s;
  if (dst_bytes < bytes || (bytes != 0 && (src == NULL || dst == NULL))) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "quantize: bad buffers");
  for (int64_t r = 0; r < rows; ++r) {
    const float* w = src + r * cols;
    unsigned char* rec = (unsigned char*)dst + r * EXAMPLE_Q8X_ROW_BYTES(cols);
    for (int64_t u = 0; u < cols / EXAMPLE_Q8X_UNIT; ++u) {
      float amax = 0.0f;
      for (int j = 0; j < EXAMPLE_Q8X_UNIT; ++j) {
        const float v = w[u * EXAMPLE_Q8X_UNIT + j];
        if (!isfinite(v)) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "quantize: weight is not finite");
        if (fabsf(v) > amax) amax = fabsf(v);
      }
      const uint16_t h = float_to_half(amax / 127.0f);
      const float d = half_to_float(h);
      memcpy(rec + cols + 2 * u, &h, 2);
      for (int j = 0; j < EXAMPLE_Q8X_UNIT; ++j) {
        float q = d > 0.0f ? nearbyintf(w[u * EXAMPLE_Q8X_UNIT + j] / d) : 0.0f;
        q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
        ((signed char*)rec)[u * EXAMPLE_Q8X_UNIT + j] = (signed char)q;
      }
    }
  }
  return MEMRA_OK;
}

static float scale_of(const unsigned char* rec, int64_t cols, int64_t u) {
  uint16_t h;
  memcpy(&h, rec + cols + 2 * u, 2);
  return half_to_float(h);
}

static memra_status q8x_dequantize(memra_plugin_ctx* ctx, const char* scheme, const void* src, uint64_t src_bytes, int64_t rows,
                                   int64_t cols, float* dst) {
  uint64_t bytes = 0;
  memra_status s = q8x_weight_bytes(ctx, scheme, rows, cols, &bytes);
  if (s != MEMRA_OK) return s;
  if (src_bytes < bytes || (bytes != 0 && (src == NULL || dst == NULL))) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "dequantize: bad buffers");
  for (int64_t r = 0; r < rows; ++r) {
    const unsigned char* rec = (const unsigned char*)src + r * EXAMPLE_Q8X_ROW_BYTES(cols);
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = (float)((const signed char*)rec)[c] * scale_of(rec, cols, c / EXAMPLE_Q8X_UNIT);
  }
  return MEMRA_OK;
}

/* The int8x32 activation rows, as the backend produces them (memra/quant.h). */
static void quantize_activations(const float* x, int64_t cols, signed char* q, float* d) {
  for (int64_t u = 0; u < cols / EXAMPLE_Q8X_UNIT; ++u) {
    float amax = 0.0f;
    for (int j = 0; j < EXAMPLE_Q8X_UNIT; ++j) amax = fmaxf(amax, fabsf(x[u * EXAMPLE_Q8X_UNIT + j]));
    d[u] = amax / 127.0f;
    for (int j = 0; j < EXAMPLE_Q8X_UNIT; ++j) {
      float v = d[u] != 0.0f ? nearbyintf(x[u * EXAMPLE_Q8X_UNIT + j] / d[u]) : 0.0f;
      v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
      q[u * EXAMPLE_Q8X_UNIT + j] = (signed char)v;
    }
  }
}

/* One output element exactly as the kernel computes it (example_q8x.h). */
static float row_dot(const unsigned char* rec, int64_t cols, const signed char* a, const float* d) {
  const int64_t units = cols / EXAMPLE_Q8X_UNIT;
  float warp_sum[EXAMPLE_Q8X_WARPS];
  for (int w = 0; w < EXAMPLE_Q8X_WARPS; ++w) {
    float lane[32];
    for (int l = 0; l < 32; ++l) {
      float acc = 0.0f;
      for (int64_t u = 32 * w + l; u < units; u += 32 * EXAMPLE_Q8X_WARPS) {
        int32_t isum = 0;
        for (int j = 0; j < EXAMPLE_Q8X_UNIT; ++j)
          isum += (int32_t)((const signed char*)rec)[u * EXAMPLE_Q8X_UNIT + j] * (int32_t)a[u * EXAMPLE_Q8X_UNIT + j];
        const float sd = scale_of(rec, cols, u) * d[u];
        acc = fmaf((float)isum, sd, acc);
      }
      lane[l] = acc;
    }
    for (int off = 16; off > 0; off >>= 1) {
      float next[32];
      for (int l = 0; l < 32; ++l) next[l] = lane[l] + lane[l ^ off];
      memcpy(lane, next, sizeof lane);
    }
    warp_sum[w] = lane[0];
  }
  float v = warp_sum[0];
  for (int w = 1; w < EXAMPLE_Q8X_WARPS; ++w) v = v + warp_sum[w];
  return v;
}

static memra_status q8x_matmul(memra_plugin_ctx* ctx, const memra_matmul_args* a) {
  if (a == NULL || a->struct_size < MEMRA_STRUCT_SIZE(memra_matmul_args, stream))
    return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "matmul: args NULL or struct_size too small");
  memra_status s = check_shape(ctx, a->scheme, a->rows, a->cols);
  if (s != MEMRA_OK) return s;
  if (a->backend != MEMRA_BACKEND_CPU) return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example-q8x: the GPU runs its registered kernels");
  if (a->m <= 0 || a->rows == 0) return MEMRA_OK;
  signed char* q = (signed char*)malloc((size_t)a->cols);
  float* d = (float*)malloc((size_t)(a->cols / EXAMPLE_Q8X_UNIT) * sizeof(float));
  if (q == NULL || d == NULL) {
    free(q), free(d);
    return fail(ctx, MEMRA_ERR_OUT_OF_MEMORY, "example-q8x: out of memory");
  }
  for (int64_t t = 0; t < a->m; ++t) {
    quantize_activations(a->x + t * a->cols, a->cols, q, d);
    for (int64_t r = 0; r < a->rows; ++r)
      a->y[t * a->rows + r] = row_dot((const unsigned char*)a->weight + r * EXAMPLE_Q8X_ROW_BYTES(a->cols), a->cols, q, d);
  }
  free(q), free(d);
  return MEMRA_OK;
}

static memra_status q8x_register_kernels(memra_plugin_ctx* ctx, const memra_kernel_registrar* reg) {
  if (reg == NULL || reg->struct_size < MEMRA_KERNEL_REGISTRAR_STRUCT_SIZE || reg->device == NULL || reg->add == NULL)
    return fail(ctx, MEMRA_ERR_ABI_MISMATCH, "register_kernels: registrar too small");
  if (!has_sass_for(reg->device->arch)) return MEMRA_OK;
  memra_kernel_module* module = NULL;
  memra_status s = ctx->host->kernel_module_load(ctx->host->ctx, EXAMPLE_Q8X_MODULE, &module);
  if (s != MEMRA_OK) return s; /* the host reported why (e.g. example_q8x.fatbin missing) */
  memra_matmul_kernels k;
  memset(&k, 0, sizeof k);
  k.struct_size = MEMRA_MATMUL_KERNELS_STRUCT_SIZE;
  k.module = module;
  k.block_elems = 256; /* a row is cols / 256 times 272 bytes (256 codes + 8 scales each) */
  k.block_bytes = 272;
  k.cols_multiple = 256;
  k.gemv_form = MEMRA_GEMV_INT8;
  for (int i = 0; i < 5; ++i) {
    k.launch[i].kernel = EXAMPLE_Q8X_GEMV;
    k.launch[i].rows_per_block = EXAMPLE_Q8X_ROWS;
    k.launch[i].blocks_per_sm = 0; /* one block per group of rows */
    k.launch[i].threads = 32 * EXAMPLE_Q8X_WARPS;
  }
  k.gemm = MEMRA_GEMM_BF16;
  k.gemm_dequant = EXAMPLE_Q8X_DEQUANT;
  k.gemm_unit = 8;
  memra_kernel_desc d;
  memset(&d, 0, sizeof d);
  d.struct_size = MEMRA_KERNEL_DESC_STRUCT_SIZE;
  d.op = "matmul";
  d.scheme = EXAMPLE_Q8X_SCHEME;
  d.activation = MEMRA_ACT_INT8X32;
  d.arch = reg->device->arch;
  d.score = 100;
  d.kernels = &k;
  return reg->add(reg->registry, &d);
}

static memra_status q8x_scheme_info(memra_plugin_ctx* ctx, const char* scheme, struct memra_scheme_info* out) {
  if (!ours(scheme) || out == NULL || out->struct_size < MEMRA_STRUCT_SIZE(memra_scheme_info, prompt))
    return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "scheme_info: not example_q8x");
  out->block_elems = 256;
  out->block_bytes = 272;
  out->prompt = MEMRA_PROMPT_ROUNDED_WEIGHTS; /* prompt rows: weights rounded to bf16, bf16 activations */
  if (out->struct_size >= MEMRA_SCHEME_INFO_STRUCT_SIZE) {
    out->repack = MEMRA_REPACK_QUANT;
    out->sensitive = NULL;
    out->fallback = NULL;
    out->keep_as_stored = MEMRA_KEEP_TOKEN_EMBD; /* no embedding gather */
  }
  return MEMRA_OK;
}

static const memra_quant_api kApi = {MEMRA_QUANT_API_STRUCT_SIZE, q8x_weight_bytes,     q8x_quantize,    q8x_dequantize,
                                     q8x_matmul,                  q8x_register_kernels, q8x_scheme_info, NULL};

static int32_t q8x_score(const memra_device_info* device, const char* handled_name) {
  if (device == NULL || !ours(handled_name)) return -1;
  if (device->backend == MEMRA_BACKEND_CPU) return 1;
  return device->backend == MEMRA_BACKEND_CUDA && has_sass_for(device->arch) ? 1 : -1;
}

static const char* const kHandles[] = {EXAMPLE_Q8X_SCHEME, NULL};
static const memra_plugin_descriptor kDescriptor = {MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE,
                                                    MEMRA_ABI_MAJOR,
                                                    MEMRA_ABI_MINOR,
                                                    MEMRA_PLUGIN_KIND_QUANT,
                                                    "q8x",
                                                    "0.1.0",
                                                    "example: q8_0's arithmetic on int8x32 activation rows, device kernels",
                                                    kHandles,
                                                    q8x_score};

MEMRA_EXPORT const memra_plugin_descriptor* memra_plugin_query(void) { return &kDescriptor; }

static void q8x_shutdown(memra_plugin_ctx* ctx) { free(ctx); }

MEMRA_EXPORT memra_status memra_plugin_init(const memra_host_api* host, memra_plugin_api* out) {
  if (host == NULL || host->struct_size < MEMRA_HOST_API_STRUCT_SIZE || host->abi_major != MEMRA_ABI_MAJOR || out == NULL)
    return MEMRA_ERR_ABI_MISMATCH;
  memra_plugin_ctx* ctx = (memra_plugin_ctx*)calloc(1, sizeof *ctx);
  if (ctx == NULL) return MEMRA_ERR_OUT_OF_MEMORY;
  ctx->host = host;
  out->kind = MEMRA_PLUGIN_KIND_QUANT;
  out->ctx = ctx;
  out->quant = &kApi;
  out->shutdown = q8x_shutdown;
  return MEMRA_OK;
}
