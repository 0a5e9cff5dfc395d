// RoPE + paged-KV write + split-KV attention against the CPU reference
// (kernels/rope, kernels/attention), and its batch-invariance bit checks: a row
// alone vs beside three other sequences, and in a prefill vs a decode step; with an
// f32, an f16 and a bf16 KV cache (the reference then rounds K and V to the 16-bit type
// when written; its K is the device's RoPE'd k, so a 1-ulp RoPE difference cannot flip a
// rounding). (The f16 / bf16 decode kernels run on the tensor cores, the f32 one on the
// CUDA cores: each is held to the reference on its own.) And a layer's results do not
// depend on the other layers' KV geometry or dtype.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "kernels/attention/attention_ref.hpp"
#include "kernels/norm/rms_norm_ref.hpp"
#include "kernels/rope/rope_ref.hpp"
#include "repack/quant/fp_convert.hpp"

namespace memra::kcheck {
namespace {

struct Config {
  std::string name;
  int32_t heads, kv_heads, head_dim;
  bool has_rope;
  memra_rope_params rope;
  int32_t window;
  float softcap;
  memra_dtype kv = MEMRA_DTYPE_F32;
  bool qk_norm = false;  // per-head q/k RMS norms before RoPE (memra_attention_params 2.4)
};

ref::KvElement kv_element(memra_dtype d) {
  return d == MEMRA_DTYPE_F16         ? ref::KvElement::f16
         : d == MEMRA_DTYPE_BF16      ? ref::KvElement::bf16
         : d == MEMRA_DTYPE_F8_E4M3   ? ref::KvElement::fp8
                                      : ref::KvElement::f32;
}
const char* kv_name(memra_dtype d) {
  return d == MEMRA_DTYPE_F16 ? "f16" : d == MEMRA_DTYPE_BF16 ? "bf16" : d == MEMRA_DTYPE_F8_E4M3 ? "fp8" : "f32";
}

memra_rope_params rope(int32_t rotary_dim, int32_t neox, float theta, memra_rope_scaling scaling) {
  memra_rope_params p{};
  p.struct_size = MEMRA_ROPE_PARAMS_STRUCT_SIZE;
  p.rotary_dim = rotary_dim;
  p.neox_style = neox;
  p.theta = theta;
  p.scaling = scaling;
  p.factor = 8.0f;
  p.low_freq_factor = 1.0f;
  p.high_freq_factor = 4.0f;
  p.original_max_position = 256;
  p.beta_fast = 32.0f;
  p.beta_slow = 1.0f;
  return p;
}

struct Token {
  int32_t seq, pos;
  std::vector<float> q, k, v;
};

class Scenario {
 public:
  // `layer0`: the device's layer 0 gets this geometry and dtype instead (state groups of
  // different KV geometry); the reference keeps every layer alike.
  Scenario(Device& d, const Config& c, int32_t layers, int32_t block_size, int32_t max_blocks, int32_t seqs, Rng& rng,
           const backend::KvLayerConfig* layer0 = nullptr)
      : d_(d), c_(c), layers_(layers), bs_(block_size), max_blocks_(max_blocks) {
    num_blocks_ = seqs * max_blocks;
    auto kv = backend::KvCacheConfig::uniform(layers, c.kv_heads, c.head_dim, block_size, num_blocks_, c.kv);
    if (layer0) kv.layers[0] = *layer0;
    d.check(d.allocate_kv(kv), "allocate_kv");
    const size_t n = static_cast<size_t>(layers) * num_blocks_ * static_cast<size_t>(block_bytes());
    kc_.assign(n, 0);
    vc_.assign(n, 0);
    tables_ = scattered_block_tables(seqs, max_blocks, rng);
    if (c.has_rope) table_ = ref::rope_table(c.rope);
    if (c.qk_norm) {
      q_norm_ = rng.floats(static_cast<size_t>(c.head_dim));
      k_norm_ = rng.floats(static_cast<size_t>(c.head_dim));
      q_norm_w_ = d.f32_weight("q_norm", q_norm_);
      k_norm_w_ = d.f32_weight("k_norm", k_norm_);
    }
  }

