// moe_ffn v2 on the CUDA backend: routed experts only, routing on the device, fixed launch
// shapes (kernels/moe/moe_ffn.cu). Per layer:
//   - memra_moe_route: every row's top-k experts and weights (moe_route.cuh, bitwise the CPU
//     reference's choice and weights);
//   - gate and up (then down over the activation) for the step's tokens * top_k (row, choice)
//     slots: memra_moe_plan groups the slots by expert, and the scheme's routed GEMV
//     (memra_moe_gemv_<s>, kernels/matmul/scheme_entries.cuh) takes a warp per row of each
//     expert the step uses, dequantised in registers once for all the slots that chose it,
//     or, for a scheme module without one, in chunks of at most kSlotChunk slots and tiles of
//     weight rows: the rows gathered by the scheme's embedding gather (exact f32) and dotted by
//     memra_moe_tile_dot (a fixed order per output); the activation by gated_activation;
//   - memra_moe_combine: each row's weighted sum in selection order, plus the sigmoid-gated
//     shared expert, whose MLP runs through the backend's own matmuls over every row.
// The launches depend on the step's row count and the shapes only, never on the routing, so a
// decode step stays one captured graph (the grid covers min(experts, slots) groups; groups the
// routing leaves empty exit at once); each distinct routed expert is read once per step. A
// slot's result depends on its row and expert alone (batch invariant). Next for speed: a
// tensor-core GEMM for the groups of prompt steps, and the routed GEMV named in
// memra_matmul_kernels instead of found by the embedding entry's name.
#include <algorithm>
#include <string>
#include <string_view>

#include "host/backend/cuda/cuda_backend.hpp"
#include "host/backend/moe_ffn_args.hpp"
#include "kernels/moe/moe_route.cuh"
#include "memra/ops.h"

