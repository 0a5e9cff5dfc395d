// memra-gen — one-shot generation and chat from the shell.
//
//   memra-gen MODEL --prompt "Once upon a time" [--max-tokens N] [--temperature T] ...
//   memra-gen MODEL --chat                      (a conversation on stdin/stdout)
//   memra-gen MODEL --prompt-ids 1,2,3 --json   (raw ids in, one JSON object out)
//
// Tokens stream to stdout as they are generated; a one-line summary goes to stderr.
#include <Poco/Util/Application.h>
#include <Poco/Util/HelpFormatter.h>
#include <Poco/Util/Option.h>
#include <Poco/Util/OptionSet.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "host/engine/draft_loader.hpp"
#include "host/engine/draft_model.hpp"
#include "host/engine/mtp_drafter.hpp"
#include "host/engine/generate.hpp"
#include "host/engine/kv_dtype.hpp"
#include "host/engine/text_model.hpp"

namespace {

using namespace memra;

using Poco::Util::Application;
using Poco::Util::Option;
using Poco::Util::OptionSet;

// A flag's number, whole (no trailing text) and within [lo, hi]; otherwise an error that
// names the flag, what it takes and what it got (main() prints it, exit 64: usage).
template <class T>
T number(const std::string& flag, const std::string& text, T lo, T hi) {
  T v{};
  const char* end = text.data() + text.size();
  bool ok = false;
  if constexpr (std::is_floating_point_v<T>) {
    char* stop = nullptr;
    errno = 0;
    v = static_cast<T>(std::strtod(text.c_str(), &stop));
    ok = !text.empty() && stop == end && errno == 0 && std::isfinite(v);
  } else {
    const auto [ptr, ec] = std::from_chars(text.data(), end, v);
    ok = !text.empty() && ec == std::errc() && ptr == end;
  }
  if (!ok || v < lo || v > hi) {
    std::ostringstream want;
    want << "--" << flag << " needs " << (std::is_floating_point_v<T> ? "a number" : "an integer") << " from " << +lo
         << " to " << +hi << "; got '" << text << "'";
    throw std::invalid_argument(want.str());
  }
  return v;
}

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    ids.push_back(number<int32_t>("prompt-ids", item, 0, std::numeric_limits<int32_t>::max()));
  }
  return ids;
}

class GenApp : public Application {
 protected:
  void defineOptions(OptionSet& o) override {
    Application::defineOptions(o);
    auto add = [&](const char* name, const char* help, const char* arg = nullptr, bool repeat = false) {
      Option opt(name, "", help, false);
      if (arg) opt.argument(arg);
      opt.repeatable(repeat);
      o.addOption(opt.callback(Poco::Util::OptionCallback<GenApp>(this, &GenApp::set)));
    };
    add("help", "print this help and exit");
    add("prompt", "generate a continuation of TEXT", "TEXT");
    add("prompt-ids", "generate from raw token ids (comma-separated)", "IDS");
    add("chat", "chat on stdin/stdout with the model's chat template (one user message per line)");
    add("system", "system message for --chat", "TEXT");
    add("max-tokens", "tokens to generate at most (default 128)", "N");
    add("temperature", "sampling temperature; 0 = greedy (default 0)", "T");
    add("top-p", "nucleus sampling mass (default 1)", "P");
    add("top-k", "keep the K most likely tokens (default 0 = off)", "K");
    add("min-p", "drop tokens below P times the most likely one (default 0)", "P");
    add("repetition-penalty", "penalty for tokens already present (default 1 = off)", "R");
    add("seed", "seed of the sampler's draws (default 0)", "S");
    add("backend", "auto, cpu or cuda (default auto: cuda when a driver and the CUDA backend load, else cpu)", "NAME");
    add("pp", "split the layers over N pipeline stages (CUDA devices 0..N-1; default 1)", "N");
    add("pp-split", "layers per pipeline stage, e.g. 18 or 12,12,12 (default: balanced by memory)", "LIST");
    add("pp-devices", "CUDA device of each pipeline stage, e.g. 0,1 (default 0..N-1)", "LIST");
    add("kv-dtype", "KV cache element type: f16, bf16, fp8 or f32 (default f16)", "TYPE");
    add("plugin-dir", "also look for plugins in DIR (repeatable)", "DIR", true);
    add("json", "print one JSON object at the end instead of streaming text");
    add("top-logprobs", "alternatives per step in --json output (default 5)", "N");
    add("spec", "speculative decoding with a drafter: ngram (prompt lookup), draft (a draft model, --draft) or mtp "
        "(MTP heads of the checkpoint); tokens are identical to plain decode", "KIND");
    add("spec-k", "tokens drafted per step (default 4)", "K");
    add("draft", "the draft model for --spec draft (same tokenizer as MODEL; HF directory, .gguf or .memra)", "PATH");
    add("spec-verify-cost", "fallback cost model: cost of one more token in a verify step, in plain decode steps "
        "(default auto: measured from the step times; speculation pauses while it would be slower)", "R");
    add("spec-no-fallback", "speculate on every step, even when acceptance makes it slower");
    add("dump-logits", "write float32 logits [prompt positions + generated steps][vocab] to FILE", "FILE");
  }

