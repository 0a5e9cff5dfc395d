// Matmul (every scheme, random and adversarial inputs, long rows, bias, tiled M)
// with batch-invariance bit checks; embedding and row gather bitwise. Integer schemes
// whose rows take int8 activations (ref::int8_activation_matmul) are held bitwise to
// their reference (quantize_act_q8 + gemv_int8); the others to the exact product (of
// the bf16-rounded x for bf16 and fp8 weights, ref::bf16_activation_matmul).
#include <cstring>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "kernels/embedding/embedding_ref.hpp"
#include "kernels/gather/gather_rows_ref.hpp"
#include "plugins/quant-common/gemv_int8_ref.hpp"
#include "kernels/matmul/matmul_ref.hpp"
#include "repack/quant/fp_convert.hpp"

namespace memra::kcheck {
namespace {

struct Layout {
  const char* scheme;
  int block_elems, block_bytes;
  std::vector<int> f16_fields;  // byte offsets of f16 scales inside a block
};
const std::vector<Layout>& layouts() {
  static const std::vector<Layout> l = {
      {"f32", 1, 4, {}},          {"f16", 1, 2, {}},           {"bf16", 1, 2, {}},          {"q8_0", 32, 34, {0}},
      {"q4_0", 32, 18, {0}},      {"q4_k", 256, 144, {0, 2}},  {"q5_k", 256, 176, {0, 2}},  {"q6_k", 256, 210, {208}},
      {"iq4_xs", 256, 136, {0}},  {"fp8", 128, 132, {}},
  };
  return l;
}
const Layout& layout(const std::string& s) {
  for (const Layout& l : layouts())
    if (s == l.scheme) return l;
  throw Failure("unknown scheme " + s);
}

std::string shape_str(int64_t m, int64_t rows, int64_t cols) {
  return "M=" + std::to_string(m) + " " + std::to_string(rows) + "x" + std::to_string(cols);
}

}  // namespace

bool int8_matmul_ref(const std::string& scheme, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                     const std::vector<float>& x, int64_t m, const float* bias, float* y) {
  ref::Int8Scheme is;
  if (!ref::int8_scheme(scheme, &is)) return false;
  std::vector<int8_t> q(static_cast<size_t>(m * cols));
  std::vector<float> meta(static_cast<size_t>(m * (cols / 32) * 2));
  return ref::quantize_act_q8(x.data(), m, cols, q.data(), meta.data()) &&
         ref::gemv_int8(is, w.data(), rows, cols, q.data(), meta.data(), m, bias, y);
}

RefWeight ref_weight(const std::string& s, const std::vector<uint8_t>& w, int64_t rows, int64_t cols) {
  if (s != "fp8") return {type_of(s), w};
  RefWeight r{quant::GgmlType::F32, std::vector<uint8_t>(static_cast<size_t>(rows * cols) * 4)};
  const int64_t groups = cols / 128, row_bytes = groups * 4 + cols;
  for (int64_t i = 0; i < rows; ++i) {
    const uint8_t* row = w.data() + i * row_bytes;
    for (int64_t c = 0; c < cols; ++c) {
      float scale;
      std::memcpy(&scale, row + (c / 128) * 4, 4);
      const float v = quant::f8_e4m3_to_f32(row[groups * 4 + c]) * scale;
      std::memcpy(r.bytes.data() + (i * cols + c) * 4, &v, 4);
    }
  }
  return r;
}

memra_dtype dtype_of(const std::string& s) {
  if (s == "f32") return MEMRA_DTYPE_F32;
  if (s == "f16") return MEMRA_DTYPE_F16;
  if (s == "bf16") return MEMRA_DTYPE_BF16;
  return MEMRA_DTYPE_BLOCKS;
}

quant::GgmlType type_of(const std::string& s) {
  if (s == "fp8") throw Failure("fp8 has no ggml type: use ref_weight");
  quant::GgmlType t;
  if (!ref::scheme_type(s.c_str(), &t)) throw Failure("no ggml type for " + s);
  return t;
}

std::vector<uint8_t> random_weight(Rng& rng, const std::string& scheme, int64_t rows, int64_t cols,
                                   const std::string& flavour) {
  const Layout& l = layout(scheme);
  const int64_t n = rows * cols;
  std::vector<uint8_t> b;
  if (scheme == "f32" || scheme == "f16" || scheme == "bf16") {
    const std::vector<float> v = rng.floats(static_cast<size_t>(n), flavour);
    if (scheme == "f32") {
      b.resize(static_cast<size_t>(n) * 4);
      std::memcpy(b.data(), v.data(), b.size());
      return b;
    }
    b.resize(static_cast<size_t>(n) * 2);
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = scheme == "f16" ? quant::f32_to_fp16(v[static_cast<size_t>(i)]) : quant::f32_to_bf16(v[static_cast<size_t>(i)]);
      std::memcpy(b.data() + i * 2, &h, 2);
    }
    return b;
  }
  if (scheme == "fp8") {
    // Per row: cols/128 f32 scales, then the e4m3fn codes (NaN codes left out).
    const int64_t groups = cols / 128, row_bytes = groups * 4 + cols;
    b.resize(static_cast<size_t>(rows * row_bytes));
    for (int64_t i = 0; i < rows; ++i) {
      uint8_t* row = b.data() + i * row_bytes;
      for (int64_t g = 0; g < groups; ++g) {
        float s = std::fabs(rng.normal()) * 0.002f + 1e-4f;
        if (flavour == "large") s *= 2e4f;
        if (flavour == "zeros") s = 0.0f;
        if (flavour == "denormal") s = 1e-40f * static_cast<float>(1 + rng.uniform(0, 1000));
        std::memcpy(row + g * 4, &s, 4);
      }
      for (int64_t c = 0; c < cols; ++c) {
        uint8_t q = static_cast<uint8_t>(rng.bits());
        if ((q & 0x7fu) == 0x7fu) q = static_cast<uint8_t>(q - 1);
        if (flavour == "subnormal") q &= 0x87u;  // zero and subnormal codes only
        row[groups * 4 + c] = q;
      }
    }
    return b;
  }
  const int64_t blocks = n / l.block_elems;
  b.resize(static_cast<size_t>(blocks * l.block_bytes));
  for (auto& x : b) x = static_cast<uint8_t>(rng.bits());
  for (int64_t i = 0; i < blocks; ++i) {
    for (int off : l.f16_fields) {
      float s = std::fabs(rng.normal()) * 0.02f + 1e-3f;
      if (flavour == "large") s *= 2e3f;
      uint16_t h = quant::f32_to_fp16(s);
      if (flavour == "zeros") h = 0;
      if (flavour == "denormal") h = static_cast<uint16_t>(1 + rng.uniform(0, 0x3fe));
      std::memcpy(b.data() + i * l.block_bytes + off, &h, 2);
    }
  }
  return b;
}