  Token token(Rng& rng, int32_t seq, int32_t pos) {
    const size_t qw = static_cast<size_t>(c_.heads) * c_.head_dim, kw = static_cast<size_t>(c_.kv_heads) * c_.head_dim;
    return Token{seq, pos, rng.floats(qw), rng.floats(kw), rng.floats(kw)};
  }

  struct Result {
    std::vector<float> out, q, k;              // GPU
    std::vector<float> ref_out, ref_q, ref_k;  // CPU
  };

  // One step over `toks` (sequences in the order they first appear) on layer `layer`;
  // `then` (optional) runs in the step right after the attention, given its output.
  Result step(const std::vector<Token>& toks, int32_t layer, const std::function<void(memra_tensor&)>& then = {}) {
    std::vector<int32_t> order;
    for (const Token& t : toks)
      if (std::find(order.begin(), order.end(), t.seq) == order.end()) order.push_back(t.seq);
    const int64_t T = static_cast<int64_t>(toks.size());
    const int64_t qw = static_cast<int64_t>(c_.heads) * c_.head_dim, kw = static_cast<int64_t>(c_.kv_heads) * c_.head_dim;
    std::vector<float> q, k, v;
    std::vector<int32_t> ids, pos, seq_index, seq_lens(order.size(), 0), tables;
    for (const Token& t : toks) {
      q.insert(q.end(), t.q.begin(), t.q.end());
      k.insert(k.end(), t.k.begin(), t.k.end());
      v.insert(v.end(), t.v.begin(), t.v.end());
      ids.push_back(0);
      pos.push_back(t.pos);
      const auto si = std::find(order.begin(), order.end(), t.seq) - order.begin();
      seq_index.push_back(static_cast<int32_t>(si));
      seq_lens[static_cast<size_t>(si)] = std::max(seq_lens[static_cast<size_t>(si)], t.pos + 1);
    }
    for (int32_t s : order) tables.insert(tables.end(), tables_[static_cast<size_t>(s)].begin(), tables_[static_cast<size_t>(s)].end());
    memra_forward_batch b{};
    b.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
    b.num_tokens = static_cast<int32_t>(T);
    b.token_ids = ids.data();
    b.positions = pos.data();
    b.seq_index = seq_index.data();
    b.num_seqs = static_cast<int32_t>(order.size());
    b.seq_lens = seq_lens.data();
    b.block_tables = tables.data();
    b.max_blocks_per_seq = max_blocks_;

    memra_attention_params p{};
    p.struct_size = MEMRA_ATTENTION_PARAMS_STRUCT_SIZE;
    p.layer = layer;
    p.num_heads = c_.heads;
    p.num_kv_heads = c_.kv_heads;
    p.head_dim = c_.head_dim;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
    p.sliding_window = c_.window;
    p.logit_softcap = c_.softcap;
    p.rope = c_.has_rope ? &c_.rope : nullptr;
    p.q_norm = q_norm_w_;
    p.k_norm = k_norm_w_;
    p.qk_norm_eps = kQkNormEps;

    d_.begin_step();
    memra_tensor qt = d_.upload(q, {T, qw}), kt = d_.upload(k, {T, kw});
    const memra_tensor vt = d_.upload(v, {T, kw});
    memra_tensor out = d_.upload(std::vector<float>(static_cast<size_t>(T * qw), NAN), {T, qw});
    d_.check(d_.ops().attention(d_.ctx(), &p, &b, &qt, &kt, &vt, &out), "attention");
    if (then) then(out);
    Result r;
    r.out = d_.download(out);
    r.q = d_.download(qt);
    r.k = d_.download(kt);

    // The CPU backend's sequence of reference calls.
    ref::PagedKvLayer L;
    const int64_t block_bytes = this->block_bytes();
    L.k = kc_.data() + layer * num_blocks_ * block_bytes;
    L.v = vc_.data() + layer * num_blocks_ * block_bytes;
    L.element = kv_element(c_.kv);
    L.block_size = bs_;
    L.kv_heads = c_.kv_heads;
    L.head_dim = c_.head_dim;
    r.ref_q = q;
    r.ref_k = k;
    if (c_.qk_norm) {  // the CPU backend's order: the per-head norms over every token, then RoPE
      ref::rms_norm(r.ref_q.data(), q_norm_.data(), T * c_.heads, c_.head_dim, kQkNormEps, 0.0f, r.ref_q.data());
      ref::rms_norm(r.ref_k.data(), k_norm_.data(), T * c_.kv_heads, c_.head_dim, kQkNormEps, 0.0f, r.ref_k.data());
    }
    r.ref_out.assign(static_cast<size_t>(T * qw), 0.0f);
    for (int64_t t = 0; t < T; ++t) {
      const int32_t* table = tables_[static_cast<size_t>(toks[static_cast<size_t>(t)].seq)].data();
      if (c_.has_rope) {
        ref::rope_apply(table_, c_.rope, pos[static_cast<size_t>(t)], r.ref_q.data() + t * qw, c_.heads, c_.head_dim);
        ref::rope_apply(table_, c_.rope, pos[static_cast<size_t>(t)], r.ref_k.data() + t * kw, c_.kv_heads, c_.head_dim);
      }
      // A 16-bit cache stores the device's RoPE'd k, rounded by the reference: the CPU's and
      // the GPU's RoPE differ by ~1 f32 ulp (the rope checks bound it), and where that
      // straddles a rounding boundary the stored K would differ by one 16-bit ulp
      // (2^13 to 2^16 times more), which the attention bound is not about. The rounding
      // itself (RNE of the device's f32 k) is still the reference's; so is an fp8 row's
      // quantisation (its scale and codes).
      const float* kw_row = (c_.kv != MEMRA_DTYPE_F32 ? r.k : r.ref_k).data() + t * kw;
      ref::paged_kv_write(L, table, pos[static_cast<size_t>(t)], kw_row, v.data() + t * kw);
    }
    for (int64_t t = 0; t < T; ++t) {
      const int32_t* table = tables_[static_cast<size_t>(toks[static_cast<size_t>(t)].seq)].data();
      ref::paged_attention(L, table, pos[static_cast<size_t>(t)], r.ref_q.data() + t * qw, c_.heads, p.scale, c_.window,
                           c_.softcap, r.ref_out.data() + t * qw);
    }
    return r;
  }

