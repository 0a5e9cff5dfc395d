// RMSNorm / add+RMSNorm (fatbin and NVRTC-specialised row lengths, in place, batch
// invariance), gated activations and add.
#include "host/tools/memra-kernel-check/checks.hpp"
#include "kernels/activation/gated_activation_ref.hpp"
#include "kernels/norm/rms_norm_ref.hpp"

namespace memra::kcheck {

void check_elementwise(Device& d, Report& r, const CheckOptions& o) {
  Rng rng(o.seed ^ 0x6e6f726d);
  // 128/4096: NVRTC-specialised when NVRTC is there; 100/1000/5000/12288: fatbin kernel.
  for (int64_t dim : {int64_t{128}, int64_t{100}, int64_t{1000}, int64_t{4096}, int64_t{5000}, int64_t{12288}}) {
    for (const char* flav : {"random", "large", "zeros", "denormal"}) {
      const int64_t rows = 9;
      for (float offset : {0.0f, 1.0f}) {
        const std::string name = "rms_norm dim=" + std::to_string(dim) + " " + flav + " unit_offset=" + fmt(offset);
        r.guard(name, [&] {
          d.begin_step();
          const std::vector<float> x = rng.floats(static_cast<size_t>(rows * dim), flav);
          const std::vector<float> w = rng.floats(static_cast<size_t>(dim));
          std::vector<float> ref(x.size());
          ref::rms_norm(x.data(), w.data(), rows, dim, 1e-6f, offset, ref.data());
          const memra_weight* wt = d.f32_weight("norm", w);
          memra_tensor xt = d.upload(x, {rows, dim});
          memra_tensor out = d.upload(std::vector<float>(x.size(), NAN), {rows, dim});
          d.check(d.ops().rms_norm(d.ctx(), &xt, wt, 1e-6f, offset, &out), "rms_norm");
          r.nmse(name, compare(d.download(out), ref), kNormBound);
          // In place (the per-head q/k norm writes over its input).
          d.check(d.ops().rms_norm(d.ctx(), &xt, wt, 1e-6f, offset, &xt), "rms_norm in place");
          r.nmse(name + " in-place", compare(d.download(xt), ref), kNormBound);
        });
      }
      const std::string name = "add_rms_norm dim=" + std::to_string(dim) + " " + flav;
      r.guard(name, [&] {
        d.begin_step();
        const std::vector<float> x = rng.floats(static_cast<size_t>(rows * dim), flav);
        std::vector<float> res = rng.floats(static_cast<size_t>(rows * dim), flav);
        const std::vector<float> w = rng.floats(static_cast<size_t>(dim));
        std::vector<float> ref(x.size());
        const memra_weight* wt = d.f32_weight("norm", w);
        const memra_tensor xt = d.upload(x, {rows, dim});
        memra_tensor rt = d.upload(res, {rows, dim});
        memra_tensor out = d.upload(std::vector<float>(x.size(), NAN), {rows, dim});
        ref::add_rms_norm(x.data(), res.data(), w.data(), rows, dim, 1e-5f, 0.0f, ref.data());
        d.check(d.ops().add_rms_norm(d.ctx(), &xt, &rt, wt, 1e-5f, 0.0f, &out), "add_rms_norm");
        r.nmse(name, compare(d.download(out), ref), kNormBound);
        r.bitwise(name + " residual", compare(d.download(rt), res));
      });
    }
    // Batch invariance of a norm row.
    const std::string name = "bitwise rms_norm+add_rms_norm dim=" + std::to_string(dim) + " row independent of rows=1..16,40";
    r.guard(name, [&] {
      d.begin_step();
      const std::vector<float> target = rng.floats(static_cast<size_t>(dim));
      const std::vector<float> target_res = rng.floats(static_cast<size_t>(dim));
      const memra_weight* wt = d.f32_weight("norm", rng.floats(static_cast<size_t>(dim)));
      auto run = [&](int64_t m, int64_t at) {
        std::vector<float> x = rng.floats(static_cast<size_t>(m * dim)), res = rng.floats(static_cast<size_t>(m * dim));
        std::copy(target.begin(), target.end(), x.begin() + at * dim);
        std::copy(target_res.begin(), target_res.end(), res.begin() + at * dim);
        const memra_tensor xt = d.upload(x, {m, dim});
        memra_tensor rt = d.upload(res, {m, dim});
        memra_tensor a = d.tensor({m, dim}), b = d.tensor({m, dim});
        d.check(d.ops().rms_norm(d.ctx(), &xt, wt, 1e-6f, 0.0f, &a), "rms_norm");
        d.check(d.ops().add_rms_norm(d.ctx(), &xt, &rt, wt, 1e-6f, 0.0f, &b), "add_rms_norm");
        std::vector<float> ya = d.download(a), yb = d.download(b);
        std::vector<float> row(ya.begin() + at * dim, ya.begin() + (at + 1) * dim);
        row.insert(row.end(), yb.begin() + at * dim, yb.begin() + (at + 1) * dim);
        return row;
      };
      const std::vector<float> alone = run(1, 0);
      bool ok = true;
      for (int64_t m = 2; m <= 40 && ok; m = m < 16 ? m + 1 : m + 24)
        for (int64_t at : {int64_t{0}, m - 1}) ok = ok && compare(run(m, at), alone).bitwise;
      r.add(name, ok, ok ? "bitwise equal" : "a row's norm depends on the other rows");
    });
  }

  for (const char* flav : {"random", "large", "zeros", "denormal"}) {
    const int64_t n = 100003;
    for (int act : {MEMRA_ACTIVATION_SILU, MEMRA_ACTIVATION_GELU_TANH}) {
      const std::string name = std::string(act == MEMRA_ACTIVATION_SILU ? "silu_mul " : "gelu_tanh_mul ") + flav;
      r.guard(name, [&] {
        d.begin_step();
        std::vector<float> g = rng.floats(static_cast<size_t>(n), flav), u = rng.floats(static_cast<size_t>(n), flav);
        if (std::string(flav) == "large")
          for (float& v : g) v *= 1e-3f;  // gate around +-30..100: the saturated regions
        std::vector<float> ref(g.size());
        if (act == MEMRA_ACTIVATION_SILU) ref::silu_mul(g.data(), u.data(), n, ref.data());
        else ref::gelu_tanh_mul(g.data(), u.data(), n, ref.data());
        const memra_tensor gt = d.upload(g, {n}), ut = d.upload(u, {n});
        memra_tensor out = d.upload(std::vector<float>(g.size(), NAN), {n});
        d.check(d.ops().gated_activation(d.ctx(), act, &gt, &ut, &out), "gated_activation");
        r.nmse(name, compare(d.download(out), ref), kActivationBound);
      });
    }
    const std::string name = std::string("add ") + flav;
    r.guard(name, [&] {
      d.begin_step();
      const std::vector<float> a = rng.floats(static_cast<size_t>(n), flav), b = rng.floats(static_cast<size_t>(n), flav);
      std::vector<float> ref(a.size());
      for (size_t i = 0; i < a.size(); ++i) ref[i] = a[i] + b[i];
      const memra_tensor at = d.upload(a, {n}), bt = d.upload(b, {n});
      memra_tensor out = d.upload(std::vector<float>(a.size(), NAN), {n});
      d.check(d.ops().add(d.ctx(), &at, &bt, &out), "add");
      r.bitwise(name, compare(d.download(out), ref));
    });
  }
}

}  // namespace memra::kcheck