void check_matmul(Device& d, Report& r, const CheckOptions& o) {
  Rng rng(o.seed ^ 0x6d61746d);
  for (const Layout& l : layouts()) {
    const std::string s = l.scheme;
    const bool is_float = l.block_elems == 1;
    struct Case {
      int64_t m, rows, cols;
      std::string wflav, xflav;
      bool bias;
    };
    std::vector<Case> cases = {
        {1, 257, 1024, "random", "random", false},  {5, 257, 1024, "random", "random", true},
        {16, 130, 1024, "random", "random", false}, {40, 67, 1024, "random", "random", false},
        {3, 64, 1024, "large", "large", false},     {2, 64, 1024, "zeros", "random", false},
        {2, 64, 1024, "denormal", "denormal", false},
        {4, 32, o.quick ? 4096 : 16384, "random", "random", false},  // long rows
    };
    if (is_float) cases.push_back({7, 33, 1003, "random", "random", true});  // rows not a multiple of 8
    // 32-element blocks whose rows do not start 16-byte aligned (Q8_0's generic path).
    if (l.block_elems == 32) cases.push_back({3, 40, 800, "random", "random", true});
    // fp8 rows of 3 groups: the codes are not 16-byte aligned (the 4-byte path); rows of
    // subnormal codes only (the GEMV maps them to bf16 subnormals on the tensor cores).
    if (s == "fp8") {
      cases.push_back({5, 40, 384, "random", "random", true});
      cases.push_back({3, 64, 1024, "subnormal", "random", false});
      cases.push_back({9, 64, 1024, "subnormal", "large", false});
    }
    for (const Case& c : cases) {
      const std::string name = "matmul " + s + " " + shape_str(c.m, c.rows, c.cols) + " w=" + c.wflav + " x=" + c.xflav + (c.bias ? " +bias" : "");
      r.guard(name, [&] {
        d.begin_step();
        std::vector<uint8_t> wb = random_weight(rng, s, c.rows, c.cols, c.wflav);
        const std::vector<float> x = rng.floats(static_cast<size_t>(c.m * c.cols), c.xflav);
        const std::vector<float> bias = rng.floats(static_cast<size_t>(c.rows));
        std::vector<float> ref(static_cast<size_t>(c.m * c.rows));
        const RefWeight rw = ref_weight(s, wb, c.rows, c.cols);
        // Integer schemes on int8 activations: the reference of the same arithmetic, bitwise.
        const bool int8 = ref::int8_activation_matmul(s, c.cols);
        // bf16 and fp8 weights take bf16 activations: the exact product of the rounded x.
        const std::vector<float> xe = ref::bf16_activation_matmul(s) ? ref::bf16_rounded(x.data(), static_cast<int64_t>(x.size())) : x;
        if (int8 ? !int8_matmul_ref(s, wb, c.rows, c.cols, x, c.m, c.bias ? bias.data() : nullptr, ref.data())
                 : !ref::matmul_rows(rw.type, rw.bytes.data(), c.rows, c.cols, xe.data(), c.m, c.bias ? bias.data() : nullptr, ref.data()))
          throw Failure("reference matmul refused the shape");
        const memra_weight* w = d.weight("w", s, dtype_of(s), {c.rows, c.cols}, std::move(wb));
        const memra_weight* bw = c.bias ? d.f32_weight("b", bias) : nullptr;
        const memra_tensor xt = d.upload(x, {c.m, c.cols});
        memra_tensor yt = d.upload(std::vector<float>(ref.size(), NAN), {c.m, c.rows});  // poisoned
        d.check(d.ops().matmul(d.ctx(), &xt, w, bw, &yt), "matmul");
        if (int8) r.bitwise(name + " (int8 activations)", compare(d.download(yt), ref));
        else r.nmse(name, compare(d.download(yt), ref), kMatmulBound);
      });
    }
    // Batch invariance: the target row's output is bitwise the same alone, at any
    // position of a 1..16-token tile, in a second tile, whatever the other rows hold.
    const std::string name = "bitwise matmul " + s + " row independent of M=1..16,40 and of other rows";
    r.guard(name, [&] {
      d.begin_step();
      const int64_t rows = 96, cols = is_float ? 1000 : 1024;
      const memra_weight* w = d.weight("w", s, dtype_of(s), {rows, cols}, random_weight(rng, s, rows, cols, "random"));
      const std::vector<float> target = rng.floats(static_cast<size_t>(cols));
      auto run = [&](int64_t m, int64_t at) {
        std::vector<float> x = rng.floats(static_cast<size_t>(m * cols));
        std::copy(target.begin(), target.end(), x.begin() + at * cols);
        const memra_tensor xt = d.upload(x, {m, cols});
        memra_tensor yt = d.tensor({m, rows});
        d.check(d.ops().matmul(d.ctx(), &xt, w, nullptr, &yt), "matmul");
        const std::vector<float> y = d.download(yt);
        return std::vector<float>(y.begin() + at * rows, y.begin() + (at + 1) * rows);
      };
      const std::vector<float> alone = run(1, 0);
      Comparison worst;
      std::string where = "all equal";
      for (int64_t m = 2; m <= 16 + 24; m = m < 16 ? m + 1 : m + 24) {
        for (int64_t at : {int64_t{0}, m - 1, m / 2}) {
          const Comparison c = compare(run(m, at), alone);
          if (!c.bitwise && worst.bitwise) {
            worst = c;
            where = "M=" + std::to_string(m) + " row " + std::to_string(at);
          }
        }
      }
      r.add(name, worst.bitwise, worst.bitwise ? "bitwise equal (M=1..16, 40; rows first/middle/last)" : "differs at " + where);
    });
  }
}

