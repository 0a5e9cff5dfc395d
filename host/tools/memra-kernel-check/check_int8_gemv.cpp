// Integer-activation decode GEMVs (kernels/matmul/gemv_int8.cuh, numeric contract v2)
// against their CPU reference (plugins/quant-common/gemv_int8_ref.cpp), which implements the
// same integer dots and the same f32 operations in the same order: every check here
// is bitwise. Weights come from the quant plugins' real quantisers (q8_0, q4_k, q5_k,
// q6_k, iq4_xs; q4_0's blocks are random bytes with sane f16 scales), inputs are fresh random
// draws per run (--seed), outputs are poisoned before each launch, and a guard tail past
// the output must stay poisoned. Then the int8-activation error against the exact
// product of the dequantised weights and the f32 activations (the v2 contract's
// accuracy, in llama.cpp MMVQ's range; bound: test-backend-ops' 5e-4 for MUL_MAT).
#include <cmath>
#include <cstring>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "host/tools/memra-kernel-check/int8_gemv_util.hpp"
#include "plugins/quant-common/gemv_int8_ref.hpp"
#include "repack/quant/dequant.hpp"
#include "plugins/quant-common/quantize.hpp"

namespace memra::kcheck {
namespace {

using ref::Int8Scheme;
using namespace i8;

constexpr uint32_t kPoison = 0x7fc0dead;  // a NaN no kernel writes
constexpr double kInt8AccuracyBound = 5e-4;

std::string shape_str(int64_t m, int64_t rows, int64_t cols) {
  return "M=" + std::to_string(m) + " " + std::to_string(rows) + "x" + std::to_string(cols);
}

// Activations with per-row magnitudes from 1e-3 to 1e3 and, for "spiky", one large
// element per 32-block (most codes then round to 0 or +-1).
std::vector<float> activations(Rng& rng, int64_t m, int64_t cols, const std::string& flavour) {
  std::vector<float> x = rng.floats(static_cast<size_t>(m * cols));
  for (int64_t t = 0; t < m; ++t) {
    const float scale = std::pow(10.0f, static_cast<float>(rng.uniform(-3, 3)));
    for (int64_t c = 0; c < cols; ++c) x[static_cast<size_t>(t * cols + c)] *= scale;
    if (flavour == "spiky")
      for (int64_t b = 0; b < cols / 32; ++b) x[static_cast<size_t>(t * cols + 32 * b + rng.uniform(0, 31))] *= 1e3f;
  }
  return x;
}

// Exact ties of the rounding (x/d = k + 0.5): blocks with amax 127 (d == 1) and
// half-integer elements, plus all-zero blocks and tiny (subnormal) ones.
std::vector<float> tie_activations(Rng& rng, int64_t m, int64_t cols) {
  std::vector<float> x(static_cast<size_t>(m * cols));
  for (int64_t b = 0; b < m * cols / 32; ++b) {
    float* xb = x.data() + 32 * b;
    const int kind = static_cast<int>(b % 4);
    for (int i = 0; i < 32; ++i) {
      if (kind == 0) xb[i] = static_cast<float>(rng.uniform(-126, 125)) + 0.5f;
      else if (kind == 1) xb[i] = 0.0f;
      else if (kind == 2) xb[i] = 1e-40f * static_cast<float>(rng.uniform(-1000, 1000));
      else xb[i] = rng.normal();
    }
    if (kind == 0) xb[rng.uniform(0, 31)] = rng.uniform(0, 1) ? 127.0f : -127.0f;
  }
  return x;
}

std::vector<uint8_t> weights(Rng& rng, Int8Scheme s, int64_t rows, int64_t cols) {
  const int64_t row_bytes = ref::int8_scheme_row_bytes(s, cols);
  if (s == Int8Scheme::q4_0) return random_weight(rng, "q4_0", rows, cols, "random");
  std::vector<uint8_t> w(static_cast<size_t>(rows * row_bytes));
  std::vector<float> f = rng.floats(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    // Rows of varied scale, some with an outlier (as real weight rows have).
    const float scale = 0.02f * std::pow(2.0f, static_cast<float>(rng.uniform(-4, 4)));
    for (auto& v : f) v = rng.normal() * scale;
    if (r % 3 == 0) f[static_cast<size_t>(rng.uniform(0, static_cast<int>(cols) - 1))] *= 20.0f;
    uint8_t* dst = w.data() + r * row_bytes;
    const bool ok = s == Int8Scheme::q8_0   ? quant::quantize_q8_0(f.data(), dst, cols)
                    : s == Int8Scheme::q4_k ? quant::quantize_q4_k(f.data(), dst, cols)
                    : s == Int8Scheme::q5_k ? quant::quantize_q5_k(f.data(), dst, cols)
                    : s == Int8Scheme::q6_k ? quant::quantize_q6_k(f.data(), dst, cols)
                                            : quant::quantize_iq4_xs(f.data(), dst, cols);
    if (!ok) throw Failure("quantiser refused a row");
  }
  return w;
}

std::vector<float> poisoned(size_t n) {
  std::vector<float> v(n);
  for (auto& f : v) std::memcpy(&f, &kPoison, 4);
  return v;
}

bool guard_intact(const std::vector<float>& tail) {
  for (float f : tail) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    if (b != kPoison) return false;
  }
  return true;
}

void check_quantize(Device& d, Kernels& k, Report& r, Rng& rng, int64_t m, int64_t cols, const std::string& flavour) {
  const std::string name = "int8 act quantise " + flavour + " M=" + std::to_string(m) + " cols=" + std::to_string(cols);
  if (!r.wants(name)) return;
  r.guard(name, [&] {
    const std::vector<float> x = flavour == "ties" ? tie_activations(rng, m, cols) : activations(rng, m, cols, flavour);
    const int64_t n = m * cols, nb = n / 32;
    std::vector<int8_t> q(static_cast<size_t>(n));
    std::vector<float> meta(static_cast<size_t>(2 * nb));
    if (!ref::quantize_act_q8(x.data(), m, cols, q.data(), meta.data())) throw Failure("reference refused the shape");
    DevBuf xd(d, static_cast<uint64_t>(n) * 4), qd(d, static_cast<uint64_t>(n) + 64), md(d, static_cast<uint64_t>(2 * nb + 16) * 4);
    xd.put(x.data(), static_cast<uint64_t>(n) * 4);
    const std::vector<uint8_t> qpoison(static_cast<size_t>(n + 64), 0xa5);
    qd.put(qpoison.data(), qpoison.size());
    const std::vector<float> mpoison = poisoned(static_cast<size_t>(2 * nb + 16));
    md.put(mpoison.data(), mpoison.size() * 4);
    launch_quantize(k, xd.ptr(), m, cols, qd.ptr(), md.ptr());
    const auto qg = qd.get<int8_t>(static_cast<size_t>(n + 64));
    const auto mg = md.get<float>(static_cast<size_t>(2 * nb + 16));
    size_t bad_q = 0;
    for (int64_t i = 0; i < n; ++i) bad_q += qg[static_cast<size_t>(i)] != q[static_cast<size_t>(i)];
    bool tail_ok = true;
    for (int64_t i = n; i < n + 64; ++i) tail_ok &= static_cast<uint8_t>(qg[static_cast<size_t>(i)]) == 0xa5;
    const Comparison c = compare(std::vector<float>(mg.begin(), mg.begin() + 2 * nb), meta);
    tail_ok &= guard_intact(std::vector<float>(mg.begin() + 2 * nb, mg.end()));
    r.add(name, bad_q == 0 && c.bitwise && tail_ok,
          "codes " + std::string(bad_q == 0 ? "bitwise" : std::to_string(bad_q) + " differ") + ", {d, s} " +
              (c.bitwise ? "bitwise" : "differ (nmse " + fmt(c.nmse) + ")") + (tail_ok ? "" : ", wrote past the end"));
  });
}

// Bitwise against the reference for M = 1..16 and 40 (three token tiles), every R, the
// second half of the M = 40 run's rows redrawn for a second launch (a row's bits must not
// depend on its neighbours).
void check_gemv(Device& d, Kernels& k, Report& r, Rng& rng, Int8Scheme s, int64_t rows, int64_t cols, bool with_bias,
                const std::string& xflavour) {
  const std::string sch = scheme_name(s);
  const std::string name = "int8 gemv " + sch + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                           " M=1..16,40 R=1,2,4 blocks=all,5" + (s == Int8Scheme::q4_k ? " q4_k,q4_k2,q4_km1/2/4(R=16) "
                                                                  : s == Int8Scheme::q5_k ? " q5_k,q5_k2 " : " ") + xflavour +
                           (with_bias ? " +bias" : "");
  if (!r.wants(name)) return;
  r.guard(name, [&] {
    constexpr int64_t kMaxM = 40;
    const int64_t row_bytes = ref::int8_scheme_row_bytes(s, cols), units = cols / 32;
    const std::vector<uint8_t> w = weights(rng, s, rows, cols);
    std::vector<float> bias;
    if (with_bias) bias = rng.floats(static_cast<size_t>(rows));
    std::vector<float> x = activations(rng, kMaxM, cols, xflavour);
    std::vector<int8_t> q(static_cast<size_t>(kMaxM * cols));
    std::vector<float> meta(static_cast<size_t>(2 * kMaxM * units));
    ref::quantize_act_q8(x.data(), kMaxM, cols, q.data(), meta.data());
    std::vector<float> yref(static_cast<size_t>(kMaxM * rows));
    ref::gemv_int8(s, w.data(), rows, cols, q.data(), meta.data(), kMaxM, with_bias ? bias.data() : nullptr, yref.data());

    DevBuf wd(d, w.size()), qd(d, q.size()), md(d, meta.size() * 4), bd(d, bias.size() * 4 + 4);
    const size_t guard = 256;
    DevBuf yd(d, (yref.size() + guard) * 4);
    wd.put(w.data(), w.size());
    qd.put(q.data(), q.size());
    md.put(meta.data(), meta.size() * 4);
    if (with_bias) bd.put(bias.data(), bias.size() * 4);
    const std::vector<float> poison = poisoned(yref.size() + guard);

    int runs = 0, mismatched_runs = 0;
    std::string first_bad;
    std::vector<std::string> kernels = dp4a_kernels(s);
    if (s == Int8Scheme::q4_k) {
      for (const std::string& km : q4_k_mma_kernels()) kernels.push_back(km);
    }
    for (const std::string& kern : kernels)
      for (int64_t blocks : {int64_t{0}, int64_t{5}})  // one block per group; 5 persistent blocks
        for (int rr : is_mma_kernel(kern) ? std::vector<int>{16} : std::vector<int>{1, 2, 4}) {
          for (int64_t m = 1; m <= kMaxM; m = m == 16 ? kMaxM : m + 1) {
            if (!has_tile(kern, m)) continue;
            yd.put(poison.data(), poison.size() * 4);
            launch_gemv8(k, s, rr, {wd.ptr(), row_bytes, rows, cols, qd.ptr(), md.ptr(), m, yd.ptr(), with_bias ? bd.ptr() : nullptr},
                         nullptr, kern, blocks);
            const auto y = yd.get<float>(yref.size() + guard);
            const size_t n = static_cast<size_t>(m * rows);
            const Comparison c = compare(std::vector<float>(y.begin(), y.begin() + static_cast<ptrdiff_t>(n)),
                                         std::vector<float>(yref.begin(), yref.begin() + static_cast<ptrdiff_t>(n)));
            const bool tail = guard_intact(std::vector<float>(y.begin() + static_cast<ptrdiff_t>(n), y.end()));
            ++runs;
            if (!c.bitwise || !tail) {
              ++mismatched_runs;
              if (first_bad.empty())
                first_bad = " first: " + kern + " blocks=" + std::to_string(blocks) + " R=" + std::to_string(rr) +
                            " M=" + std::to_string(m) + " nmse " + fmt(c.nmse) + (tail ? "" : " (wrote past its rows)");
            }
            if (m == kMaxM) break;
          }
        }
    // The same matrix as 3 matrices of one launch (GemvMats: rows split 40 % / 35 % / rest,
    // none a multiple of 16), each bitwise its rows of the reference, for the tensor-core
    // kernels (q4_k) or the production kernel, M = 1..16.
    int mats_runs = 0, mats_bad = 0;
    const int64_t r0 = rows * 2 / 5 | 1, r1 = rows * 7 / 20 | 1, r2 = rows - r0 - r1;
    std::vector<std::string> mats_kernels = {ref::int8_gemv_launch(sch.c_str(), 8).kernel};
    if (s == Int8Scheme::q4_k) mats_kernels = q4_k_mma_kernels();
    if (r2 > 0)
      for (const std::string& kern : mats_kernels)
        for (int64_t m = 1; m <= 16; ++m) {
          if (!has_tile(kern, m)) continue;
          const int rr = is_mma_kernel(kern) ? 16 : ref::int8_gemv_launch(sch.c_str(), m).rows_per_block;
          const int64_t mr[3] = {r0, r1, r2};
          const void* mw[3] = {wd.ptr(), wd.at(static_cast<uint64_t>(r0 * row_bytes)), wd.at(static_cast<uint64_t>((r0 + r1) * row_bytes))};
          const uint64_t yo[3] = {0, static_cast<uint64_t>(m * r0) * 4, static_cast<uint64_t>(m * (r0 + r1)) * 4};
          void* my[3] = {yd.at(yo[0]), yd.at(yo[1]), yd.at(yo[2])};
          const void* mb[3] = {nullptr, nullptr, nullptr};
          if (with_bias)
            for (int i = 0; i < 3; ++i) mb[i] = bd.at(static_cast<uint64_t>(i == 0 ? 0 : i == 1 ? r0 : r0 + r1) * 4);
          yd.put(poison.data(), poison.size() * 4);
          launch_gemv8_mats(k, sch, kern, rr, 3, mw, mr, my, mb, row_bytes, cols, qd.ptr(), md.ptr(), m, m % 3 == 0 ? 7 : 0);
          const auto y = yd.get<float>(static_cast<size_t>(m * rows) + guard);
          bool ok = guard_intact(std::vector<float>(y.begin() + m * rows, y.end()));
          int64_t row_base = 0;
          for (int i = 0; i < 3; ++i) {
            for (int64_t t = 0; t < m; ++t)
              for (int64_t rr2 = 0; rr2 < mr[i]; ++rr2) {
                const float got = y[static_cast<size_t>(yo[i] / 4 + t * mr[i] + rr2)];
                const float want = yref[static_cast<size_t>(t * rows + row_base + rr2)];
                ok &= std::memcmp(&got, &want, 4) == 0;
              }
            row_base += mr[i];
          }
          ++mats_runs;
          if (!ok) {
            ++mats_bad;
            if (first_bad.empty()) first_bad = " first: 3 matrices " + kern + " M=" + std::to_string(m);
          }
        }
    runs += mats_runs;
    mismatched_runs += mats_bad;
    // Neighbours redrawn: tokens 20..39 get other activations; tokens 0..19 must keep their bits.
    std::vector<float> x2 = activations(rng, kMaxM, cols, xflavour);
    std::copy(x.begin(), x.begin() + 20 * cols, x2.begin());
    ref::quantize_act_q8(x2.data(), kMaxM, cols, q.data(), meta.data());
    qd.put(q.data(), q.size());
    md.put(meta.data(), meta.size() * 4);
    yd.put(poison.data(), poison.size() * 4);
    launch_gemv8(k, s, 2, {wd.ptr(), row_bytes, rows, cols, qd.ptr(), md.ptr(), kMaxM, yd.ptr(), with_bias ? bd.ptr() : nullptr});
    const auto y2 = yd.get<float>(static_cast<size_t>(20 * rows));
    bool same = compare(y2, std::vector<float>(yref.begin(), yref.begin() + 20 * rows)).bitwise;
    if (s == Int8Scheme::q4_k) {
      yd.put(poison.data(), poison.size() * 4);
      launch_gemv8(k, s, 16, {wd.ptr(), row_bytes, rows, cols, qd.ptr(), md.ptr(), kMaxM, yd.ptr(), with_bias ? bd.ptr() : nullptr},
                   nullptr, "q4_km1");
      same &= compare(yd.get<float>(static_cast<size_t>(20 * rows)), std::vector<float>(yref.begin(), yref.begin() + 20 * rows)).bitwise;
    }
    r.add(name, mismatched_runs == 0 && same,
          std::to_string(runs - mismatched_runs) + "/" + std::to_string(runs) + " launches bitwise == reference" + first_bad +
              (same ? "; rows unchanged with neighbours redrawn" : "; a row CHANGED when its neighbours were redrawn"));
  });
}

// The int8-activation error: the GPU result (== the reference) against the exact product
// of the dequantised weights and the f32 activations, accumulated in double.
void check_accuracy(Device& d, Kernels& k, Report& r, Rng& rng, Int8Scheme s, int64_t rows, int64_t cols, int64_t m) {
  const std::string sch = scheme_name(s);
  const std::string name = "int8 gemv " + sch + " accuracy vs exact f32 product " + shape_str(m, rows, cols);
  if (!r.wants(name)) return;
  r.guard(name, [&] {
    const int64_t row_bytes = ref::int8_scheme_row_bytes(s, cols), units = cols / 32;
    const std::vector<uint8_t> w = weights(rng, s, rows, cols);
    const std::vector<float> x = activations(rng, m, cols, "random");
    DevBuf wd(d, w.size()), xd(d, x.size() * 4), qd(d, x.size()), md(d, static_cast<uint64_t>(m * units) * 8),
        yd(d, static_cast<uint64_t>(m * rows) * 4);
    wd.put(w.data(), w.size());
    xd.put(x.data(), x.size() * 4);
    const std::vector<float> poison = poisoned(static_cast<size_t>(m * rows));
    yd.put(poison.data(), poison.size() * 4);
    // The whole device path: quantise on the GPU, then the GEMV.
    launch_quantize(k, xd.ptr(), m, cols, qd.ptr(), md.ptr());
    launch_gemv8(k, s, 2, {wd.ptr(), row_bytes, rows, cols, qd.ptr(), md.ptr(), m, yd.ptr(), nullptr});
    const auto y = yd.get<float>(static_cast<size_t>(m * rows));
    std::vector<float> wf(static_cast<size_t>(cols)), exact(static_cast<size_t>(m * rows));
    const quant::GgmlType type = s == Int8Scheme::q8_0   ? quant::GgmlType::Q8_0
                                 : s == Int8Scheme::q4_0 ? quant::GgmlType::Q4_0
                                 : s == Int8Scheme::q4_k ? quant::GgmlType::Q4_K
                                 : s == Int8Scheme::q5_k ? quant::GgmlType::Q5_K
                                 : s == Int8Scheme::q6_k ? quant::GgmlType::Q6_K
                                                         : quant::GgmlType::IQ4_XS;
    for (int64_t i = 0; i < rows; ++i) {
      if (!quant::dequantize_row(type, w.data() + i * row_bytes, wf.data(), cols)) throw Failure("dequantize_row");
      for (int64_t t = 0; t < m; ++t) {
        double acc = 0;
        for (int64_t c = 0; c < cols; ++c) acc += static_cast<double>(wf[static_cast<size_t>(c)]) * x[static_cast<size_t>(t * cols + c)];
        exact[static_cast<size_t>(t * rows + i)] = static_cast<float>(acc);
      }
    }
    const Comparison c = compare(y, exact);
    r.add(name, c.nonfinite_mismatch == 0 && c.nmse <= kInt8AccuracyBound,
          "nmse " + fmt(c.nmse) + " <= " + fmt(kInt8AccuracyBound) + " (int8 activations; the f32 kernels' bound is 1e-09)");
  });
}

}  // namespace

