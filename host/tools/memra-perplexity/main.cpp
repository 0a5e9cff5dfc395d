// memra-perplexity — a model's perplexity over a text file, by the standard sliding
// window (llama.cpp's llama-perplexity with --ppl-stride): windows of --ctx tokens every
// --stride tokens, each scoring its last --stride tokens. Progress goes to stderr; the
// figure with its uncertainty to stdout (or one JSON object with --json).
//
//   memra-perplexity MODEL FILE [--ctx 512] [--stride 256] [--chunks N] [--backend cpu|cuda]
//                    [--kv-dtype f16|bf16|fp8|f32] [--plugin-dir DIR] [--json]
//
// Exit status: 0 done, 1 the model or the file cannot be used (missing, not UTF-8, shorter
// than one context), 2 usage error.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "host/engine/engine.hpp"
#include "host/engine/kv_dtype.hpp"
#include "host/engine/text_model.hpp"
#include "host/tools/memra-perplexity/perplexity.hpp"

namespace {

using namespace memra;

const char kUsage[] =
    "usage: memra-perplexity MODEL FILE [options]\n"
    "\n"
    "Perplexity of MODEL (Hugging Face directory, .gguf or .memra) over the UTF-8 text FILE, by the\n"
    "sliding window of llama.cpp's llama-perplexity --ppl-stride: FILE is tokenized whole (no special\n"
    "tokens; a model whose tokenizer adds BOS gets it as each window's first token), windows of --ctx\n"
    "tokens start every --stride tokens while they fit, and each window, one forward pass from\n"
    "position 0, scores its last --stride tokens. Prints progress on stderr, then on stdout\n"
    "'PPL = X +/- E' (E = PPL * the standard error of the mean NLL, as llama.cpp prints it).\n"
    "\n"
    "  --ctx N          tokens per window (default 512; at most the model's positions)\n"
    "  --stride N       tokens between windows, and tokens each scores (default ctx/2; below ctx)\n"
    "  --chunks N       use only the first N windows (default: all)\n"
    "  --backend NAME   cpu (default, the reference) or cuda\n"
    "  --kv-dtype T     KV cache element type: f16 (default), bf16 or f32\n"
    "  --plugin-dir DIR also look for plugins in DIR (repeatable)\n"
    "  --json           print one JSON object instead of the PPL line\n"
    "  --help           this text\n"
    "\n"
    "Exit status: 0 done, 1 the model or FILE cannot be used (missing, not UTF-8, fewer tokens than\n"
    "one context), 2 usage error. See docs/FLAGS.md.\n";

int usage_error(const std::string& why) {
  std::cerr << "memra-perplexity: " << why << "\n\n" << kUsage;
  return 2;
}

int fail(const std::string& why) {
  std::cerr << "memra-perplexity: " << why << "\n";
  return 1;
}

bool parse_count(const std::string& text, int64_t lo, int64_t* out) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < lo) return false;
  *out = v;
  return true;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Args {
  std::string model, file;
  int64_t ctx = 512, stride = 0, chunks = 0;
  std::string backend = "cpu", kv_dtype = engine::kv_dtype_name(engine::kDefaultKvDtype);
  std::vector<std::string> plugin_dirs;
  bool json = false;
};

// Parses argv into `a`; returns -1 to go on, else the exit code.
int parse(int argc, char** argv, Args& a) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    const bool has_eq = arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos;
    if (has_eq) {
      value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
    }
    auto take = [&]() -> bool {
      if (has_eq) return true;
      if (i + 1 >= argc) return false;
      value = argv[++i];
      return true;
    };
    auto count = [&](int64_t lo, int64_t* out) -> int {
      if (!take()) return usage_error(arg + " needs a value");
      if (!parse_count(value, lo, out)) return usage_error(arg + " needs a whole number of at least " + std::to_string(lo) + "; got '" + value + "'");
      return -1;
    };
    int rc = -1;
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--ctx") rc = count(2, &a.ctx);
    else if (arg == "--stride") rc = count(1, &a.stride);
    else if (arg == "--chunks") rc = count(1, &a.chunks);
    else if (arg == "--backend" || arg == "--kv-dtype" || arg == "--plugin-dir") {
      if (!take()) return usage_error(arg + " needs a value");
      if (arg == "--backend") a.backend = value;
      else if (arg == "--kv-dtype") a.kv_dtype = value;
      else a.plugin_dirs.push_back(value);
    } else if (arg == "--json") a.json = true;
    else if (arg.rfind("-", 0) == 0 && arg.size() > 1) return usage_error("unknown option " + arg);
    else positional.push_back(arg);
    if (rc != -1) return rc;
  }
  if (positional.size() != 2) return usage_error("give MODEL and FILE");
  a.model = positional[0];
  a.file = positional[1];
  if (a.stride == 0) a.stride = a.ctx / 2;
  if (a.stride >= a.ctx) return usage_error("--stride " + std::to_string(a.stride) + " must be below --ctx " + std::to_string(a.ctx));
  if (a.backend != "cpu" && a.backend != "cuda") return usage_error("--backend must be cpu or cuda");
  if (!engine::parse_kv_dtype(a.kv_dtype)) return usage_error("--kv-dtype must be f16, bf16, fp8 or f32");
  return -1;
}

