/* memra C ABI — the model-family plugin table.
 *
 * A family plugin owns its architectures end to end: it turns a checkpoint's raw
 * config (Hugging Face config.json or GGUF metadata, as the host read it) into the
 * normalised config (JSON, docs/FORMAT.md), names the checkpoint's tensors the
 * canonical way, turns the normalised config into a model plan (tensors, layer
 * groups and the state each needs, inputs) and runs the forward pass against the
 * backend op set the host hands it. The host has no per-architecture code.
 * Everything a plugin creates it frees through the same table.
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

struct memra_tensor; /* memra/backend.h */

/* One step of the forward pass over a batch of tokens from one or more sequences. */
typedef struct memra_forward_batch {
  size_t struct_size;
  int32_t num_tokens;
  const int32_t* token_ids;     /* [num_tokens] */
  const int32_t* positions;     /* [num_tokens] absolute positions */
  const int32_t* seq_index;     /* [num_tokens] index into the per-sequence arrays */
  int32_t num_seqs;
  const int32_t* seq_lens;      /* [num_seqs] KV length after this step */
  const int32_t* block_tables;  /* [num_kv_pools][num_seqs][max_blocks_per_seq] KV block ids (ABI 2.5: pool 0's
                                   tables first; -1 where a sliding-window pool dropped a block) */
  int32_t max_blocks_per_seq;
  int32_t num_logits;
  const int32_t* logits_rows;   /* [num_logits] token rows whose logits are wanted */
  float* logits;                /* [num_logits][vocab], written by model_forward */
  /* ABI 1.1: [num_tokens] 1 = the token is part of its sequence's prompt (prefill),
   * 0 = a generated token (decode or a speculative verify step); NULL = all 0.
   * A backend may compute prompt rows on another (tensor-core) path than generated
   * rows, as long as each path's row result never depends on the batch. */
  const uint8_t* prompt_tokens;
  /* ABI 2.1: [num_seqs] each sequence's recurrent-state slot (the row of every
   * RECURRENT layer's state the ops read and update); NULL when the plan has no
   * RECURRENT group. Slots are the host's; a plugin only passes the batch on. */
  const int32_t* state_slots;
  /* ABI 2.2: layer ranges (pipeline stages), for a family whose plan says it runs them
   * (memra_plan_info.layer_ranges). layer_end 0: the whole model. Otherwise only layers
   * [layer_begin, layer_end) run, on this batch's backend: a range that starts after
   * layer 0 continues from carry_in (what the range before it left, copied to this
   * backend); one that ends before the last layer writes what the next range needs into
   * carry_out[0..MEMRA_MAX_CARRY) (tensors of this backend, step scoped), sets
   * *num_carry_out and produces no logits. Layer indices stay the model's. */
  int32_t layer_begin;
  int32_t layer_end;
  const struct memra_tensor* carry_in;
  int32_t num_carry_in;
  struct memra_tensor* carry_out;
  int32_t* num_carry_out;
  /* ABI 2.3: what logits_rows ask for (MEMRA_ROW_OUTPUT_*). HIDDEN (embeddings): each
   * row's final hidden state, after the final norm and before the output matmul, so
   * batch->logits is [num_logits][memra_plan_info.hidden_width] and logits_output gets
   * the gathered normed rows. Only for a plan whose hidden_width is set; 0 = LOGITS. */
  int32_t row_output;
  /* ABI 2.5: the KV pools block_tables holds tables for (the host's state manager keeps
   * full-attention layers in one pool and each sliding window in its own, sized for the
   * window: docs/ARCHITECTURE.md, "State manager"). Only backends read it; a plugin
   * passes the batch on. Absent (an older struct) = 1. */
  int32_t num_kv_pools;
  /* ABI 2.8: [num_tokens] a RECURRENT state slot that receives the row's sequence's state
   * as it stands right after that row (every layer's, by the ops that declare
   * MEMRA_OP_SNAPSHOTS), or -1; NULL = none. The host sets it only when every state op of
   * the plan declares it (speculative rollback without a replay); a plugin passes the
   * batch on. */
  const int32_t* snapshot_slots;
  /* ABI 2.9: draft heads (multi-token prediction, memra_plan_info.draft_layers).
   * head 0: the model. hidden_out, when set, receives every row's final hidden state
   * (after the final norm; [num_tokens][hidden_width] floats on the host), as well as
   * the logits. head 1: the draft head runs instead of the model: row t reads the token
   * token_ids[t] (the token that follows the hidden state's position) and the hidden
   * state hidden_in[t] ([num_tokens][hidden_width] floats on the host: the model's at
   * that position, or the head's own previous output when it drafts ahead), keeps KV in
   * the draft layers at positions[t], and yields logits (and its output hidden state in
   * hidden_out when set) predicting the token after token_ids[t]. A head step leaves
   * RECURRENT state alone (state_slots and snapshot_slots are NULL). */
  int32_t head;
  const float* hidden_in;
  float* hidden_out;
} memra_forward_batch;
#define MEMRA_FORWARD_BATCH_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_forward_batch, hidden_out)
#define MEMRA_ROW_OUTPUT_LOGITS 0 /* [num_logits][vocab_size] logits */
#define MEMRA_ROW_OUTPUT_HIDDEN 1 /* [num_logits][hidden_width] final hidden states */
#define MEMRA_MAX_CARRY 4