  void set(const std::string& name, const std::string& value) {
    if (name == "help") help_ = true;
    else if (name == "plugin-dir") plugin_dirs_.push_back(value);
    else opts_[name] = value;
    if (name == "help") stopOptionsProcessing();
  }

  void help() const {
    Poco::Util::HelpFormatter f(options());
    f.setCommand("memra-gen");
    f.setUsage("MODEL (--prompt TEXT | --prompt-ids IDS | --chat) [options]");
    f.setHeader("Generates text with a model (Hugging Face directory or .gguf) on the CUDA backend or the CPU reference.");
    f.setFooter("Environment: MEMRA_PLUGIN_PATH (extra plugin directories). See docs/FLAGS.md.");
    f.format(std::cout);
  }

  std::string opt(const std::string& k, const std::string& d = "") const {
    auto it = opts_.find(k);
    return it == opts_.end() ? d : it->second;
  }

  int main(const ArgVec& args) override {
    if (help_) {
      help();
      return EXIT_OK;
    }
    try {
      return execute(args);
    } catch (const std::exception& e) {
      std::cerr << "memra-gen: " << e.what() << "\n";
      return EXIT_USAGE;
    }
  }

  int execute(const ArgVec& args) {
    if (args.size() != 1) {
      std::cerr << "memra-gen: give exactly one MODEL (a Hugging Face directory or a .gguf file); --help for usage\n";
      return EXIT_USAGE;
    }
    const int modes = opts_.count("prompt") + opts_.count("prompt-ids") + opts_.count("chat");
    if (modes != 1) {
      std::cerr << "memra-gen: give exactly one of --prompt, --prompt-ids, --chat\n";
      return EXIT_USAGE;
    }
    engine::EngineOptions eo;
    const std::string backend = opt("backend", "auto");
    if (backend != "auto" && backend != "cpu" && backend != "cuda") {
      std::cerr << "memra-gen: --backend must be auto, cpu or cuda\n";
      return EXIT_USAGE;
    }
    if (backend != "cpu") {
      // The CUDA backend opens only where a driver is present; auto falls back to the CPU.
      backend::BackendOptions cuda;
      cuda.kind = MEMRA_BACKEND_CUDA;
      auto probe = backend::open_backend(cuda);
      if (probe) {
        eo.backend.kind = MEMRA_BACKEND_CUDA;
      } else if (backend == "cuda") {
        std::cerr << "memra-gen: the CUDA backend is not available: " << probe.error().message << "\n";
        return EXIT_UNAVAILABLE;
      }
    }
    std::cerr << "memra-gen: backend " << (eo.backend.kind == MEMRA_BACKEND_CUDA ? "cuda" : "cpu") << "\n";
    eo.pipeline_stages = number<int32_t>("pp", opt("pp", "1"), 1, 64);
    auto list = [](const std::string& flag, const std::string& text, int64_t lo) {
      std::vector<int64_t> v;
      for (size_t p = 0; p < text.size();) {
        const size_t q = std::min(text.find(',', p), text.size());
        v.push_back(number<int64_t>(flag, text.substr(p, q - p), lo, 1 << 20));
        p = q + 1;
      }
      return v;
    };
    eo.pipeline_split = list("pp-split", opt("pp-split", ""), 1);
    for (int64_t d : list("pp-devices", opt("pp-devices", ""), 0)) eo.pipeline_devices.push_back(static_cast<int>(d));
    const auto kv_dtype = engine::parse_kv_dtype(opt("kv-dtype", engine::kv_dtype_name(engine::kDefaultKvDtype)));
    if (!kv_dtype) return usage_error("--kv-dtype must be f16, bf16, fp8 or f32");
    eo.kv_dtype = *kv_dtype;
    engine::GenerateOptions g;
    constexpr float kBig = 1e30f;
    g.max_tokens = number<int64_t>("max-tokens", opt("max-tokens", "128"), 1, std::numeric_limits<int32_t>::max());
    g.sampling.temperature = number<float>("temperature", opt("temperature", "0"), 0.0f, kBig);
    g.sampling.top_p = number<float>("top-p", opt("top-p", "1"), 0.0f, 1.0f);
    g.sampling.top_k = number<int32_t>("top-k", opt("top-k", "0"), 0, std::numeric_limits<int32_t>::max());
    g.sampling.min_p = number<float>("min-p", opt("min-p", "0"), 0.0f, 1.0f);
    g.sampling.repetition_penalty = number<float>("repetition-penalty", opt("repetition-penalty", "1"), 0.0f, kBig);
    g.sampling.seed = number<uint64_t>("seed", opt("seed", "0"), 0, std::numeric_limits<uint64_t>::max());
    json_ = opts_.count("json") > 0;
    if (json_) {
      g.sampling.logprobs = true;
      g.sampling.top_logprobs = number<int32_t>("top-logprobs", opt("top-logprobs", "5"), 0, 20);
    }
    if (auto bad = engine::validate(g.sampling)) {
      std::cerr << "memra-gen: " << *bad << "\n";
      return EXIT_USAGE;
    }
    // Every argument is checked before the model is read.
    std::vector<int32_t> prompt;
    if (opts_.count("prompt-ids")) prompt = parse_ids(opt("prompt-ids"));

    plugins::PluginHostOptions po;
    for (const auto& d : plugin_dirs_) po.plugin_dirs.emplace_back(d);
    po.services.log = [](memra_log_level level, std::string_view line) {
      if (level >= MEMRA_LOG_WARN) std::cerr << line << "\n";
    };
    plugins::PluginHost host(std::move(po));
    host.discover();

    std::cerr << "memra-gen: loading " << args[0] << " ...\n";
    auto source = engine::open_model_source(args[0], host);
    if (!source) return fail(source.error().message);
    const ModelConfig config = (*source)->config;
    auto text = engine::load_text_model(args[0], config);
    if (!text) return fail(text.error().message);
    text_ = std::move(*text);
    // Speculating: a hybrid's rollback copies a row's state snapshot back instead of replaying.
    if (!opt("spec", "").empty()) eo.state_snapshot_rows = std::max(1, std::atoi(opt("spec-k", "4").c_str()));
    eo.draft_head = opt("spec", "") == "mtp";
    auto eng = engine::Engine::create(std::move(*source), host, eo);
    if (!eng) return fail(eng.error().message);
    engine_ = std::move(*eng);
    g.stop_ids = text_.stop_ids;
    if (int rc = setup_spec(args[0], host, eo); rc != EXIT_OK) return rc;

    if (opts_.count("chat")) return chat(g);
    if (!opts_.count("prompt-ids")) prompt = text_.tokenizer->encode(opt("prompt"), true);
    return one_shot(prompt, g);
  }

