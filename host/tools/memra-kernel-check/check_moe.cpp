// moe_ffn v2 on the CUDA backend (host/backend/cuda/ops_moe.cpp, kernels/moe/moe_ffn.cu)
// against its CPU reference arithmetic: the routing by ref::moe_route_row (the one definition
// both run), each chosen expert's slice of the stacked [E][rows][cols] tensors exactly
// dequantised (the scheme's CPU dequantiser), the MLP in double, the weighted sum in selection
// order, the shared expert (f32) gated by sigmoid. Per scheme, top-k and expert count up to
// 512 and top-8, both ways of normalize, with and without a shared expert: nmse <= 1e-9
// (kMatmulBound; the routed path multiplies the exact f32 weights); then batch invariance,
// bitwise: each row computed alone is the row of the 40-row step, and a step graph's replay.
#include <cmath>
#include <cstring>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "kernels/embedding/embedding_ref.hpp"
#include "kernels/moe/moe_route_ref.hpp"
#include "memra/ops.h"

namespace memra::kcheck {
namespace {

struct MoeShape {
  int32_t experts, top_k;
  int64_t hidden, width, shared;  // shared 0: none
};

// Exact f32 values of a [rows][cols] weight (the embedding reference gathers every row).
std::vector<float> dequant(const std::string& s, const std::vector<uint8_t>& w, int64_t rows, int64_t cols) {
  const RefWeight rw = ref_weight(s, w, rows, cols);
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  if (!ref::embedding_rows(rw.type, rw.bytes.data(), cols, ids.data(), rows, 1.0f, out.data()))
    throw Failure("reference dequantisation refused " + s);
  return out;
}

// act(g . x) * (u . x) then down, in double.
std::vector<double> mlp(const float* g, const float* u, const float* d, int64_t width, int64_t hidden, const float* x) {
  std::vector<double> a(static_cast<size_t>(width)), y(static_cast<size_t>(hidden), 0.0);
  for (int64_t r = 0; r < width; ++r) {
    double gs = 0, us = 0;
    for (int64_t c = 0; c < hidden; ++c) gs += double(g[r * hidden + c]) * x[c], us += double(u[r * hidden + c]) * x[c];
    a[static_cast<size_t>(r)] = gs / (1.0 + std::exp(-gs)) * us;
  }
  for (int64_t h = 0; h < hidden; ++h)
    for (int64_t r = 0; r < width; ++r) y[static_cast<size_t>(h)] += double(d[h * width + r]) * a[static_cast<size_t>(r)];
  return y;
}

}  // namespace

void check_moe(Device& d, Report& r, const CheckOptions& o) {
  Rng rng(o.seed ^ 0x6d6f65);
  auto n = [&](Rng& g) { return g.normal(); };
  const std::vector<MoeShape> shapes = o.quick ? std::vector<MoeShape>{{8, 2, 256, 256, 0}, {16, 4, 256, 256, 256}}
                                               : std::vector<MoeShape>{{8, 2, 256, 256, 0},
                                                                       {16, 4, 512, 256, 256},
                                                                       {128, 8, 256, 256, 0},
                                                                       {512, 8, 128, 128, 256}};
  for (const char* scheme : {"f32", "bf16", "q8_0", "q4_k", "q6_k", "iq4_xs"})
    for (const MoeShape& sh : shapes)
      for (bool normalize : {false, true}) {
        const std::string s = scheme;
        const std::string name = "moe_ffn " + s + " E=" + std::to_string(sh.experts) + " top" + std::to_string(sh.top_k) + " " +
                                 std::to_string(sh.hidden) + "x" + std::to_string(sh.width) + (sh.shared ? " +shared" : "") +
                                 (normalize ? " norm" : "");
        r.guard(name, [&] {
          d.begin_step();
          const int64_t E = sh.experts, H = sh.hidden, W = sh.width, S = sh.shared;
          std::vector<uint8_t> gb = random_weight(rng, s, E * W, H, "random"), ub = random_weight(rng, s, E * W, H, "random"),
                               db = random_weight(rng, s, E * H, W, "random");
          const std::vector<float> gf = dequant(s, gb, E * W, H), uf = dequant(s, ub, E * W, H), df = dequant(s, db, E * H, W);
          std::vector<const memra_weight*> ws = {d.weight("gate_exps", s, dtype_of(s), {E, W, H}, gb),
                                                 d.weight("up_exps", s, dtype_of(s), {E, W, H}, ub),
                                                 d.weight("down_exps", s, dtype_of(s), {E, H, W}, db)};
          std::vector<float> sg, su, sd, gi;
          if (S) {
            for (auto* v : {&sg, &su, &sd}) {
              v->resize(static_cast<size_t>(S * H));
              for (float& x : *v) x = 0.05f * n(rng);
            }
            gi.resize(static_cast<size_t>(H));
            for (float& x : gi) x = 0.1f * n(rng);
            auto bytes = [](const std::vector<float>& v) {
              return std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), reinterpret_cast<const uint8_t*>(v.data() + v.size()));
            };
            ws.push_back(d.weight("gate_shexp", "f32", MEMRA_DTYPE_F32, {S, H}, bytes(sg)));
            ws.push_back(d.weight("up_shexp", "f32", MEMRA_DTYPE_F32, {S, H}, bytes(su)));
            ws.push_back(d.weight("down_shexp", "f32", MEMRA_DTYPE_F32, {H, S}, bytes(sd)));
            ws.push_back(d.weight("gate_inp_shexp", "f32", MEMRA_DTYPE_F32, {H}, bytes(gi)));  // llama.cpp's [hidden] vector
          }
          const memra_backend_ops& ops = d.ops();
          const memra_op* op = nullptr;
          d.check(ops.op_find(d.ctx(), MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V2, &op), "op_find moe_ffn v2");
          const memra_moe_ffn_attrs_v2 attrs{MEMRA_MOE_FFN_ATTRS_V2_STRUCT_SIZE, sh.experts, sh.top_k, normalize ? 1 : 0, MEMRA_ACTIVATION_SILU,
                                             S ? 1 : 0};
          constexpr int32_t kTokens = 40;
          std::vector<float> x(static_cast<size_t>(kTokens * H)), logits(static_cast<size_t>(kTokens * E));
          for (float& v : x) v = n(rng);
          for (float& v : logits) v = 2.0f * n(rng);
          for (int64_t e = 0; e < E; ++e) logits[static_cast<size_t>(7 * E + e)] = 0.5f;  // a row of ties
          // The step over rows [first, first + m).
          auto run = [&](int32_t first, int32_t m) {
            d.begin_step();
            std::vector<int32_t> ids(static_cast<size_t>(m), 1), pos(static_cast<size_t>(m), 0), seq(static_cast<size_t>(m), 0), tables = {0};
            int32_t seq_len = m;
            memra_forward_batch b{};
            b.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
            b.num_tokens = m;
            b.token_ids = ids.data();
            b.positions = pos.data();
            b.seq_index = seq.data();
            b.num_seqs = 1;
            b.seq_lens = &seq_len;
            b.block_tables = tables.data();
            b.max_blocks_per_seq = 1;
            memra_tensor tx = d.upload(std::vector<float>(x.begin() + first * H, x.begin() + (first + m) * H), {m, H});
            memra_tensor tl = d.upload(std::vector<float>(logits.begin() + first * E, logits.begin() + (first + m) * E), {m, E});
            memra_tensor ty = d.upload(std::vector<float>(static_cast<size_t>(m * H), NAN), {m, H});
            const memra_tensor* in[2] = {&tx, &tl};
            memra_tensor* out[1] = {&ty};
            memra_op_args a{};
            a.struct_size = MEMRA_OP_ARGS_STRUCT_SIZE;
            a.layer = 0;
            a.attrs_version = MEMRA_OP_MOE_FFN_V2;
            a.attrs = &attrs;
            a.attrs_size = sizeof(attrs);
            a.num_inputs = 2, a.inputs = in, a.num_outputs = 1, a.outputs = out;
            a.num_weights = static_cast<int32_t>(ws.size()), a.weights = ws.data();
            a.batch = &b;
            d.check(ops.op_run(d.ctx(), op, &a), "moe_ffn");
            return d.download(ty);
          };
          const std::vector<float> all = run(0, kTokens);
          std::vector<float> ref(all.size());
          for (int32_t t = 0; t < kTokens; ++t) {
            const float* xr = x.data() + t * H;
            int32_t chosen[8];
            float w[8];
            ref::moe_route_row(logits.data() + t * E, sh.experts, sh.top_k, normalize, chosen, w);
            std::vector<double> y(static_cast<size_t>(H), 0.0);
            for (int32_t i = 0; i < sh.top_k; ++i) {
              const int64_t e = chosen[i];
              const auto oe = mlp(gf.data() + e * W * H, uf.data() + e * W * H, df.data() + e * H * W, W, H, xr);
              for (int64_t h = 0; h < H; ++h) y[static_cast<size_t>(h)] += double(w[i]) * oe[static_cast<size_t>(h)];
            }
            if (S) {
              double g = 0;
              for (int64_t c = 0; c < H; ++c) g += double(gi[static_cast<size_t>(c)]) * xr[c];
              const auto so = mlp(sg.data(), su.data(), sd.data(), S, H, xr);
              for (int64_t h = 0; h < H; ++h) y[static_cast<size_t>(h)] += so[static_cast<size_t>(h)] / (1.0 + std::exp(-g));
            }
            for (int64_t h = 0; h < H; ++h) ref[static_cast<size_t>(t * H + h)] = static_cast<float>(y[static_cast<size_t>(h)]);
          }
          const Comparison c = compare(all, ref);
          // Batch invariance: rows alone (decode steps) and a 5-row step, bitwise the 40-row step.
          bool invariant = true;
          for (int32_t t : {0, 7, 19, 39}) {
            const std::vector<float> one = run(t, 1);
            invariant = invariant && std::memcmp(one.data(), all.data() + t * H, static_cast<size_t>(H) * 4) == 0;
          }
          const std::vector<float> five = run(11, 5);
          invariant = invariant && std::memcmp(five.data(), all.data() + 11 * H, static_cast<size_t>(5 * H) * 4) == 0;
          r.add(name, c.nmse <= kMatmulBound && c.nonfinite_mismatch == 0 && invariant,
                "nmse " + fmt(c.nmse) + " (bound " + fmt(kMatmulBound) + "), rows alone and in 5 == in 40: " + (invariant ? "bitwise" : "DIFFER"));
        });
      }
}

}  // namespace memra::kcheck
