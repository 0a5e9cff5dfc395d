// Device sampling (kernels/sampling/sampling.cu) against the canonical CPU reference:
// the device token must EQUAL the reference token for every row and parameter set
// (random and adversarial rows, small vocabularies and 151936), a row's token must not
// depend on the other rows of the launch, and the shared arithmetic (memra_exp,
// Philox) must give the host's bits on the device.
#include <cmath>
#include <cstring>

#include "host/engine/philox.hpp"
#include "host/tools/memra-kernel-check/checks.hpp"
#include "kernels/sampling/sampling_ref.hpp"

namespace memra::kcheck {
namespace {

using sampling::BiasEntry;
using sampling::PenaltyEntry;
using sampling::RowParams;

memra_kernel* sampling_kernel(Device& d, const char* name) {
  memra_kernel_module* m = nullptr;
  d.check(d.kernel_module_load("sampling", &m), "kernel_module_load(sampling)");
  memra_kernel* k = nullptr;
  d.check(d.kernel_get(m, name, &k), std::string("kernel_get(") + name + ")");
  return k;
}

void launch_1d(Device& d, memra_kernel* k, int64_t n, void** args) {
  memra_launch_config c{};
  c.struct_size = MEMRA_LAUNCH_CONFIG_STRUCT_SIZE;
  c.grid[0] = static_cast<uint32_t>(std::min<int64_t>((n + 255) / 256, 4096));
  c.grid[1] = c.grid[2] = 1;
  c.block[0] = 256;
  c.block[1] = c.block[2] = 1;
  d.check(d.kernel_launch(k, &c, args), "kernel_launch");
}

// Step 0 of one sample: its logit_bias entries and its allowed-token bitset (empty: none).
struct Adjust {
  std::vector<BiasEntry> bias;
  std::vector<uint64_t> allowed;
};

// Device tokens of `params.size()` samples of rows `rows` of the device tensor `logits`
// (with `adjust`, one per sample, their step 0).
std::vector<int32_t> device_tokens(Device& d, const memra_tensor& logits, int64_t vocab, const std::vector<int32_t>& rows,
                                   const std::vector<RowParams>& params, const std::vector<std::vector<PenaltyEntry>>& pen,
                                   const std::vector<Adjust>* adjust = nullptr) {
  std::vector<int32_t> offsets{0};
  std::vector<PenaltyEntry> flat;
  for (const auto& p : pen) {
    flat.insert(flat.end(), p.begin(), p.end());
    offsets.push_back(static_cast<int32_t>(flat.size()));
  }
  std::vector<int32_t> bias_offsets;
  std::vector<BiasEntry> biases;
  std::vector<int64_t> mask_offsets;
  std::vector<uint64_t> masks;
  if (adjust) {
    bias_offsets.push_back(0);
    for (const Adjust& a : *adjust) {
      biases.insert(biases.end(), a.bias.begin(), a.bias.end());
      bias_offsets.push_back(static_cast<int32_t>(biases.size()));
      mask_offsets.push_back(a.allowed.empty() ? -1 : static_cast<int64_t>(masks.size()));
      masks.insert(masks.end(), a.allowed.begin(), a.allowed.end());
    }
  }
  backend::SampleRequest r;
  r.logits = static_cast<const float*>(logits.data);
  r.vocab = vocab;
  r.rows = rows;
  r.params = params;
  r.penalty_offsets = offsets;
  r.penalties = flat;
  r.bias_offsets = bias_offsets;
  r.biases = biases;
  r.mask_offsets = mask_offsets;
  r.masks = masks;
  std::vector<int32_t> tokens(rows.size(), -1);
  d.check(d.sample_rows(r, tokens.data()), "sample_rows");
  return tokens;
}

// Rows of one flavour: "random" N(0,1)*3, "equal" (all the same), "inf" (random with
// +-inf and NaN sprinkled), "huge" (+-3e38 and ordinary values), "ties" (few levels).
std::vector<float> make_row(Rng& rng, int64_t vocab, const std::string& flavour) {
  std::vector<float> x(static_cast<size_t>(vocab));
  for (auto& v : x) v = rng.normal() * 3.0f;
  if (flavour == "equal") std::fill(x.begin(), x.end(), 0.25f);
  if (flavour == "ties")
    for (auto& v : x) v = static_cast<float>(rng.uniform(0, 4));
  if (flavour == "inf" || flavour == "huge") {
    const int64_t specials = std::max<int64_t>(1, vocab / 50);
    for (int64_t s = 0; s < specials; ++s) {
      float& v = x[static_cast<size_t>(rng.uniform(0, static_cast<int>(vocab - 1)))];
      const int kind = rng.uniform(0, 2);
      if (flavour == "inf") v = kind == 0 ? INFINITY : kind == 1 ? -INFINITY : NAN;
      else v = kind == 0 ? 3e38f : kind == 1 ? -3e38f : 1e30f;
    }
  }
  return x;
}

// `rows` rows of one flavour, on the host and on the device, and their ids 0..rows-1.
struct Rows {
  std::vector<float> values;
  memra_tensor tensor;
  std::vector<int32_t> ids;
};
Rows upload_rows(Device& d, Rng& rng, int64_t rows, int64_t vocab, const std::string& flavour) {
  Rows out;
  for (int64_t i = 0; i < rows; ++i) {
    const std::vector<float> row = make_row(rng, vocab, flavour);
    out.values.insert(out.values.end(), row.begin(), row.end());
    out.ids.push_back(static_cast<int32_t>(i));
  }
  out.tensor = d.upload(out.values, {rows, vocab});
  return out;
}

// Step 0 on the device (logit_bias and grammar masks, then the sampler): the token must
// equal the reference's (ref::adjust_row, then ref::sample_row),
// for masks of every density (one token, 1 %, 90 %, none), biases on allowed and on
// masked-out ids, with and without penalties, and a row's token must not depend on the
// other rows' masks.
void check_sampling_step0(Device& d, Report& r, const CheckOptions& o, Rng& rng) {
  const int64_t rows = 12;
  std::vector<int64_t> vocabs = {37, 1025, 151936};
  for (int64_t vocab : vocabs)
    for (const char* flavour : {"random", "inf", "ties"}) {
      const std::string name = "sampling step 0 vocab=" + std::to_string(vocab) + " " + flavour +
                               " (bias + grammar mask) device token == reference";
      r.guard(name, [&] {
        d.begin_step();
        const Rows rs = upload_rows(d, rng, rows, vocab, flavour);
        const std::vector<float>& all = rs.values;
        const memra_tensor& lt = rs.tensor;
        const std::vector<int32_t>& row_ids = rs.ids;
        const size_t words = static_cast<size_t>((vocab + 63) / 64);
        int combos = 0, mismatches = 0;
        bool invariant = true;
        std::string first_bad;
        for (float t : {0.0f, 0.9f})
          for (int32_t k : {0, 40})
            for (float tp : {1.0f, 0.9f})
              for (int pen = 0; pen < 2; ++pen) {
                if (o.quick && vocab >= 151936 && combos % 2 != 0) {
                  ++combos;
                  continue;
                }
                std::vector<RowParams> ps(static_cast<size_t>(rows));
                std::vector<std::vector<PenaltyEntry>> pens(static_cast<size_t>(rows));
                std::vector<Adjust> adj(static_cast<size_t>(rows));
                for (int64_t i = 0; i < rows; ++i) {
                  RowParams& p = ps[static_cast<size_t>(i)];
                  p = RowParams{};
                  p.temperature = t;
                  p.top_k = k;
                  p.top_p = tp;
                  p.repetition_penalty = pen ? 1.3f : 1.0f;
                  p.presence_penalty = pen ? 0.5f : 0.0f;
                  p.seed = static_cast<uint64_t>(combos) * 104729u + 5;
                  p.position = static_cast<uint64_t>(i) * 17u + static_cast<uint64_t>(combos);
                  // Mask density by row: every token (no mask), one token, ~1 %, ~90 %.
                  Adjust& a = adj[static_cast<size_t>(i)];
                  const int density = static_cast<int>(i % 4);
                  if (density > 0) {
                    a.allowed.assign(words, 0);
                    auto allow = [&](int64_t id) { a.allowed[static_cast<size_t>(id >> 6)] |= uint64_t{1} << (id & 63); };
                    if (density == 1) allow(rng.uniform(0, static_cast<int>(vocab - 1)));
                    for (int64_t id = 0; id < vocab && density > 1; ++id)
                      if (rng.uniform(0, 99) < (density == 2 ? 1 : 90)) allow(id);
                    allow(vocab - 1);  // the last word's high bits stay clear: the kernel must not read them as tokens
                  }
                  for (int e = 0; e < 6 && e < vocab; ++e) {
                    const int32_t id = static_cast<int32_t>((e * 104729 + i * 31) % vocab);
                    bool dup = false;
                    for (const auto& x : a.bias) dup = dup || x.id == id;
                    if (!dup) a.bias.push_back({id, e % 2 ? 5.5f : -100.0f});
                  }
                  if (pen)
                    for (int e = 0; e < 10 && e < vocab; ++e) {
                      const int32_t id = static_cast<int32_t>((e * 7919 + i) % vocab);
                      bool dup = false;
                      for (const auto& x : pens[static_cast<size_t>(i)]) dup = dup || x.id == id;
                      if (!dup) pens[static_cast<size_t>(i)].push_back({id, (e % 4) << 1 | 1});
                    }
                }
                const std::vector<int32_t> got = device_tokens(d, lt, vocab, row_ids, ps, pens, &adj);
                for (int64_t i = 0; i < rows; ++i) {
                  const Adjust& a = adj[static_cast<size_t>(i)];
                  std::vector<float> row(all.begin() + i * vocab, all.begin() + (i + 1) * vocab);
                  ref::adjust_row(row.data(), vocab, a.bias.data(), static_cast<int32_t>(a.bias.size()),
                                  a.allowed.empty() ? nullptr : a.allowed.data(), static_cast<int64_t>(a.allowed.size()));
                  const auto& pe = pens[static_cast<size_t>(i)];
                  const int32_t want = ref::sample_row(row.data(), vocab, ps[static_cast<size_t>(i)], pe.data(),
                                                       static_cast<int32_t>(pe.size()));
                  if (got[static_cast<size_t>(i)] != want) {
                    ++mismatches;
                    if (first_bad.empty())
                      first_bad = "T=" + fmt(t) + " top_k=" + std::to_string(k) + " top_p=" + fmt(tp) + " penalties=" +
                                  std::to_string(pen) + " row " + std::to_string(i) + " (mask density " +
                                  std::to_string(i % 4) + "): device " + std::to_string(got[static_cast<size_t>(i)]) +
                                  ", reference " + std::to_string(want);
                  }
                }
                if (combos % 4 == 0) {  // one masked row alone == among rows with other masks
                  const size_t at = static_cast<size_t>(1 + combos % (rows - 1));
                  const std::vector<Adjust> one = {adj[at]};
                  const std::vector<int32_t> alone =
                      device_tokens(d, lt, vocab, {static_cast<int32_t>(at)}, {ps[at]}, {pens[at]}, &one);
                  invariant = invariant && alone[0] == got[at];
                }
                ++combos;
              }
        r.add(name, mismatches == 0,
              mismatches == 0 ? std::to_string(combos) + " parameter sets x " + std::to_string(rows) + " rows equal"
                              : std::to_string(mismatches) + " mismatches; first: " + first_bad);
        r.add("sampling step 0 vocab=" + std::to_string(vocab) + " " + flavour + " bitwise masked row alone == among 12",
              invariant, invariant ? "equal" : "a row's token depends on the other rows' masks");
      });
    }
}

}  // namespace

void check_sampling(Device& d, Report& r, const CheckOptions& o) {
  Rng rng(o.seed ^ 0x73616d70);
  r.guard("sampling memra_exp device == host bitwise", [&] {
    d.begin_step();
    std::vector<float> x;
    for (uint32_t u = 0; u < 0x42b40000u; u += o.quick ? 4099 : 257) {  // [0, 90]
      float f;
      std::memcpy(&f, &u, 4);
      x.push_back(f);
      x.push_back(-f * 1.16f);  // down to about -104.4
    }
    for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -104.0f, -103.9f, 88.72283935546875f, 88.7229f, -87.3f, -1e-30f})
      x.push_back(f);
    const memra_tensor xt = d.upload(x, {static_cast<int64_t>(x.size())});
    memra_tensor out = d.tensor({static_cast<int64_t>(x.size())});
    void* xd = xt.data;
    int64_t n = static_cast<int64_t>(x.size());
    void* args[] = {&xd, &n, &out.data};
    launch_1d(d, sampling_kernel(d, "memra_sampling_exp_test"), n, args);
    std::vector<float> ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = sampling::memra_exp(x[i]);
    r.bitwise("sampling memra_exp device == host bitwise", compare(d.download(out), ref));
  });
  r.guard("sampling philox_uniform device == host/engine/philox.hpp", [&] {
    d.begin_step();
    const int64_t n = 4096;
    std::vector<uint64_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = i < n / 2 ? static_cast<uint64_t>(i) : (static_cast<uint64_t>(rng.bits()) << 32) | rng.bits();
    // Positions travel as a float tensor's bytes (8 bytes = 2 floats each).
    std::vector<float> raw(static_cast<size_t>(2 * n));
    std::memcpy(raw.data(), pos.data(), pos.size() * 8);
    const memra_tensor pt = d.upload(raw, {2 * n});
    memra_tensor out = d.tensor({n});
    uint64_t seed = 0x123456789abcdefull;
    int64_t count = n;
    void* pd = pt.data;
    void* args[] = {&seed, &pd, &count, &out.data};
    launch_1d(d, sampling_kernel(d, "memra_sampling_philox_test"), n, args);
    std::vector<float> ref(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ref[static_cast<size_t>(i)] = engine::philox_uniform(seed, pos[static_cast<size_t>(i)]);
    r.bitwise("sampling philox_uniform device == host/engine/philox.hpp", compare(d.download(out), ref));
  });

  const int64_t rows = 16;
  std::vector<int64_t> vocabs = {1, 37, 1000, 1025, 32000, 151936};
  if (o.quick) vocabs = {1, 37, 1025, 151936};
  for (int64_t vocab : vocabs) {
    for (const char* flavour : {"random", "equal", "inf", "huge", "ties"}) {
      const std::string name = "sampling vocab=" + std::to_string(vocab) + " " + flavour + " device token == reference";
      r.guard(name, [&] {
        d.begin_step();
        const Rows rs = upload_rows(d, rng, rows, vocab, flavour);
        const std::vector<float>& all = rs.values;
        const memra_tensor& lt = rs.tensor;
        const std::vector<int32_t>& row_ids = rs.ids;
        int combos = 0, mismatches = 0;
        std::string first_bad;
        bool invariant = true;
        const std::vector<float> temps = {0.0f, 0.7f, 1.0f, 1.5f};
        const std::vector<int32_t> ks = {0, 1, 40, static_cast<int32_t>(std::max<int64_t>(1, vocab - 1))};
        const std::vector<float> tps = {1.0f, 0.9f, 0.5f};
        const std::vector<float> mps = {0.0f, 0.05f};
        for (float t : temps)
          for (int32_t k : ks)
            for (float tp : tps)
              for (float mp : mps)
                for (int pen = 0; pen < 2; ++pen) {
                  if (o.quick && vocab >= 32000 && (combos % 3) != 0) {
                    ++combos;
                    continue;
                  }
                  std::vector<RowParams> ps(static_cast<size_t>(rows));
                  std::vector<std::vector<PenaltyEntry>> pens(static_cast<size_t>(rows));
                  for (int64_t i = 0; i < rows; ++i) {
                    RowParams& p = ps[static_cast<size_t>(i)];
                    p = RowParams{};
                    p.temperature = t;
                    p.top_k = k;
                    p.top_p = tp;
                    p.min_p = mp;
                    p.repetition_penalty = pen ? 1.3f : 1.0f;
                    p.presence_penalty = pen ? 0.5f : 0.0f;
                    p.frequency_penalty = pen ? 0.25f : 0.0f;
                    p.seed = static_cast<uint64_t>(combos) * 7919u + 3;
                    p.position = static_cast<uint64_t>(i) * 131u + static_cast<uint64_t>(combos);
                    if (pen)
                      for (int e = 0; e < 20 && e < vocab; ++e) {
                        const int32_t id = static_cast<int32_t>((e * 7919 + i) % vocab);
                        bool dup = false;
                        for (const auto& x : pens[static_cast<size_t>(i)]) dup = dup || x.id == id;
                        if (!dup) pens[static_cast<size_t>(i)].push_back({id, (e % 4) << 1 | (e % 3 != 0)});
                      }
                  }
                  const std::vector<int32_t> got = device_tokens(d, lt, vocab, row_ids, ps, pens);
                  for (int64_t i = 0; i < rows; ++i) {
                    const auto& pe = pens[static_cast<size_t>(i)];
                    const int32_t want = ref::sample_row(all.data() + i * vocab, vocab, ps[static_cast<size_t>(i)], pe.data(),
                                                         static_cast<int32_t>(pe.size()));
                    if (got[static_cast<size_t>(i)] != want) {
                      ++mismatches;
                      if (first_bad.empty())
                        first_bad = "T=" + fmt(t) + " top_k=" + std::to_string(k) + " top_p=" + fmt(tp) + " min_p=" + fmt(mp) +
                                    " penalties=" + std::to_string(pen) + " row " + std::to_string(i) + ": device " +
                                    std::to_string(got[static_cast<size_t>(i)]) + ", reference " + std::to_string(want);
                    }
                  }
                  // Batch invariance: one row alone, and the same row among others in another order.
                  if (combos % 8 == 0) {
                    const int64_t at = combos % rows;
                    const std::vector<int32_t> alone =
                        device_tokens(d, lt, vocab, {static_cast<int32_t>(at)}, {ps[static_cast<size_t>(at)]}, {pens[static_cast<size_t>(at)]});
                    invariant = invariant && alone[0] == got[static_cast<size_t>(at)];
                  }
                  ++combos;
                }
        r.add(name, mismatches == 0,
              mismatches == 0 ? std::to_string(combos) + " parameter sets x " + std::to_string(rows) + " rows equal"
                              : std::to_string(mismatches) + " mismatches; first: " + first_bad);
        r.add("sampling vocab=" + std::to_string(vocab) + " " + flavour + " bitwise row alone == among 16", invariant,
              invariant ? "equal" : "a row's token depends on the other rows of the launch");
      });
    }
  }
  check_sampling_step0(d, r, o, rng);
}

}  // namespace memra::kcheck
