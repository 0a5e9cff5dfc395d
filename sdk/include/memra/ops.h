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
#include "memra/backend.h"
#include "memra/host_api.h"

MEMRA_EXTERN_C_BEGIN

/* (ABI 2.1-2.6 had a host op decay_scan v1, which only a test family used; 2.7 moved it
 * to the SDK's example family as its own op example.decay_scan: sdk/examples/family-example.) */

/* (ABI 2.6-2.10 had moe_ffn v1, over 3 * num_experts separate expert matrices; 2.11 replaced
 * it with v2 over stacked experts, the one form both checkpoint kinds load into.) */

/* moe_ffn v2 (ABI 2.11): a mixture-of-experts MLP with softmax top-k routing over stacked
 * experts, optionally with a sigmoid-gated shared expert (Qwen3-MoE, Qwen3-Next, Qwen3.5-MoE,
 * Mixtral). inputs[0] = x [tokens][hidden] (the normed rows), inputs[1] = the router's logits
 * [tokens][num_experts] (a plain matmul of x by the router weight); outputs[0] = y
 * [tokens][hidden] (must not alias x); batch required; no state. weights:
 *   [0] gate_exps, [1] up_exps: [num_experts][width][hidden]; [2] down_exps:
 *       [num_experts][hidden][width] — 3-D, any loaded scheme (the three of one scheme);
 *       expert e's matrix is the e-th [rows][cols] slice: bytes / num_experts from
 *       e * bytes / num_experts (llama.cpp's ffn_*_exps, read in place);
 *   with shared_expert: [3] gate_shexp, [4] up_shexp [shared_width][hidden], [5] down_shexp
 *       [hidden][shared_width] (one scheme), [6] gate_inp_shexp: its gate, a [1][hidden] matrix
 *       or an F32 [hidden] vector (llama.cpp's form).
 * For each token row t (every float operation one IEEE-rounded op, exp as
 * kernels/moe/moe_route.cuh states it, so every backend picks the same experts and weights):
 *   - the top_k experts by logit, highest first (ties: the lower index);
 *   - p_e = exp(l_e - max) / sum over all experts of exp(l - max)  (float32, the sum in
 *     expert order), and w_i = p_i, or p_i / (p_0 + .. + p_{k-1}) when normalize_top_k;
 *   - y[t] = w_0 * o_0 + .. + w_{k-1} * o_{k-1} (float32, in that order from 0), where
 *     o_i = down_e(act(gate_e(x[t])) * up_e(x[t])) with act a MEMRA_ACTIVATION_*;
 *   - with shared_expert: y[t] += sigmoid(g) * s, s = down_sh(act(gate_sh(x[t])) * up_sh(x[t])),
 *     g = gate_inp_shexp · x[t], sigmoid(g) = 1 / (1 + exp(-g)) (after the routed sum).
 * Each matmul treats row t exactly as the matmul op treats it in this batch (its prompt flag),
 * so a row's result depends on that row alone, never on which other rows chose its experts. */
#define MEMRA_OP_MOE_FFN "moe_ffn"
#define MEMRA_OP_MOE_FFN_V2 2u

typedef struct memra_moe_ffn_attrs_v2 {
  size_t struct_size;
  int32_t num_experts;     /* 1..512 */
  int32_t top_k;           /* 1..min(num_experts, 8) */
  int32_t normalize_top_k; /* 1: the k weights are divided by their sum */
  int32_t activation;      /* MEMRA_ACTIVATION_SILU or MEMRA_ACTIVATION_GELU_TANH (memra/backend.h) */
  int32_t shared_expert;   /* 1: weights[3..6] are a shared expert and its sigmoid gate */
} memra_moe_ffn_attrs_v2;
#define MEMRA_MOE_FFN_ATTRS_V2_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_moe_ffn_attrs_v2, shared_expert)
#define MEMRA_MOE_FFN_MAX_EXPERTS 512
#define MEMRA_MOE_FFN_MAX_TOP_K 8

/* ---- Ops a plugin brings (ABI 2.7) -------------------------------------------------
 *
 * A family plugin adds ops of its own to the host's registry: it lists them in
 * memra_plugin_api.ops (memra/plugin.h) and its forward pass finds them with op_find
 * like the ops above. The host checks each definition when the plugin loads and
 * refuses the plugin, naming it and the op, for a bad one. An op is its CPU reference
 * (required: the oracle, and what the CPU backend runs) and optionally its CUDA form:
 * kernels from the plugin's own fatbin (host->kernel_module_load in prepare_cuda),
 * launched in run_cuda through host->kernel_launch with argument sizes, so a decode
 * step that runs them is still captured and replayed as one CUDA graph. */

#define MEMRA_OP_NEEDS_BATCH 1u /* args->batch is required (and the batch arrays of memra_op_env are set) */
#define MEMRA_OP_USES_STATE 2u  /* reads and updates args->layer's RECURRENT state (memra_op_env.state) */
#define MEMRA_OP_SNAPSHOTS 4u   /* 2.8, with USES_STATE: writes state snapshots where memra_op_env.snapshot_slots asks */