void check_embedding_gather(Device& d, Report& r, const CheckOptions& o) {
  Rng rng(o.seed ^ 0x656d62);
  for (const Layout& l : layouts()) {
    const std::string s = l.scheme;
    if (s == "fp8") continue;  // fp8 checkpoints keep their embedding table as stored (docs/FORMAT.md)
    for (int64_t dim : {int64_t{512}, int64_t{l.block_elems == 1 ? 1003 : 4096}}) {
      for (const char* flav : {"random", "large", "denormal"}) {
        for (float scale : {1.0f, 0.125f}) {
          const std::string name = "embedding " + s + " dim=" + std::to_string(dim) + " " + flav + " scale=" + fmt(scale);
          r.guard(name, [&] {
            d.begin_step();
            const int64_t vocab = 50;
            std::vector<uint8_t> table = random_weight(rng, s, vocab, dim, flav);
            std::vector<int32_t> ids = {0, 49, 7, 7, 23, 1, 48, 12, 30};
            std::vector<float> ref(ids.size() * static_cast<size_t>(dim));
            if (!ref::embedding_rows(type_of(s), table.data(), dim, ids.data(), static_cast<int64_t>(ids.size()), scale, ref.data()))
              throw Failure("reference embedding refused the shape");
            const memra_weight* w = d.weight("emb", s, dtype_of(s), {vocab, dim}, std::move(table));
            std::vector<int32_t> pos(ids.size(), 0), seq(ids.size(), 0), tables = {0};
            int32_t seq_len = 1;
            memra_forward_batch b{};
            b.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
            b.num_tokens = static_cast<int32_t>(ids.size());
            b.token_ids = ids.data();
            b.positions = pos.data();
            b.seq_index = seq.data();
            b.num_seqs = 1;
            b.seq_lens = &seq_len;
            b.block_tables = tables.data();
            b.max_blocks_per_seq = 1;
            memra_tensor out = d.upload(std::vector<float>(ref.size(), NAN), {static_cast<int64_t>(ids.size()), dim});
            d.check(d.ops().embedding(d.ctx(), w, &b, scale, &out), "embedding");
            r.bitwise(name, compare(d.download(out), ref));
          });
        }
      }
    }
  }
  const std::string name = "gather_logit_rows";
  r.guard(name, [&] {
    d.begin_step();
    const int64_t t = 37, dim = 1000;
    const std::vector<float> x = rng.floats(static_cast<size_t>(t * dim));
    std::vector<int32_t> rows = {36, 0, 5, 5, 17};
    std::vector<float> ref(rows.size() * static_cast<size_t>(dim));
    ref::gather_rows(x.data(), dim, rows.data(), static_cast<int64_t>(rows.size()), ref.data());
    std::vector<int32_t> ids(static_cast<size_t>(t), 0), pos(static_cast<size_t>(t), 0), seq(static_cast<size_t>(t), 0), tables = {0};
    memra_forward_batch b{};
    b.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
    b.num_tokens = static_cast<int32_t>(t);
    b.token_ids = ids.data();
    b.positions = pos.data();
    b.seq_index = seq.data();
    b.num_seqs = 1;
    b.block_tables = tables.data();
    b.max_blocks_per_seq = 1;
    b.num_logits = static_cast<int32_t>(rows.size());
    b.logits_rows = rows.data();
    const memra_tensor xt = d.upload(x, {t, dim});
    memra_tensor out = d.upload(std::vector<float>(ref.size(), NAN), {static_cast<int64_t>(rows.size()), dim});
    d.check(d.ops().gather_logit_rows(d.ctx(), &xt, &b, &out), "gather_logit_rows");
    std::vector<float> got = d.download(out);
    r.bitwise(name, compare(got, ref));
    // logits_output: the device rows land in the host array as they are.
    std::vector<float> host(ref.size(), NAN);
    b.logits = host.data();
    d.check(d.ops().logits_output(d.ctx(), &out, &b), "logits_output");
    r.bitwise("logits_output", compare(host, ref));
  });
}

}  // namespace memra::kcheck
