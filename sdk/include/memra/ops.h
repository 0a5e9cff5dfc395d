/* memra C ABI — the ops a forward pass finds by name (memra_backend_ops.op_find).
 *
 * Each op is a name plus a version of its attribute struct; a new op, or a new
 * version of one, is appended here in an ABI minor (docs/PLUGINS.md, "Adding an
 * op"). An attribute struct begins with struct_size like every public struct; a
 * version changes when a field's meaning changes, never to append. A plan lists the
 * ops it uses in memra_plan_info.required_ops so the host can refuse it at load.
 */
#ifndef MEMRA_OPS_H
#define MEMRA_OPS_H

#include "memra/abi.h"

MEMRA_EXTERN_C_BEGIN

/* decay_scan v1 (ABI 2.1): a decayed running sum over each sequence's tokens, kept in
 * the RECURRENT state of args.layer (state layout "decay_scan.v1": float32[width] per
 * sequence, bytes_per_sequence = 4 * width). For each token row t, in batch order,
 * with s the state of the row's sequence (batch->state_slots):
 *     s = decay * s + x[t];  y[t] = s        (float32, one rounding per operation)
 * inputs[0] = x [tokens][width], outputs[0] = y [tokens][width] (may alias x),
 * batch required, no weights. Rows of one sequence are in position order, so a
 * chunked prefill gives bitwise what one step gives. */
#define MEMRA_OP_DECAY_SCAN "decay_scan"
#define MEMRA_OP_DECAY_SCAN_V1 1u
#define MEMRA_STATE_LAYOUT_DECAY_SCAN_V1 "decay_scan.v1"

typedef struct memra_decay_scan_attrs_v1 {
  size_t struct_size;
  float decay;
  int32_t width;
} memra_decay_scan_attrs_v1;
#define MEMRA_DECAY_SCAN_ATTRS_V1_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_decay_scan_attrs_v1, width)

/* moe_ffn v1 (ABI 2.6): a mixture-of-experts MLP with softmax top-k routing (Qwen3-MoE,
 * Mixtral). inputs[0] = x [tokens][hidden] (the normed rows), inputs[1] = the router's
 * logits [tokens][num_experts] (a plain matmul of x by the router weight);
 * outputs[0] = y [tokens][hidden] (must not alias x); weights = 3 * num_experts
 * matrices in the order gate_0 .. gate_{E-1}, up_0 .., down_0 .. (gate and up
 * [expert_width][hidden], down [hidden][expert_width], any loaded scheme, each expert's
 * three of one scheme); no state; batch required. For each token row t:
 *   - the top_k experts by logit, highest first (ties: the lower index);
 *   - p_e = exp(l_e - max) / sum over all experts of exp(l - max)  (float32, the sum in
 *     expert order), and w_i = p_i, or p_i / (p_0 + .. + p_{k-1}) when normalize_top_k;
 *   - y[t] = w_0 * o_0 + .. + w_{k-1} * o_{k-1} (float32, in that order from 0), where
 *     o_i = down_e(act(gate_e(x[t])) * up_e(x[t])) with act a MEMRA_ACTIVATION_* and
 *     each matmul treating row t exactly as the matmul op treats it in this batch.
 * A row's result depends on that row (and whether it is a prompt row) alone. */
#define MEMRA_OP_MOE_FFN "moe_ffn"
#define MEMRA_OP_MOE_FFN_V1 1u

typedef struct memra_moe_ffn_attrs_v1 {
  size_t struct_size;
  int32_t num_experts;
  int32_t top_k;
  int32_t normalize_top_k; /* 1: the k weights are divided by their sum */
  int32_t activation;      /* MEMRA_ACTIVATION_SILU or MEMRA_ACTIVATION_GELU_TANH (memra/backend.h) */
} memra_moe_ffn_attrs_v1;
#define MEMRA_MOE_FFN_ATTRS_V1_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_moe_ffn_attrs_v1, activation)

MEMRA_EXTERN_C_END

#endif /* MEMRA_OPS_H */
