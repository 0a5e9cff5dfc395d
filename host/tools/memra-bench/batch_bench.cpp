#include "host/tools/memra-bench/batch_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "host/backend/backend.hpp"
#include "host/engine/sampler.hpp"

namespace memra::bench {
namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

int run_batch_bench(engine::Engine& engine, const BatchBenchOptions& o, std::vector<BatchFigure>* figures) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(engine.vocab_size() - 1));
  std::printf("%6s %12s %12s %12s %12s %10s\n", "batch", "prefill t/s", "decode ms", "decode t/s", "roofline t/s", "% roofline");
  for (int b : o.batches) {
    std::vector<int32_t> seqs;
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(b));
    std::vector<engine::StepRequest> reqs;
    for (int s = 0; s < b; ++s) {
      seqs.push_back(engine.open_sequence());
      for (int i = 0; i < o.prompt; ++i) prompts[static_cast<size_t>(s)].push_back(tok(rng));
    }
    auto close_all = [&] {
      for (int32_t s : seqs) engine.close_sequence(s);
    };
    for (int s = 0; s < b; ++s) reqs.push_back({seqs[static_cast<size_t>(s)], prompts[static_cast<size_t>(s)], false, /*prompt=*/true});
    double t0 = now_s();
    auto pre = engine.step(reqs);
    const double prefill_s = now_s() - t0;
    if (!pre) {
      std::fprintf(stderr, "memra-bench: prefill: %s\n", pre.error().message.c_str());
      close_all();
      return 1;
    }
    std::vector<int32_t> next(static_cast<size_t>(b));
    for (int s = 0; s < b; ++s) next[static_cast<size_t>(s)] = tok(rng);
    engine::SamplingParams greedy;
    greedy.temperature = 0.0f;
    std::vector<engine::RowSampling> sampling(static_cast<size_t>(b));
    std::vector<double> times;
    for (int step = 0; step < o.decode + 2; ++step) {
      reqs.clear();
      for (int s = 0; s < b; ++s) {
        engine::RowSampling& rs = sampling[static_cast<size_t>(s)];
        rs.params = &greedy;
        rs.position = static_cast<uint64_t>(o.prompt + step);
        reqs.push_back({seqs[static_cast<size_t>(s)], {&next[static_cast<size_t>(s)], 1}, false});
        reqs.back().sampling = &rs;
      }
      t0 = now_s();
      auto out = engine.step_sampled(reqs);
      if (!out) {
        std::fprintf(stderr, "memra-bench: decode: %s\n", out.error().message.c_str());
        close_all();
        return 1;
      }
      if (step >= 2) times.push_back(now_s() - t0);  // the first steps warm up (NVRTC, allocations)
      for (int s = 0; s < b; ++s) next[static_cast<size_t>(s)] = (*out)[static_cast<size_t>(s)].tokens.at(0);
    }
    std::sort(times.begin(), times.end());
    const double med = times[times.size() / 2];
    // Batch-1 roofline: every matrix once, plus the KV cache of the context (K and V).
    const double ctx = o.prompt + o.decode / 2.0;
    const double kv_bytes =
        static_cast<double>(engine.kv_bytes_per_token()) * ctx * b;
    const double roof = b * o.hbm_gbps * 1e9 / (static_cast<double>(o.matrix_bytes) + kv_bytes);
    std::printf("%6d %12.1f %12.3f %12.1f %12.1f %9.1f%%\n", b, b * o.prompt / prefill_s, med * 1e3, b / med, roof,
                100.0 * (b / med) / roof);
    if (figures) figures->push_back({b, b * o.prompt / prefill_s, med * 1e3, b / med, roof});
    close_all();
  }
  return 0;
}

}  // namespace memra::bench
