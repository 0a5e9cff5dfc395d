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
struct memra_matmul_kernels;
struct memra_scheme_info;
struct memra_import_args;

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
  /* 2.10: instead of `matmul` (then NULL), device kernels the backend launches itself
   * with its calling conventions (below), so the kernel gets what the backend's own
   * path has: prompt rows on the tensor-core GEMM, generated rows on the GEMV, bias,
   * activations prepared once per row (or by the producing norm), step scratch, one
   * launch for the matrices over the same rows (q, k, v; gate, up) and step graphs. */
  const struct memra_matmul_kernels* kernels;
} memra_kernel_desc;
#define MEMRA_KERNEL_DESC_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_kernel_desc, kernels)

/* 2.10: activation formats, the kernel registry's activation key: the rows a matmul
 * kernel reads. The backend produces each from float32 rows, once per row for the
 * matmuls that read the same rows, or fused into the norm / activation that writes them.
 *  f32      float32 rows [m][cols].
 *  bf16     float32 rows [m][cols] that the kernel rounds to bf16 on load (round to
 *           nearest even): the products of exact weights in f32.
 *  int8x32  per 32 elements of a row, int8 codes q = round(x / d) clamped to +-127 with
 *           d = max|x| / 127 (f32, correctly rounded divisions), and the pair {d, s = d *
 *           sum q} as float2: codes [m][cols], pairs [m][cols / 32]. cols % 32 == 0.
 *  bf16s128 per 128 elements, x scaled by 2^(120 - E) (E the group's largest exponent)
 *           and rounded to bf16, stored in the tensor-core operand's pair order, and the
 *           f32 back-scale: plane [m][cols] bf16, scales [m][cols / 128]. cols % 128 == 0. */
#define MEMRA_ACT_F32 "f32"
#define MEMRA_ACT_BF16 "bf16"
#define MEMRA_ACT_INT8X32 "int8x32"
#define MEMRA_ACT_BF16S128 "bf16s128"

/* 2.10: the GEMV form of a memra_matmul_kernels: which entry names and arguments the
 * backend launches for generated rows (decode, speculative verify). Every form
 * computes a row's bits independently of m, of the launch shape and of which matrices
 * share a launch (numeric contract, clause 3): the backend picks shapes freely.
 *  ROWS   "<gemv>[_u8|_u1]_t<N>" (N = 1, 2, 4, 8, 16: tokens per lane group; _u8 when
 *         by_alignment and cols % 8 == 0, _u1 otherwise), 128 threads, grid
 *         (ceil(rows / 4), ceil(m / N)); args (const uint8_t* w, int64_t row_bytes,
 *         int64_t rows, int64_t cols, const float* x, int64_t m, float* y, const float* bias).
 *  MMA16  "<gemv>_mma_n<T>" (T = 1 for m <= 8, else 2), 32 * mma_warps threads, grid
 *         (the matrices' 16-row tiles, ceil(m / (8 T))); args (memra_gemv_mats ms, int64_t
 *         cols, x..., int64_t m) with x = (const float* x) for bf16, (const uint16_t* plane,
 *         const float* scales) for bf16s128.
 *  INT8   "<launch[i].kernel>_r<R>_t<N>" for the token tile i (m = 1, 2, <= 4, <= 8, more;
 *         N = 1, 2, 4, 8, 16), launch[i].threads threads, grid (min(groups, blocks_per_sm *
 *         SMs) or groups when 0, ceil(m / N)), groups = the matrices' R-row groups; args
 *         (memra_gemv_mats ms, int64_t row_bytes, int64_t cols, const int8_t* codes, const
 *         float2* pairs, int64_t m).
 * memra_gemv_mats (up to 3 matrices over the same rows; device code: kernels/matmul/
 * gemv_mats.hpp): w[3], y[3], bias[3] pointers, rows[3] and group_end[3] int64 (matrix k
 * takes groups [group_end[k-1], group_end[k]) ). */
#define MEMRA_GEMV_ROWS 0
#define MEMRA_GEMV_MMA16 1
#define MEMRA_GEMV_INT8 2

/* 2.12: memra_gemv_mats as a C type, for kernels built against the SDK alone (the MMA16 and
 * INT8 forms' first argument, passed by value): matrix k's weight rows w[k], output y[k]
 * ([m][rows[k]] float32), bias[k] (0: none; else rows[k] float32), and the groups (of the
 * form's rows per group) it takes, [group_end[k - 1], group_end[k]) (group_end[-1] = 0);
 * unused matrices repeat the last group_end. Device pointers as uint64_t. */