  // --spec: the drafter (and draft engine) generation uses; none without --spec.
  int setup_spec(const std::string& model, const plugins::PluginHost& host, const engine::EngineOptions& eo) {
    spec_kind_ = opt("spec", "");
    if (spec_kind_.empty()) {
      if (opts_.count("draft")) return usage_error("--draft needs --spec draft");
      return EXIT_OK;
    }
    spec_.k = number<int>("spec-k", opt("spec-k", "4"), 1, 64);
    const std::string cost = opt("spec-verify-cost", "auto");
    spec_.policy.verify_token_cost = cost == "auto" ? -1.0 : number<double>("spec-verify-cost", cost, 0.0, 1e6);
    spec_.policy.adaptive = opts_.count("spec-no-fallback") == 0;
    if (spec_kind_ == "ngram") {
      drafter_ = std::make_unique<engine::NgramDrafter>();
    } else if (spec_kind_ == "draft") {
      if (!opts_.count("draft")) return usage_error("--spec draft needs --draft PATH (a model with the same tokenizer)");
      std::cerr << "memra-gen: loading draft model " << opt("draft") << " ...\n";
      auto d = engine::open_draft_engine(opt("draft"), *engine_, *text_.tokenizer, host, eo);
      if (!d) return fail(d.error().message);
      draft_engine_ = std::move(*d);
      drafter_ = std::make_unique<engine::DraftModelDrafter>(*draft_engine_, engine::draft_cost_estimate(*engine_, *draft_engine_));
    } else if (spec_kind_ == "mtp") {
      if (engine_->draft_layers() == 0)
        return fail(model + " has no MTP head" + (engine_->draft_head_missing().empty() ? "" : " (" + engine_->draft_head_missing() + ")") +
                    "; use --spec ngram, or --spec draft --draft PATH");
      drafter_ = std::make_unique<engine::MtpDrafter>(*engine_, engine::mtp_draft_cost(*engine_));
    } else {
      return usage_error("--spec must be ngram, draft or mtp");
    }
    spec_.drafter = drafter_.get();
    return EXIT_OK;
  }