namespace memra::backend::cuda {
namespace {

static_assert(memra::moe::kMaxTopK == MEMRA_MOE_FFN_MAX_TOP_K);

constexpr int64_t kSlotChunk = 64;             // slots per chunk
constexpr int64_t kTileFloats = int64_t{8} << 20;  // a gathered tile: at most 32 MiB of f32
constexpr unsigned kWarpsPerBlock = 8;

CUdeviceptr dev(const memra_tensor& t) { return reinterpret_cast<CUdeviceptr>(t.data); }

// The routed GEMV beside a scheme's embedding gather ("memra_embedding_<s>" ->
// "memra_moe_gemv_<s>", both defined by kernels/matmul/scheme_entries.cuh's
// MEMRA_DEFINE_EMBEDDING); "" for an entry of another name.
std::string moe_gemv_entry(const std::string& embedding) {
  constexpr std::string_view kPrefix = "memra_embedding_";
  if (embedding.compare(0, kPrefix.size(), kPrefix) != 0) return "";
  return "memra_moe_gemv_" + embedding.substr(kPrefix.size());
}

// Whether every stacked matrix has the routed GEMV (then one chunk holds every slot: no tiles).
bool all_fused(CudaBackend& b, const memra_op_args& a) {
  for (int i = 0; i < 3; ++i)
    if (!b.moe_has_gemv(*a.weights[i])) return false;
  return true;
}

}  // namespace

// One stacked matrix over a chunk of slots: out[(out_base + j) * out_stride + r] =
// expert(slot0 + j)'s row r . in[(in_base + j) / in_div], for every row r of the expert.
memra_status CudaBackend::moe_stacked_rows(const memra_weight& stacked, const memra_tensor& routes, int32_t top_k, int32_t slot0,
                                           int32_t nslots, const memra_tensor& in, int32_t in_base, int32_t in_div, memra_tensor& out,
                                           int64_t out_stride, int32_t out_base, const memra_tensor& tile, const memra_tensor& ids,
                                           int64_t tile_rows) {
  memra_status st = MEMRA_OK;
  const CUdeviceptr wd = resolve(&stacked, &st);
  if (st != MEMRA_OK) return st;
  const memra_weight slice = moe_expert_slice(stacked, 0);
  auto s = scheme(&slice);
  if (!s) return fail(s.error());
  if (!s->dev || s->embedding.empty())
    return fail(MEMRA_ERR_UNSUPPORTED, std::string("moe_ffn: ") + (stacked.name ? stacked.name : "?") + ": " + s->entry->provider +
                                           " registers no row gather (embedding entry) for scheme '" + s->scheme +
                                           "' on this device, which stacked experts need");
  const int64_t rows = slice.shape[0], cols = slice.shape[1];
  const int64_t row_bytes = static_cast<int64_t>(s->row_bytes);
  for (int64_t row0 = 0; row0 < rows; row0 += tile_rows) {
    const int32_t nrows = static_cast<int32_t>(std::min(tile_rows, rows - row0));
    const int64_t n = static_cast<int64_t>(nslots) * nrows;
    if (st = launch("moe", "memra_moe_tile_ids", static_cast<unsigned>((n + 255) / 256), 1, 256, 0, dev(routes), top_k, slot0, nslots,
                    rows, row0, nrows, dev(ids));
        st != MEMRA_OK)
      return st;
    if (st = launch_in(s->module, s->embedding, static_cast<unsigned>(n), 1, 256, 0, wd, row_bytes, cols, dev(ids), 1.0f, dev(tile));
        st != MEMRA_OK)
      return st;
    if (st = launch("moe", "memra_moe_tile_dot", static_cast<unsigned>((n + kWarpsPerBlock - 1) / kWarpsPerBlock), 1, 32 * kWarpsPerBlock, 0,
                    dev(tile), dev(in), cols, in_base, in_div, nslots, nrows, dev(out), out_stride, out_base, row0);
        st != MEMRA_OK)
      return st;
  }
  return MEMRA_OK;
}

// One stacked matrix through the scheme's routed GEMV, every slot at once, grouped by expert
// (plan: n_active, active[groups], start[groups + 1], order[slots]): out[s * out_stride + r] =
// row r of s's expert . in[s / in_div].
memra_status CudaBackend::moe_grouped_rows(const memra_weight& stacked, const memra_tensor& plan, int32_t groups, const memra_tensor& in,
                                           int32_t in_div, memra_tensor& out, int64_t out_stride) {
  memra_status st = MEMRA_OK;
  const CUdeviceptr wd = resolve(&stacked, &st);
  if (st != MEMRA_OK) return st;
  const memra_weight slice = moe_expert_slice(stacked, 0);
  auto s = scheme(&slice);
  if (!s) return fail(s.error());
  const int64_t rows = slice.shape[0], cols = slice.shape[1];
  const CUdeviceptr p = reinterpret_cast<CUdeviceptr>(plan.data);
  const CUdeviceptr n_active = p, active = p + 4, start = active + 4 * static_cast<CUdeviceptr>(groups),
                    order = start + 4 * static_cast<CUdeviceptr>(groups + 1);
  const int64_t n = static_cast<int64_t>(groups) * rows;
  return launch_in(s->module, moe_gemv_entry(s->embedding), static_cast<unsigned>((n + kWarpsPerBlock - 1) / kWarpsPerBlock), 1,
                   32 * kWarpsPerBlock, 0, wd, static_cast<int64_t>(slice.bytes), static_cast<int64_t>(s->row_bytes), cols, n_active, active,
                   start, order, groups, rows, dev(in), in_div, dev(out), out_stride);
}

bool CudaBackend::moe_has_gemv(const memra_weight& stacked) {
  const memra_weight slice = moe_expert_slice(stacked, 0);
  auto s = scheme(&slice);
  if (!s || !s->dev) return false;
  const std::string fused = moe_gemv_entry(s->embedding);
  return !fused.empty() && static_cast<bool>(modules_->get(s->module, fused));
}

memra_status CudaBackend::moe_ffn(const memra_op_args& a) {
  if (std::string e = moe_ffn_args_error(a); !e.empty()) return fail(MEMRA_ERR_INVALID_ARGUMENT, e);
  const auto& attrs = *static_cast<const memra_moe_ffn_attrs_v2*>(a.attrs);
  const int32_t experts = attrs.num_experts, k = attrs.top_k;
  const memra_tensor* x = a.inputs[0];
  const memra_tensor* logits = a.inputs[1];
  memra_tensor* y = a.outputs[0];
  const int32_t tokens = a.batch->num_tokens;
  const int64_t hidden = tensor_last_dim(x), width = a.weights[0]->shape[1];
  const int64_t slots = static_cast<int64_t>(tokens) * k;
  const bool fused = all_fused(*this, a);  // the schemes' routed GEMVs: every slot at once, no tiles
  const int64_t chunk = fused ? slots : std::min<int64_t>(slots, kSlotChunk);
  const int64_t widest = std::max(hidden, width);
  const int64_t tile_rows = fused ? 1 : std::max<int64_t>(1, std::min(widest, kTileFloats / (chunk * widest)));
  const int32_t groups = static_cast<int32_t>(std::min<int64_t>(experts, slots));  // the most experts a step can use

  memra_tensor routes, o, g, u, act, tile, ids;
  const int64_t route_shape[2] = {tokens, 2 * static_cast<int64_t>(k)}, o_shape[2] = {slots, hidden}, w_shape[2] = {chunk, width},
                tile_shape[2] = {fused ? 1 : chunk * tile_rows, widest},
                ids_shape[1] = {fused ? 2 + 2 * static_cast<int64_t>(groups) + slots : chunk * tile_rows};
  for (auto [shape, ndim, t] : {std::tuple{route_shape, 2, &routes}, std::tuple{o_shape, 2, &o}, std::tuple{w_shape, 2, &g},
                                std::tuple{w_shape, 2, &u}, std::tuple{w_shape, 2, &act}, std::tuple{tile_shape, 2, &tile},
                                std::tuple{ids_shape, 1, &ids}})
    if (const memra_status st = tensor_create(ndim, shape, t); st != MEMRA_OK) return st;

  if (const memra_status st = launch("moe", "memra_moe_route", static_cast<unsigned>((tokens + 3) / 4), 1, 128, 0, dev(*logits), tokens,
                                     experts, k, attrs.normalize_top_k, dev(routes));
      st != MEMRA_OK)
    return st;
  if (fused) {
    // The slots grouped by expert (ids holds the plan), then gate, up, the activation and down:
    // each distinct expert of the step read once per matrix.
    const CUdeviceptr p = dev(ids);
    memra_status st = launch("moe", "memra_moe_plan", 1, 1, 1024, 0, dev(routes), k, static_cast<int32_t>(slots), experts, p, p + 4,
                             p + 4 + 4 * static_cast<CUdeviceptr>(groups), p + 4 + 4 * static_cast<CUdeviceptr>(2 * groups + 1));
    if (st == MEMRA_OK) st = moe_grouped_rows(*a.weights[0], ids, groups, *x, k, g, width);
    if (st == MEMRA_OK) st = moe_grouped_rows(*a.weights[1], ids, groups, *x, k, u, width);
    if (st == MEMRA_OK) st = gated_activation(attrs.activation, &g, &u, &act);
    if (st == MEMRA_OK) st = moe_grouped_rows(*a.weights[2], ids, groups, act, 1, o, hidden);
    if (st != MEMRA_OK) return st;
  } else {
    for (int64_t slot0 = 0; slot0 < slots; slot0 += chunk) {
      const int32_t n = static_cast<int32_t>(std::min(chunk, slots - slot0)), s0 = static_cast<int32_t>(slot0);
      memra_tensor gv = g, uv = u, av = act;  // views of this chunk's rows
      gv.shape[0] = uv.shape[0] = av.shape[0] = n;
      memra_status st = moe_stacked_rows(*a.weights[0], routes, k, s0, n, *x, s0, k, g, width, 0, tile, ids, tile_rows);
      if (st == MEMRA_OK) st = moe_stacked_rows(*a.weights[1], routes, k, s0, n, *x, s0, k, u, width, 0, tile, ids, tile_rows);
      if (st == MEMRA_OK) st = gated_activation(attrs.activation, &gv, &uv, &av);
      if (st == MEMRA_OK) st = moe_stacked_rows(*a.weights[2], routes, k, s0, n, act, 0, 1, o, hidden, s0, tile, ids, tile_rows);
      if (st != MEMRA_OK) return st;
    }
  }

  CUdeviceptr shared_out = 0, shared_gate = 0;
  if (attrs.shared_expert) {
    const int64_t sw = a.weights[3]->shape[0];
    memra_tensor sg, su, sa, sd, gl;
    const int64_t s_shape[2] = {tokens, sw}, d_shape[2] = {tokens, hidden}, g_shape[2] = {tokens, 1};
    for (auto [shape, t] : {std::pair{s_shape, &sg}, std::pair{s_shape, &su}, std::pair{s_shape, &sa}, std::pair{d_shape, &sd},
                            std::pair{g_shape, &gl}})
      if (const memra_status st = tensor_create(2, shape, t); st != MEMRA_OK) return st;
    const memra_weight gate = moe_shared_gate_matrix(*a.weights[6]);
    memra_status st = matmul(x, a.weights[3], nullptr, &sg);
    if (st == MEMRA_OK) st = matmul(x, a.weights[4], nullptr, &su);
    if (st == MEMRA_OK) st = gated_activation(attrs.activation, &sg, &su, &sa);
    if (st == MEMRA_OK) st = matmul(&sa, a.weights[5], nullptr, &sd);
    if (st == MEMRA_OK) st = matmul(x, &gate, nullptr, &gl);
    if (st != MEMRA_OK) return st;
    shared_out = dev(sd), shared_gate = dev(gl);
  }
  return launch("moe", "memra_moe_combine", static_cast<unsigned>(tokens), 1, 256, 0, dev(o), dev(routes), k,
                static_cast<int32_t>(hidden), shared_out, shared_gate, dev(*y));
}

}  // namespace memra::backend::cuda
