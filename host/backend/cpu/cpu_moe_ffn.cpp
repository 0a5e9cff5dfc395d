// The CPU reference of moe_ffn v2 (memra/ops.h): routing by ref::moe_route_row, then
// each chosen expert's MLP over the rows routed to it through the CPU matmul on its slice
// of the stacked tensors (read in place), every row on the path a dense matmul of that row
// would take (its prompt flag), so a row's result never depends on which other rows share
// its experts; then the weighted sum in selection order and the gated shared expert.
#include <string>
#include <vector>

#include "host/backend/cpu/cpu_backend.hpp"
#include "host/backend/moe_ffn_args.hpp"
#include "kernels/activation/gated_activation_ref.hpp"
#include "kernels/moe/moe_route_ref.hpp"

namespace memra::backend {

// One MLP (gate, up, down) over n rows xs [n][hidden] into down [n][hidden].
memra_status CpuBackend::moe_mlp(const float* xs, int64_t n, const memra_weight& wg, const memra_weight& wu, const memra_weight& wd,
                                 int32_t activation, const std::vector<uint8_t>& kinds, std::vector<float>& down) {
  const int64_t width = wg.shape[0], hidden = wd.shape[0];
  std::vector<float> gate(static_cast<size_t>(n * width)), up(gate.size()), act(gate.size());
  down.resize(static_cast<size_t>(n * hidden));
  if (const memra_status st = matmul_rows(xs, n, &wg, kinds, gate.data()); st != MEMRA_OK) return st;
  if (const memra_status st = matmul_rows(xs, n, &wu, kinds, up.data()); st != MEMRA_OK) return st;
  if (activation == MEMRA_ACTIVATION_SILU) ref::silu_mul(gate.data(), up.data(), n * width, act.data());
  else ref::gelu_tanh_mul(gate.data(), up.data(), n * width, act.data());
  return matmul_rows(act.data(), n, &wd, kinds, down.data());
}

memra_status CpuBackend::moe_ffn(const memra_op_args& a) {
  if (std::string e = moe_ffn_args_error(a); !e.empty()) return fail(MEMRA_ERR_INVALID_ARGUMENT, e);
  note_batch(a.batch);
  const auto& attrs = *static_cast<const memra_moe_ffn_attrs_v2*>(a.attrs);
  const int32_t experts = attrs.num_experts, k = attrs.top_k;
  const int64_t tokens = a.batch->num_tokens, hidden = tensor_last_dim(a.inputs[0]);
  const auto* x = static_cast<const float*>(a.inputs[0]->data);
  const auto* logits = static_cast<const float*>(a.inputs[1]->data);
  auto* y = static_cast<float*>(a.outputs[0]->data);
  const bool prompt_kinds = static_cast<int64_t>(prompt_flags_.size()) == tokens;

  std::vector<int32_t> chosen(static_cast<size_t>(tokens * k));
  std::vector<float> weight(static_cast<size_t>(tokens * k));
  for (int64_t t = 0; t < tokens; ++t)
    ref::moe_route_row(logits + t * experts, experts, k, attrs.normalize_top_k != 0, chosen.data() + t * k,
                       weight.data() + t * k);

  // outputs[t * k + i]: expert chosen[t * k + i]'s MLP of row t.
  std::vector<float> outputs(static_cast<size_t>(tokens * k * hidden));
  std::vector<float> xs, down;
  for (int32_t e = 0; e < experts; ++e) {
    std::vector<int64_t> slots;  // t * k + i for every (row, choice) that picked e
    for (int64_t s = 0; s < tokens * k; ++s)
      if (chosen[static_cast<size_t>(s)] == e) slots.push_back(s);
    if (slots.empty()) continue;
    const memra_weight wg = moe_expert_slice(*a.weights[0], e), wu = moe_expert_slice(*a.weights[1], e),
                       wd = moe_expert_slice(*a.weights[2], e);
    const auto n = static_cast<int64_t>(slots.size());
    xs.resize(static_cast<size_t>(n * hidden));
    std::vector<uint8_t> kinds;
    if (prompt_kinds) kinds.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      const int64_t t = slots[static_cast<size_t>(j)] / k;
      std::copy_n(x + t * hidden, hidden, xs.data() + j * hidden);
      if (!kinds.empty()) kinds[static_cast<size_t>(j)] = prompt_flags_[static_cast<size_t>(t)];
    }
    if (const memra_status st = moe_mlp(xs.data(), n, wg, wu, wd, attrs.activation, kinds, down); st != MEMRA_OK) return st;
    for (int64_t j = 0; j < n; ++j)
      std::copy_n(down.data() + j * hidden, hidden, outputs.data() + slots[static_cast<size_t>(j)] * hidden);
  }

  for (int64_t t = 0; t < tokens; ++t) {
    float* row = y + t * hidden;
    std::fill_n(row, hidden, 0.0f);
    for (int32_t i = 0; i < k; ++i) {
      const float w = weight[static_cast<size_t>(t * k + i)];
      const float* o = outputs.data() + (t * k + i) * hidden;
      for (int64_t c = 0; c < hidden; ++c) row[c] += w * o[c];
    }
  }
  if (!attrs.shared_expert) return MEMRA_OK;

  // The shared expert over every row, gated by sigmoid(gate_inp_shexp · x[t]).
  const std::vector<uint8_t> kinds = prompt_kinds ? prompt_flags_ : std::vector<uint8_t>{};
  std::vector<float> gate_logit(static_cast<size_t>(tokens));
  if (const memra_status st = moe_mlp(x, tokens, *a.weights[3], *a.weights[4], *a.weights[5], attrs.activation, kinds, down);
      st != MEMRA_OK)
    return st;
  const memra_weight gate = moe_shared_gate_matrix(*a.weights[6]);
  if (const memra_status st = matmul_rows(x, tokens, &gate, kinds, gate_logit.data()); st != MEMRA_OK) return st;
  for (int64_t t = 0; t < tokens; ++t) {
    const float g = ref::moe_shared_gate(gate_logit[static_cast<size_t>(t)]);
    float* row = y + t * hidden;
    const float* s = down.data() + t * hidden;
    for (int64_t c = 0; c < hidden; ++c) row[c] += g * s[c];
  }
  return MEMRA_OK;
}

}  // namespace memra::backend