void check_int8_gemv(Device& d, Report& r, const CheckOptions& o) {
  Rng rng(o.seed ^ 0x1a7e8ull);
  Kernels k(d);
  for (const char* f : {"random", "spiky", "ties"}) {
    check_quantize(d, k, r, rng, 1, 4096, f);
    check_quantize(d, k, r, rng, 7, 12288, f);
    check_quantize(d, k, r, rng, 16, 288, f);
  }
  for (Int8Scheme s : int8_schemes()) {
    const bool kquant = s == Int8Scheme::q4_k || s == Int8Scheme::q5_k || s == Int8Scheme::q6_k || s == Int8Scheme::iq4_xs;
    // 4352 columns = 136 units: a second, partial phase; 37 and 301 rows: partial row blocks.
    // (q6_k / iq4_xs rows of 17 super-blocks start off the 16-byte grid: the staged loads.)
    check_gemv(d, k, r, rng, s, 301, 4352, false, "random");
    if (kquant) check_gemv(d, k, r, rng, s, 45, 12288, true, "spiky");  // 3 units per slot, partial tiles
    check_gemv(d, k, r, rng, s, 37, 256, true, "spiky");
    if (kquant) check_gemv(d, k, r, rng, s, 19, 768, false, "random");  // 3 super-blocks: odd rows off the 16-byte grid
    if (!o.quick) {
      check_gemv(d, k, r, rng, s, 64, 12288, false, "random");
      check_gemv(d, k, r, rng, s, 130, 4096, true, "random");
    }
    check_accuracy(d, k, r, rng, s, o.quick ? 64 : 256, 4096, 4);
  }
}

}  // namespace memra::kcheck
