// The CPU reference of family-gemma's op (the oracle, and what the CPU backend runs), its
// argument checks and memra-kernel-check's cases.
#include "gemma_ops.hpp"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "family_plugin_support.hpp"
#include "gemma_math.h"

namespace memra::gemma {
namespace {

using family::guarded;
using family::report;

int64_t numel(const memra_tensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

}  // namespace

memra_status softcap_check(memra_plugin_ctx* ctx, const memra_op_args* args) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || !args->inputs[0] || !args->outputs[0])
    return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "gemma.softcap: takes one input, gives one output");
  const auto* at = static_cast<const SoftcapAttrsV1*>(args->attrs);
  if (!(at->cap > 0)) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "gemma.softcap: cap must be positive");
  if (numel(args->inputs[0]) != numel(args->outputs[0]))
    return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "gemma.softcap: the output must have the input's element count");
  return MEMRA_OK;
}

namespace {

memra_status softcap_cpu(memra_plugin_ctx* ctx, const memra_op_env*, const memra_op_args* args) {
  return guarded(ctx, [&]() -> memra_status {
    if (const memra_status st = softcap_check(ctx, args); st != MEMRA_OK) return st;
    const float cap = static_cast<const SoftcapAttrsV1*>(args->attrs)->cap;
    const auto* x = static_cast<const float*>(args->inputs[0]->data);
    auto* y = static_cast<float*>(args->outputs[0]->data);
    const int64_t n = numel(args->inputs[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = gemma_softcap(x[i], cap);
    return MEMRA_OK;
  });
}

// ---- memra-kernel-check's cases -----------------------------------------------------------

struct CaseData {
  std::vector<int32_t> positions, seq_index;
  std::vector<int64_t> in_shapes, out_shapes;
  std::vector<float> input;
  const float* in_ptr = nullptr;
  SoftcapAttrsV1 attrs{};
};

memra_status softcap_example(memra_plugin_ctx* ctx, int32_t index, memra_op_example* out) {
  return guarded(ctx, [&]() -> memra_status {
    if (!out) return MEMRA_ERR_INVALID_ARGUMENT;
    if (index < 0 || index > 1) return MEMRA_ERR_NOT_FOUND;
    auto c = std::make_shared<CaseData>();
    const int32_t rows = index == 0 ? 3 : 5;
    const int64_t cols = index == 0 ? 1024 : 333;
    c->attrs = {sizeof(SoftcapAttrsV1), index == 0 ? 30.0f : 5.0f};
    for (int32_t t = 0; t < rows; ++t) c->seq_index.push_back(0), c->positions.push_back(t);
    // Logits from far below to far above the cap (the tanh saturates both ways).
    uint32_t r = 2654435761u * static_cast<uint32_t>(index + 1);
    for (int64_t i = 0; i < rows * cols; ++i) {
      r = r * 1664525u + 1013904223u;
      c->input.push_back(-120.0f + 240.0f * (static_cast<float>(r >> 8) / 16777216.0f));
    }
    c->in_ptr = c->input.data();
    c->in_shapes = {rows, cols};
    c->out_shapes = {rows, cols};
    std::memset(out, 0, sizeof *out);
    out->struct_size = MEMRA_OP_EXAMPLE_STRUCT_SIZE;
    out->label = index == 0 ? "3 rows of 1024 logits, cap 30" : "5 rows of 333, cap 5";
    out->attrs = &c->attrs;
    out->attrs_size = sizeof(SoftcapAttrsV1);
    out->num_tokens = rows;
    out->num_seqs = 1;
    out->positions = c->positions.data();
    out->seq_index = c->seq_index.data();
    out->num_inputs = 1;
    out->input_shapes = c->in_shapes.data();
    out->inputs = &c->in_ptr;
    out->num_outputs = 1;
    out->output_shapes = c->out_shapes.data();
    out->tolerance = 2e-6f;  // tanh is each platform's own (gemma_math.h)
    std::lock_guard lock(ctx->mu);
    ctx->owned.push_back(std::move(c));
    return MEMRA_OK;
  });
}

const memra_op_def kOps[] = {
    {MEMRA_OP_DEF_STRUCT_SIZE, GEMMA_OP_SOFTCAP, 1u, sizeof(SoftcapAttrsV1), 0u,
     "tanh soft-cap: cap * tanh(x / cap), elementwise (the final logits)", softcap_cpu, prepare_cuda, softcap_cuda,
     softcap_example},
};

}  // namespace

std::span<const memra_op_def> op_defs() { return kOps; }

}  // namespace memra::gemma
