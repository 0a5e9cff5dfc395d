// Prefill attention (kernels/attention/prefill_attention_mma.cu) through the backend's
// attention op on steps whose batch flags prompt rows (memra_forward_batch.
// prompt_tokens), against the CPU reference (kernels/attention/attention_ref, after the
// reference RoPE and KV write), and its exactness contract bit for bit:
//  - accuracy (bound kAttentionBound, the decode kernel's) on prompts of 1..2100
//    tokens, several prompts and decode rows in one step, a prompt that starts
//    mid-way over KV written by an earlier step (the prefix-cache case), GQA groups
//    1, 3, 4 and 8, sliding windows (a multiple of 16 and not), logit softcap,
//    head_dim 64 and 128 (and 256, which stays on the decode kernel), peaky and
//    uniform softmax inputs;
//  - chunking invariance: the same prompt in one step and in chunks of 1, 7, 64 and
//    300 tokens (each chunk over the KV of the earlier ones, beside a decode row of
//    another sequence) gives bitwise-identical rows for every token;
//  - a mixed step's decode rows are bitwise a decode-only step's, and its prompt
//    rows bitwise a prompt-only step's;
//  - all of it again over an f16 and a bf16 KV cache for several configs (the _f16 /
//    _bf16 kernels against the reference over its 16-bit cache, same bound).
// A failing line names the first differing (or worst) token row: its position,
// sequence and q head.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "kernels/attention/attention_ref.hpp"
#include "kernels/rope/rope_ref.hpp"

namespace memra::kcheck {
namespace {

struct PConfig {
  std::string name;
  int32_t heads, kv_heads, head_dim;
  bool has_rope;
  int32_t window;
  float softcap;
  float q_scale;          // peaky softmax when large
  std::string k_flavour;  // "random" | "zeros" (uniform softmax)
  memra_dtype kv = MEMRA_DTYPE_F32;
};

memra_rope_params neox_rope(int32_t dim) {
  memra_rope_params p{};
  p.struct_size = MEMRA_ROPE_PARAMS_STRUCT_SIZE;
  p.rotary_dim = dim;
  p.neox_style = 1;
  p.theta = 1000000.0f;
  p.scaling = MEMRA_ROPE_SCALING_NONE;
  p.factor = 1.0f;
  return p;
}

// One token's inputs (before RoPE).
struct TokenData {
  std::vector<float> q, k, v;
};

struct Row {
  int32_t seq, pos;
  bool prompt;
  const TokenData* data;
};

// The device KV cache (layer 1 of 2) and its CPU mirror; sequences own shuffled
// physical blocks.
class Cache {
 public:
  Cache(Device& d, const PConfig& c, int32_t seqs, int32_t max_len, Rng& rng) : d_(d), c_(c) {
    max_blocks_ = (max_len + kBlock - 1) / kBlock + 1;
    num_blocks_ = seqs * max_blocks_;
    const auto kv = backend::KvCacheConfig::uniform(kLayers, c.kv_heads, c.head_dim, kBlock, num_blocks_, c.kv);
    d.check(d.allocate_kv(kv), "allocate_kv");
    const size_t n = static_cast<size_t>(kLayers) * num_blocks_ * static_cast<size_t>(block_bytes());
    kc_.assign(n, 0);
    vc_.assign(n, 0);
    tables_ = scattered_block_tables(seqs, max_blocks_, rng);
    if (c.has_rope) {
      rope_ = neox_rope(c.head_dim);
      table_ = ref::rope_table(rope_);
    }
  }

  TokenData token(Rng& rng) const {
    const size_t qw = static_cast<size_t>(c_.heads) * c_.head_dim, kw = static_cast<size_t>(c_.kv_heads) * c_.head_dim;
    TokenData t{rng.floats(qw), rng.floats(kw, c_.k_flavour), rng.floats(kw)};
    for (float& x : t.q) x *= c_.q_scale;
    return t;
  }
  std::vector<TokenData> tokens(Rng& rng, int32_t n) const {
    std::vector<TokenData> v;
    for (int32_t i = 0; i < n; ++i) v.push_back(token(rng));
    return v;
  }

  struct Out {
    std::vector<float> out, ref;  // ref empty unless asked
  };

