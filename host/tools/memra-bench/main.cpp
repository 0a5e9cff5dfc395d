// memra-bench: decode (and prefill) throughput of the engine on a random-weight
// model of a real shape (default Qwen3-8B), with the memory roofline for batch 1:
// bytes read per token (every matrix except the embedding table, plus the KV cache)
// over the HBM bandwidth. Prints one line per batch size.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <random>
#include <map>
#include <string>
#include <vector>

#include "host/engine/engine.hpp"
#include "host/engine/generate.hpp"
#include "host/engine/kv_dtype.hpp"
#include "host/tools/memra-bench/random_model.hpp"

#include <nlohmann/json.hpp>
#include "memra_bench_shapes.hpp"  // generated from shapes/*.config.json
#include "host/tools/memra-bench/batch_bench.hpp"
#include "host/tools/memra-bench/mask_bench.hpp"
#include "host/tools/memra-bench/serve_bench.hpp"
#include "host/tools/memra-bench/spec_bench.hpp"
#include "host/tools/memra-bench/standard_bench.hpp"
#include "host/tools/memra-bench/table_bench.hpp"

namespace {

void usage() {
  std::printf(
      "usage: memra-bench [MODEL] [options]\n"
      "Single-stream prefill (pp), time to first token, decode (tg) at KV depths, peak device memory and\n"
      "the decode roofline fraction: (bytes of weights read per token, input embedding excluded, + KV bytes\n"
      "read) x tok/s / the device-to-device copy bandwidth measured in the same run. Medians of --repeats\n"
      "runs after a warm-up. MODEL is a checkpoint (safetensors directory, .gguf, .memra); without it a\n"
      "random-weight model of the --model shape in the --quant scheme is made in memory.\n\n"
      "  --model SHAPE           shape of the random model: qwen3-8b (default), tiny, qwen3-30b-a3b\n"
      "                          (Qwen3-MoE: 128 experts, top-8, stacked as llama.cpp stacks them), qwen3.5-27b,\n"
      "                          qwen3.5-27b-16l (its first 16 layers, same 3:1 pattern) or\n"
      "                          qwen3.6-35b-a3b (family-qwen3next's hybrids), gemma3-12b\n"
      "                          (Gemma 3 12B's text decoder, family-gemma)\n"
      "  --quant SCHEME          bf16 (default), f16, q8_0, q4_0, q4_k, q5_k, q6_k, iq4_xs, fp8, or any\n"
      "                          installed quant plugin's scheme (nvfp4: quantised by its plugin)\n"
      "  --backend cuda|cpu      (default cuda)\n"
      "  --prompt-tokens N       pp / TTFT prompt length (default 512)\n"
      "  --gen-tokens N          decode steps timed per depth (default 128)\n"
      "  --depth LIST            comma-separated KV depths for tg (default 0)\n"
      "  --repeats N             timed runs per figure, median reported (default 3)\n"
      "  --json                  print the figures as one JSON object\n"
      "  --batches LIST          also: batched decode table for these batch sizes (e.g. 1,4,16): decode\n"
      "                          steps as served (greedy, sampled on the device: no logits download), with\n"
      "    --prompt N            its prompt tokens per sequence (default 64) and\n"
      "    --decode N            its decode steps timed per batch size (default 32)\n"
      "  --hbm-gbps X            roofline bandwidth when it cannot be measured (CPU; default 4300)\n"
      "  --spec ngram|draft|oracle|mtp  instead: batch-1 greedy generation, plain vs speculative; prints both\n"
      "                          speeds, the speed-up, drafted/accepted/acceptance, and fails unless the\n"
      "                          tokens are identical. ngram: prompt lookup; draft: a draft model (below);\n"
      "                          oracle: plain decode's own tokens as drafts, each right with probability\n"
      "                          --oracle-accept (the verify path's ceiling, not a drafter); mtp: the\n"
      "                          model's MTP head (a random shape gets one), its drafts forced to\n"
      "                          --oracle-accept (-1: the head's own drafts)\n"
      "  --spec-k K              drafted tokens per step (default 4)\n"
      "  --gen N                 tokens generated in --spec mode (default 128)\n"
      "  --prompt N              also the --spec prompt length (default 64)\n"
      "  --spec-pattern N        --spec prompt: an N-token random unit repeated (default 16; 0 = random)\n"
      "  --prompt-file FILE      --spec prompt with MODEL: the first --prompt tokens of FILE (real text)\n"
      "  --draft-quant SCHEME    --spec draft on the random model: the draft is the target's own weights\n"
      "                          requantized to q8_0, q4_0, q4_k (default), q5_k, q6_k or iq4_xs (needs --quant bf16)\n"
      "  --draft PATH            --spec draft with MODEL: a draft checkpoint with MODEL's vocabulary\n"
      "  --oracle-accept P       --spec oracle / mtp: probability a draft is right (default 0.9)\n"
      "  --spec-fallback         --spec: with the adaptive fallback (default off: every step drafts)\n"
      "  --spec-verify-cost R    the fallback's cost of one more verify token (default: measured)\n"
      "  --spec-repeats N        --spec: best of N runs (default 3)\n"
      "  --pp N                  pipeline stages: layers split over N backends on devices 0..N-1 (default 1)\n"
      "  --pp-split LIST         layers per stage, e.g. 18 (stage 0; the rest on stage 1) or 12,12,12;\n"
      "                          default: balanced by weight + KV bytes\n"
      "  --pp-devices LIST       CUDA device of each stage, e.g. 0,0 for two stages on one GPU\n"
      "  --concurrency LIST      also: serving throughput through the scheduler with N concurrent greedy\n"
      "                          requests (--prompt tokens each, --decode generated): the aggregate decode\n"
      "                          rate while all N decode, median of --repeats runs\n"
      "  --kv-dtype f16|bf16|fp8|f32 KV cache element type (default f16; f32 doubles the KV bytes read, fp8 about halves them)\n"
      "  --pp-groups LIST        --concurrency: scheduler rolling groups to measure (1: one step at a time,\n"
      "                          2: two groups alternate through the stages; default 1,2 with --pp, else 1)\n"
      "  --table                 instead: every figure of issue #15's table in one run (tg and roofline per\n"
      "                          scheme bf16/q8_0/q4_k/fp8, depth-4096/0 ratios, pp512 per scheme, TTFT of a\n"
      "                          2,048-token prompt, batch-8/batch-1 step ratios, 8 serving streams), then\n"
      "                          the table beside llama.cpp's figures, the floors and the goals; takes\n"
      "                          --model, --backend, --kv-dtype, --repeats and --hbm-gbps\n"
      "  --json-mask             instead, with MODEL (its tokenizer): the cost of a grammar mask —\n"
      "                          --concurrency (default 1) greedy streams through the scheduler, plain\n"
      "                          and under response_format json_object (host/structured), --prompt and\n"
      "                          --decode tokens each; prints both rates and the slowdown\n"
      "  --help                  this text\n");
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "qwen3-8b", quant = "bf16", backend = "cuda", batches_arg, model_path, depth_arg = "0";
  memra::bench::StandardBenchOptions sb;
  int prompt = 64, decode = 32, spec_k = 4, gen = 128;
  std::string spec;
  bool table = false, json_mask = false;
  memra::bench::SpecBenchOptions sbo;
  double hbm_gbps = 4300;
  int pp = 1;
  memra_dtype kv_dtype = memra::engine::kDefaultKvDtype;
  std::string pp_split, pp_devices, concurrency_arg, groups_arg;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "memra-bench: %s needs a value (see --help)\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a == "--model") model = value();
    else if (a == "--quant") quant = value();
    else if (a == "--backend") backend = value();
    else if (a == "--prompt") prompt = std::atoi(value().c_str());
    else if (a == "--decode") decode = std::atoi(value().c_str());
    else if (a == "--batches") batches_arg = value();
    else if (a == "--hbm-gbps") hbm_gbps = std::atof(value().c_str());
    else if (a == "--spec") spec = value();
    else if (a == "--spec-k") spec_k = std::atoi(value().c_str());
    else if (a == "--spec-pattern") sbo.pattern = std::atoi(value().c_str());
    else if (a == "--prompt-file") sbo.prompt_file = value();
    else if (a == "--draft-quant") sbo.draft_quant = value();
    else if (a == "--draft") sbo.draft_path = value();
    else if (a == "--oracle-accept") sbo.oracle_accept = std::atof(value().c_str());
    else if (a == "--spec-fallback") sbo.fallback = true;
    else if (a == "--spec-verify-cost") sbo.verify_cost = std::atof(value().c_str());
    else if (a == "--spec-repeats") sbo.repeats = std::atoi(value().c_str());
    else if (a == "--gen") gen = std::atoi(value().c_str());
    else if (a == "--prompt-tokens") sb.prompt_tokens = std::atoi(value().c_str());
    else if (a == "--gen-tokens") sb.gen_tokens = std::atoi(value().c_str());
    else if (a == "--depth") depth_arg = value();
    else if (a == "--repeats") sb.repeats = std::atoi(value().c_str());
    else if (a == "--json") sb.json = true;
    else if (a == "--table") table = true;
    else if (a == "--json-mask") json_mask = true;
    else if (a == "--pp") pp = std::atoi(value().c_str());
    else if (a == "--pp-split") pp_split = value();
    else if (a == "--pp-devices") pp_devices = value();
    else if (a == "--concurrency") concurrency_arg = value();
    else if (a == "--pp-groups") groups_arg = value();
    else if (a == "--kv-dtype") {
      const auto d = memra::engine::parse_kv_dtype(value());
      if (!d) {
        std::fprintf(stderr, "memra-bench: --kv-dtype must be f16, bf16, fp8 or f32\n");
        return 2;
      }
      kv_dtype = *d;
    }
    else if (!a.empty() && a[0] != '-' && model_path.empty()) model_path = a;
    else {
      std::fprintf(stderr, "memra-bench: unknown option %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  auto int_list = [](const std::string& arg) {
    std::vector<int> v;
    for (size_t p = 0; p < arg.size();) {
      const size_t q = arg.find(',', p);
      v.push_back(std::atoi(arg.substr(p, q - p).c_str()));
      p = q == std::string::npos ? arg.size() : q + 1;
    }
    return v;
  };
  const std::vector<int> batches = int_list(batches_arg);
  sb.depths = int_list(depth_arg);
  if (sb.prompt_tokens < 1 || sb.gen_tokens < 1 || sb.repeats < 1 || sb.depths.empty() ||
      std::any_of(sb.depths.begin(), sb.depths.end(), [](int d) { return d < 0; }) ||
      std::any_of(batches.begin(), batches.end(), [](int b) { return b < 1; })) {
    std::fprintf(stderr, "memra-bench: --prompt-tokens, --gen-tokens, --repeats and --batches need positive numbers, --depth non-negative ones\n");
    return 2;
  }
  const std::vector<int> concurrency = int_list(concurrency_arg);
  const std::vector<int> groups = groups_arg.empty() ? (pp > 1 ? std::vector<int>{1, 2} : std::vector<int>{1}) : int_list(groups_arg);
  if (std::any_of(concurrency.begin(), concurrency.end(), [](int c) { return c < 1; }) ||
      std::any_of(groups.begin(), groups.end(), [](int g) { return g < 1 || g > 2; })) {
    std::fprintf(stderr, "memra-bench: --concurrency needs positive numbers, --pp-groups 1 or 2\n");
    return 2;
  }
  const int max_batch = std::max(batches.empty() ? 1 : *std::max_element(batches.begin(), batches.end()),
                                 concurrency.empty() ? 1 : *std::max_element(concurrency.begin(), concurrency.end()));

  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  memra::plugins::PluginHostOptions po;
  po.plugin_dirs = {exe.parent_path() / ".." / "lib" / "memra" / "plugins"};
  memra::plugins::PluginHost plugins(std::move(po));
  plugins.discover();
  const std::map<std::string, const char*> shapes = {{"qwen3-8b", memra::bench::kQwen3_8BShape},
                                                      {"qwen3-30b-a3b", memra::bench::kQwen3_30BA3BShape},
                                                      {"tiny", memra::bench::kTinyShape},
                                                      {"qwen3.5-27b", memra::bench::kQwen35_27BShape},
                                                      {"qwen3.5-27b-16l", memra::bench::kQwen35_27B16LShape},
                                                      {"qwen3.6-35b-a3b", memra::bench::kQwen36_35BA3BShape},
                                                      {"gemma3-12b", memra::bench::kGemma3_12BShape}};
  const auto shape_it = shapes.find(model);
  if (shape_it == shapes.end()) {
    std::fprintf(stderr, "memra-bench: unknown --model '%s' (see --help)\n", model.c_str());
    return 2;
  }
  std::string shape_json = shape_it->second;
  if (table) {
    if (!model_path.empty() || !spec.empty()) {
      std::fprintf(stderr, "memra-bench: --table makes its own random models: give no MODEL and no --spec\n");
      return 2;
    }
    memra::bench::TableBenchOptions to;
    to.shape_json = shape_json;
    to.shape_name = model;
    to.backend = backend == "cpu" ? MEMRA_BACKEND_CPU : MEMRA_BACKEND_CUDA;
    to.kv_dtype = kv_dtype;
    to.repeats = sb.repeats;
    to.hbm_gbps = hbm_gbps;
    return memra::bench::run_table_bench(to, plugins);
  }

  if (json_mask && (model_path.empty() || !spec.empty())) {
    std::fprintf(stderr, "memra-bench: --json-mask needs a MODEL with a tokenizer (the grammar is over its vocabulary) and no --spec\n");
    return 2;
  }

  // --spec mtp on a random shape: the shape with its MTP layer (random too; drafts are
  // forced to --oracle-accept, the head's compute is real).
  if (spec == "mtp" && model_path.empty()) {
    auto j = nlohmann::json::parse(shape_json, nullptr, false);
    if (j.is_object() && !j.contains("mtp_num_hidden_layers")) j["mtp_num_hidden_layers"] = 1;
    if (j.is_object()) shape_json = j.dump();
  }
  double t0 = now_s();
  auto src = model_path.empty() ? memra::bench::random_model(shape_json, quant, plugins, 42)
                                : memra::engine::open_model_source(model_path, plugins);
  if (!src) {
    std::fprintf(stderr, "memra-bench: %s\n", src.error().message.c_str());
    return 1;
  }
  const memra::bench::WeightBytes wb = memra::bench::weight_bytes(**src);
  const uint64_t matrix_bytes = wb.matrices, embd_bytes = wb.embedding;
  const memra::ModelConfig cfg = (*src)->config;
  FILE* info = sb.json ? stderr : stdout;  // --json: stdout holds the JSON object only
  std::fprintf(info, "model %s (%s): %.2f GB of matrices read per token (+ %.2f GB embedding table), generated in %.1f s\n",
              model_path.empty() ? model.c_str() : model_path.c_str(), model_path.empty() ? quant.c_str() : "as stored", matrix_bytes / 1e9, embd_bytes / 1e9, now_s() - t0);

  memra::engine::EngineOptions eo;
  eo.backend.kind = backend == "cpu" ? MEMRA_BACKEND_CPU : MEMRA_BACKEND_CUDA;
  eo.max_context = std::max<int64_t>(prompt + std::max(decode, gen) + 16, memra::bench::standard_bench_context(sb));
  eo.max_sequences = max_batch;
  if (!spec.empty()) eo.state_snapshot_rows = spec_k;  // a hybrid's rollback without a replay
  eo.draft_head = spec == "mtp";
  eo.pipeline_stages = pp;
  if (!pp_split.empty())
    for (int c : int_list(pp_split)) eo.pipeline_split.push_back(c);
  if (!pp_devices.empty()) eo.pipeline_devices = int_list(pp_devices);
  eo.kv_dtype = kv_dtype;
  t0 = now_s();
  auto engine = memra::engine::Engine::create(std::move(*src), plugins, eo);
  if (!engine) {
    std::fprintf(stderr, "memra-bench: %s\n", engine.error().message.c_str());
    return 1;
  }
  std::fprintf(info, "engine created (weights uploaded, %s KV cache) in %.1f s\n", memra::engine::kv_dtype_name(kv_dtype), now_s() - t0);
  if (pp > 1) std::fprintf(info, "%s\n", (*engine)->backend().describe().c_str());

  if (!spec.empty()) {
    sbo.drafter = spec;
    sbo.k = spec_k;
    sbo.gen = gen;
    sbo.prompt = prompt;
    return memra::bench::run_spec_bench(**engine, plugins, eo, sbo);
  }

  if (json_mask) {
    auto text = memra::engine::load_text_model(model_path, cfg);
    if (!text) {
      std::fprintf(stderr, "memra-bench: --json-mask: %s\n", text.error().message.c_str());
      return 1;
    }
    return memra::bench::run_mask_bench(**engine, *text, concurrency.empty() ? std::vector<int>{1} : concurrency, prompt,
                                        decode, sb.repeats);
  }

  sb.cuda = backend != "cpu";
  sb.model_label = model_path.empty() ? model + " (random weights)" : model_path;
  sb.quant = model_path.empty() ? quant : "as stored";
  sb.weight_bytes_per_token = wb.per_token();
  sb.fallback_gbps = hbm_gbps;
  sb.kv_dtype = kv_dtype;
  if (const int rc = memra::bench::run_standard_bench(**engine, sb); rc != 0) return rc;
  if (!concurrency.empty()) {
    memra::bench::ServeBenchOptions so;
    so.concurrency = concurrency;
    so.groups = groups;
    so.prompt = prompt;
    so.decode = decode;
    so.repeats = sb.repeats;
    if (const int rc = memra::bench::run_serve_bench(**engine, so); rc != 0) return rc;
  }
  if (batches.empty()) return 0;
  memra::bench::BatchBenchOptions bo;
  bo.batches = batches;
  bo.prompt = prompt;
  bo.decode = decode;
  bo.matrix_bytes = matrix_bytes;
  bo.kv_dtype = kv_dtype;
  bo.hbm_gbps = hbm_gbps;
  return memra::bench::run_batch_bench(**engine, bo);
}