  int usage_error(const std::string& message) {
    std::cerr << "memra-gen: " << message << "\n";
    return EXIT_USAGE;
  }

  int fail(const std::string& message) {
    std::cerr << "memra-gen: " << message << "\n";
    return EXIT_SOFTWARE;
  }

  int one_shot(const std::vector<int32_t>& prompt, engine::GenerateOptions g) {
    std::ofstream dump;
    if (opts_.count("dump-logits")) {
      dump.open(opt("dump-logits"), std::ios::binary);
      if (!dump) return fail("cannot write " + opt("dump-logits"));
      g.prompt_logits = true;
    }
    auto write_row = [&](std::span<const float> row) {
      if (dump.is_open()) dump.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(row.size() * sizeof(float)));
    };
    tokenizer::StreamDecoder stream(text_.tokenizer, {.skip_special_tokens = true, .clean_up_tokenization_spaces = {}});
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    const auto t0 = std::chrono::steady_clock::now();
    auto first = t0;
    bool got_first = false;
    const std::string& spec_kind = spec_kind_;
    const engine::SpeculativeOptions& spec = spec_;
    if (!spec_kind.empty() && dump.is_open()) return fail("--dump-logits cannot be combined with --spec");
    auto on_token =
        [&](const engine::TokenEvent& ev) {
          if (!got_first) {
            first = std::chrono::steady_clock::now();
            got_first = true;
          }
          write_row(ev.logits);
          if (json_) {
            nlohmann::ordered_json top = nlohmann::ordered_json::array();
            for (const auto& t : ev.top) top.push_back({{"id", t.id}, {"logprob", t.logprob}});
            steps.push_back({{"id", ev.token}, {"logprob", ev.logprob}, {"top_logprobs", top}});
          } else {
            std::cout << stream.push(ev.token) << std::flush;
          }
          return true;
        };
    auto r = spec_kind.empty()
                 ? engine::generate(*engine_, prompt, g, [&](std::span<const float> row) { write_row(row); }, on_token)
                 : engine::generate_speculative(*engine_, prompt, g, spec, on_token);
    if (!r) return fail(r.error().message);
    const auto t1 = std::chrono::steady_clock::now();
    if (!spec_kind.empty())
      std::cerr << "memra-gen: speculative (" << spec_kind << ", k " << spec.k << "): " << r->accepted << " of " << r->drafted
                << " drafted tokens accepted in " << r->verify_steps << " verify steps; " << r->plain_steps
                << " plain steps, fallback engaged " << r->fallbacks << " times\n";
    const std::string text = text_.tokenizer->decode(r->tokens, {.skip_special_tokens = true, .clean_up_tokenization_spaces = {}});
    if (json_) {
      nlohmann::ordered_json out = {{"prompt_ids", prompt},  {"generated_ids", r->tokens}, {"text", text},
                                    {"finish_reason", r->finish_reason}, {"steps", steps}};
      if (!spec_kind.empty())
        out["speculative"] = {{"drafter", spec_kind},      {"k", spec.k},
                              {"drafted", r->drafted},     {"accepted", r->accepted},
                              {"verify_steps", r->verify_steps}, {"plain_steps", r->plain_steps},
                              {"fallbacks", r->fallbacks}};
      std::cout << out.dump() << "\n";
    } else {
      std::cout << stream.finish() << "\n";
    }
    summary(prompt.size(), r->tokens.size(), t0, first, t1);
    return EXIT_OK;
  }

  void summary(size_t prompt, size_t generated, std::chrono::steady_clock::time_point t0,
               std::chrono::steady_clock::time_point first, std::chrono::steady_clock::time_point t1) {
    const double prefill_s = std::chrono::duration<double>(first - t0).count();
    const double decode_s = std::chrono::duration<double>(t1 - first).count();
    char line[256];
    std::snprintf(line, sizeof line, "memra-gen: %zu prompt tokens, %zu generated; prefill %.1f ms, decode %.2f tok/s\n",
                  prompt, generated, prefill_s * 1000.0, generated > 1 && decode_s > 0 ? (generated - 1) / decode_s : 0.0);
    std::cerr << line;
  }

  int chat(engine::GenerateOptions g) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (opts_.count("system")) messages.push_back({{"role", "system"}, {"content", opt("system")}});
    std::string line;
    while (std::cerr << "> " << std::flush, std::getline(std::cin, line)) {
      if (line.empty()) continue;
      messages.push_back({{"role", "user"}, {"content", line}});
      auto rendered = text_.render_chat({{"messages", messages}, {"add_generation_prompt", true}});
      if (!rendered) return fail(rendered.error().message);
      const std::vector<int32_t> prompt = text_.tokenizer->encode(*rendered, false);
      tokenizer::StreamDecoder stream(text_.tokenizer, {.skip_special_tokens = true, .clean_up_tokenization_spaces = {}});
      const auto t0 = std::chrono::steady_clock::now();
      auto first = t0;
      bool got_first = false;
      auto on_token = [&](const engine::TokenEvent& ev) {
        if (!got_first) {
          first = std::chrono::steady_clock::now();
          got_first = true;
        }
        std::cout << stream.push(ev.token) << std::flush;
        return true;
      };
      auto r = spec_kind_.empty() ? engine::generate(*engine_, prompt, g, nullptr, on_token)
                                  : engine::generate_speculative(*engine_, prompt, g, spec_, on_token);
      if (!r) return fail(r.error().message);
      std::cout << stream.finish() << "\n";
      summary(prompt.size(), r->tokens.size(), t0, first, std::chrono::steady_clock::now());
      messages.push_back({{"role", "assistant"}, {"content", text_.tokenizer->decode(r->tokens, {.skip_special_tokens = true, .clean_up_tokenization_spaces = {}})}});
    }
    return EXIT_OK;
  }

 private:
  bool help_ = false;
  bool json_ = false;
  std::map<std::string, std::string> opts_;
  std::vector<std::string> plugin_dirs_;
  engine::TextModel text_;
  std::unique_ptr<engine::Engine> engine_;
  std::string spec_kind_;                        // "" = plain decode
  engine::SpeculativeOptions spec_;
  std::unique_ptr<engine::Engine> draft_engine_;  // --spec draft
  std::unique_ptr<engine::Drafter> drafter_;      // declared after the draft engine: destroyed first
};

}  // namespace

POCO_APP_MAIN(GenApp)