#define MEMRA_GEMV_MATS_MAX 3
typedef struct memra_gemv_mats {
  uint64_t w[MEMRA_GEMV_MATS_MAX];
  uint64_t y[MEMRA_GEMV_MATS_MAX];
  uint64_t bias[MEMRA_GEMV_MATS_MAX];
  int64_t rows[MEMRA_GEMV_MATS_MAX];
  int64_t group_end[MEMRA_GEMV_MATS_MAX];
} memra_gemv_mats;

/* 2.10: how prompt rows (memra_forward_batch.prompt_tokens) are multiplied: the backend's
 * tensor-core GEMM over weight rows the scheme's dequantiser writes as bf16 planes.
 *  NONE          no GEMM: every row on the GEMV.
 *  STREAMS_BF16  the weights are bf16 rows already (no dequantiser); bf16 activations.
 *  BF16          "<gemm_dequant>" writes each weight dequantised exactly, then rounded to
 *                bf16; bf16 activations, one pass.
 *  SPLIT         "<gemm_dequant>" writes each weight split into bf16 hi + lo planes; the
 *                f32 activations split likewise; three products (f32-faithful).
 * The dequantiser: args (const uint8_t* w, int64_t row_bytes, int32_t rows, int64_t cols,
 * int64_t ld, bf16* hi, bf16* lo (NULL unless SPLIT)), 256 threads, a thread per
 * gemm_unit elements of a row. */
#define MEMRA_GEMM_NONE 0
#define MEMRA_GEMM_STREAMS_BF16 1
#define MEMRA_GEMM_BF16 2
#define MEMRA_GEMM_SPLIT 3

typedef struct memra_gemv_launch {
  const char* kernel;       /* entry stem */
  int32_t rows_per_block;   /* R */
  int32_t blocks_per_sm;    /* persistent blocks per multiprocessor; 0: one block per group */
  int32_t threads;
} memra_gemv_launch;

typedef struct memra_matmul_kernels {
  size_t struct_size;
  memra_kernel_module* module;   /* from host->kernel_module_load, holding every entry below */
  int64_t block_elems;           /* a weight row is whole blocks of block_elems elements ... */
  int64_t block_bytes;           /* ... of block_bytes bytes each */
  int64_t cols_multiple;         /* the kernels serve rows whose length is a multiple of
                                    this (0: block_elems); for a weight the backend takes the
                                    highest-scoring entry of its scheme that serves its rows */
  int32_t gemv_form;             /* MEMRA_GEMV_* */
  int32_t by_alignment;          /* ROWS form and embedding: _u8 / _u1 suffixes */
  const char* gemv;              /* GEMV entry stem (ROWS, MMA16) */
  int32_t mma_warps;             /* MMA16 form */
  int32_t gemm;                  /* MEMRA_GEMM_* */
  memra_gemv_launch launch[5];   /* INT8 form, per token tile */
  const char* gemm_dequant;      /* BF16 and SPLIT: the dequantiser entry */
  int64_t gemm_unit;             /* its elements per thread (a divisor of block_elems or a multiple) */
  int32_t pdl;                   /* the GEMV entries call griddepcontrol.wait before reading
                                    activations or writing y (and may issue their weight loads
                                    before it), so the backend may launch them programmatically
                                    after the kernel that produces their activations */
  /* The embedding gather "<embedding>[_u8|_u1]" (NULL: the scheme cannot be an embedding
   * table on this device): args (const uint8_t* table, int64_t row_bytes, int64_t dim,
   * const int32_t* ids, float scale, float* out), 256 threads, a block per token;
   * out[t] = dequant(table[ids[t]]) (* scale when scale != 1), bitwise the CPU dequantiser. */
  const char* embedding;
} memra_matmul_kernels;
#define MEMRA_MATMUL_KERNELS_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_matmul_kernels, embedding)

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
  /* 2.10, optional (NULL: prompt rows as generated rows; memra-repack writes the scheme as a
   * --quant target, matrices only, token_embd kept as stored, no mix): the scheme's layout,
   * the numerics of its prompt rows, which every backend follows, and memra-repack's mix. */
  memra_status (*scheme_info)(memra_plugin_ctx* ctx, const char* scheme, struct memra_scheme_info* out);
  /* 2.12, optional (NULL: the plugin reads no checkpoint form): a weight a checkpoint stores
   * already quantised (FP8 with scales, NVFP4, ...) read as published into one of this
   * plugin's schemes; see memra_import_args. */
  memra_status (*import_tensor)(memra_plugin_ctx* ctx, struct memra_import_args* args);
} memra_quant_api;
#define MEMRA_QUANT_API_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_quant_api, import_tensor)

