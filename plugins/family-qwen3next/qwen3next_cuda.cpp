// The CUDA forms of the family's ops (memra_op_def.prepare_cuda / run_cuda): the kernels of
// qwen3next_kernels.fatbin (beside the plugin), loaded once per GPU backend and launched
// through the host's kernel services with argument sizes.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "family_plugin_support.hpp"
#include "qwen3next_ops.hpp"

namespace memra::qwen3next {
namespace {

using family::guarded;
using family::report;

struct Kernels {
  memra_kernel *conv = nullptr, *prep = nullptr, *recur = nullptr, *out = nullptr, *fused = nullptr, *out_conv = nullptr,
               *split = nullptr, *sigmul = nullptr, *concat = nullptr;
  int32_t fused_rows = 0;  // MEMRA_QWEN3NEXT_FUSED_DECODE=1: Q3N_FUSED_ROWS (steps that short take two kernels)
};

template <class... A>
memra_status launch2(memra_plugin_ctx* ctx, const memra_op_env* env, memra_kernel* k, uint32_t gx, uint32_t gy, uint32_t block,
                     uint32_t smem, A... a) {
  void* args[] = {static_cast<void*>(&a)...};
  const size_t sizes[] = {sizeof(A)...};
  memra_launch_config c{};
  c.struct_size = MEMRA_LAUNCH_CONFIG_STRUCT_SIZE;
  c.grid[0] = gx, c.grid[1] = gy, c.grid[2] = 1;
  c.block[0] = block, c.block[1] = 1, c.block[2] = 1;
  c.shared_bytes = smem;
  c.stream = env->stream;
  c.num_args = sizeof...(A);
  c.arg_sizes = sizes;
  return ctx->host->kernel_launch(ctx->host->ctx, k, &c, args);
}

template <class... A>
memra_status launch(memra_plugin_ctx* ctx, const memra_op_env* env, memra_kernel* k, uint32_t grid, uint32_t block, uint32_t smem,
                    A... a) {
  return launch2(ctx, env, k, grid, 1, block, smem, a...);
}

const Kernels* kernels_of(const memra_op_env* env) { return static_cast<const Kernels*>(env->kernel_data); }

}  // namespace

memra_status prepare_cuda(memra_plugin_ctx* ctx, const memra_device_info* device, void** kernel_data) {
  return guarded(ctx, [&]() -> memra_status {
    if (!device || !kernel_data) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "prepare_cuda: NULL argument");
    const std::string arch = device->arch ? device->arch : "";
    if (arch != "sm_90a" && arch != "sm_120a")
      return report(ctx, MEMRA_ERR_UNSUPPORTED, "qwen3next_kernels.fatbin has no SASS for " + (arch.empty() ? std::string("this GPU") : arch));
    const memra_host_api* h = ctx->host;
    if (!h->kernel_module_load || !h->kernel_get) return report(ctx, MEMRA_ERR_UNSUPPORTED, "the host has no kernel services");
    memra_kernel_module* module = nullptr;
    if (const memra_status st = h->kernel_module_load(h->ctx, "qwen3next_kernels", &module); st != MEMRA_OK) return st;
    auto k = std::make_shared<Kernels>();
    for (const auto& [name, slot] : {std::pair{"q3n_gdn_conv", &k->conv}, std::pair{"q3n_gdn_prep", &k->prep},
                                     std::pair{"q3n_gdn_recur", &k->recur}, std::pair{"q3n_gdn_out", &k->out},
                                     std::pair{"q3n_gdn_fused", &k->fused}, std::pair{"q3n_gdn_out_conv", &k->out_conv},
                                     std::pair{"q3n_split_gate", &k->split}, std::pair{"q3n_sigmoid_mul", &k->sigmul},
                                     std::pair{"q3n_concat", &k->concat}})
      if (const memra_status st = h->kernel_get(h->ctx, module, name, slot); st != MEMRA_OK) return st;
    // Off by default: on an H100 the 27B's decode ran 2-3 % slower fused (docs/PERFORMANCE.md, session 26).
    if (const char* v = std::getenv("MEMRA_QWEN3NEXT_FUSED_DECODE"); v && std::strcmp(v, "1") == 0) k->fused_rows = Q3N_FUSED_ROWS;
    *kernel_data = k.get();
    std::lock_guard lock(ctx->mu);
    ctx->owned.push_back(std::move(k));
    return MEMRA_OK;
  });
}

