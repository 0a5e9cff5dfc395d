#include "host/tools/memra-bench/table_bench.hpp"

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <vector>

#include "host/engine/engine.hpp"
#include "host/engine/kv_dtype.hpp"
#include "host/tools/memra-bench/batch_bench.hpp"
#include "host/tools/memra-bench/random_model.hpp"
#include "host/tools/memra-bench/serve_bench.hpp"
#include "host/tools/memra-bench/standard_bench.hpp"

namespace memra::bench {
namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// What one scheme's engine is asked for, and what it gave.
struct SchemePart {
  std::string scheme;
  bool depth = false;    // also tg at depth 4096
  bool batches = false;  // batch-1 and batch-8 decode steps
  bool bf16_only = false;  // TTFT of 2,048 tokens and 8 serving streams
};

struct Measured {
  StandardFigures standard, long_prompt;
  std::vector<BatchFigure> batches;
  std::vector<ServeFigure> serve;
};

// A row of the closing table: issue #15's figure, llama.cpp's value there (b10472,
// llama-bench -fa 1, the same shape and kind of GPU), the floor and the goal.
struct Row {
  std::string figure;
  std::optional<double> memra;
  std::string unit;
  std::string llama_cpp;
  double floor, goal;
  bool lower_is_better = false;
};

int run_scheme(const TableBenchOptions& o, const plugins::PluginHost& plugins, const SchemePart& part, Measured& m) {
  std::printf("\n== %s\n", part.scheme.c_str());
  double t0 = now_s();
  auto src = random_model(o.shape_json, part.scheme, plugins, 42);
  if (!src) {
    std::fprintf(stderr, "memra-bench: %s: %s\n", part.scheme.c_str(), src.error().message.c_str());
    return 1;
  }
  const WeightBytes wb = weight_bytes(**src);
  const uint64_t matrix_bytes = wb.matrices;
  std::printf("model %s (%s): %.2f GB of matrices read per token, generated in %.1f s\n", o.shape_name.c_str(),
              part.scheme.c_str(), matrix_bytes / 1e9, now_s() - t0);

  StandardBenchOptions sb;
  sb.prompt_tokens = 512;
  sb.gen_tokens = 64;
  sb.depths = part.depth ? std::vector<int>{0, 4096} : std::vector<int>{0};
  sb.repeats = o.repeats;
  sb.cuda = o.backend == MEMRA_BACKEND_CUDA;
  sb.model_label = o.shape_name + " (random weights)";
  sb.quant = part.scheme;
  sb.weight_bytes_per_token = wb.per_token();
  sb.fallback_gbps = o.hbm_gbps;
  sb.kv_dtype = o.kv_dtype;
  StandardBenchOptions long_prompt = sb;
  long_prompt.prompt_tokens = 2048;
  long_prompt.gen_tokens = 8;
  long_prompt.depths = {0};

  engine::EngineOptions eo;
  eo.backend.kind = o.backend;
  eo.max_context = std::max(standard_bench_context(sb), standard_bench_context(long_prompt));
  eo.max_sequences = 8;
  eo.kv_dtype = o.kv_dtype;
  t0 = now_s();
  auto engine = engine::Engine::create(std::move(*src), plugins, eo);
  if (!engine) {
    std::fprintf(stderr, "memra-bench: %s: %s\n", part.scheme.c_str(), engine.error().message.c_str());
    return 1;
  }
  std::printf("engine created (%s KV cache) in %.1f s\n", engine::kv_dtype_name(o.kv_dtype), now_s() - t0);
  if (const int rc = run_standard_bench(**engine, sb, &m.standard); rc != 0) return rc;
  if (part.bf16_only) {
    if (const int rc = run_standard_bench(**engine, long_prompt, &m.long_prompt); rc != 0) return rc;
    ServeBenchOptions so;
    so.concurrency = {8};
    so.prompt = 64;
    so.decode = 64;
    so.repeats = o.repeats;
    if (const int rc = run_serve_bench(**engine, so, &m.serve); rc != 0) return rc;
  }
  if (part.batches) {
    BatchBenchOptions bo;
    bo.batches = {1, 8};
    bo.prompt = 64;
    bo.decode = 16;
    bo.matrix_bytes = matrix_bytes;
    bo.kv_dtype = o.kv_dtype;
    bo.hbm_gbps = m.standard.copy_gbps > 0 ? m.standard.copy_gbps : o.hbm_gbps;
    if (const int rc = run_batch_bench(**engine, bo, &m.batches); rc != 0) return rc;
  }
  return 0;
}

std::optional<double> tg_at(const Measured& m, int depth) {
  for (const auto& d : m.standard.tg)
    if (d.depth == depth) return d.tok_s;
  return std::nullopt;
}

std::optional<double> depth_ratio(const Measured& m) {
  const auto deep = tg_at(m, 4096), flat = tg_at(m, 0);
  if (!deep || !flat || *flat <= 0) return std::nullopt;
  return *deep / *flat;
}

std::optional<double> batch_ratio(const Measured& m) {
  std::optional<double> one, eight;
  for (const auto& b : m.batches) (b.batch == 1 ? one : eight) = b.step_ms;
  if (!one || !eight || *one <= 0) return std::nullopt;
  return *eight / *one;
}

std::string roofline_of(const Measured& m) {
  for (const auto& d : m.standard.tg)
    if (d.depth == 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, " (%.1f %%)", 100.0 * d.roofline);
      return buf;
    }
  return "";
}

}  // namespace