/* 2.10: prompt rows' numerics (memra_scheme_info.prompt; the GEMM forms above).
 *  EXACT           as the generated rows (f32 and f16 weights: f32 activations, the
 *                  split GEMM on the GPU, exact products on the CPU).
 *  BF16            bf16 activations on the exact weights (bf16 weights).
 *  ROUNDED_WEIGHTS bf16 activations, each weight dequantised exactly and rounded to bf16,
 *                  products exact in f32, f32 sums (block and fp8 schemes). */
#define MEMRA_PROMPT_EXACT 0
#define MEMRA_PROMPT_BF16 1
#define MEMRA_PROMPT_ROUNDED_WEIGHTS 2

/* 2.10: what memra-repack may write in the scheme (memra_scheme_info.repack). */
#define MEMRA_REPACK_NONE 0    /* never (no quantiser) */
#define MEMRA_REPACK_TENSOR 1  /* per tensor (--tensor-scheme) only */
#define MEMRA_REPACK_QUANT 2   /* also as the --quant target of a whole checkpoint */

/* 2.10: which embedding-side matrices a --quant target keeps as stored
 * (memra_scheme_info.keep_as_stored), bits: */
#define MEMRA_KEEP_TOKEN_EMBD 1  /* token_embd.weight (a scheme the backends cannot gather) */
#define MEMRA_KEEP_HEAD 2        /* the output head (output.weight, or token_embd when tied) */

typedef struct memra_scheme_info {
  size_t struct_size;
  int64_t block_elems;
  int64_t block_bytes;
  int32_t prompt;           /* MEMRA_PROMPT_* */
  int32_t repack;           /* MEMRA_REPACK_* */
  /* memra-repack's mix for --quant <this scheme>, as llama.cpp's _M mixes: */
  const char* sensitive;    /* the scheme of the output head and attn_v.weight (NULL: this one) */
  const char* fallback;     /* the scheme of matrices whose rows break the block (NULL: kept as stored) */
  int32_t keep_as_stored;   /* MEMRA_KEEP_* bits */
} memra_scheme_info;
#define MEMRA_SCHEME_INFO_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_scheme_info, keep_as_stored)

/* 2.12: a checkpoint tensor as stored (Hugging Face safetensors). */
typedef struct memra_checkpoint_tensor {
  size_t struct_size;
  const char* name;     /* as the checkpoint spells it */
  const char* dtype;    /* safetensors' dtype name: "F8_E4M3", "U8", "F32", "BF16", ... */
  int32_t ndim;         /* 0 (a scalar) .. 8 */
  int64_t shape[8];     /* outermost first */
  const void* data;     /* the stored bytes (little-endian, row-major) */
  uint64_t bytes;
} memra_checkpoint_tensor;
#define MEMRA_CHECKPOINT_TENSOR_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_checkpoint_tensor, bytes)

/* 2.12: memra_quant_api.import_tensor's arguments. memra-repack asks the quant plugins, in
 * their load order, about every checkpoint tensor "<p>.weight" that is not a float tensor
 * or has tensors "<p>.<x>" beside it (other than "<p>.bias"), passing those as siblings.
 *  Match (dst == NULL): the plugin returns MEMRA_ERR_UNSUPPORTED when it does not read this
 *    form; else it checks the whole form (shapes, dtypes, every scale finite) and fills
 *    scheme (one of its own), rows and cols (the matrix it becomes) and `used` (bit i:
 *    siblings[i] is part of this weight; memra loads no used sibling as a tensor of its
 *    own), or refuses a broken form with MEMRA_ERR_INVALID_ARGUMENT and a message naming
 *    the tensor (memra-repack then writes nothing).
 *  Write (dst != NULL, after a match, with the same weight and siblings): rows
 *    [row0, row0 + row_count) of the matrix in the scheme's layout into dst (dst_bytes =
 *    weight_bytes(scheme, row_count, cols)); codes a scheme cannot hold (NaN) are refused
 *    with MEMRA_ERR_INVALID_ARGUMENT. */
typedef struct memra_import_args {
  size_t struct_size;
  const memra_checkpoint_tensor* weight;
  const memra_checkpoint_tensor* siblings;
  size_t sibling_count;          /* at most 64 */
  int64_t row0, row_count;       /* write */
  void* dst;
  uint64_t dst_bytes;
  char scheme[32];               /* match: out */
  int64_t rows, cols;            /* match: out */
  uint64_t used;                 /* match: out */
} memra_import_args;
#define MEMRA_IMPORT_ARGS_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_import_args, used)

MEMRA_EXTERN_C_END

#endif /* MEMRA_QUANT_H */
