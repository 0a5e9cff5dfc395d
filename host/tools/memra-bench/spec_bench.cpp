#include "host/tools/memra-bench/spec_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <random>
#include <thread>
#include <vector>

#include "host/engine/draft_model.hpp"
#include "host/engine/mtp_drafter.hpp"
#include "host/engine/drafter.hpp"
#include "host/engine/generate.hpp"
#include "host/engine/text_model.hpp"
#include "repack/quant/fp_convert.hpp"
#include "plugins/quant-common/quantize.hpp"

namespace memra::bench {
namespace {

std::string fmt_ms(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

bool to_f32(const memra_weight& w, int64_t row, int64_t cols, float* out) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  switch (w.dtype) {
    case MEMRA_DTYPE_F32: std::memcpy(out, base + row * cols * 4, static_cast<size_t>(cols) * 4); return true;
    case MEMRA_DTYPE_BF16:
    case MEMRA_DTYPE_F16: {
      const auto* h = reinterpret_cast<const uint16_t*>(base) + row * cols;
      for (int64_t c = 0; c < cols; ++c)
        out[c] = w.dtype == MEMRA_DTYPE_BF16 ? quant::bf16_to_f32(h[c]) : quant::fp16_to_f32(h[c]);
      return true;
    }
    default: return false;
  }
}

// Proposes plain decode's own continuation; each draft is right with probability p.
class OracleDrafter : public engine::Drafter {
 public:
  OracleDrafter(std::vector<int32_t> truth, double p, int64_t vocab) : truth_(std::move(truth)), p_(p), vocab_(vocab) {}
  std::vector<int32_t> draft(std::span<const int32_t> context, int k) override {
    std::vector<int32_t> out;
    for (size_t i = context.size(); i < truth_.size() && static_cast<int>(out.size()) < k; ++i) {
      const bool right = std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p_;
      out.push_back(right ? truth_[i] : static_cast<int32_t>((truth_[i] + 1) % vocab_));
    }
    return out;
  }

 private:
  std::vector<int32_t> truth_;
  double p_;
  int64_t vocab_;
  std::mt19937_64 rng_{5};
};

// The MTP head's real drafting (its steps run, its KV and state are kept), with the
// drafts it returns replaced by the oracle's: a forced acceptance, whatever the weights.
class ForcedMtpDrafter : public engine::Drafter {
 public:
  ForcedMtpDrafter(engine::Engine& target, std::vector<int32_t> truth, double p, int64_t vocab)
      : mtp_(target, engine::mtp_draft_cost(target)), oracle_(std::move(truth), p, vocab) {}
  void attach(int32_t seq) override { mtp_.attach(seq); }
  std::vector<int32_t> draft(std::span<const int32_t> context, int k) override {
    const double t0 = now_s();
    const std::vector<int32_t> real = mtp_.draft(context, k);
    head_s += now_s() - t0;
    ++calls;
    return oracle_.draft(context, static_cast<int>(real.size()));
  }
  void verified(std::span<const int32_t> context, int drafted, int accepted) override { mtp_.verified(context, drafted, accepted); }
  bool wants_target_hidden() const override { return true; }
  void target_hidden(int64_t first, std::span<const int32_t> tokens, bool final_tokens, std::span<const float> rows, int64_t dim) override {
    const double t0 = now_s();
    mtp_.target_hidden(first, tokens, final_tokens, rows, dim);
    head_s += now_s() - t0;
  }
  double draft_token_cost() const override { return mtp_.draft_token_cost(); }
  // Wall time in the head's steps (drafts and catch-ups) and draft calls.
  double head_s = 0.0;
  int64_t calls = 0;
  int64_t head_rows() const { return mtp_.head_rows(); }

