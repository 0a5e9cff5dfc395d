/* memra C ABI — the model-family plugin table.
 *
 * A family plugin turns a normalised model config (JSON, docs/FORMAT.md) into a
 * model plan (tensors, layer kinds, KV/state layout) and runs the forward pass
 * against the backend op set the host hands it. Everything it creates it frees
 * through the same table.
 */
#ifndef MEMRA_FAMILY_H
#define MEMRA_FAMILY_H

#include "memra/abi.h"

MEMRA_EXTERN_C_BEGIN

typedef struct memra_model_plan memra_model_plan; /* opaque, plugin-owned */
typedef struct memra_model memra_model;           /* opaque, plugin-owned */
typedef struct memra_backend_ops memra_backend_ops; /* the host's op set (memra/backend.h) */

/* One weight tensor as the host loaded it (already in the quant scheme's layout). */
typedef struct memra_weight {
  size_t struct_size;
  const char* name;        /* canonical tensor name from the plan */
  const char* quant;       /* quant scheme name, e.g. "bf16", "q4_k" */
  memra_dtype dtype;       /* element type, or MEMRA_DTYPE_BLOCKS for quantised layouts */
  int32_t ndim;
  int64_t shape[4];        /* logical shape, outermost first */
  uint64_t bytes;
  const void* data;        /* host or device address, per the backend */
} memra_weight;
#define MEMRA_WEIGHT_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_weight, data)

typedef struct memra_weight_set {
  size_t struct_size;
  size_t count;
  const memra_weight* weights;
} memra_weight_set;
#define MEMRA_WEIGHT_SET_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_weight_set, weights)

/* One step of the forward pass over a batch of tokens from one or more sequences. */
typedef struct memra_forward_batch {
  size_t struct_size;
  int32_t num_tokens;
  const int32_t* token_ids;     /* [num_tokens] */
  const int32_t* positions;     /* [num_tokens] absolute positions */
  const int32_t* seq_index;     /* [num_tokens] index into the per-sequence arrays */
  int32_t num_seqs;
  const int32_t* seq_lens;      /* [num_seqs] KV length after this step */
  const int32_t* block_tables;  /* [num_seqs][max_blocks_per_seq] KV block ids */
  int32_t max_blocks_per_seq;
  int32_t num_logits;
  const int32_t* logits_rows;   /* [num_logits] token rows whose logits are wanted */
  float* logits;                /* [num_logits][vocab], written by model_forward */
  /* ABI 1.1: [num_tokens] 1 = the token is part of its sequence's prompt (prefill),
   * 0 = a generated token (decode or a speculative verify step); NULL = all 0.
   * A backend may compute prompt rows on another (tensor-core) path than generated
   * rows, as long as each path's row result never depends on the batch. */
  const uint8_t* prompt_tokens;
} memra_forward_batch;
#define MEMRA_FORWARD_BATCH_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_forward_batch, prompt_tokens)

typedef struct memra_family_api {
  size_t struct_size;
  /* config_json: the normalised config. Fails with UNSUPPORTED naming the architecture. */
  memra_status (*plan_create)(const char* config_json, memra_model_plan** out);
  /* The plan as JSON (tensors with shapes, layer kinds, KV layout); copied into buf,
   * *needed gets the full size including the NUL. */
  memra_status (*plan_describe)(const memra_model_plan* plan, char* buf, size_t buf_size,
                                size_t* needed);
  void (*plan_destroy)(memra_model_plan* plan);
  memra_status (*model_create)(const memra_model_plan* plan, const memra_weight_set* weights,
                               const memra_backend_ops* ops, memra_model** out);
  memra_status (*model_forward)(memra_model* model, const memra_forward_batch* batch);
  void (*model_destroy)(memra_model* model);
} memra_family_api;
#define MEMRA_FAMILY_API_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_family_api, model_destroy)

MEMRA_EXTERN_C_END

#endif /* MEMRA_FAMILY_H */
