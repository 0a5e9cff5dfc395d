// The fused decode path of the CUDA backend (ops_basic.cpp, ops_matmul.cpp): add_rms_norm
// and the gated activations also write their output as int8x32 rows, and matmuls over the
// same rows that follow each other (q/k/v, gate/up) share one GEMV launch. Held bitwise:
// every matmul's output == int8_matmul_ref of the producer's own (downloaded) output,
// i.e. the fused codes are exactly ref::quantize_act_q8's, and a merged launch computes
// each matrix's rows as its own launch would. The backend's counters show that both
// paths ran (merging needs step recording, the default). The path is on by default
// (BackendOptions::fuse_decode; MEMRA_CUDA_FUSE=0 turns it off), else the check opens a
// backend with it. fp8 weights: the producers write the fp8 GEMV's prepared rows instead;
// every output bitwise what the matmul computes alone over the same values (prepared by
// memra_prepare_act_fp8_rows, its own launch), and within the matmul bound of the CPU
// reference. bf16 weights (no prepared activations) merge their launches too: held
// bitwise against each matmul run alone.
#include <algorithm>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "host/tools/memra-kernel-check/int8_gemv_util.hpp"
#include "kernels/matmul/matmul_ref.hpp"

namespace memra::kcheck {
namespace {

// m rows of dim floats in their own buffer, filled before the step: an upload inside the
// step would end its recording (and so the merging).
memra_tensor rows_tensor(i8::DevBuf& b, const std::vector<float>& v, int64_t m, int64_t dim) {
  b.put(v.data(), v.size() * 4);
  memra_tensor t{};
  t.struct_size = MEMRA_TENSOR_STRUCT_SIZE;
  t.dtype = MEMRA_DTYPE_F32;
  t.ndim = 2;
  t.shape[0] = m;
  t.shape[1] = dim;
  t.data = b.ptr();
  return t;
}

memra_tensor random_rows(Rng& rng, i8::DevBuf& b, int64_t m, int64_t dim) {
  return rows_tensor(b, rng.floats(static_cast<size_t>(m * dim)), m, dim);
}

// One decode layer on random weights of `scheme`, its producers and matmuls in one step:
// add_rms_norm -> q, k, v (+bias); add_rms_norm -> gate, up; the gated activation -> down.
// The inputs go into `in` (three buffers of m * dim floats, alive until the downloads).
struct FusedLayer {
  struct W {
    int64_t rows, cols;
    std::vector<uint8_t> bytes;
    const memra_weight* w;
  };
  W wq, wk, wv, wg, wu, wd;
  std::vector<float> bq, bv;
  const memra_weight *bqw = nullptr, *bvw = nullptr;
  memra_tensor h1{}, h2{}, q{}, k{}, v{}, g{}, u{}, a{}, dn{};
  backend::BackendStats before, after;
};

FusedLayer run_fused_layer(Device& d, Rng& rng, const std::string& scheme, int64_t m, int act, int64_t dim, int64_t ffn,
                           int64_t nq, int64_t nkv, int64_t ndown, i8::DevBuf (&in)[3]) {
  FusedLayer L;
  auto make = [&](const char* n, int64_t rows, int64_t cols) {
    FusedLayer::W w{rows, cols, random_weight(rng, scheme, rows, cols, "random"), nullptr};
    w.w = d.weight(n, scheme, dtype_of(scheme), {rows, cols}, w.bytes);
    return w;
  };
  L.wq = make("wq", nq, dim), L.wk = make("wk", nkv, dim), L.wv = make("wv", nkv, dim);
  L.wg = make("wg", ffn, dim), L.wu = make("wu", ffn, dim), L.wd = make("wd", ndown, ffn);
  L.bq = rng.floats(static_cast<size_t>(nq)), L.bv = rng.floats(static_cast<size_t>(nkv));
  L.bqw = d.f32_weight("bq", L.bq);
  L.bvw = d.f32_weight("bv", L.bv);
  const memra_weight* n1 = d.f32_weight("n1", rng.floats(static_cast<size_t>(dim)));
  const memra_weight* n2 = d.f32_weight("n2", rng.floats(static_cast<size_t>(dim)));
  const memra_tensor x1 = random_rows(rng, in[0], m, dim), x2 = random_rows(rng, in[1], m, dim);
  memra_tensor res = random_rows(rng, in[2], m, dim);
  d.begin_step();
  L.before = d.backend().stats();
  L.h1 = d.tensor({m, dim}), L.h2 = d.tensor({m, dim});
  L.q = d.tensor({m, nq}), L.k = d.tensor({m, nkv}), L.v = d.tensor({m, nkv});
  L.g = d.tensor({m, ffn}), L.u = d.tensor({m, ffn}), L.a = d.tensor({m, ffn}), L.dn = d.tensor({m, ndown});
  d.check(d.ops().add_rms_norm(d.ctx(), &x1, &res, n1, 1e-6f, 0.0f, &L.h1), "add_rms_norm");
  d.check(d.ops().matmul(d.ctx(), &L.h1, L.wq.w, L.bqw, &L.q), "matmul q");
  d.check(d.ops().matmul(d.ctx(), &L.h1, L.wk.w, nullptr, &L.k), "matmul k");
  d.check(d.ops().matmul(d.ctx(), &L.h1, L.wv.w, L.bvw, &L.v), "matmul v");
  d.check(d.ops().add_rms_norm(d.ctx(), &x2, &res, n2, 1e-6f, 0.0f, &L.h2), "add_rms_norm");
  d.check(d.ops().matmul(d.ctx(), &L.h2, L.wg.w, nullptr, &L.g), "matmul gate");
  d.check(d.ops().matmul(d.ctx(), &L.h2, L.wu.w, nullptr, &L.u), "matmul up");
  d.check(d.ops().gated_activation(d.ctx(), static_cast<memra_activation>(act), &L.g, &L.u, &L.a), "gated_activation");
  d.check(d.ops().matmul(d.ctx(), &L.a, L.wd.w, nullptr, &L.dn), "matmul down");
  L.after = d.backend().stats();
  return L;
}

// fp8 weights on a backend of their own: the format a producer writes follows the weights
// the backend holds (int8x32 first), and the integer checks' weights are on the other one.
void check_fusion_fp8(Device& dev, Report& r, Rng& rng, int64_t dim, int64_t ffn, int64_t nq, int64_t nkv, int64_t ndown) {
  const std::vector<int64_t> ms = {1, 2, 5, 16, 40};
  auto name_of = [](int64_t m, int act) {
    return "fused decode fp8 M=" + std::to_string(m) + " add_rms_norm->q,k,v (+bias) and ->gate,up; " +
           (act == MEMRA_ACTIVATION_SILU ? "silu_mul" : "gelu_tanh_mul") + "->down";
  };
  bool any = false;
  for (int64_t m : ms) any = any || r.wants(name_of(m, MEMRA_ACTIVATION_SILU)) || (m == 5 && r.wants(name_of(m, MEMRA_ACTIVATION_GELU_TANH)));
  if (!any) return;
  std::unique_ptr<Device> own;
  try {
    own = dev.reopen([](backend::BackendOptions& b) { b.fuse_decode = true; });
  } catch (const Failure& e) {
    r.add("fused decode fp8: open a backend with fuse_decode", false, e.what());
    return;
  }
  Device& d = *own;
  for (int64_t m : ms) {
    for (int act : {MEMRA_ACTIVATION_SILU, MEMRA_ACTIVATION_GELU_TANH}) {
      if (act == MEMRA_ACTIVATION_GELU_TANH && m != 5) continue;
      const std::string name = name_of(m, act);
      if (!r.wants(name)) continue;
      r.guard(name, [&] {
        const uint64_t xb = static_cast<uint64_t>(m * dim) * 4;
        i8::DevBuf in[3] = {i8::DevBuf(d, xb), i8::DevBuf(d, xb), i8::DevBuf(d, xb)};
        const FusedLayer L = run_fused_layer(d, rng, "fp8", m, act, dim, ffn, nq, nkv, ndown, in);
        using W = FusedLayer::W;
        const auto &wq = L.wq, &wk = L.wk, &wv = L.wv, &wg = L.wg, &wu = L.wu, &wd = L.wd;
        const auto &bq = L.bq, &bv = L.bv;
        const memra_weight *bqw = L.bqw, *bvw = L.bvw;
        const auto &h1 = L.h1, &h2 = L.h2, &q = L.q, &k = L.k, &v = L.v, &g = L.g, &u = L.u, &a = L.a, &dn = L.dn;
        const backend::BackendStats &before = L.before, &after = L.after;

        // Everything downloaded before the steps below reuse the step scratch.
        const std::vector<float> h1v = d.download(h1), h2v = d.download(h2), av = d.download(a);
        const std::vector<float> qv = d.download(q), kv = d.download(k), vv = d.download(v), gv = d.download(g), uv = d.download(u),
                                 dv = d.download(dn);
        std::string bad;
        double worst = 0;
        // Alone: the producer's values in a buffer of their own, one matmul in a step of
        // its own (no producer: the standalone preparation; nothing to merge with).
        auto expect = [&](const char* what, const W& w, const std::vector<float>& x, const memra_weight* bias_w, const float* bias,
                          const std::vector<float>& fused) {
          i8::DevBuf xbuf(d, x.size() * 4);
          const memra_tensor xt = rows_tensor(xbuf, x, m, w.cols);
          d.begin_step();
          memra_tensor alone = d.tensor({m, w.rows});
          d.check(d.ops().matmul(d.ctx(), &xt, w.w, bias_w, &alone), "matmul alone");
          const Comparison c = compare(fused, d.download(alone));
          if (!c.bitwise) bad += std::string(bad.empty() ? "" : ", ") + what + " != alone (nmse " + fmt(c.nmse) + ")";
          std::vector<float> ref(static_cast<size_t>(m * w.rows));
          const RefWeight rw = ref_weight("fp8", w.bytes, w.rows, w.cols);
          const std::vector<float> xe = ref::bf16_rounded(x.data(), static_cast<int64_t>(x.size()));
          if (!ref::matmul_rows(rw.type, rw.bytes.data(), w.rows, w.cols, xe.data(), m, bias, ref.data())) throw Failure("reference refused the shape");
          const Comparison e = compare(fused, ref);
          worst = std::max(worst, e.nmse);
          if (e.nonfinite_mismatch || e.nmse > kMatmulBound) bad += std::string(bad.empty() ? "" : ", ") + what + " nmse " + fmt(e.nmse) + " vs reference";
        };
        expect("q", wq, h1v, bqw, bq.data(), qv);
        expect("k", wk, h1v, nullptr, nullptr, kv);
        expect("v", wv, h1v, bvw, bv.data(), vv);
        expect("gate", wg, h2v, nullptr, nullptr, gv);
        expect("up", wu, h2v, nullptr, nullptr, uv);
        expect("down", wd, av, nullptr, nullptr, dv);
        const int64_t fused = after.fused_act_quantisations - before.fused_act_quantisations;
        const int64_t merged = after.merged_gemv_launches - before.merged_gemv_launches;
        const bool graphs = d.options().step_graphs && !d.options().sync_each_op;
        const bool counts = fused == 3 && merged == (graphs ? 3 : 0);
        r.add(name, bad.empty() && counts,
              (bad.empty() ? "6 matmuls bitwise == each alone (standalone preparation), nmse <= " + fmt(worst) + " vs reference" : bad) +
                  "; fused " + std::to_string(fused) + "/3, merged " + std::to_string(merged) + "/" + (graphs ? "3" : "0"));
      });
    }
  }
}

}  // namespace

void check_decode_fusion(Device& dev, Report& r, const CheckOptions& o) {
  Rng rng(o.seed ^ 0xf05edull);
  // The fused path is a backend setting (BackendOptions::fuse_decode, on by default):
  // checked on a second backend with it on when this one has it off.
  std::unique_ptr<Device> fused;
  if (!dev.options().fuse_decode) {
    const std::string name = "fused decode: open a backend with fuse_decode";
    try {
      fused = dev.reopen([](backend::BackendOptions& b) { b.fuse_decode = true; });
    } catch (const Failure& e) {
      r.add(name, false, e.what());
      return;
    }
  }
  Device& d = fused ? *fused : dev;
  const int64_t dim = 1024, ffn = 1536, nq = 160, nkv = 64, ndown = 96;
  for (const char* sch : {"q8_0", "q4_0", "q4_k"}) {
    const std::string s = sch;
    for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{16}, int64_t{40}}) {
      for (int act : {MEMRA_ACTIVATION_SILU, MEMRA_ACTIVATION_GELU_TANH}) {
        if (act == MEMRA_ACTIVATION_GELU_TANH && m != 5) continue;
        const std::string name = "fused decode " + s + " M=" + std::to_string(m) + " add_rms_norm->q,k,v (+bias) and ->gate,up; " +
                                 (act == MEMRA_ACTIVATION_SILU ? "silu_mul" : "gelu_tanh_mul") + "->down";
        if (!r.wants(name)) continue;
        r.guard(name, [&] {
          const uint64_t xb = static_cast<uint64_t>(m * dim) * 4;
          i8::DevBuf in[3] = {i8::DevBuf(d, xb), i8::DevBuf(d, xb), i8::DevBuf(d, xb)};
          const FusedLayer L = run_fused_layer(d, rng, s, m, act, dim, ffn, nq, nkv, ndown, in);
          using W = FusedLayer::W;
          const auto &wq = L.wq, &wk = L.wk, &wv = L.wv, &wg = L.wg, &wu = L.wu, &wd = L.wd;
          const auto &bq = L.bq, &bv = L.bv;
          const auto &h1 = L.h1, &h2 = L.h2, &q = L.q, &k = L.k, &v = L.v, &g = L.g, &u = L.u, &a = L.a, &dn = L.dn;
          const backend::BackendStats &before = L.before, &after = L.after;

          const std::vector<float> h1v = d.download(h1), h2v = d.download(h2), av = d.download(a);
          std::string bad;
          auto expect = [&](const char* what, const W& w, const std::vector<float>& x, const float* bias, const memra_tensor& y) {
            std::vector<float> ref(static_cast<size_t>(m * w.rows));
            if (!int8_matmul_ref(s, w.bytes, w.rows, w.cols, x, m, bias, ref.data())) throw Failure("reference refused the shape");
            const Comparison c = compare(d.download(y), ref);
            if (!c.bitwise) bad += std::string(bad.empty() ? "" : ", ") + what + " differs (nmse " + fmt(c.nmse) + ")";
          };
          expect("q", wq, h1v, bq.data(), q);
          expect("k", wk, h1v, nullptr, k);
          expect("v", wv, h1v, bv.data(), v);
          expect("gate", wg, h2v, nullptr, g);
          expect("up", wu, h2v, nullptr, u);
          expect("down", wd, av, nullptr, dn);
          const int64_t fused = after.fused_act_quantisations - before.fused_act_quantisations;
          const int64_t merged = after.merged_gemv_launches - before.merged_gemv_launches;
          const bool graphs = d.options().step_graphs && !d.options().sync_each_op;
          // m <= 64 fuses; merging needs recording (k, v join q; up joins gate).
          const bool counts = fused == 3 && merged == (graphs ? 3 : 0);
          r.add(name, bad.empty() && counts,
                (bad.empty() ? std::string("6 matmuls bitwise == int8 reference of the producers' outputs") : bad) + "; fused " +
                    std::to_string(fused) + "/3, merged " + std::to_string(merged) + "/" + (graphs ? "3" : "0"));
        });
      }
    }
  }

  check_fusion_fp8(dev, r, rng, dim, ffn, nq, nkv, ndown);

  // bf16 weights (the tensor-core GEMV, no activation quantisation): q/k/v and gate/up
  // merge into one launch each; every output bitwise what the matmul computes when it
  // runs alone (each in a step of its own, downloaded before the next: no merging).
  for (int64_t m : {int64_t{1}, int64_t{5}, int64_t{16}}) {
    const std::string name = "fused decode bf16 M=" + std::to_string(m) + " q,k,v (+bias) and gate,up share launches";
    if (!r.wants(name)) continue;
    r.guard(name, [&] {
      struct W {
        const memra_weight* w;
        const memra_weight* bias;
        int64_t rows;
      };
      auto make = [&](const char* n, int64_t rows, const char* bias_name) {
        const std::vector<uint8_t> bytes = random_weight(rng, "bf16", rows, dim, "random");
        const memra_weight* bw = bias_name ? d.f32_weight(bias_name, rng.floats(static_cast<size_t>(rows))) : nullptr;
        return W{d.weight(n, "bf16", dtype_of("bf16"), {rows, dim}, bytes), bw, rows};
      };
      const W mats[5] = {make("fq", nq, "fbq"), make("fk", nkv, nullptr), make("fv", nkv, "fbv"), make("fg", ffn, nullptr),
                         make("fu", ffn, nullptr)};
      i8::DevBuf b1(d, static_cast<uint64_t>(m * dim) * 4), b2(d, static_cast<uint64_t>(m * dim) * 4);
      const memra_tensor x1 = random_rows(rng, b1, m, dim), x2 = random_rows(rng, b2, m, dim);
      auto x_of = [&](int i) { return i < 3 ? &x1 : &x2; };
      d.begin_step();
      const backend::BackendStats before = d.backend().stats();
      std::vector<memra_tensor> merged;
      for (int i = 0; i < 5; ++i) {
        merged.push_back(d.tensor({m, mats[i].rows}));
        d.check(d.ops().matmul(d.ctx(), x_of(i), mats[i].w, mats[i].bias, &merged.back()), "matmul");
      }
      const backend::BackendStats after = d.backend().stats();
      std::vector<std::vector<float>> got;
      for (const memra_tensor& t : merged) got.push_back(d.download(t));
      std::string bad;
      const char* names[5] = {"q", "k", "v", "gate", "up"};
      for (int i = 0; i < 5; ++i) {
        d.begin_step();
        memra_tensor alone = d.tensor({m, mats[i].rows});
        d.check(d.ops().matmul(d.ctx(), x_of(i), mats[i].w, mats[i].bias, &alone), "matmul alone");
        if (!compare(got[static_cast<size_t>(i)], d.download(alone)).bitwise) bad += std::string(bad.empty() ? "" : ", ") + names[i] + " differs";
      }
      const int64_t n_merged = after.merged_gemv_launches - before.merged_gemv_launches;
      const bool graphs = d.options().step_graphs && !d.options().sync_each_op;
      r.add(name, bad.empty() && n_merged == (graphs ? 3 : 0),
            (bad.empty() ? std::string("5 matmuls bitwise == each alone") : bad) + "; merged " + std::to_string(n_merged) + "/" +
                (graphs ? "3" : "0"));
    });
  }
}

}  // namespace memra::kcheck