 private:
  engine::MtpDrafter mtp_;
  OracleDrafter oracle_;
};

}  // namespace

Result<std::unique_ptr<engine::ModelSource>> requantized_copy(const engine::ModelSource& target, const std::string& scheme) {
  quant::QuantScheme qs;
  if (!quant::parse_scheme(scheme, &qs) || qs == quant::QuantScheme::fp8)
    return make_error(ErrorCode::invalid_argument, "--draft-quant " + scheme + ": use q8_0, q4_0, q4_k, q5_k, q6_k or iq4_xs");
  auto src = std::make_unique<engine::ModelSource>();
  src->path = target.path + " requantized to " + scheme;
  src->format = "random";
  src->config = target.config;
  src->config_json = target.config_json;
  auto storage = std::make_shared<std::vector<std::vector<uint8_t>>>();
  storage->reserve(target.weights.size());
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (const memra_weight& w : target.weights) {
    memra_weight d = w;
    d.name = src->strings.emplace_back(w.name).c_str();
    if (w.ndim != 2) {
      d.quant = src->strings.emplace_back(w.quant ? w.quant : "f32").c_str();
      src->weights.push_back(d);  // 1-D tensors: the target's float32 copy
      continue;
    }
    const int64_t rows = w.shape[0], cols = w.shape[1];
    const uint64_t row_bytes = quant::scheme_row_bytes(qs, cols);
    if (row_bytes == 0) return make_error(ErrorCode::unsupported, std::string(w.name) + ": rows do not fit " + scheme + " blocks");
    if (w.dtype != MEMRA_DTYPE_BF16 && w.dtype != MEMRA_DTYPE_F16 && w.dtype != MEMRA_DTYPE_F32)
      return make_error(ErrorCode::unsupported, std::string(w.name) + ": --draft-quant needs a bf16/f16/f32 target (--quant bf16)");
    auto& buf = storage->emplace_back(static_cast<size_t>(rows) * row_bytes);
    std::vector<std::thread> pool;
    std::vector<std::string> errors(threads);
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const int64_t r0 = rows * t / threads, r1 = rows * (t + 1) / threads;
        std::vector<float> row(static_cast<size_t>(cols));
        for (int64_t r = r0; r < r1 && errors[t].empty(); ++r) {
          to_f32(w, r, cols, row.data());
          if (!quant::quantize_rows(qs, row.data(), 1, cols, buf.data() + static_cast<size_t>(r) * row_bytes, row_bytes, &errors[t]) &&
              errors[t].empty())
            errors[t] = "quantization failed";
        }
      });
    }
    for (auto& th : pool) th.join();
    for (const auto& e : errors)
      if (!e.empty()) return make_error(ErrorCode::internal, std::string(w.name) + ": " + e);
    d.quant = src->strings.emplace_back(scheme).c_str();
    d.dtype = MEMRA_DTYPE_BLOCKS;
    d.bytes = buf.size();
    d.data = buf.data();
    src->weights.push_back(d);
  }
  src->mapping = storage;
  return src;
}