/* Where a plugin op runs: handed to run_cpu / run_cuda for one call, valid during it. */
typedef struct memra_op_env {
  size_t struct_size;
  memra_backend_kind backend;
  void* stream;      /* CUDA: the backend's stream (kernel_launch with stream NULL uses it); NULL on the CPU */
  void* kernel_data; /* CUDA: what the op's prepare_cuda returned on this backend; NULL on the CPU */
  /* MEMRA_OP_USES_STATE: args->layer's RECURRENT state on this backend; sequence s of the
   * batch keeps its bytes at (char*)state + state_slots[s] * state_stride (host memory on
   * the CPU, device memory on CUDA; state_stride >= the group's bytes_per_sequence). NULL
   * when the layer keeps none. */
  void* state;
  uint64_t state_stride;
  int32_t num_state_slots;
  /* MEMRA_OP_NEEDS_BATCH: the batch's arrays where the op runs (host arrays on the CPU,
   * device copies on CUDA), valid for the step. state_slots is NULL without state. */
  const int32_t* positions;   /* [num_tokens] */
  const int32_t* seq_index;   /* [num_tokens] */
  const int32_t* seq_lens;    /* [num_seqs] */
  const int32_t* state_slots; /* [num_seqs] */
  /* Step scratch where the op runs (256-byte aligned), reclaimed when the step ends. */
  memra_status (*scratch)(const struct memra_op_env* env, uint64_t bytes, void** out);
  void* scratch_ctx; /* the backend's; scratch reads it */
  /* ABI 2.8, MEMRA_OP_SNAPSHOTS: [num_tokens] where the op runs (as seq_index), a slot of
   * the layer's state that receives the row's sequence's state of this layer as it stands
   * right after that row (bitwise what the live slot would hold had the step ended there),
   * or -1; NULL = none. Never a slot of the batch's live states. */
  const int32_t* snapshot_slots;
} memra_op_env;
#define MEMRA_OP_ENV_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_op_env, snapshot_slots)

/* A small case memra-kernel-check runs an op on: the CPU reference against the CUDA form,
 * outputs and state compared (bitwise when tolerance is 0, else |cuda - cpu| <=
 * tolerance * (1 + |cpu|)). Inputs, outputs and weights are float32 [rows][cols]; the
 * tool makes a one-layer RECURRENT state of state_bytes per sequence (zeroed), one slot
 * per sequence, and runs the case twice so the second call starts from the state the
 * first one left. Arrays are the plugin's and live until the next example call. */
typedef struct memra_op_example {
  size_t struct_size;
  const char* label;
  const void* attrs;
  size_t attrs_size;
  int32_t num_tokens;
  int32_t num_seqs;
  const int32_t* positions; /* [num_tokens] */
  const int32_t* seq_index; /* [num_tokens], a sequence's rows in position order */
  uint64_t state_bytes;     /* per sequence; 0: no state */
  int32_t num_inputs;
  const int64_t* input_shapes; /* [num_inputs][2] */
  const float* const* inputs;
  int32_t num_outputs;
  const int64_t* output_shapes; /* [num_outputs][2] */
  int32_t num_weights;
  const int64_t* weight_shapes; /* [num_weights][2], float32 weights */
  const float* const* weights;
  float tolerance;
} memra_op_example;
#define MEMRA_OP_EXAMPLE_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_op_example, tolerance)

typedef struct memra_op_def {
  size_t struct_size;
  const char* name;    /* "<plugin name>.<op>", e.g. "example.shift_mix" */
  uint32_t version;    /* >= 1: the attribute struct's version (op_find's attrs_version) */
  size_t attrs_size;   /* that version's attribute struct, >= sizeof(size_t): struct_size first */
  uint32_t flags;      /* MEMRA_OP_* */
  const char* summary; /* one line, for logs and errors */
  /* Required: the CPU reference. */
  memra_status (*run_cpu)(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args);
  /* Optional, both or neither: the CUDA form. prepare_cuda runs once per CUDA backend,
   * before any model runs on it (kernel_module_load and kernel_get work there); what it
   * stores in *kernel_data comes back as memra_op_env.kernel_data. Without them (or
   * when prepare_cuda fails) a plan that needs the op is refused on CUDA at load. */
  memra_status (*prepare_cuda)(memra_plugin_ctx* ctx, const memra_device_info* device, void** kernel_data);
  memra_status (*run_cuda)(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args);
  /* (run_cuda gets the tensors' device addresses, and weights whose data are device
   * addresses too; run_cpu gets host addresses.) */
  /* Optional: memra-kernel-check's cases, index 0, 1, ... until NOT_FOUND. */
  memra_status (*example)(memra_plugin_ctx* ctx, int32_t index, memra_op_example* out);
} memra_op_def;
#define MEMRA_OP_DEF_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_op_def, example)

MEMRA_EXTERN_C_END

#endif /* MEMRA_OPS_H */
