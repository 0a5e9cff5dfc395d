#include "host/tools/memra-bench/serve_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>

#include "host/engine/scheduler.hpp"

namespace memra::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Stream {
  std::vector<int32_t> tokens;
  std::vector<Clock::time_point> arrived;  // per token
  bool failed = false;
  std::string error;
};

// Reads one handle to its end, stamping each token as it arrives.
void consume(engine::SequenceHandle& h, Stream& out) {
  engine::SequenceUpdate u;
  while (true) {
    h.wait(u, std::chrono::milliseconds(1000));
    const auto t = Clock::now();
    for (const auto& g : u.tokens) {
      out.tokens.push_back(g.token);
      out.arrived.push_back(t);
    }
    if (u.finish != engine::FinishReason::none) {
      out.failed = u.finish == engine::FinishReason::error || u.finish == engine::FinishReason::cancelled ||
                   u.finish == engine::FinishReason::aborted;
      out.error = u.error;
      return;
    }
  }
}

struct RunResult {
  double tok_s = 0;
  double window_s = 0;
  engine::SchedulerStats stats;
  int64_t tokens = 0;
  std::vector<std::vector<int32_t>> outputs;
  std::string error;
};

RunResult run_once(engine::Engine& e, const ServeBenchOptions& o, int n, int groups,
                   const std::vector<std::vector<int32_t>>& prompts, int decode) {
  engine::SchedulerOptions so;
  so.max_running = n;
  so.max_waiting = n;
  so.max_step_tokens = std::max<int64_t>(512, static_cast<int64_t>(prompts[0].size()));
  so.pipeline_groups = groups;
  RunResult r;
  std::vector<Stream> streams(static_cast<size_t>(n));
  {
    engine::Scheduler s(e, so);
    std::vector<std::shared_ptr<engine::SequenceHandle>> handles;
    for (int i = 0; i < n; ++i) {
      engine::SequenceRequest req;
      req.prompt = prompts[static_cast<size_t>(i)];
      req.max_tokens = decode;
      req.sampling.temperature = 0.0f;
      req.constraint = o.constraint;
      req.stop_ids = o.stop_ids;
      auto h = s.submit(std::move(req));
      if (!h) {
        r.error = h.error().message;
        return r;
      }
      handles.push_back(*h);
    }
    std::vector<std::thread> readers;
    for (int i = 0; i < n; ++i)
      readers.emplace_back([&, i] { consume(*handles[static_cast<size_t>(i)], streams[static_cast<size_t>(i)]); });
    for (auto& t : readers) t.join();
    r.stats = s.stats();
  }
  Clock::time_point all_started = Clock::time_point::min(), first_done = Clock::time_point::max();
  for (const Stream& st : streams) {
    if (st.failed || st.tokens.size() < 2) {
      r.error = st.error.empty() ? "a request produced fewer than two tokens" : st.error;
      return r;
    }
    all_started = std::max(all_started, st.arrived.front());
    first_done = std::min(first_done, st.arrived.back());
    r.outputs.push_back(st.tokens);
  }
  for (const Stream& st : streams)
    for (const auto& t : st.arrived)
      if (t > all_started && t <= first_done) ++r.tokens;
  r.window_s = std::chrono::duration<double>(first_done - all_started).count();
  r.tok_s = r.window_s > 0 ? static_cast<double>(r.tokens) / r.window_s : 0.0;
  return r;
}

}  // namespace

int run_serve_bench(engine::Engine& e, const ServeBenchOptions& o, std::vector<ServeFigure>* figures) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(e.vocab_size() - 1));
  const std::string label = o.label.empty() ? "" : " " + o.label;
  std::printf("serve%s: %d-token prompts, %d generated tokens per request, greedy; aggregate decode rate while all "
              "requests decode (median of %d runs after a warm-up)\n", label.c_str(), o.prompt, o.decode, o.repeats);
  for (int n : o.concurrency) {
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(n));
    for (auto& p : prompts)
      for (int i = 0; i < o.prompt; ++i) p.push_back(tok(rng));
    std::vector<std::vector<int32_t>> reference;
    for (int groups : o.groups) {
      std::vector<double> rates;
      RunResult last;
      for (int rep = 0; rep <= o.repeats; ++rep) {
        RunResult r = run_once(e, o, n, groups, prompts, rep == 0 ? std::min(o.decode, 8) : o.decode);
        if (!r.error.empty()) {
          std::fprintf(stderr, "memra-bench: serve (concurrency %d, groups %d): %s\n", n, groups, r.error.c_str());
          return 1;
        }
        if (rep == 0) continue;  // warm-up
        if (reference.empty()) reference = r.outputs;
        if (r.outputs != reference) {
          std::fprintf(stderr, "memra-bench: serve (concurrency %d, groups %d): tokens differ from the first run's\n", n, groups);
          return 1;
        }
        rates.push_back(r.tok_s);
        last = std::move(r);
      }
      std::sort(rates.begin(), rates.end());
      if (figures) figures->push_back({n, groups, rates[rates.size() / 2]});
      std::printf("serve%s concurrency %d, pipeline groups %d: %.1f tok/s aggregate decode (%lld tokens in %.3f s); "
                  "tokens identical across runs: yes\n",
                  label.c_str(), n, groups, rates[rates.size() / 2], static_cast<long long>(last.tokens), last.window_s);
      const double steps = static_cast<double>(std::max<int64_t>(1, last.stats.steps));
      std::printf("  scheduler thread per step (last run, %lld steps): waiting %.3f ms, issuing %.3f ms, other %.3f ms\n",
                  static_cast<long long>(last.stats.steps), 1e3 * last.stats.step_wait_seconds / steps,
                  1e3 * last.stats.step_issue_seconds / steps, 1e3 * last.stats.host_seconds / steps);
    }
  }
  return 0;
}

}  // namespace memra::bench
