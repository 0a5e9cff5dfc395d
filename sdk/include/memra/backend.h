/* memra C ABI — the backend op set a family plugin writes its forward pass with.
 *
 * The host hands a family plugin a memra_backend_ops table at model_create; the
 * same plugin code then runs on the CPU reference backend (the oracle) and on
 * the CUDA backend. Ops work on memra_tensor descriptors whose storage belongs
 * to the backend: tensor_create hands out step-scoped scratch that the backend
 * reclaims when model_forward returns (the plugin never frees it). A view is a
 * copy of a contiguous descriptor with another shape over the same data.
 *
 * Exactness: every op's result for a token row depends only on that row's
 * inputs (and, for attention, its own sequence's KV), never on the batch size
 * or on co-scheduled sequences (ARCHITECTURE.md, batch invariance).
 *
 * Shapes are outermost first; activations are [tokens][features], row-major.
 */
#ifndef MEMRA_BACKEND_H
#define MEMRA_BACKEND_H

#include "memra/abi.h"
#include "memra/family.h"

MEMRA_EXTERN_C_BEGIN

typedef struct memra_backend_ctx memra_backend_ctx; /* opaque, host-owned */

typedef struct memra_tensor {
  size_t struct_size;
  memra_dtype dtype;      /* the backend's activation type (F32 on the CPU reference) */
  int32_t ndim;
  int64_t shape[4];
  void* data;             /* backend storage; host or device address */
} memra_tensor;
#define MEMRA_TENSOR_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_tensor, data)

/* RoPE scaling kinds (HF config `rope_scaling.rope_type`). */
typedef int32_t memra_rope_scaling;
#define MEMRA_ROPE_SCALING_NONE 0
#define MEMRA_ROPE_SCALING_LINEAR 1
#define MEMRA_ROPE_SCALING_LLAMA3 2
#define MEMRA_ROPE_SCALING_YARN 3

typedef struct memra_rope_params {
  size_t struct_size;
  int32_t rotary_dim;          /* dims rotated per head (head_dim unless partial rotary) */
  int32_t neox_style;          /* 1: rotate the two halves (HF Llama/Qwen); 0: interleaved pairs */
  float theta;
  memra_rope_scaling scaling;
  float factor;                /* LINEAR, LLAMA3, YARN */
  float low_freq_factor;       /* LLAMA3 */
  float high_freq_factor;      /* LLAMA3 */
  int32_t original_max_position; /* LLAMA3, YARN */
  float beta_fast;             /* YARN */
  float beta_slow;             /* YARN */
  float attention_factor;      /* YARN mscale; 0 = derive from factor */
} memra_rope_params;
#define MEMRA_ROPE_PARAMS_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_rope_params, attention_factor)

typedef struct memra_attention_params {
  size_t struct_size;
  int32_t layer;               /* KV-cache layer index (the plan's KV layout) */
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t head_dim;
  float scale;                 /* softmax scale, e.g. 1/sqrt(head_dim) */
  int32_t sliding_window;      /* 0 = full attention; else attend to the last N positions */
  float logit_softcap;         /* 0 = none */
  const memra_rope_params* rope; /* applied to q and k before the KV write; NULL = none */
  /* 2.4: per-head RMS norms of q and k before RoPE (Qwen3's q_norm / k_norm), each a
   * head_dim-float F32 weight or NULL: every head h of a token becomes
   * x * (1 / sqrt(mean(x^2) + qk_norm_eps)) * w (rms_norm's arithmetic, unit offset 0),
   * fused into the backend's RoPE + KV write. */
  const memra_weight* q_norm;
  const memra_weight* k_norm;
  float qk_norm_eps;
} memra_attention_params;
#define MEMRA_ATTENTION_PARAMS_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_attention_params, qk_norm_eps)

/* Activation functions for gated MLPs: out = act(gate) * up. */
typedef int32_t memra_activation;
#define MEMRA_ACTIVATION_SILU 0
#define MEMRA_ACTIVATION_GELU_TANH 1

/* ABI 2.1: one backend's implementation of one (op name, attribute version). */
typedef struct memra_op memra_op; /* opaque, backend-owned */

/* The arguments of op_run. Which tensors, weights and attributes an op takes is
 * the op's contract (memra/ops.h). Inputs are read; outputs are written (an output
 * may alias an input when the op says so). */
typedef struct memra_op_args {
  size_t struct_size;
  int32_t layer;               /* the model layer whose state or weights it uses; -1 = none.
                                  A pipeline runs the op on the stage holding this layer. */
  uint32_t attrs_version;      /* the version given to op_find */
  const void* attrs;           /* that version's attribute struct (struct_size first) */
  size_t attrs_size;           /* sizeof the caller's attribute struct */
  int32_t num_inputs;
  int32_t num_outputs;
  const memra_tensor* const* inputs;
  memra_tensor* const* outputs;
  int32_t num_weights;
  const memra_weight* const* weights;
  const memra_forward_batch* batch; /* NULL for ops that need none */
} memra_op_args;
#define MEMRA_OP_ARGS_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_op_args, batch)