int run(const Args& a) {
  // The text first: a bad file fails before the model is read.
  std::ifstream in(a.file, std::ios::binary);
  if (!in) return fail("cannot read " + a.file + ": " + (std::filesystem::exists(a.file) ? "not readable" : "no such file"));
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  if (const auto bad = perplexity::first_invalid_utf8(text)) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[*bad]));
    return fail(a.file + " is not UTF-8 text: byte " + byte + " at offset " + std::to_string(*bad) +
                " does not start a valid UTF-8 sequence");
  }

  plugins::PluginHostOptions po;
  for (const auto& d : a.plugin_dirs) po.plugin_dirs.emplace_back(d);
  po.services.log = [](memra_log_level level, std::string_view line) {
    if (level >= MEMRA_LOG_WARN) std::cerr << line << "\n";
  };
  plugins::PluginHost host(std::move(po));
  host.discover();
  auto source = engine::open_model_source(a.model, host);
  if (!source) return fail(source.error().message);
  const int64_t positions = (*source)->config.max_position_embeddings;
  if (positions > 0 && a.ctx > positions)
    return fail("--ctx " + std::to_string(a.ctx) + " is beyond the model's " + std::to_string(positions) + " positions");
  auto tok = engine::load_tokenizer(a.model);
  if (!tok) return fail(tok.error().message);

  std::vector<int32_t> ids = (*tok)->encode(text, false);
  // A tokenizer that adds BOS gets it as each window's first token, as llama.cpp does.
  const std::vector<int32_t> probe = (*tok)->encode("a", true);
  const auto bos = (*tok)->bos_id();
  const bool add_bos = bos && !probe.empty() && probe.front() == *bos && (*tok)->encode("a", false) != probe;
  const auto starts = perplexity::window_starts(static_cast<int64_t>(ids.size()), a.ctx, a.stride, a.chunks);
  if (starts.empty())
    return fail(a.file + " has " + std::to_string(ids.size()) + " tokens, fewer than one context of " +
                std::to_string(a.ctx) + ": give a longer text or a smaller --ctx");

  engine::EngineOptions eo;
  eo.backend.kind = a.backend == "cuda" ? MEMRA_BACKEND_CUDA : MEMRA_BACKEND_CPU;
  eo.max_context = a.ctx;
  eo.max_sequences = 1;
  eo.kv_dtype = *engine::parse_kv_dtype(a.kv_dtype);
  auto eng = engine::Engine::create(std::move(*source), host, eo);
  if (!eng) return fail(eng.error().message);
  engine::Engine& e = **eng;

  std::cerr << "memra-perplexity: " << a.model << " on " << a.backend << " (KV " << a.kv_dtype << "): " << a.file << ", "
            << ids.size() << " tokens; " << starts.size() << " windows of " << a.ctx << " (stride " << a.stride
            << "), " << starts.size() * static_cast<size_t>(a.stride) << " tokens scored\n";
  perplexity::NllStats stats;
  const double t0 = now_s();
  const size_t every = std::max<size_t>(1, starts.size() / 50);
  std::vector<int32_t> window(static_cast<size_t>(a.ctx));
  for (size_t w = 0; w < starts.size(); ++w) {
    std::copy_n(ids.begin() + starts[w], a.ctx, window.begin());
    if (add_bos) window[0] = *bos;
    const int32_t seq = e.open_sequence();
    engine::StepRequest req{seq, window, /*all_logits=*/true, /*prompt=*/true};
    auto out = e.step({&req, 1});
    e.close_sequence(seq);
    if (!out) return fail("window " + std::to_string(w + 1) + ": " + out.error().message);
    for (int64_t j = a.ctx - a.stride - 1; j < a.ctx - 1; ++j)
      stats.add(perplexity::token_nll((*out)[static_cast<size_t>(j)], window[static_cast<size_t>(j + 1)]));
    if ((w + 1) % every == 0 || w + 1 == starts.size()) {
      const double el = now_s() - t0;
      char line[160];
      std::snprintf(line, sizeof line, "[%zu/%zu] PPL %.4f +/- %.4f, %.1f s, %.0f tokens/s, ETA %.0f s\n", w + 1,
                    starts.size(), stats.ppl(), stats.ppl_error(), el, (w + 1) * a.ctx / el,
                    el / (w + 1) * (starts.size() - w - 1));
      std::cerr << line << std::flush;
    }
  }
  if (a.json) {
    nlohmann::ordered_json j = {{"model", a.model},           {"file", a.file},
                                {"backend", a.backend},       {"kv_dtype", a.kv_dtype},
                                {"ctx", a.ctx},               {"stride", a.stride},
                                {"chunks", a.chunks},         {"tokens", ids.size()},
                                {"windows", starts.size()},   {"scored", stats.count()},
                                {"nll_mean", stats.mean()},   {"ppl", stats.ppl()},
                                {"ppl_err", stats.ppl_error()}, {"seconds", now_s() - t0}};
    std::cout << j.dump() << "\n";
  } else {
    char line[160];
    std::snprintf(line, sizeof line, "PPL = %.4f +/- %.4f (%lld tokens scored in %zu windows of %lld, stride %lld)\n",
                  stats.ppl(), stats.ppl_error(), static_cast<long long>(stats.count()), starts.size(),
                  static_cast<long long>(a.ctx), static_cast<long long>(a.stride));
    std::cout << line;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (int rc = parse(argc, argv, a); rc != -1) return rc;
  try {
    return run(a);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