  // One step over `rows` on layer 1; the reference rows only when with_ref.
  Out step(const std::vector<Row>& rows, bool with_ref) {
    std::vector<int32_t> order;
    for (const Row& r : rows)
      if (std::find(order.begin(), order.end(), r.seq) == order.end()) order.push_back(r.seq);
    const int64_t T = static_cast<int64_t>(rows.size());
    const int64_t qw = this->qw(), kw = static_cast<int64_t>(c_.kv_heads) * c_.head_dim;
    std::vector<float> q, k, v;
    std::vector<int32_t> ids, pos, seq_index, seq_lens(order.size(), 0), tables;
    std::vector<uint8_t> flags;
    for (const Row& r : rows) {
      q.insert(q.end(), r.data->q.begin(), r.data->q.end());
      k.insert(k.end(), r.data->k.begin(), r.data->k.end());
      v.insert(v.end(), r.data->v.begin(), r.data->v.end());
      ids.push_back(0);
      pos.push_back(r.pos);
      flags.push_back(r.prompt ? 1 : 0);
      const auto si = static_cast<size_t>(std::find(order.begin(), order.end(), r.seq) - order.begin());
      seq_index.push_back(static_cast<int32_t>(si));
      seq_lens[si] = std::max(seq_lens[si], r.pos + 1);
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
    b.prompt_tokens = flags.data();

    memra_attention_params p{};
    p.struct_size = MEMRA_ATTENTION_PARAMS_STRUCT_SIZE;
    p.layer = 1;
    p.num_heads = c_.heads;
    p.num_kv_heads = c_.kv_heads;
    p.head_dim = c_.head_dim;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
    p.sliding_window = c_.window;
    p.logit_softcap = c_.softcap;
    p.rope = c_.has_rope ? &rope_ : nullptr;

    d_.begin_step();
    memra_tensor qt = d_.upload(q, {T, qw}), kt = d_.upload(k, {T, kw});
    const memra_tensor vt = d_.upload(v, {T, kw});
    memra_tensor out = d_.upload(std::vector<float>(static_cast<size_t>(T * qw), NAN), {T, qw});
    d_.check(d_.ops().attention(d_.ctx(), &p, &b, &qt, &kt, &vt, &out), "attention");
    Out r;
    r.out = d_.download(out);

    // The CPU backend's sequence of reference calls (the mirror is always updated).
    ref::PagedKvLayer L;
    L.k = kc_.data() + 1 * num_blocks_ * block_bytes();
    L.v = vc_.data() + 1 * num_blocks_ * block_bytes();
    L.element = c_.kv == MEMRA_DTYPE_F16       ? ref::KvElement::f16
                : c_.kv == MEMRA_DTYPE_BF16    ? ref::KvElement::bf16
                : c_.kv == MEMRA_DTYPE_F8_E4M3 ? ref::KvElement::fp8
                                               : ref::KvElement::f32;
    L.block_size = kBlock;
    L.kv_heads = c_.kv_heads;
    L.head_dim = c_.head_dim;
    for (int64_t t = 0; t < T; ++t) {
      const Row& row = rows[static_cast<size_t>(t)];
      const int32_t* table = tables_[static_cast<size_t>(row.seq)].data();
      if (c_.has_rope) {
        ref::rope_apply(table_, rope_, row.pos, q.data() + t * qw, c_.heads, c_.head_dim);
        ref::rope_apply(table_, rope_, row.pos, k.data() + t * kw, c_.kv_heads, c_.head_dim);
      }
      ref::paged_kv_write(L, table, row.pos, k.data() + t * kw, v.data() + t * kw);
    }
    if (with_ref) {
      r.ref.assign(static_cast<size_t>(T * qw), 0.0f);
      for (int64_t t = 0; t < T; ++t) {
        const Row& row = rows[static_cast<size_t>(t)];
        ref::paged_attention(L, tables_[static_cast<size_t>(row.seq)].data(), row.pos, q.data() + t * qw, c_.heads,
                             p.scale, c_.window, c_.softcap, r.ref.data() + t * qw);
      }
    }
    return r;
  }

  int64_t qw() const { return static_cast<int64_t>(c_.heads) * c_.head_dim; }
  int32_t head_dim() const { return c_.head_dim; }

 private:
  // Bytes of one KV block of one layer (fp8: the codes, then the rows' scales).
  int64_t block_bytes() const {
    return static_cast<int64_t>(kBlock) * c_.kv_heads * static_cast<int64_t>(backend::kv_row_bytes(c_.kv, c_.head_dim));
  }
  static constexpr int32_t kLayers = 2, kBlock = 16;
  Device& d_;
  PConfig c_;
  int32_t max_blocks_ = 0, num_blocks_ = 0;
  std::vector<uint8_t> kc_, vc_;  // the reference caches, elements of c_.kv
  std::vector<std::vector<int32_t>> tables_;
  memra_rope_params rope_{};
  ref::RopeTable table_;
};

std::vector<float> rows_of(const std::vector<float>& v, int64_t first, int64_t count, int64_t width) {
  return std::vector<float>(v.begin() + first * width, v.begin() + (first + count) * width);
}

// Normalised MSE over all rows; the detail names the worst row (position, sequence, head).
void nmse_line(Report& r, const std::string& name, const std::vector<float>& out, const std::vector<float>& ref,
               const std::vector<Row>& rows, int64_t qw, int32_t head_dim) {
  const Comparison c = compare(out, ref);
  const bool ok = c.nonfinite_mismatch == 0 && c.nmse <= kAttentionBound;
  std::string detail = "nmse " + fmt(c.nmse) + " <= " + fmt(kAttentionBound) + ", max abs diff " + fmt(c.max_abs);
  if (c.nonfinite_mismatch) detail += ", " + std::to_string(c.nonfinite_mismatch) + " non-finite mismatches";
  if (!ok && out.size() == ref.size()) {
    double worst = -1;
    size_t wt = 0, wh = 0;
    for (size_t t = 0; t < rows.size(); ++t)
      for (size_t h = 0; h < static_cast<size_t>(qw / head_dim); ++h) {
        double se = 0, sr = 0;
        for (int32_t i = 0; i < head_dim; ++i) {
          const size_t k = t * static_cast<size_t>(qw) + h * static_cast<size_t>(head_dim) + static_cast<size_t>(i);
          const double d = std::isfinite(out[k]) ? static_cast<double>(out[k]) - ref[k] : INFINITY;
          se += d * d;
          sr += static_cast<double>(ref[k]) * ref[k];
        }
        const double e = sr > 0 ? se / sr : se;
        if (!(e <= worst)) worst = e, wt = t, wh = h;
      }
    detail += "; worst row: token " + std::to_string(wt) + " (position " + std::to_string(rows[wt].pos) + ", sequence " +
              std::to_string(rows[wt].seq) + (rows[wt].prompt ? ", prompt" : ", generated") + ") head " +
              std::to_string(wh) + " nmse " + fmt(worst);
  }
  r.add(name, ok, detail);
}

// Bitwise; the detail names the first differing element's row (as position) and head.
void bitwise_line(Report& r, const std::string& name, const std::vector<float>& out, const std::vector<float>& expect,
                  int64_t qw, int32_t head_dim, const std::vector<int32_t>& positions) {
  const Comparison c = compare(out, expect);
  std::string detail = c.bitwise ? "bitwise equal" : "differs: max abs diff " + fmt(c.max_abs) + ", nmse " + fmt(c.nmse);
  if (!c.bitwise && out.size() == expect.size()) {
    size_t differing = 0, first = out.size();
    for (size_t i = 0; i < out.size(); ++i)
      if (std::memcmp(&out[i], &expect[i], 4) != 0) {
        if (first == out.size()) first = i;
        ++differing;
      }
    const size_t row = first / static_cast<size_t>(qw);
    detail += "; " + std::to_string(differing) + " elements differ, first at row " + std::to_string(row) +
              (row < positions.size() ? " (position " + std::to_string(positions[row]) + ")" : std::string()) + " head " +
              std::to_string((first % static_cast<size_t>(qw)) / static_cast<size_t>(head_dim)) + " dim " +
              std::to_string(first % static_cast<size_t>(head_dim));
  }
  r.add(name, c.bitwise, detail);
}

std::vector<Row> prompt_rows(int32_t seq, const std::vector<TokenData>& data, int32_t from, int32_t to, bool prompt = true) {
  std::vector<Row> rows;
  for (int32_t p = from; p < to; ++p) rows.push_back({seq, p, prompt, &data[static_cast<size_t>(p)]});
  return rows;
}

std::vector<int32_t> positions_of(const std::vector<Row>& rows) {
  std::vector<int32_t> p;
  for (const Row& r : rows) p.push_back(r.pos);
  return p;
}

void run_config(Device& d, Report& r, const CheckOptions& o, const PConfig& c, Rng& rng) {
  const std::string base = "prefill attention " + c.name;
  const int32_t n = o.quick ? 300 : 2100;  // the long prompt
  // Sequences: 0 the long prompt in one step; 1..4 the same prompt in chunks of 1, 7,
  // 64, 300; 5 a decode sequence beside the chunks; 6..10 short prompts; 11 the
  // prefix-cache case; 12, 13 decode rows of the mixed step.
  Cache cache(d, c, 14, n + 8, rng);
  const int64_t qw = cache.qw();
  const std::vector<TokenData> prompt = cache.tokens(rng, n);

  // 1. The long prompt in one step, against the reference.
  const std::vector<Row> whole = prompt_rows(0, prompt, 0, n);
  const Cache::Out one = cache.step(whole, true);
  nmse_line(r, base + " prompt T=" + std::to_string(n) + " in one step", one.out, one.ref, whole, qw, c.head_dim);

  // 2. Chunking invariance: the same prompt in chunks, each beside a decode row of
  //    sequence 5 (positions 0, 1, ...), bitwise equal to the one-step rows.
  const std::vector<TokenData> side = cache.tokens(rng, n + 1);
  int32_t side_pos = 0;
  const int32_t chunk_sizes[] = {1, 7, 64, 300};
  for (int32_t ci = 0; ci < 4; ++ci) {
    const int32_t chunk = chunk_sizes[ci], seq = 1 + ci;
    std::vector<float> got;
    for (int32_t p0 = 0; p0 < n; p0 += chunk) {
      std::vector<Row> rows = prompt_rows(seq, prompt, p0, std::min(n, p0 + chunk));
      const size_t prompt_count = rows.size();
      if (ci % 2 == 1 && side_pos < n) {  // chunks of 7 and 300: a decode row in front of the chunk
        rows.insert(rows.begin(), Row{5, side_pos, false, &side[static_cast<size_t>(side_pos)]});
        ++side_pos;
      }
      const Cache::Out s = cache.step(rows, false);
      const int64_t first = static_cast<int64_t>(rows.size() - prompt_count);
      const std::vector<float> part = rows_of(s.out, first, static_cast<int64_t>(prompt_count), qw);
      got.insert(got.end(), part.begin(), part.end());
    }
    bitwise_line(r, "bitwise " + base + " chunks of " + std::to_string(chunk) + " == one step (every row)", got, one.out,
                 qw, c.head_dim, positions_of(whole));
  }

  // 3. A prefix written by an earlier step (sequence 11: positions 0..99), then a
  //    mixed step: short prompts of 1, 17, 64, 65, 129 tokens (sequences 6..10), the
  //    rest of sequence 11 from position 100 (the prefix-cache case), and decode rows
  //    of sequences 12 and 13 over earlier KV (written by decode-flagged steps).
  const std::vector<TokenData> pre = cache.tokens(rng, 160);
  const std::vector<TokenData> d12 = cache.tokens(rng, 80), d13 = cache.tokens(rng, 80);
  (void)cache.step(prompt_rows(11, pre, 0, 100), false);
  (void)cache.step(prompt_rows(12, d12, 0, 79, false), false);
  (void)cache.step(prompt_rows(13, d13, 0, 40, false), false);
  const int32_t lens[] = {1, 17, 64, 65, 129};
  std::vector<std::vector<TokenData>> shorts;
  for (int32_t len : lens) shorts.push_back(cache.tokens(rng, len));
  std::vector<Row> mixed = {Row{12, 79, false, &d12[79]}};
  for (int32_t i = 0; i < 5; ++i) {
    const std::vector<Row> rows = prompt_rows(6 + i, shorts[static_cast<size_t>(i)], 0, lens[i]);
    mixed.insert(mixed.end(), rows.begin(), rows.end());
    if (i == 2) mixed.push_back(Row{13, 40, false, &d13[40]});
  }
  const std::vector<Row> tail = prompt_rows(11, pre, 100, 160);
  mixed.insert(mixed.end(), tail.begin(), tail.end());
  const Cache::Out m = cache.step(mixed, true);
  nmse_line(r, base + " mixed step: 6 prompts (one from position 100) + 2 decode rows", m.out, m.ref, mixed, qw, c.head_dim);

  // 4. The same rows again, split: decode rows alone (an unflagged step, the decode
  //    kernel over every row) and prompt rows alone; bitwise the mixed step's rows.
  std::vector<Row> decode_only, prompt_only;
  std::vector<float> m_decode, m_prompt;
  for (size_t i = 0; i < mixed.size(); ++i) {
    const std::vector<float> row = rows_of(m.out, static_cast<int64_t>(i), 1, qw);
    (mixed[i].prompt ? prompt_only : decode_only).push_back(mixed[i]);
    (mixed[i].prompt ? m_prompt : m_decode).insert((mixed[i].prompt ? m_prompt : m_decode).end(), row.begin(), row.end());
  }
  const Cache::Out dd = cache.step(decode_only, false);
  bitwise_line(r, "bitwise " + base + " mixed step's decode rows == a decode-only step", m_decode, dd.out, qw, c.head_dim,
               positions_of(decode_only));
  const Cache::Out pp = cache.step(prompt_only, false);
  bitwise_line(r, "bitwise " + base + " mixed step's prompt rows == a prompt-only step", m_prompt, pp.out, qw, c.head_dim,
               positions_of(prompt_only));
}

}  // namespace

void check_prefill_attention(Device& d, Report& r, const CheckOptions& o) {
  Rng rng(o.seed ^ 0x70726566);
  std::vector<PConfig> configs = {
      {"gqa 8/2 hd128 neox", 8, 2, 128, true, 0, 0.0f, 1.0f, "random"},
      {"gqa 8/1 hd128 softcap=30", 8, 1, 128, false, 0, 30.0f, 1.0f, "random"},
      {"mha 4/4 hd64 neox window=128", 4, 4, 64, true, 128, 0.0f, 1.0f, "random"},
      {"gqa 6/2 hd64 window=37 softcap=20", 6, 2, 64, false, 37, 20.0f, 1.0f, "random"},
      {"gqa 8/2 hd128 peaky (q x4)", 8, 2, 128, false, 0, 0.0f, 4.0f, "random"},
      {"gqa 4/1 hd128 uniform (k = 0)", 4, 1, 128, false, 0, 0.0f, 1.0f, "zeros"},
      {"mha 2/2 hd256 (decode kernel where 192 KB of shared memory is not there)", 2, 2, 256, false, 0, 0.0f, 1.0f, "random"},
      {"gqa 6/1 hd256 neox window=40 (Qwen3.5's group)", 6, 1, 256, true, 40, 0.0f, 1.0f, "random"},
  };
  // An f16 and a bf16 KV cache: both head sizes of the tensor-core path, windows,
  // softcap, peaky scores, and the decode-kernel fallback.
  for (const memra_dtype kv : {MEMRA_DTYPE_F16, MEMRA_DTYPE_BF16})
    for (const size_t i : {0u, 2u, 3u, 4u, 6u, 7u}) {
      PConfig c = configs[i];
      c.kv = kv;
      c.name += kv == MEMRA_DTYPE_F16 ? " f16-kv" : " bf16-kv";
      configs.push_back(c);
    }
  // An fp8 KV cache, on the configs without RoPE (the reference then quantises the very k
  // the device does, so the codes are the same; a RoPE'd k one ulp off may flip a code).
  for (const size_t i : {1u, 3u, 4u, 6u}) {
    PConfig c = configs[i];
    c.kv = MEMRA_DTYPE_F8_E4M3;
    c.name += " fp8-kv";
    configs.push_back(c);
  }
  for (const PConfig& c : configs) {
    const std::string base = "prefill attention " + c.name;
    r.guard(base, [&] { run_config(d, r, o, c, rng); });
  }
}

}  // namespace memra::kcheck
