// The prefill GEMM (kernels/matmul/gemm_mma.cu) through the backend's matmul op, on
// steps whose batch flags rows as prompt rows (memra_forward_batch.prompt_tokens):
//  - accuracy per scheme and precision mode against the exact product (matmul_rows,
//    double) and against the GEMM's CPU model (gemm_ref: the same bf16 operands,
//    summed in double, so only the tensor cores' f32 accumulation differs), on random
//    and adversarial inputs, M = 1..512, rows not a multiple of the tile, K not a
//    multiple of the k tile (float schemes);
//  - bitwise row invariance: a prompt row's output is the same for M = 1, 15, 16, 17,
//    64, 130, 512 at the first, middle and last position, whatever the other rows hold;
//  - mixed steps: generated rows bitwise equal to a pure decode step (and to a step
//    without flags), prompt rows bitwise equal to a pure-prompt step, and the same
//    for a matmul over gathered logits rows.
// Operands follow the prompt rows' numerics (ref::bf16_prompt_matmul): bf16 weights
// and the block and fp8 schemes' weights rounded to bf16 take bf16 activations (one pass;
// the exact product is taken over the rounded x, and for the block and fp8 schemes over
// their unrounded weights, so it bounds the weight rounding too), f32 and f16 weights f32
// activations, split into bf16 hi + lo with the weights (the int8 schemes' generated
// rows in the mixed steps below run the int8 GEMV, bitwise a pure decode step's).
// Bounds (normalised MSE): 1e-9 vs exact (1e-5 where weights are rounded to bf16),
// 1e-10 vs the model.
#include <cstdlib>
#include <cstring>
#include <optional>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "kernels/matmul/gemm_ref.hpp"
#include "plugins/quant-common/gemv_int8_ref.hpp"
#include "kernels/matmul/matmul_ref.hpp"

