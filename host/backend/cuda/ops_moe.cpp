// moe_ffn v1 on the CUDA backend: a correctness-first form. Every expert's MLP runs over
// all of the step's rows through the backend's own matmul and gated activation (so each
// row takes exactly the path a dense matmul of that row takes, and the step's launches
// do not depend on the routing: one captured graph serves every step of a shape), then
// kernels/moe/moe_ffn.cu routes, scatters each expert's rows into the slots that chose
// it and sums each row's slots. It reads every expert's weights each step, like a dense
// model of the same size; a grouped kernel that reads only the chosen experts replaces it
// once the engine serves MoE models at speed.
#include <string>
#include <tuple>

#include "host/backend/cuda/cuda_backend.hpp"
#include "host/backend/moe_ffn_args.hpp"
#include "memra/ops.h"

namespace memra::backend::cuda {

memra_status CudaBackend::moe_ffn(const memra_op_args& a) {
  if (std::string e = moe_ffn_args_error(a); !e.empty()) return fail(MEMRA_ERR_INVALID_ARGUMENT, e);
  const auto& attrs = *static_cast<const memra_moe_ffn_attrs_v1*>(a.attrs);
  const int32_t experts = attrs.num_experts, k = attrs.top_k;
  const memra_tensor* x = a.inputs[0];
  const memra_tensor* logits = a.inputs[1];
  memra_tensor* y = a.outputs[0];
  const int32_t tokens = a.batch->num_tokens;
  const int64_t hidden = tensor_last_dim(x), width = a.weights[0]->shape[0];
  for (int32_t e = 1; e < experts; ++e)
    if (a.weights[e]->shape[0] != width)
      return fail(MEMRA_ERR_UNSUPPORTED, "moe_ffn: the CUDA backend needs every expert of one width");

  memra_tensor routes, gate, up, act, out, contrib;
  const int64_t route_shape[2] = {tokens, 2 * static_cast<int64_t>(k)}, wide[2] = {tokens, width}, narrow[2] = {tokens, hidden},
                slots[3] = {tokens, k, hidden};
  for (auto [shape, ndim, t] : {std::tuple{route_shape, 2, &routes}, std::tuple{wide, 2, &gate}, std::tuple{wide, 2, &up},
                                std::tuple{wide, 2, &act}, std::tuple{narrow, 2, &out}, std::tuple{slots, 3, &contrib}})
    if (const memra_status st = tensor_create(ndim, shape, t); st != MEMRA_OK) return st;
  const auto dev = [](const memra_tensor& t) { return reinterpret_cast<CUdeviceptr>(t.data); };
  const int32_t h = static_cast<int32_t>(hidden);

  if (const memra_status st = launch("moe", "memra_moe_route", static_cast<unsigned>((tokens + 127) / 128), 1, 128, 0, dev(*logits),
                                     tokens, experts, k, attrs.normalize_top_k, dev(routes));
      st != MEMRA_OK)
    return st;
  for (int32_t e = 0; e < experts; ++e) {
    memra_status st = matmul(x, a.weights[e], nullptr, &gate);
    if (st == MEMRA_OK) st = matmul(x, a.weights[experts + e], nullptr, &up);
    if (st == MEMRA_OK) st = gated_activation(attrs.activation, &gate, &up, &act);
    if (st == MEMRA_OK) st = matmul(&act, a.weights[2 * experts + e], nullptr, &out);
    if (st == MEMRA_OK)
      st = launch("moe", "memra_moe_scatter", static_cast<unsigned>(tokens), 1, 256, 0, dev(out), dev(routes), k, h, e, dev(contrib));
    if (st != MEMRA_OK) return st;
  }
  return launch("moe", "memra_moe_combine", static_cast<unsigned>(tokens), 1, 256, 0, dev(contrib), dev(routes), k, h, dev(*y));
}

}  // namespace memra::backend::cuda