memra_status gdn_cuda(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args) {
  return guarded(ctx, [&]() -> memra_status {
    if (const memra_status st = gdn_check(ctx, env, args); st != MEMRA_OK) return st;
    const Kernels* k = kernels_of(env);
    if (!k) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.gated_delta_net: not prepared on this backend");
    const auto& at = *static_cast<const GdnAttrsV1*>(args->attrs);
    const int32_t hk = at.num_k_heads, hv = at.num_v_heads, dk = at.head_k_dim, dv = at.head_v_dim, kc = at.conv_kernel;
    const int64_t c_dim = 2ll * hk * dk + static_cast<int64_t>(hv) * dv;
    const int32_t tokens = args->batch->num_tokens;
    const q3n_sources src = sources_of(at, args);
    float* y = static_cast<float*>(args->outputs[0]->data);
    const void* conv_w = args->weights[0]->data;
    const int32_t w_dtype = args->weights[0]->dtype;
    const float* a_weight = static_cast<const float*>(args->weights[1]->data);
    const float* dt_bias = static_cast<const float*>(args->weights[2]->data);
    const float* norm_w = static_cast<const float*>(args->weights[3]->data);
    const int32_t* seq = env->seq_index;
    const int32_t* slots = env->state_slots;
    const int32_t* snaps = MEMRA_STRUCT_HAS(env, memra_op_env, snapshot_slots) ? env->snapshot_slots : nullptr;
    char* state = static_cast<char*>(env->state);
    const unsigned long long stride = env->state_stride;
    const uint64_t pairs_v = static_cast<uint64_t>(tokens) * static_cast<uint64_t>(hv);
    if (tokens <= k->fused_rows) {
      // Decode and verify steps: two launches (qwen3next_kernels.cu, q3n_gdn_fused).
      if (const memra_status st = launch2(ctx, env, k->fused, static_cast<uint32_t>(hv),
                                          static_cast<uint32_t>((dv + Q3N_RECUR_WARPS - 1) / Q3N_RECUR_WARPS), Q3N_RECUR_WARPS * 32, 0,
                                          src, tokens, kc, conv_w, w_dtype, a_weight, dt_bias, seq, slots, snaps, state, stride, y);
          st != MEMRA_OK)
        return st;
      const auto out_blocks = static_cast<int32_t>((pairs_v + 3) / 4);
      return launch(ctx, env, k->out_conv, static_cast<uint32_t>(out_blocks + (c_dim + 127) / 128), 128, 0, src, tokens, norm_w,
                    at.norm_eps, y, out_blocks, kc, seq, slots, snaps, state, stride);
    }
    // Step scratch: the conv output [T][C], then qn and kn [T][Hk][dk], beta and decay [T][Hv].
    const uint64_t kd = static_cast<uint64_t>(hk) * static_cast<uint64_t>(dk), T = static_cast<uint64_t>(tokens);
    const uint64_t floats = T * (static_cast<uint64_t>(c_dim) + 2 * kd + 2 * static_cast<uint64_t>(hv));
    void* scratch = nullptr;
    if (const memra_status st = env->scratch(env, floats * 4, &scratch); st != MEMRA_OK)
      return report(ctx, st, "qwen3next.gated_delta_net: no step scratch for the conv output and the row scalars");
    float* conv = static_cast<float*>(scratch);
    float* qn = conv + T * static_cast<uint64_t>(c_dim);
    float* kn = qn + T * kd;
    float* beta = kn + T * kd;
    float* decay = beta + T * static_cast<uint64_t>(hv);
    if (const memra_status st = launch(ctx, env, k->conv, static_cast<uint32_t>((c_dim + 63) / 64), 64, 0, src, tokens, kc, conv_w,
                                       w_dtype, seq, slots, snaps, state, stride, conv);
        st != MEMRA_OK)
      return st;
    const float* conv_in = conv;
    // Four warps a block: (row, key head) pairs here, (row, value head) pairs in the norm; the
    // recurrence's blocks are Q3N_RECUR_WARPS state columns of one head.
    const uint64_t pairs_k = T * static_cast<uint64_t>(hk);
    if (const memra_status st = launch(ctx, env, k->prep, static_cast<uint32_t>((pairs_k + 3) / 4), 128, 0, src, conv_in, tokens, a_weight,
                                       dt_bias, qn, kn, beta, decay);
        st != MEMRA_OK)
      return st;
    const float *qn_in = qn, *kn_in = kn, *beta_in = beta, *decay_in = decay;
    if (const memra_status st = launch2(ctx, env, k->recur, static_cast<uint32_t>(hv), static_cast<uint32_t>((dv + Q3N_RECUR_WARPS - 1) / Q3N_RECUR_WARPS),
                                        Q3N_RECUR_WARPS * 32, q3n_recur_smem(dk), src,
                                        conv_in, qn_in, kn_in, beta_in, decay_in, tokens, kc, seq, slots, snaps, state, stride, y);
        st != MEMRA_OK)
      return st;
    return launch(ctx, env, k->out, static_cast<uint32_t>((pairs_v + 3) / 4), 128, 0, src, tokens, norm_w, at.norm_eps, y);
  });
}