namespace memra::kcheck {
namespace {

constexpr double kGemmExactBound = 1e-9;
constexpr double kGemmRoundedWeightBound = 1e-5;  // bf16 rounding of each weight: ~2^-9 relative
constexpr double kGemmModelBound = 1e-10;

struct Scheme {
  const char* name;
  int64_t cols;      // a K that is a multiple of the k tile
  int64_t odd_cols;  // a K that is not (0: the block size forbids it)
};
const std::vector<Scheme>& schemes() {
  static const std::vector<Scheme> s = {
      {"bf16", 1024, 1000}, {"q8_0", 1024, 0}, {"q4_k", 1024, 0},  {"q6_k", 1024, 0},   {"f16", 1024, 1000},
      {"f32", 1024, 1000},  {"q4_0", 1024, 0}, {"q5_k", 1024, 0},  {"iq4_xs", 1024, 0}, {"fp8", 1024, 0},
  };
  return s;
}


// A step's batch with per-row prompt flags, made known to the backend the way a
// model's forward does (the embedding op), so the matmuls that follow see the flags.
struct StepBatch {
  std::vector<int32_t> ids, pos, seq, tables{0}, logits_rows;
  std::vector<uint8_t> flags;
  int32_t seq_len = 1;
  memra_forward_batch b{};
  // flags empty: no prompt_tokens array (every row generated).
  StepBatch(Device& d, const memra_weight* table, std::vector<uint8_t> f, int64_t m, std::vector<int32_t> logits = {})
      : ids(static_cast<size_t>(m), 0), pos(static_cast<size_t>(m), 0), seq(static_cast<size_t>(m), 0),
        logits_rows(std::move(logits)), flags(std::move(f)) {
    b.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
    b.num_tokens = static_cast<int32_t>(m);
    b.token_ids = ids.data();
    b.positions = pos.data();
    b.seq_index = seq.data();
    b.num_seqs = 1;
    b.seq_lens = &seq_len;
    b.block_tables = tables.data();
    b.max_blocks_per_seq = 1;
    b.num_logits = static_cast<int32_t>(logits_rows.size());
    b.logits_rows = logits_rows.empty() ? nullptr : logits_rows.data();
    b.prompt_tokens = flags.empty() ? nullptr : flags.data();
    memra_tensor e = d.tensor({m, 8});
    d.check(d.ops().embedding(d.ctx(), table, &b, 1.0f, &e), "embedding (registers the batch)");
  }
};

class Gemm {
 public:
  explicit Gemm(Device& d) : d_(d) {
    table_ = d.f32_weight("gemm-embd", std::vector<float>(4 * 8, 0.5f));
    // f32_weight registers a 1-D weight: reshape the descriptor copy to [4][8].
    tbl_ = *table_;
    tbl_.ndim = 2;
    tbl_.shape[0] = 4;
    tbl_.shape[1] = 8;
  }
  // y = matmul(x) in a fresh step whose batch has `flags` (empty: none) over x's rows.
  std::vector<float> run(const memra_weight* w, const std::vector<float>& x, int64_t m, int64_t cols, int64_t rows,
                         const std::vector<uint8_t>& flags, const memra_weight* bias = nullptr) {
    d_.begin_step();
    StepBatch sb(d_, &tbl_, flags, m);
    const memra_tensor xt = d_.upload(x, {m, cols});
    memra_tensor yt = d_.upload(std::vector<float>(static_cast<size_t>(m * rows), NAN), {m, rows});  // poisoned
    d_.check(d_.ops().matmul(d_.ctx(), &xt, w, bias, &yt), "matmul");
    return d_.download(yt);
  }
  // A matmul over gathered logits rows: the batch has `tokens` rows with `flags`, x
  // holds the logits rows only.
  std::vector<float> run_logits(const memra_weight* w, const std::vector<float>& x, int64_t tokens,
                                const std::vector<int32_t>& logits, int64_t cols, int64_t rows,
                                const std::vector<uint8_t>& flags) {
    d_.begin_step();
    StepBatch sb(d_, &tbl_, flags, tokens, logits);
    const auto m = static_cast<int64_t>(logits.size());
    const memra_tensor xt = d_.upload(x, {m, cols});
    memra_tensor yt = d_.upload(std::vector<float>(static_cast<size_t>(m * rows), NAN), {m, rows});
    d_.check(d_.ops().matmul(d_.ctx(), &xt, w, nullptr, &yt), "matmul (logits rows)");
    return d_.download(yt);
  }