  int64_t qw() const { return static_cast<int64_t>(c_.heads) * c_.head_dim; }
  // Bytes of one KV block of one layer (fp8: the codes, then the rows' scales).
  int64_t block_bytes() const {
    return static_cast<int64_t>(bs_) * c_.kv_heads * static_cast<int64_t>(backend::kv_row_bytes(c_.kv, c_.head_dim));
  }

 private:
  Device& d_;
  Config c_;
  int32_t layers_, bs_, max_blocks_, num_blocks_ = 0;
  std::vector<uint8_t> kc_, vc_;  // the reference caches, elements of c_.kv
  std::vector<std::vector<int32_t>> tables_;
  ref::RopeTable table_;
  static constexpr float kQkNormEps = 1e-6f;
  std::vector<float> q_norm_, k_norm_;
  const memra_weight* q_norm_w_ = nullptr;
  const memra_weight* k_norm_w_ = nullptr;
};

std::vector<float> row(const std::vector<float>& v, int64_t i, int64_t width) {
  return std::vector<float>(v.begin() + i * width, v.begin() + (i + 1) * width);
}

}  // namespace

// A layer after a layer of another KV geometry and dtype (a cache sized per state group)
// computes bitwise what it computes in a cache of its own geometry throughout.
void check_mixed_geometry(Device& d, Report& r, int32_t n) {
  for (const memra_dtype kv : {MEMRA_DTYPE_F32, MEMRA_DTYPE_F16, MEMRA_DTYPE_BF16}) {
    const std::string name = std::string("bitwise attention gqa 8/2 hd128 ") + kv_name(kv) +
                             "-kv on layer 1 after a layer of 4 kv heads of hd64 in another dtype == a uniform cache";
    r.guard(name, [&] {
      const Config c{"", 8, 2, 128, true, rope(128, 1, 10000.0f, MEMRA_ROPE_SCALING_NONE), 0, 0.0f, kv};
      const backend::KvLayerConfig other{4, 64, kv == MEMRA_DTYPE_F32 ? MEMRA_DTYPE_BF16 : MEMRA_DTYPE_F32};
      const int32_t bs = 16, max_blocks = (n + 1 + bs - 1) / bs + 1;
      std::vector<Token> toks;
      {
        Rng token_rng(11);
        Rng table_rng(7);
        Scenario shapes(d, c, 1, bs, max_blocks, 1, table_rng);
        for (int32_t p = 0; p <= n; ++p) toks.push_back(shapes.token(token_rng, 0, p));
      }
      std::vector<float> out[2];
      for (int i = 0; i < 2; ++i) {
        Rng table_rng(7);  // the same paging for both
        Scenario s(d, c, 2, bs, max_blocks, 1, table_rng, i == 0 ? nullptr : &other);
        auto pre = s.step(std::vector<Token>(toks.begin(), toks.end() - 1), 1);
        if (i == 1) r.nmse(name + ": prefill vs reference", compare(pre.out, pre.ref_out), kAttentionBound);
        out[i] = pre.out;
        const auto dec = s.step({toks.back()}, 1).out;
        out[i].insert(out[i].end(), dec.begin(), dec.end());
      }
      r.bitwise(name, compare(out[1], out[0]));
    });
  }
}

// The decode attention's fused rows for the o projection: with integer-activation weights
// on the backend (and the fused decode path on), the kernel that writes a decode step's
// output (the chunk kernel when every row has one chunk, else the merge) also writes it as
// the o projection's int8x32 rows, and the matmul takes them: its output is bitwise
// int8_matmul_ref of the downloaded attention output, and the backend counts one fused
// quantisation per step. With fp8 weights (a backend of their own: the fused format
// follows the weights it holds, int8x32 first) the chunk kernel writes the fp8 GEMV's
// prepared rows on one-chunk steps only: the matmul's output is bitwise the same matmul
// over the downloaded output uploaded afresh (which prepares its rows itself), one fused
// step of two.
void check_attention_fused_rows(Device& dev, Report& r, Rng& rng) {
  for (const std::string scheme : {"q8_0", "fp8"})
    for (const memra_dtype kv : {MEMRA_DTYPE_F16, MEMRA_DTYPE_BF16}) {
      const bool fp8 = scheme == "fp8";
      const std::string name = std::string("fused decode attention gqa 8/2 hd128 ") + kv_name(kv) + "-kv -> o projection " +
                               scheme + ": rows of 1 and of 4 chunks, and of 1 chunk only";
      r.guard(name, [&] {
        std::unique_ptr<Device> own;  // the fused path is a backend setting (on by default)
        if (fp8 || !dev.options().fuse_decode) own = dev.reopen([](backend::BackendOptions& b) { b.fuse_decode = true; });
        Device& d = own ? *own : dev;
        const Config c{"", 8, 2, 128, true, rope(128, 1, 10000.0f, MEMRA_ROPE_SCALING_NONE), 0, 0.0f, kv};
        const int32_t bs = 16, n = 200, max_blocks = (n + 1 + bs - 1) / bs + 1;
        const int64_t rows = 256, cols = 8 * 128;
        const std::vector<uint8_t> bytes = random_weight(rng, scheme, rows, cols, "random");
        const memra_weight* wo = d.weight("wo_fused_attention_" + scheme, scheme, dtype_of(scheme), {rows, cols}, bytes);
        Scenario s(d, c, 1, bs, max_blocks, 2, rng);
        std::vector<Token> pre;
        for (int32_t p = 0; p < n; ++p) pre.push_back(s.token(rng, 0, p));
        for (int32_t p = 0; p < 30; ++p) pre.push_back(s.token(rng, 1, p));
        s.step(pre, 0);  // (more than 64 rows: no fusion)
        std::string bad;
        int64_t fused = 0;
        const std::vector<std::vector<Token>> steps = {{s.token(rng, 0, n), s.token(rng, 1, 30)}, {s.token(rng, 1, 31)}};
        for (const auto& toks : steps) {
          const auto m = static_cast<int64_t>(toks.size());
          memra_tensor y{};
          const backend::BackendStats before = d.backend().stats();
          backend::BackendStats after;
          const auto res = s.step(toks, 0, [&](memra_tensor& out) {
            y = d.tensor({m, rows});
            d.check(d.ops().matmul(d.ctx(), &out, wo, nullptr, &y), "matmul o");
            after = d.backend().stats();
          });
          fused += after.fused_act_quantisations - before.fused_act_quantisations;
          std::vector<float> ref(static_cast<size_t>(m * rows));
          if (fp8) {
            memra_tensor x = d.upload(res.out, {m, cols}), yr = d.tensor({m, rows});
            d.check(d.ops().matmul(d.ctx(), &x, wo, nullptr, &yr), "matmul o (unfused)");
            ref = d.download(yr);
          } else if (!int8_matmul_ref(scheme, bytes, rows, cols, res.out, m, nullptr, ref.data())) {
            throw Failure("reference refused the shape");
          }
          const Comparison cmp = compare(d.download(y), ref);
          if (!cmp.bitwise) bad += (bad.empty() ? "" : ", ") + std::to_string(m) + "-row step differs (nmse " + fmt(cmp.nmse) + ")";
          if (compare(res.out, res.ref_out).nmse > kAttentionBound) bad += (bad.empty() ? "" : ", ") + std::string("attention out of bound");
        }
        const int64_t want = fp8 ? 1 : 2;
        r.add(name, bad.empty() && fused == want,
              (bad.empty() ? std::string(fp8 ? "o projection bitwise == the unfused matmul of the attention output"
                                             : "o projection bitwise == int8 reference of the attention output")
                           : bad) +
                  "; fused " + std::to_string(fused) + "/" + std::to_string(want));
      });
    }
}

void check_attention(Device& d, Report& r, const CheckOptions& o) {
  Rng rng(o.seed ^ 0x6174746e);
  std::vector<Config> configs = {
      {"gqa 8/2 hd128 neox", 8, 2, 128, true, rope(128, 1, 10000.0f, MEMRA_ROPE_SCALING_NONE), 0, 0.0f},
      {"gqa 4/4 hd64 interleaved llama3 window=100 softcap=30", 4, 4, 64, true, rope(64, 0, 500000.0f, MEMRA_ROPE_SCALING_LLAMA3), 100, 30.0f},
      {"gqa 6/2 hd128 yarn partial-rotary 64", 6, 2, 128, true, rope(64, 1, 1000000.0f, MEMRA_ROPE_SCALING_YARN), 0, 0.0f},
      {"mha 2/2 hd256 no-rope", 2, 2, 256, false, {}, 0, 0.0f},
      // The decode kernel's multi-pass paths: 10 q heads per kv head (score passes of
      // 4 + 4 + 2 heads, output passes of 8 + 2), and head_dim 96 (lanes and threads idle).
      {"gqa 10/1 hd128 neox window=200", 10, 1, 128, true, rope(128, 1, 10000.0f, MEMRA_ROPE_SCALING_NONE), 200, 0.0f},
      {"gqa 6/1 hd96 neox softcap=50", 6, 1, 96, true, rope(96, 1, 10000.0f, MEMRA_ROPE_SCALING_NONE), 0, 50.0f},
      // head_dim % 16 == 8: the 16-bit kernels' last mma step reads the zeroed row pads.
      {"gqa 4/2 hd72 neox", 4, 2, 72, true, rope(72, 1, 10000.0f, MEMRA_ROPE_SCALING_NONE), 0, 0.0f},
      // Qwen3: per-head q/k norms fused into the RoPE + KV write.
      {"gqa 8/2 hd128 neox qk-norm", 8, 2, 128, true, rope(128, 1, 1000000.0f, MEMRA_ROPE_SCALING_NONE), 0, 0.0f, MEMRA_DTYPE_F32, true},
  };
  // Every config again over an f16, a bf16 and (head_dim a multiple of 16) an fp8 KV
  // cache: same bounds, same bit checks.
  for (size_t i = 0, n = configs.size(); i < n; ++i)
    for (const memra_dtype kv : {MEMRA_DTYPE_F16, MEMRA_DTYPE_BF16, MEMRA_DTYPE_F8_E4M3}) {
      if (kv == MEMRA_DTYPE_F8_E4M3 && configs[i].head_dim % 16 != 0) continue;
      Config b = configs[i];
      b.kv = kv;
      b.name += std::string(" ") + kv_name(kv) + "-kv";
      configs.push_back(b);
    }
  const int32_t n = o.quick ? 270 : 600;  // > one 256-position chunk: split-KV runs
  for (const Config& c : configs) {
    const std::string base = "attention " + c.name;
    r.guard(base, [&] {
      const int32_t bs = 16, max_blocks = (n + 1 + bs - 1) / bs + 1;
      Scenario s(d, c, 2, bs, max_blocks, 5, rng);
      const int32_t layer = 1;
      const int64_t qw = s.qw();
      // Prefill A.
      std::vector<Token> a;
      for (int32_t p = 0; p < n; ++p) a.push_back(s.token(rng, 0, p));
      auto pa = s.step(a, layer);
      r.nmse(base + " prefill T=" + std::to_string(n) + " out", compare(pa.out, pa.ref_out), kAttentionBound);
      if (c.has_rope) {
        r.nmse("rope " + c.name + " q", compare(pa.q, pa.ref_q), kRopeBound);
        r.nmse("rope " + c.name + " k", compare(pa.k, pa.ref_k), kRopeBound);
      }
      // B, C, D prefills in one mixed step.
      std::vector<Token> bcd;
      const int32_t lens[3] = {40, 17, 5};
      for (int32_t si = 0; si < 3; ++si)
        for (int32_t p = 0; p < lens[si]; ++p) bcd.push_back(s.token(rng, si + 1, p));
      auto pb = s.step(bcd, layer);
      r.nmse(base + " mixed prefill of 3 sequences", compare(pb.out, pb.ref_out), kAttentionBound);
      // Decode A alone, then the same token beside B, C, D (A third in the batch).
      const Token next = s.token(rng, 0, n);
      auto alone = s.step({next}, layer);
      r.nmse(base + " decode pos=" + std::to_string(n), compare(alone.out, alone.ref_out), kAttentionBound);
      std::vector<Token> beside = {s.token(rng, 1, 40), s.token(rng, 2, 17), next, s.token(rng, 3, 5)};
      auto bb = s.step(beside, layer);
      r.nmse(base + " decode beside 3 sequences", compare(bb.out, bb.ref_out), kAttentionBound);
      r.bitwise("bitwise " + base + " decode row alone vs beside 3 sequences", compare(row(bb.out, 2, qw), alone.out));
      // Sequence E = A's tokens 0..n in one prefill: its rows equal A's prefill rows and
      // A's decode row (a verify step computes what plain decode computed).
      std::vector<Token> e = a;
      e.push_back(next);
      for (Token& t : e) t.seq = 4;
      auto pe = s.step(e, layer);
      std::vector<float> a_rows = pa.out;
      a_rows.insert(a_rows.end(), alone.out.begin(), alone.out.end());
      r.bitwise("bitwise " + base + " prefill rows == decode rows", compare(pe.out, a_rows));
    });
  }
  check_mixed_geometry(d, r, o.quick ? 270 : 600);
  check_attention_fused_rows(d, r, rng);
}

}  // namespace memra::kcheck