/* The state a group of layers needs (the plan's contract with the host's state
 * manager, which sizes and allocates state only from these). */
typedef int32_t memra_state_kind;
#define MEMRA_STATE_PAGED_KV 1  /* K and V per position, in fixed-size blocks (attention) */
#define MEMRA_STATE_RECURRENT 2 /* fixed bytes per sequence and layer (e.g. a linear-attention state) */

typedef struct memra_state_group {
  size_t struct_size;
  memra_state_kind kind;
  int32_t num_layers;
  const int32_t* layers;      /* model layer indices (memra_attention_params.layer) */
  /* MEMRA_STATE_PAGED_KV */
  int32_t kv_heads;
  int32_t head_dim;
  memra_dtype kv_dtype;       /* the family's preference; INVALID = the host's default */
  int32_t sliding_window;     /* 0 = every position; N = only the last N are read */
  /* MEMRA_STATE_RECURRENT: each layer of the group keeps bytes_per_sequence bytes per
   * sequence, zeroed when the sequence opens (docs/PLUGINS.md, "Declaring state"). */
  uint64_t bytes_per_sequence;
  const char* layout;         /* names the layout the family's ops use, e.g. "example.decay_scan.v1" */
} memra_state_group;
#define MEMRA_STATE_GROUP_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_state_group, layout)

/* What a model's forward pass takes besides positions. */
#define MEMRA_INPUT_TOKEN_IDS 1u  /* memra_forward_batch.token_ids */
#define MEMRA_INPUT_EMBEDDINGS 2u /* embeddings injected at positions (media encoders) */

/* ABI 2.1: an op the forward pass looks up by name (memra/backend.h op_find, memra/ops.h).
 * The host refuses at load a plan naming an op or version it has not registered, or one
 * the chosen backend does not implement. */
typedef struct memra_op_requirement {
  size_t struct_size;
  const char* name;           /* e.g. MEMRA_OP_MOE_FFN, or a plugin's "example.decay_scan" */
  uint32_t version;           /* the attribute struct version the plugin passes */
} memra_op_requirement;
#define MEMRA_OP_REQUIREMENT_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_op_requirement, version)

/* A plan's contract with the host; the arrays are the plan's and live as long as it. */
typedef struct memra_plan_info {
  size_t struct_size;         /* set by the host; the plugin fills what fits */
  int64_t vocab_size;         /* logits per row */
  int32_t num_layers;
  uint32_t inputs;            /* MEMRA_INPUT_* bits */
  size_t num_state_groups;    /* every layer in exactly one group */
  const memra_state_group* state_groups;
  size_t num_encoders;        /* encoders the model has (e.g. "vision"); 0 for text models */
  const char* const* encoders;
  /* ABI 2.1 (a plugin writes these only when out->struct_size covers them): */
  size_t num_required_ops;
  const memra_op_requirement* required_ops;
  /* ABI 2.2: 1 when model_forward runs layer ranges (memra_forward_batch.layer_begin),
   * so the host may split the model into pipeline stages; 0 refuses a split. */
  int32_t layer_ranges;
  /* ABI 2.3: the width of a final hidden state when model_forward honours
   * memra_forward_batch.row_output = MEMRA_ROW_OUTPUT_HIDDEN (embedding models);
   * 0 = it does not, and the host never asks for hidden rows. */
  int32_t hidden_width;
  /* ABI 2.9: layers of a draft head (an MTP layer shipped in the checkpoint), numbered
   * after the model's: [num_layers, num_layers + draft_layers). Their state is in the state
   * groups like any layer's (PAGED_KV only); the host allocates it only when it drafts with
   * the head (memra_forward_batch.head = 1), which needs hidden_width set. 0 = no head. */
  int32_t draft_layers;
} memra_plan_info;
#define MEMRA_PLAN_INFO_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_plan_info, draft_layers)