 private:
  Device& d_;
  const memra_weight* table_;
  memra_weight tbl_{};
};

std::vector<float> row_of(const std::vector<float>& y, int64_t row, int64_t width) {
  return {y.begin() + row * width, y.begin() + (row + 1) * width};
}

}  // namespace

void check_gemm(Device& d, Report& r, const CheckOptions& o) {
  Rng rng(o.seed ^ 0x67656d6d);
  Gemm g(d);
  const std::vector<int64_t> ms = o.quick ? std::vector<int64_t>{1, 17, 130} : std::vector<int64_t>{1, 17, 130, 512};
  for (const Scheme& sc : schemes()) {
    const std::string s = sc.name;
    const bool fast = ref::bf16_prompt_matmul(s);  // one bf16 pass
    const bool rounded_weights = ref::prompt_rounds_weights(s);
    const double exact_bound = rounded_weights ? kGemmRoundedWeightBound : kGemmExactBound;
    const std::string mode = fast ? "bf16 operands" : "precise";
    const ref::GemmPrecision prec = fast ? ref::GemmPrecision::bf16 : ref::GemmPrecision::split;
    struct Case {
      int64_t m, rows, cols;
      std::string wflav, xflav;
      bool bias;
    };
    std::vector<Case> cases;
    for (int64_t m : ms) cases.push_back({m, 257, sc.cols, "random", "random", m == 17});
    cases.push_back({16, 128, sc.cols, "large", "large", false});
    cases.push_back({15, 64, sc.cols, "zeros", "random", false});
    cases.push_back({64, 130, sc.cols, "random", "zeros", false});
    cases.push_back({17, 64, sc.cols, "denormal", "denormal", false});
    if (sc.odd_cols) cases.push_back({33, 200, sc.odd_cols, "random", "random", true});
    for (const Case& c : cases) {
      const std::string name = "gemm " + s + " " + mode + " M=" + std::to_string(c.m) + " " + std::to_string(c.rows) + "x" +
                               std::to_string(c.cols) + " w=" + c.wflav + " x=" + c.xflav + (c.bias ? " +bias" : "");
      r.guard(name, [&] {
        std::vector<uint8_t> wb = random_weight(rng, s, c.rows, c.cols, c.wflav);
        const std::vector<float> x = rng.floats(static_cast<size_t>(c.m * c.cols), c.xflav);
        const std::vector<float> bias = rng.floats(static_cast<size_t>(c.rows));
        const float* bp = c.bias ? bias.data() : nullptr;
        std::vector<float> exact(static_cast<size_t>(c.m * c.rows)), model(exact.size());
        const RefWeight rw = ref_weight(s, wb, c.rows, c.cols);
        const std::vector<float> xe = fast ? ref::bf16_rounded(x.data(), static_cast<int64_t>(x.size())) : x;
        if (!ref::matmul_rows(rw.type, rw.bytes.data(), c.rows, c.cols, xe.data(), c.m, bp, exact.data()) ||
            !ref::gemm_rows(rw.type, rw.bytes.data(), c.rows, c.cols, x.data(), c.m, bp, prec, model.data()))
          throw Failure("reference refused the shape");
        const memra_weight* w = d.weight("w", s, dtype_of(s), {c.rows, c.cols}, std::move(wb));
        const memra_weight* bw = c.bias ? d.f32_weight("b", bias) : nullptr;
        const std::vector<float> y = g.run(w, x, c.m, c.cols, c.rows, std::vector<uint8_t>(static_cast<size_t>(c.m), 1), bw);
        const Comparison ce = compare(y, exact), cm = compare(y, model);
        const bool ok = ce.nonfinite_mismatch == 0 && cm.nonfinite_mismatch == 0 && ce.nmse <= exact_bound && cm.nmse <= kGemmModelBound;
        r.add(name, ok, "nmse vs exact " + fmt(ce.nmse) + " <= " + fmt(exact_bound) + ", vs model " + fmt(cm.nmse) + " <= " +
                            fmt(kGemmModelBound) + ", max abs diff " + fmt(ce.max_abs));
      });
    }

    // A prompt row is bitwise the same alone, anywhere in a batch of M prompt rows.
    const std::string iname = "bitwise gemm " + s + " " + mode + " row independent of M=1,15,16,17,64,130,512 and position";
    r.guard(iname, [&] {
      const int64_t rows = 200, cols = sc.cols;
      const memra_weight* w = d.weight("w", s, dtype_of(s), {rows, cols}, random_weight(rng, s, rows, cols, "random"));
      const std::vector<float> target = rng.floats(static_cast<size_t>(cols));
      auto at_pos = [&](int64_t m, int64_t at) {
        std::vector<float> x = rng.floats(static_cast<size_t>(m * cols));
        std::copy(target.begin(), target.end(), x.begin() + at * cols);
        return row_of(g.run(w, x, m, cols, rows, std::vector<uint8_t>(static_cast<size_t>(m), 1)), at, rows);
      };
      const std::vector<float> alone = at_pos(1, 0);
      std::string where;
      for (int64_t m : {int64_t{15}, int64_t{16}, int64_t{17}, int64_t{64}, int64_t{130}, int64_t{512}})
        for (int64_t at : {int64_t{0}, m / 2, m - 1})
          if (where.empty() && !compare(at_pos(m, at), alone).bitwise) where = "M=" + std::to_string(m) + " row " + std::to_string(at);
      r.add(iname, where.empty(), where.empty() ? "bitwise equal (M=1,15,16,17,64,130,512; rows first/middle/last)" : "differs at " + where);
    });

    // Mixed steps: generated rows on the decode GEMV, prompt rows on the GEMM, each
    // bitwise what a pure step of its kind computes.
    const std::string mname = "bitwise gemm " + s + " " + mode + " mixed step == pure decode / pure prompt steps";
    r.guard(mname, [&] {
      const int64_t rows = 136, cols = sc.cols, m = 40;
      const memra_weight* w = d.weight("w", s, dtype_of(s), {rows, cols}, random_weight(rng, s, rows, cols, "random"));
      const std::vector<float> x = rng.floats(static_cast<size_t>(m * cols));
      std::vector<uint8_t> flags(static_cast<size_t>(m));
      for (auto& f : flags) f = static_cast<uint8_t>(rng.uniform(0, 1));
      flags[0] = 1;
      flags[1] = 0;
      const std::vector<float> mixed = g.run(w, x, m, cols, rows, flags);
      std::vector<float> xp, xg;
      std::vector<int64_t> ip, ig;
      for (int64_t i = 0; i < m; ++i) {
        auto& dst = flags[static_cast<size_t>(i)] ? xp : xg;
        dst.insert(dst.end(), x.begin() + i * cols, x.begin() + (i + 1) * cols);
        (flags[static_cast<size_t>(i)] ? ip : ig).push_back(i);
      }
      const auto np = static_cast<int64_t>(ip.size()), ng = static_cast<int64_t>(ig.size());
      const std::vector<float> prompt = g.run(w, xp, np, cols, rows, std::vector<uint8_t>(static_cast<size_t>(np), 1));
      const std::vector<float> decode = g.run(w, xg, ng, cols, rows, std::vector<uint8_t>(static_cast<size_t>(ng), 0));
      const std::vector<float> noflags = g.run(w, xg, ng, cols, rows, {});
      std::string where;
      for (int64_t i = 0; i < np && where.empty(); ++i)
        if (!compare(row_of(mixed, ip[static_cast<size_t>(i)], rows), row_of(prompt, i, rows)).bitwise)
          where = "prompt row " + std::to_string(ip[static_cast<size_t>(i)]);
      for (int64_t i = 0; i < ng && where.empty(); ++i) {
        if (!compare(row_of(mixed, ig[static_cast<size_t>(i)], rows), row_of(decode, i, rows)).bitwise)
          where = "generated row " + std::to_string(ig[static_cast<size_t>(i)]);
        else if (!compare(row_of(decode, i, rows), row_of(noflags, i, rows)).bitwise)
          where = "decode row " + std::to_string(i) + " vs a step without flags";
      }
      // Logits rows: a matmul over gathered rows follows each row's own flag.
      const std::vector<int32_t> logits = {static_cast<int32_t>(ig[0]), static_cast<int32_t>(ip[0]), static_cast<int32_t>(m - 1)};
      std::vector<float> xl;
      for (int32_t i : logits) xl.insert(xl.end(), x.begin() + i * cols, x.begin() + (i + 1) * cols);
      const std::vector<float> yl = g.run_logits(w, xl, m, logits, cols, rows, flags);
      for (size_t j = 0; j < logits.size() && where.empty(); ++j)
        if (!compare(row_of(yl, static_cast<int64_t>(j), rows), row_of(mixed, logits[j], rows)).bitwise)
          where = "logits row " + std::to_string(logits[j]);
      // Teeth: the prompt rows are not the GEMV's (whose x is rounded alike for bf16
      // weights, but summed in another order), so the GEMM ran.
      if (where.empty() && compare(prompt, g.run(w, xp, np, cols, rows, {})).bitwise)
        where = "prompt rows: equal to the GEMV's, so the GEMM did not run";
      r.add(mname, where.empty(),
            where.empty() ? "bitwise equal (" + std::to_string(np) + " prompt, " + std::to_string(ng) + " generated rows, 3 logits rows)"
                          : "differs at " + where);
    });
  }
}

}  // namespace memra::kcheck