typedef struct memra_backend_ops {
  size_t struct_size;
  memra_backend_ctx* ctx;  /* pass back as the first argument of every op */

  /* Step-scoped scratch tensor of the backend's activation dtype. */
  memra_status (*tensor_create)(memra_backend_ctx* ctx, int32_t ndim, const int64_t* shape,
                                memra_tensor* out);
  /* out[t] = table[batch->token_ids[t]] * scale (scale 1 for most families). */
  memra_status (*embedding)(memra_backend_ctx* ctx, const memra_weight* table,
                            const memra_forward_batch* batch, float scale, memra_tensor* out);
  /* out = x / rms(x) * (w + unit_offset) over the last dim; x may be a per-head view. */
  memra_status (*rms_norm)(memra_backend_ctx* ctx, const memra_tensor* x, const memra_weight* w,
                           float eps, float unit_offset, memra_tensor* out);
  /* residual += x; out = rms_norm(residual) — the fused pre-norm of the next block. */
  memra_status (*add_rms_norm)(memra_backend_ctx* ctx, const memra_tensor* x,
                               memra_tensor* residual, const memra_weight* w, float eps,
                               float unit_offset, memra_tensor* out);
  /* out = a + b (same shape). */
  memra_status (*add)(memra_backend_ctx* ctx, const memra_tensor* a, const memra_tensor* b,
                      memra_tensor* out);
  /* out[t][r] = sum_c x[t][c] * W[r][c] (+ bias[r]); W in any loaded quant scheme. */
  memra_status (*matmul)(memra_backend_ctx* ctx, const memra_tensor* x, const memra_weight* w,
                         const memra_weight* bias, memra_tensor* out);
  /* out = act(gate) * up, elementwise. */
  memra_status (*gated_activation)(memra_backend_ctx* ctx, memra_activation act,
                                   const memra_tensor* gate, const memra_tensor* up,
                                   memra_tensor* out);
  /* RoPE on q and k (in place), write k and v for this step into the layer's paged
   * KV cache at batch positions, then out = softmax(q·Kᵀ·scale [+ causal/window
   * mask]) · V for each token over its own sequence. q [t][heads*head_dim],
   * k/v [t][kv_heads*head_dim], out [t][heads*head_dim]. */
  memra_status (*attention)(memra_backend_ctx* ctx, const memra_attention_params* params,
                            const memra_forward_batch* batch, memra_tensor* q, memra_tensor* k,
                            const memra_tensor* v, memra_tensor* out);
  /* out[i] = x[batch->logits_rows[i]]: the rows whose logits are wanted. */
  memra_status (*gather_logit_rows)(memra_backend_ctx* ctx, const memra_tensor* x,
                                    const memra_forward_batch* batch, memra_tensor* out);
  /* Hand the final [num_logits][vocab] logits to the host (batch->logits). */
  memra_status (*logits_output)(memra_backend_ctx* ctx, const memra_tensor* logits,
                                const memra_forward_batch* batch);

  /* ABI 2.1: ops by name (memra/ops.h lists them with their attribute structs). A
   * plugin finds each op once (model_create) and runs it per step. op_find answers
   * NOT_FOUND for a name the host has not registered and UNSUPPORTED for a version it
   * has not, or an op this backend does not implement. The handle lives as long as
   * the backend. A reader checks MEMRA_STRUCT_HAS(ops, memra_backend_ops, op_run). */
  memra_status (*op_find)(memra_backend_ctx* ctx, const char* name, uint32_t attrs_version,
                          const memra_op** out);
  memra_status (*op_run)(memra_backend_ctx* ctx, const memra_op* op, const memra_op_args* args);

  /* ABI 2.9 (draft heads; memra_forward_batch.hidden_in / hidden_out): out[t] =
   * batch->hidden_in[t], out [num_tokens][width]; and batch->hidden_out[t] = x[t] for every
   * row, x [num_tokens][width], on the host once the step's logits are. */
  memra_status (*rows_input)(memra_backend_ctx* ctx, const memra_forward_batch* batch, memra_tensor* out);
  memra_status (*rows_output)(memra_backend_ctx* ctx, const memra_tensor* x, const memra_forward_batch* batch);
} memra_backend_ops;
#define MEMRA_BACKEND_OPS_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_backend_ops, rows_output)

MEMRA_EXTERN_C_END

#endif /* MEMRA_BACKEND_H */