/* Output strings use the buffer protocol: the callee copies at most buf_size bytes
 * including the NUL and always sets *needed to the full size including the NUL; a
 * buffer that is too small gets MEMRA_ERR_INVALID_ARGUMENT and nothing else.
 * Every slot is required: the host refuses a plugin with a NULL one, naming it. */
typedef struct memra_family_api {
  size_t struct_size;
  /* raw_json: the checkpoint as the host read it (docs/PLUGINS.md, "Raw configs":
   * {"format":"hf","architecture":..,"config":{..},"generation_config":{..}|null,
   * "tensors":{name:{"dtype":..,"shape":[..]}}} or the GGUF form with "metadata").
   * Writes the normalised config JSON. UNSUPPORTED names what the family cannot run. */
  memra_status (*config_normalize)(memra_plugin_ctx* ctx, const char* raw_json, char* buf, size_t buf_size,
                                   size_t* needed);
  /* The canonical name of a checkpoint tensor (format "hf" or "gguf");
   * MEMRA_ERR_NOT_FOUND: a tensor the family does not read (rotary buffers, ...). */
  memra_status (*tensor_name)(memra_plugin_ctx* ctx, const char* format, const char* source_name, char* buf,
                              size_t buf_size, size_t* needed);
  /* config_json: the normalised config. Fails with UNSUPPORTED naming what it cannot plan. */
  memra_status (*plan_create)(memra_plugin_ctx* ctx, const char* config_json, memra_model_plan** out);
  /* The plan as JSON (tensors with shapes, layer groups, state) for logs and tools. */
  memra_status (*plan_describe)(const memra_model_plan* plan, char* buf, size_t buf_size, size_t* needed);
  /* The plan's contract: state per layer group, inputs, encoders (out->struct_size set by the host). */
  memra_status (*plan_info)(const memra_model_plan* plan, memra_plan_info* out);
  void (*plan_destroy)(memra_model_plan* plan);
  memra_status (*model_create)(const memra_model_plan* plan, const memra_weight_set* weights,
                               const memra_backend_ops* ops, memra_model** out);
  memra_status (*model_forward)(memra_model* model, const memra_forward_batch* batch);
  void (*model_destroy)(memra_model* model);
  /* ABI 2.11 (optional; NULL or MEMRA_ERR_NOT_FOUND: tensor_name alone names the tensor): a
   * checkpoint tensor that is a part of canonical tensors rather than one itself, which the
   * host assembles (memra-repack and the engine alike) by copying whole rows of it; asked
   * before tensor_name. Writes a JSON array of parts, each {"name": canonical, "index": i,
   * "split": [j, n]} with both keys optional:
   *   "index": the canonical tensor stacks the checkpoint tensors that name it along a new
   *     outermost axis in index order, this one at `index` (Hugging Face's per-expert
   *     matrices into one [experts][rows][cols] tensor); their count is the stacked size;
   *   "split": only the j-th of n equal row ranges of the second-to-last axis (of every
   *     outer slice) goes to the canonical tensor (a fused gate_up [experts][2 * width][hidden]
   *     into [experts][width][hidden] gate and up tensors).
   * The parts of one canonical tensor must tile it exactly (indices 0..count-1 once each, one
   * dtype and shape); anything else is refused at load naming the tensor. Matrices only
   * (2 or 3 dims); rows are never cut. */
  memra_status (*tensor_parts)(memra_plugin_ctx* ctx, const char* format, const char* source_name, char* buf,
                               size_t buf_size, size_t* needed);
} memra_family_api;
#define MEMRA_FAMILY_API_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_family_api, tensor_parts)

MEMRA_EXTERN_C_END

#endif /* MEMRA_FAMILY_H */