int run_spec_bench(engine::Engine& target, const plugins::PluginHost& plugins, const engine::EngineOptions& eo,
                   const SpecBenchOptions& o) {
  const int64_t vocab = target.vocab_size();
  // The workload: real text (the first --prompt tokens of --prompt-file, tokenized by the
  // model's tokenizer), or a prompt of a `pattern`-token unit repeated (or random tokens).
  std::vector<int32_t> unit, prompt;
  std::string workload;
  if (!o.prompt_file.empty()) {
    std::ifstream in(o.prompt_file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "memra-bench: --prompt-file %s: cannot read it\n", o.prompt_file.c_str());
      return 1;
    }
    std::ostringstream text;
    text << in.rdbuf();
    auto tok = engine::load_tokenizer(target.source().path);
    if (!tok) {
      std::fprintf(stderr, "memra-bench: --prompt-file needs the model's tokenizer: %s\n", tok.error().message.c_str());
      return 1;
    }
    prompt = (*tok)->encode(text.str(), false);
    if (static_cast<int>(prompt.size()) < o.prompt) {
      std::fprintf(stderr, "memra-bench: --prompt-file %s has %zu tokens, fewer than --prompt %d\n", o.prompt_file.c_str(),
                   prompt.size(), o.prompt);
      return 1;
    }
    workload = "the first " + std::to_string(o.prompt) + " tokens of " + o.prompt_file;
  } else {
    std::mt19937 prng(11);
    std::uniform_int_distribution<int32_t> ptok(0, static_cast<int32_t>(vocab - 1));
    for (int i = 0; i < std::max(1, o.pattern); ++i) unit.push_back(ptok(prng));
    while (static_cast<int>(prompt.size()) < o.prompt) {
      if (o.pattern > 0) prompt.insert(prompt.end(), unit.begin(), unit.end());
      else prompt.push_back(ptok(prng));
    }
    workload = o.pattern > 0 ? "a " + std::to_string(o.pattern) + "-token unit repeated" : "random";
  }
  prompt.resize(static_cast<size_t>(o.prompt));

  std::unique_ptr<engine::Engine> draft;
  std::string draft_label;
  if (o.drafter == "draft") {
    double t0 = now_s();
    Result<std::unique_ptr<engine::ModelSource>> src =
        o.draft_path.empty() ? requantized_copy(target.source(), o.draft_quant) : engine::open_model_source(o.draft_path, plugins);
    if (!src) {
      std::fprintf(stderr, "memra-bench: draft model: %s\n", src.error().message.c_str());
      return 1;
    }
    draft_label = o.draft_path.empty() ? "the target's weights in " + o.draft_quant : o.draft_path;
    engine::EngineOptions d = eo;
    d.max_sequences = 1;
    d.pipeline_stages = 1;
    d.pipeline_split.clear();
    d.pipeline_devices.clear();
    auto e = engine::Engine::create(std::move(*src), plugins, d);
    if (!e) {
      std::fprintf(stderr, "memra-bench: draft model: %s\n", e.error().message.c_str());
      return 1;
    }
    if (auto st = engine::check_draft_vocab(target, **e); !st) {
      std::fprintf(stderr, "memra-bench: %s\n", st.error().message.c_str());
      return 1;
    }
    draft = std::move(*e);
    std::printf("draft model: %s, %.2f of a target step per token (matrix bytes), ready in %.1f s\n", draft_label.c_str(),
                engine::draft_cost_estimate(target, *draft), now_s() - t0);
  } else if (o.drafter == "mtp") {
    if (target.draft_layers() == 0) {
      std::fprintf(stderr, "memra-bench: --spec mtp: the model has no MTP head%s\n",
                   target.draft_head_missing().empty() ? "" : (" (" + target.draft_head_missing() + ")").c_str());
      return 2;
    }
  } else if (o.drafter != "ngram" && o.drafter != "oracle") {
    std::fprintf(stderr, "memra-bench: --spec %s: use ngram, draft, oracle or mtp\n", o.drafter.c_str());
    return 2;
  }

  engine::GenerateOptions g;
  g.max_tokens = o.gen;
  g.sampling.temperature = 0.0f;
  double best_plain = 1e30, best_spec = 1e30;
  ForcedMtpDrafter* forced = nullptr;  // this repeat's, when --spec mtp forces acceptance
  std::string head_line;
  std::vector<int32_t> plain_tokens, spec_tokens;
  engine::GenerateResult last;
  bool same = true;
  for (int rep = 0; rep < std::max(1, o.repeats); ++rep) {  // best of N; the first run warms up too
    double t0 = now_s();
    auto a = engine::generate(target, prompt, g, nullptr, nullptr);
    const double ta = now_s() - t0;
    if (!a) {
      std::fprintf(stderr, "memra-bench: plain generation failed: %s\n", a.error().message.c_str());
      return 1;
    }
    std::unique_ptr<engine::Drafter> drafter;
    forced = nullptr;
    if (o.drafter == "ngram") {
      drafter = std::make_unique<engine::NgramDrafter>();
    } else if (o.drafter == "draft") {
      drafter = std::make_unique<engine::DraftModelDrafter>(*draft, engine::draft_cost_estimate(target, *draft));
    } else if (o.drafter == "mtp" && o.oracle_accept < 0) {
      drafter = std::make_unique<engine::MtpDrafter>(target, engine::mtp_draft_cost(target));
    } else if (o.drafter == "mtp") {
      std::vector<int32_t> truth = prompt;
      truth.insert(truth.end(), a->tokens.begin(), a->tokens.end());
      auto f = std::make_unique<ForcedMtpDrafter>(target, std::move(truth), o.oracle_accept, vocab);
      forced = f.get();
      drafter = std::move(f);
    } else {
      std::vector<int32_t> truth = prompt;
      truth.insert(truth.end(), a->tokens.begin(), a->tokens.end());
      drafter = std::make_unique<OracleDrafter>(std::move(truth), o.oracle_accept, vocab);
    }
    engine::SpeculativeOptions so;
    so.drafter = drafter.get();
    so.k = o.k;
    so.policy.adaptive = o.fallback;
    so.policy.verify_token_cost = o.verify_cost;
    t0 = now_s();
    auto b = engine::generate_speculative(target, prompt, g, so, nullptr);
    const double tb = now_s() - t0;
    if (!b) {
      std::fprintf(stderr, "memra-bench: speculative generation failed: %s\n", b.error().message.c_str());
      return 1;
    }
    same = same && a->tokens == b->tokens;
    plain_tokens = a->tokens;
    spec_tokens = b->tokens;
    last = *b;
    best_plain = std::min(best_plain, ta);
    best_spec = std::min(best_spec, tb);
    if (forced)
      head_line = "(mtp head: " + std::to_string(forced->calls) + " draft calls, " + std::to_string(forced->head_rows()) + " head rows, " +
                  fmt_ms(forced->head_s * 1e3 / static_cast<double>(std::max<int64_t>(1, forced->calls))) + " ms a call, " +
                  fmt_ms(100.0 * forced->head_s / tb) + " % of the speculative run's " + fmt_ms(tb * 1e3) + " ms)";
  }
  std::printf("spec %s k=%d%s: %zu tokens, prompt %d tokens (%s); plain %.1f tok/s, speculative %.1f tok/s, "
              "speed-up %.2fx; drafted %lld, accepted %lld (acceptance %.1f%%), %lld verify + %lld plain steps, "
              "fallback engaged %lld times; tokens identical: %s\n",
              o.drafter.c_str(), o.k, o.fallback ? " (fallback on)" : "", spec_tokens.size(), o.prompt, workload.c_str(),
              plain_tokens.size() / best_plain, spec_tokens.size() / best_spec, best_plain / best_spec,
              static_cast<long long>(last.drafted), static_cast<long long>(last.accepted),
              last.drafted ? 100.0 * static_cast<double>(last.accepted) / static_cast<double>(last.drafted) : 0.0,
              static_cast<long long>(last.verify_steps), static_cast<long long>(last.plain_steps),
              static_cast<long long>(last.fallbacks), same ? "yes" : "NO");
  if (!head_line.empty()) std::printf("%s\n", head_line.c_str());
  if (o.drafter == "mtp" && o.oracle_accept >= 0)
    std::printf("(mtp: the head drafts for real; its drafts are replaced by plain decode's own tokens, each right with "
                "probability %.2f — a forced acceptance; --oracle-accept -1 keeps the head's own drafts)\n", o.oracle_accept);
  if (o.drafter == "oracle")
    std::printf("(oracle: drafts are plain decode's own tokens, each right with probability %.2f — the verify path's "
                "ceiling at that acceptance, not a drafter)\n", o.oracle_accept);
  return same ? 0 : 1;
}

}  // namespace memra::bench
