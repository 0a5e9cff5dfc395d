/* memra C ABI — versioning, status codes and the struct_size convention.
 *
 * Rules (see docs/PLUGINS.md):
 *  - every public struct begins with `size_t struct_size`, set by whoever fills it
 *    to MEMRA_<NAME>_STRUCT_SIZE; a reader checks MEMRA_STRUCT_HAS(ptr, type, field)
 *    before reading any field appended after v1.0;
 *  - the ABI major must match exactly; the minor only ever appends fields/slots;
 *  - functions return memra_status (0 = OK); the detail is reported through the
 *    host's error_report callback, which copies the text;
 *  - no exceptions, C++ types or exit() cross the boundary; whoever allocates frees.
 */
#ifndef MEMRA_ABI_H
#define MEMRA_ABI_H

#include <stddef.h>
#include <stdint.h>

#define MEMRA_ABI_MAJOR 2
#define MEMRA_ABI_MINOR 12 /* 2.1: ops by name (backend.h, ops.h), required ops, state slots; plugin kernels (quant.h, host_api.h). 2.2: layer ranges (family.h). 2.3: hidden-state rows (family.h). 2.4: per-head q/k norms in attention (backend.h). 2.5: KV pools in the forward batch (family.h). 2.6: the moe_ffn op (ops.h). 2.7: ops a plugin brings (ops.h memra_op_def, plugin.h ops). 2.8: state snapshots at rows (family.h memra_forward_batch.snapshot_slots, ops.h MEMRA_OP_SNAPSHOTS). 2.9: draft heads (MTP): family.h memra_plan_info.draft_layers, memra_forward_batch.head / hidden_in / hidden_out, backend.h rows_input / rows_output. 2.10: schemes launched by the backend: quant.h memra_kernel_desc.kernels (memra_matmul_kernels), activation formats, memra_quant_api.scheme_info. 2.11: tensor parts (family.h memra_family_api.tensor_parts: stacked / split checkpoint tensors), the moe_ffn v2 op over stacked experts with a shared expert (ops.h; v1 removed). 2.12: checkpoint forms a quant plugin reads as published (quant.h memra_quant_api.import_tensor, memra_checkpoint_tensor, memra_import_args) */

#ifdef __cplusplus
#define MEMRA_EXTERN_C extern "C"
#define MEMRA_EXTERN_C_BEGIN extern "C" {
#define MEMRA_EXTERN_C_END }
#else
#define MEMRA_EXTERN_C
#define MEMRA_EXTERN_C_BEGIN
#define MEMRA_EXTERN_C_END
#endif

#if defined(_WIN32)
#define MEMRA_EXPORT MEMRA_EXTERN_C __declspec(dllexport)
#else
#define MEMRA_EXPORT MEMRA_EXTERN_C __attribute__((visibility("default")))
#endif

/* Size of a struct up to and including `last_field` (PJRT-style): the value a
 * writer stores in struct_size for the ABI minor it was compiled against. */
#define MEMRA_STRUCT_SIZE(type, last_field) \
  (offsetof(type, last_field) + sizeof(((type*)0)->last_field))

/* True when a struct received from the other side is big enough to hold `field`. */
#define MEMRA_STRUCT_HAS(ptr, type, field) \
  ((ptr) != NULL && (ptr)->struct_size >= MEMRA_STRUCT_SIZE(type, field))

MEMRA_EXTERN_C_BEGIN

/* A plugin's own state, created by memra_plugin_init and passed back as the first
 * argument of every plugin function that is not a method of an object it created.
 * Plugins keep what they need (the host table, caches) here, never in globals. */
typedef struct memra_plugin_ctx memra_plugin_ctx;

/* Status codes: fixed-width so the ABI does not depend on enum sizing. */
typedef int32_t memra_status;
#define MEMRA_OK 0
#define MEMRA_ERR_INVALID_ARGUMENT 1 /* caller passed something malformed */
#define MEMRA_ERR_UNSUPPORTED 2      /* valid, but this plugin/host cannot do it */
#define MEMRA_ERR_OUT_OF_MEMORY 3    /* host or device allocation failed */
#define MEMRA_ERR_NOT_FOUND 4        /* named thing (tensor, kernel, key) absent */
#define MEMRA_ERR_IO 5               /* file or device I/O failed */
#define MEMRA_ERR_ABI_MISMATCH 6     /* version or struct_size incompatible */
#define MEMRA_ERR_DEVICE 7           /* a device/driver call failed */
#define MEMRA_ERR_INTERNAL 8         /* bug or unexpected exception inside the callee */
#define MEMRA_ERR_CANCELLED 9        /* the operation was cancelled by the host */

/* Log levels for memra_host_api.log. */
typedef int32_t memra_log_level;
#define MEMRA_LOG_DEBUG 0
#define MEMRA_LOG_INFO 1
#define MEMRA_LOG_WARN 2
#define MEMRA_LOG_ERROR 3

/* Element types of tensors crossing the ABI. Quantised blocks are described by
 * a quant scheme name (string) plus MEMRA_DTYPE_BLOCKS. */
typedef int32_t memra_dtype;
#define MEMRA_DTYPE_INVALID 0
#define MEMRA_DTYPE_F32 1
#define MEMRA_DTYPE_F16 2
#define MEMRA_DTYPE_BF16 3
#define MEMRA_DTYPE_F8_E4M3 4
#define MEMRA_DTYPE_I8 5
#define MEMRA_DTYPE_U8 6
#define MEMRA_DTYPE_I32 7
#define MEMRA_DTYPE_I64 8
#define MEMRA_DTYPE_BLOCKS 9 /* opaque quantised blocks; layout owned by a quant plugin */

/* Returns a static, human-readable name for a status code ("OK", "INVALID_ARGUMENT", ...). */
static inline const char* memra_status_name(memra_status s) {
  switch (s) {
    case MEMRA_OK: return "OK";
    case MEMRA_ERR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case MEMRA_ERR_UNSUPPORTED: return "UNSUPPORTED";
    case MEMRA_ERR_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case MEMRA_ERR_NOT_FOUND: return "NOT_FOUND";
    case MEMRA_ERR_IO: return "IO";
    case MEMRA_ERR_ABI_MISMATCH: return "ABI_MISMATCH";
    case MEMRA_ERR_DEVICE: return "DEVICE";
    case MEMRA_ERR_INTERNAL: return "INTERNAL";
    case MEMRA_ERR_CANCELLED: return "CANCELLED";
    default: return "UNKNOWN";
  }
}

MEMRA_EXTERN_C_END

#endif /* MEMRA_ABI_H */