memra_status split_gate_cuda(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args) {
  return guarded(ctx, [&]() -> memra_status {
    if (const memra_status st = split_gate_check(ctx, args); st != MEMRA_OK) return st;
    const Kernels* k = kernels_of(env);
    if (!k) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.split_gate: not prepared on this backend");
    const auto& at = *static_cast<const SplitGateAttrsV1*>(args->attrs);
    const int32_t d = at.head_dim;
    int64_t n = 1;
    for (int32_t i = 0; i < args->outputs[0]->ndim; ++i) n *= args->outputs[0]->shape[i];
    const long long rows = n / d;
    const float* in = static_cast<const float*>(args->inputs[0]->data);
    float* q = static_cast<float*>(args->outputs[0]->data);
    float* gate = static_cast<float*>(args->outputs[1]->data);
    return launch(ctx, env, k->split, static_cast<uint32_t>((n + 255) / 256), 256, 0, in, rows, d, q, gate);
  });
}

memra_status sigmoid_mul_cuda(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args) {
  return guarded(ctx, [&]() -> memra_status {
    if (const memra_status st = sigmoid_mul_check(ctx, args); st != MEMRA_OK) return st;
    const Kernels* k = kernels_of(env);
    if (!k) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.sigmoid_mul: not prepared on this backend");
    const memra_tensor* xt = args->inputs[0];
    const int32_t n = static_cast<int32_t>(xt->shape[xt->ndim - 1]);
    int64_t total = 1;
    for (int32_t i = 0; i < xt->ndim; ++i) total *= xt->shape[i];
    const long long rows = total / n;
    const int32_t gw = static_cast<int32_t>(args->inputs[1]->shape[args->inputs[1]->ndim - 1]);
    const float* x = static_cast<const float*>(xt->data);
    const float* g = static_cast<const float*>(args->inputs[1]->data);
    float* y = static_cast<float*>(args->outputs[0]->data);
    return launch(ctx, env, k->sigmul, static_cast<uint32_t>((total + 255) / 256), 256, 0, x, g, rows, n, gw, y);
  });
}

memra_status concat_cuda(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args) {
  return guarded(ctx, [&]() -> memra_status {
    if (const memra_status st = concat_check(ctx, args); st != MEMRA_OK) return st;
    const Kernels* k = kernels_of(env);
    if (!k) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.concat: not prepared on this backend");
    const memra_tensor *x = args->inputs[0], *y = args->inputs[1];
    const int32_t a = static_cast<int32_t>(x->shape[x->ndim - 1]), b = static_cast<int32_t>(y->shape[y->ndim - 1]);
    int64_t total = 1;
    for (int32_t i = 0; i < x->ndim; ++i) total *= x->shape[i];
    const long long rows = total / a;
    const long long n = rows * (static_cast<long long>(a) + b);
    return launch(ctx, env, k->concat, static_cast<uint32_t>((n + 255) / 256), 256, 0, static_cast<const float*>(x->data),
                  static_cast<const float*>(y->data), rows, a, b, static_cast<float*>(args->outputs[0]->data));
  });
}

}  // namespace memra::qwen3next
