// The ops only this family needs, brought to the host as plugin ops (memra/ops.h
// memra_op_def, SDK 2.7): their attribute structs, contracts and CPU references
// (qwen3next_ops.cpp). Every op's result for a token row depends on that row and, for
// the Gated DeltaNet, its own sequence's earlier rows through the recurrent state, never
// on the batch or on how a prompt was split into steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "memra/ops.h"
#include "qwen3next_math.h"

namespace memra::qwen3next {

// qwen3next.gated_delta_net v1: one Gated DeltaNet token mixer core, per token row t in
// batch order (a sequence's rows in position order), with its sequence's state:
//   - q, k, v, z (value width) and b, a (one per value head) from the projections, as
//     attrs.layout's flags say (qwen3next_math.h): inputs in order qkvz [T][2*Hk*dk + 2*Hv*dv]
//     (Hk groups of [q dk | k dk | v r*dv | z r*dv], r = Hv / Hk) or, SPLIT_QKVZ, qkv [T][C]
//     and z [T][Hv*dv]; then ba [T][2*Hv] (Hk groups of [b r | a r]) or, SPLIT_BA, b [T][Hv]
//     and a [T][Hv]. Hugging Face's Qwen3-Next is 0, its Qwen3.5 SPLIT_QKVZ | SPLIT_BA;
//     llama.cpp's GGUFs add A_DIRECT, its Qwen3.5 files V_TILED too;
//   - the causal depthwise conv over the channels [q | k | v] (C = 2*Hk*dk + Hv*dv) with
//     the kernel weights[0] ([C][1][K] or [C][K], f32/bf16/f16): out[c] = sum over
//     k = 0..K-1 of w[c][k] * x_{t-K+1+k}[c] (f32, in k order; the K-1 earlier inputs
//     are the state's, zero for a new sequence), then SiLU;
//   - q and k l2-normalised per head (x / sqrt(sum x^2 + 1e-6)), q scaled by 1/sqrt(dk);
//   - beta = sigmoid(b), g = A * softplus(a + dt_bias), A = -exp(A_log) (weights[1] A_log
//     [Hv], or A itself with A_DIRECT; weights[2] dt_bias [Hv], f32; softplus(x) = x past 20);
//   - per value head h (its key head h / r, or h % Hk with V_TILED): S = S * exp(g); m = Sᵀk;
//     S += k (beta (v - m))ᵀ; o = Sᵀq, S [dk][dv] f32;
//   - y = rms_norm(o) * w * silu(z) per value head (weights[3] [dv] f32, attrs.norm_eps).
// Every sum over a head (the q/k norms, Sᵀk and Sᵀq per column, the RMSNorm) is taken in the
// warp order of qwen3next_math.h (q3n_butterfly); dk at most 256.
// outputs[0] = y [T][Hv*dv]. State (layout "qwen3next.gdn.v2"): the conv's last K-1
// inputs [K-1][C] (oldest first), then S by column, [Hv][dv][dk], f32. exp, log1p and the
// activations are qwen3next_math.h's, shared with the kernels. Snapshots (MEMRA_OP_SNAPSHOTS):
// a row with a snapshot slot gets the whole layer state as it stands after that row.
#define QWEN3NEXT_OP_GDN "qwen3next.gated_delta_net"
#define QWEN3NEXT_STATE_LAYOUT_GDN "qwen3next.gdn.v2"
struct GdnAttrsV1 {
  size_t struct_size;
  int32_t num_k_heads, num_v_heads, head_k_dim, head_v_dim, conv_kernel;
  float norm_eps;
  int32_t layout;  // QWEN3NEXT_GDN_* flags (qwen3next_math.h)
};
// Bytes of one sequence's state for these sizes.
uint64_t gdn_state_bytes(const GdnAttrsV1& a);

// qwen3next.split_gate v1: the gated attention's q projection [T][H*2*D] holds per head
// [q D | gate D]; outputs[0] = q [T][H*D], outputs[1] = gate [T][H*D]. No batch.
#define QWEN3NEXT_OP_SPLIT_GATE "qwen3next.split_gate"
struct SplitGateAttrsV1 {
  size_t struct_size;
  int32_t heads, head_dim;
};

// qwen3next.sigmoid_mul v1: outputs[0] = inputs[0] * sigmoid(inputs[1]) elementwise, the
// gate [T][n] or [T][1] (one per row, broadcast); sigmoid(x) = 1 / (1 + exp(-x)). The
// output may alias inputs[0]. No batch.
#define QWEN3NEXT_OP_SIGMOID_MUL "qwen3next.sigmoid_mul"
struct SigmoidMulAttrsV1 {
  size_t struct_size;
};

// qwen3next.concat v1: outputs[0] [T][A+B] = inputs[0] [T][A] beside inputs[1] [T][B], row
// by row (the MTP head's [embedding | hidden] before its fc). No batch.
#define QWEN3NEXT_OP_CONCAT "qwen3next.concat"
struct ConcatAttrsV1 {
  size_t struct_size;
};

// The definitions memra_plugin_init hands the host.
std::span<const memra_op_def> op_defs();

// Shared by each op's CPU reference (qwen3next_ops.cpp) and CUDA form (qwen3next_cuda.cpp):
// the argument checks, then the CUDA side's functions.
memra_status gdn_check(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args);
// Where the op's inputs are (args checked by gdn_check).
inline q3n_sources sources_of(const GdnAttrsV1& at, const memra_op_args* args) {
  q3n_sources s{};
  s.flags = at.layout;
  s.hk = at.num_k_heads, s.hv = at.num_v_heads, s.dk = at.head_k_dim, s.dv = at.head_v_dim;
  auto in = [&](int32_t i) { return static_cast<const float*>(args->inputs[i]->data); };
  int32_t i = 0;
  s.qkv = in(i++);
  s.z = at.layout & QWEN3NEXT_GDN_SPLIT_QKVZ ? in(i++) : s.qkv;
  s.b = in(i++);
  s.a = at.layout & QWEN3NEXT_GDN_SPLIT_BA ? in(i) : s.b;
  return s;
}
memra_status split_gate_check(memra_plugin_ctx* ctx, const memra_op_args* args);
memra_status sigmoid_mul_check(memra_plugin_ctx* ctx, const memra_op_args* args);
memra_status concat_check(memra_plugin_ctx* ctx, const memra_op_args* args);
memra_status prepare_cuda(memra_plugin_ctx* ctx, const memra_device_info* device, void** kernel_data);
memra_status gdn_cuda(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args);
memra_status split_gate_cuda(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args);
memra_status sigmoid_mul_cuda(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args);
memra_status concat_cuda(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args);

}  // namespace memra::qwen3next