int run_table_bench(const TableBenchOptions& o, const plugins::PluginHost& plugins) {
  const std::vector<SchemePart> parts = {
      {"bf16", true, true, true}, {"q8_0", false, false, false}, {"q4_k", true, true, false}, {"fp8", false, false, false}};
  std::map<std::string, Measured> m;
  std::printf("memra-bench --table: %s, %s backend, %s KV cache, medians of %d runs\n", o.shape_name.c_str(),
              o.backend == MEMRA_BACKEND_CUDA ? "CUDA" : "CPU", engine::kv_dtype_name(o.kv_dtype), o.repeats);
  for (const SchemePart& p : parts)
    if (const int rc = run_scheme(o, plugins, p, m[p.scheme]); rc != 0) return rc;

  const auto tg0 = [&](const char* s) { return tg_at(m[s], 0); };
  const auto pp = [&](const char* s) { return std::optional<double>(m[s].standard.pp_tok_s); };
  std::optional<double> serve8;
  for (const auto& f : m["bf16"].serve)
    if (f.concurrency == 8) serve8 = f.tok_s;
  const std::vector<Row> rows = {
      {"tg bf16" + roofline_of(m["bf16"]), tg0("bf16"), "tok/s", "200.1", 220, 240},
      {"tg q8_0" + roofline_of(m["q8_0"]), tg0("q8_0"), "tok/s", "240.2", 290, 450},
      {"tg q4_k" + roofline_of(m["q4_k"]), tg0("q4_k"), "tok/s", "250.8", 300, 650},
      {"tg fp8" + roofline_of(m["fp8"]), tg0("fp8"), "tok/s", "-", 290, 450},
      {"tg q4_k depth 4096 / depth 0", depth_ratio(m["q4_k"]), "x", "0.92", 0.92, 0.95},
      {"tg bf16 depth 4096 / depth 0 (#14: >= 0.93 with bf16 KV)", depth_ratio(m["bf16"]), "x", "-", 0.93, 0.95},
      {"pp512 bf16", pp("bf16"), "tok/s", "24,400", 25000, 35000},
      {"pp512 q8_0", pp("q8_0"), "tok/s", "11,300", 12000, 18000},
      {"pp512 q4_k", pp("q4_k"), "tok/s", "9,900", 11000, 16000},
      {"TTFT 2,048-token prompt, bf16", std::optional<double>(m["bf16"].long_prompt.ttft_ms), "ms", "-", 120, 80, true},
      {"batch-8 / batch-1 decode step, bf16", batch_ratio(m["bf16"]), "x", "-", 1.6, 1.3, true},
      {"batch-8 / batch-1 decode step, q4_k", batch_ratio(m["q4_k"]), "x", "-", 1.6, 1.3, true},
      {"serving, 8 concurrent streams, bf16 aggregate", serve8, "tok/s", "-", 1000, 1400},
  };
  std::printf("\n| figure | memra | llama.cpp | floor | goal | floor met |\n| --- | --- | --- | --- | --- | --- |\n");
  int met = 0;
  for (const Row& r : rows) {
    char value[48] = "-";
    if (r.memra) std::snprintf(value, sizeof value, r.unit == "x" ? "%.3f%s" : "%.1f %s", *r.memra, r.unit == "x" ? "" : r.unit.c_str());
    const bool ok = r.memra && (r.lower_is_better ? *r.memra <= r.floor : *r.memra >= r.floor);
    met += ok;
    std::printf("| %s | %s | %s | %s%g | %s%g | %s |\n", r.figure.c_str(), value, r.llama_cpp.c_str(), r.lower_is_better ? "<= " : ">= ",
                r.floor, r.lower_is_better ? "<= " : ">= ", r.goal, ok ? "yes" : "no");
  }
  std::printf("\n%d of %zu floors met\n", met, rows.size());
  if (o.backend != MEMRA_BACKEND_CUDA || o.shape_name != "qwen3-8b")
    std::printf("(the floors and llama.cpp's figures are for the qwen3-8b shape on an H200)\n");
  return 0;
}

}  // namespace memra::bench
