#include "host/server/host_app.hpp"

#include <Poco/AutoPtr.h>
#include <Poco/ConsoleChannel.h>
#include <Poco/FormattingChannel.h>
#include <Poco/Net/Context.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/PatternFormatter.h>
#include <Poco/Process.h>
#include <Poco/Util/HelpFormatter.h>
#include <Poco/Util/Option.h>
#include <Poco/Util/OptionException.h>
#include <Poco/Util/OptionSet.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include <sys/resource.h>

#include "host/server/admission.hpp"
#include "host/server/response_store.hpp"
#include "host/server/api_keys.hpp"
#include "host/server/key_ring.hpp"
#include "host/server/metrics.hpp"
#include "host/server/served_model.hpp"
#include "host/server/http_frontend.hpp"
#include "host/server/router.hpp"
#include "host/server/server_state.hpp"
#include "host/server/signals.hpp"
#include "host/server/startup_modules.hpp"
#include "host/server/tls_listener.hpp"

#ifndef MEMRA_VERSION
#define MEMRA_VERSION "unknown"
#endif

namespace memra::server {
namespace {

using Poco::Util::Option;

Poco::Logger& log() { return Poco::Logger::get("memra-host"); }

void setup_logging(const std::string& level) {
  Poco::AutoPtr<Poco::PatternFormatter> formatter(new Poco::PatternFormatter("%Y-%m-%dT%H:%M:%S.%iZ [%p] %t"));
  Poco::AutoPtr<Poco::FormattingChannel> channel(
      new Poco::FormattingChannel(formatter, Poco::AutoPtr<Poco::Channel>(new Poco::ConsoleChannel)));
  Poco::Logger::root().setChannel(channel);
  Poco::Logger::setChannel("", channel);
  Poco::Logger::root().setLevel(level);
  Poco::Logger::setLevel("", Poco::Logger::parseLevel(level));
}

// Each connection is a descriptor: lift the soft limit towards the hard one so
// --max-connections can be reached (the loop stops accepting briefly when it runs out).
void raise_descriptor_limit(int max_connections) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t want = static_cast<rlim_t>(max_connections) + 256;
  if (limit.rlim_cur >= want) return;
  const rlim_t soft = limit.rlim_max == RLIM_INFINITY ? want : std::min(want, limit.rlim_max);
  if (soft > limit.rlim_cur) {
    limit.rlim_cur = soft;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  if (soft < want)
    log().warning("the descriptor limit (%s) is below --max-connections %s plus what the server needs; new connections "
                  "are refused while it is reached (raise ulimit -n)",
                  std::to_string(soft), std::to_string(max_connections));
}

// Exit without running destructors: used when requests are still running and
// must not hold the process (their threads would be joined otherwise).
[[noreturn]] void exit_now(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

// The drain ran out of time: every scheduler ends its sequences as aborted, so each
// stream sends an error event (server_shutting_down) and [DONE] and each JSON request
// a 503; they get up to 1 s to write it, then the process exits 75 without them.
[[noreturn]] void cut_and_exit(ModelSet& models, ServerState& state) {
  for (const auto& m : models.all()) m->scheduler->abort_all("the server is shutting down (the drain timeout passed)");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (state.admitted() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  exit_now(Poco::Util::Application::EXIT_TEMPFAIL);
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : sep) + item;
  return out;
}

void print_environment_help(std::ostream& out) {
  out << "\nEnvironment (a flag given on the command line wins):\n"
         "  MEMRA_HOST              as --host\n"
         "  MEMRA_PORT              as --port\n"
         "  MEMRA_API_KEYS          as --api-keys\n"
         "  MEMRA_TLS_CERT          as --tls-cert\n"
         "  MEMRA_TLS_KEY           as --tls-key\n"
         "  MEMRA_MODELS            alias=path,alias2=path2 (as repeated --model)\n"
         "  MEMRA_PLUGIN_PATH       colon-separated plugin dirs, searched after --plugin-dir\n"
         "  MEMRA_REGISTRY          as --registry\n"
         "  MEMRA_HOME              registry.db lives here when no registry path is given (default ~/.memra)\n"
         "  MEMRA_MAX_BODY_BYTES    as --max-body-bytes\n"
         "  MEMRA_DRAIN_TIMEOUT_MS  as --drain-timeout-ms\n"
         "  MEMRA_THREADS           as --threads\n"
         "  MEMRA_HEADER_TIMEOUT_MS as --header-timeout-ms\n"
         "  MEMRA_BODY_TIMEOUT_MS   as --body-timeout-ms\n"
         "  MEMRA_MIN_RECEIVE_RATE  as --min-receive-rate\n"
         "  MEMRA_MAX_CONNECTIONS   as --max-connections\n"
         "  MEMRA_MAX_CLIENT_CONNECTIONS as --max-client-connections\n"
         "  MEMRA_LOG_LEVEL         as --log-level\n"
         "  MEMRA_BACKEND           as --backend\n"
         "  MEMRA_MAX_CONTEXT       as --max-context\n"
         "  MEMRA_KV_CACHE_TOKENS   as --kv-cache-tokens\n"
         "  MEMRA_GPU_MEMORY_FRACTION as --gpu-memory-fraction\n"
         "  MEMRA_KV_DTYPE          as --kv-dtype\n"
         "  MEMRA_MAX_RUNNING       as --max-running\n"
         "  MEMRA_MAX_WAITING       as --max-waiting\n"
         "  MEMRA_MAX_STEP_TOKENS   as --max-step-tokens\n"
         "  MEMRA_TENANT_QUEUE      as --tenant-queue\n"
         "  MEMRA_DEFAULT_MAX_TOKENS as --default-max-tokens\n"
         "  MEMRA_QUEUE_TIMEOUT_MS  as --queue-timeout-ms\n"
         "  MEMRA_BACKFILL_MS       as --backfill-ms\n"
         "  MEMRA_SPEC              as --spec\n"
         "  MEMRA_SPEC_K            as --spec-k\n"
         "  MEMRA_DRAFT             as --draft\n"
         "  MEMRA_SPEC_VERIFY_COST  as --spec-verify-cost\n"
         "  MEMRA_SPEC_MAX_BATCH    as --spec-max-batch\n"
         "  MEMRA_PP                as --pp\n"
         "  MEMRA_PP_SPLIT          as --pp-split\n"
         "  MEMRA_PP_DEVICES        as --pp-devices\n"
         "  MEMRA_PP_GROUPS         as --pp-groups\n"
         "\nWithout --model or MEMRA_MODELS, the embedded default model (memra-demo, a 6M-parameter Qwen3 trained\n"
         "on public-domain English) is served from <exe>/../share/memra/default_model.\n"
         "\nExit codes: 0 ok, 64 bad flag/env value, 66 a model cannot be loaded, 69 backend not in this build,\n"
         "70 internal error, 71 cannot listen, 75 drain cut short, 77 registry gate refused a model,\n"
         "78 bad key file or registry.\n"
         "Docs: docs/SERVING.md (routes, errors, auth, metrics, drain), docs/FLAGS.md.\n";
}

// Ready-to-paste examples for the embedded default model, after the listening line.
void print_examples(const std::string& url, bool auth) {
  const std::string model = kDefaultModelAlias;
  const std::string header = auth ? " -H 'Authorization: Bearer YOUR_KEY'" : "";
  std::cout << "\nServing the embedded default model '" << model
            << "' (a 6M-parameter Qwen3 trained on public-domain English: it answers in English sentences\n"
            << "but knows nothing).\n"
            << "Try it with curl:\n"
            << "  curl -s " << url << "/v1/chat/completions -H 'Content-Type: application/json'" << header << " \\\n"
            << "    -d '{\"model\":\"" << model
            << "\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":48,\"temperature\":0.7}'\n"
            << "or with the openai client (Node, npm install openai):\n"
            << "  import OpenAI from \"openai\";\n"
            << "  const client = new OpenAI({ baseURL: \"" << url << "/v1\", apiKey: \""
            << (auth ? "YOUR_KEY" : "unused") << "\" });\n"
            << "  const r = await client.chat.completions.create({ model: \"" << model
            << "\", messages: [{ role: \"user\", content: \"Hello\" }], max_tokens: 48, temperature: 0.7 });\n"
            << "  console.log(r.choices[0].message.content);\n"
            << "Serve a real model with --model PATH (docs/SERVING.md).\n"
            << std::flush;
}

Result<std::string> read_key_from_stdin() {
  std::string key;
  if (!std::getline(std::cin, key) && key.empty()) {
    return make_error(ErrorCode::invalid_argument, "--hash-key -: nothing to read on stdin");
  }
  while (!key.empty() && (key.back() == '\r' || key.back() == '\n')) key.pop_back();
  return key;
}

}  // namespace

int HostApp::run_main(int argc, char** argv) {
  try {
    init(argc, argv);
  } catch (const Poco::Util::OptionException& e) {
    std::cerr << "memra-host: " << e.displayText() << "\nRun 'memra-host --help' for the list of flags.\n";
    return EXIT_USAGE;
  } catch (const Poco::Exception& e) {
    std::cerr << "memra-host: " << e.displayText() << "\n";
    return EXIT_CONFIG;
  }
  const int rc = run();
  try {
    uninitialize();
  } catch (const Poco::Exception& e) {
    std::cerr << "memra-host: while shutting down: " << e.displayText() << "\n";
  }
  return rc;
}

void HostApp::defineOptions(Poco::Util::OptionSet& options) {
  // ServerApplication's own --daemon/--pidfile are left out on purpose:
  // daemonising and pid files belong to the service manager (systemd, k8s).
  Poco::Util::Application::defineOptions(options);
  options.addOption(Option("help", "h", "print this help and exit"));
  options.addOption(Option("version", "", "print the version and exit"));
  options.addOption(Option("host", "", "address to listen on (default 127.0.0.1)").argument("HOST"));
  options.addOption(
      Option("port", "p", "TCP port (default 8080; 0 picks a free port, printed on stdout)").argument("PORT"));
  options.addOption(Option("api-keys", "",
                           "JSON key file; enables Bearer auth on /v1/* and /metrics (default: auth off)")
                        .argument("FILE"));
  options.addOption(Option("tls-cert", "",
                           "PEM certificate (chain) to serve HTTPS with, TLS 1.2 or newer; needs --tls-key; "
                           "SIGHUP reads both files again (default: plain HTTP)")
                        .argument("FILE"));
  options.addOption(Option("tls-key", "", "PEM private key of --tls-cert").argument("FILE"));
  options.addOption(Option("model", "",
                           "model to serve (Hugging Face directory or .gguf), repeatable; +DRAFT gives it a draft "
                           "model for speculative decoding; default: the embedded memra-demo")
                        .argument("[ALIAS=]PATH[+DRAFT]")
                        .repeatable(true));
  options.addOption(Option("chat-template", "",
                           "Jinja chat template file used instead of the model's own (or where it has none); "
                           "ALIAS=FILE for one model, repeatable")
                        .argument("[ALIAS=]FILE")
                        .repeatable(true));
  options.addOption(Option("backend", "", "auto, cpu or cuda (default auto: cpu in this build)").argument("NAME"));
  options.addOption(Option("no-repack", "",
                           "serve checkpoints in place instead of repacking them into $MEMRA_HOME/repacks on first load"));
  options.addOption(Option("allow-generic", "",
                           "load models whose registry verdict is generic (unverified), logging that loudly"));
  options.addOption(Option("max-context", "",
                           "tokens per sequence (default 0: the model's positions when one sequence of them fits "
                           "the memory plan, else the longest that does)")
                        .argument("N"));
  options.addOption(Option("kv-cache-tokens", "",
                           "KV-cache size in tokens, rounded up to whole contexts (default 0: what the memory plan "
                           "leaves, at most --max-running contexts)")
                        .argument("N"));
  options.addOption(Option("gpu-memory-fraction", "",
                           "share of the device's memory memra may hold in all: weights, workspace, KV cache and "
                           "state (default 0.9; on the CPU backend, of the available RAM)")
                        .argument("X"));
  options.addOption(Option("kv-dtype", "", "KV cache element type: f16, bf16, fp8 or f32 (default f16)").argument("TYPE"));
  options.addOption(Option("max-running", "", "sequences decoding at once per model (default 16)").argument("N"));
  options.addOption(Option("max-waiting", "",
                           "sequences queued per model before requests get 503 (default 256)")
                        .argument("N"));
  options.addOption(Option("max-step-tokens", "", "prompt tokens per scheduler step, chunked prefill; sizes sliding-window KV pools (default 512)")
                        .argument("N"));
  options.addOption(Option("default-max-tokens", "",
                           "tokens a request without max_tokens generates at most (also capped by the context left "
                           "and the key's max_kv_tokens; default 1024, 0 = the context left)")
                        .argument("N"));
  options.addOption(Option("queue-timeout-ms", "",
                           "longest wait in a model's scheduler queue before 503 (default 30000; 0 = no limit)")
                        .argument("MS"));
  options.addOption(Option("backfill-ms", "",
                           "a queued request that does not fit yet is passed by smaller ones that do for this long, "
                           "then they wait for it (default 5000; 0 = strict order)")
                        .argument("MS"));
  options.addOption(Option("tenant-queue", "",
                           "requests per tenant waiting for admission before 429 at once (default 64)")
                        .argument("N"));
  options.addOption(Option("spec", "",
                           "speculative decoding: off, ngram (prompt lookup), draft (a draft model) or mtp; tokens are "
                           "identical either way (default: draft for models given one, else off)")
                        .argument("MODE"));
  options.addOption(Option("spec-k", "", "tokens drafted per verify step (default 4)").argument("K"));
  options.addOption(Option("draft", "",
                           "draft model (same tokenizer) for models without their own ALIAS=PATH+DRAFT; implies "
                           "--spec draft unless --spec says otherwise")
                        .argument("PATH"));
  options.addOption(Option("spec-verify-cost", "",
                           "fallback cost model: one more token in a verify step costs R plain decode steps "
                           "(default auto: measured from the step times); a sequence stops speculating while it "
                           "would be slower")
                        .argument("R"));
  options.addOption(Option("spec-max-batch", "",
                           "no speculation while more sequences than N run on a model (default 4; 0 = never)")
                        .argument("N"));
  options.addOption(Option("pp", "", "split each model's layers over N pipeline stages, CUDA devices 0..N-1 "
                                     "(default 1: one device)")
                        .argument("N"));
  options.addOption(Option("pp-split", "", "layers per pipeline stage, e.g. 18 or 12,12,12 (default: balanced by "
                                           "weight + KV bytes)")
                        .argument("LIST"));
  options.addOption(Option("pp-devices", "", "CUDA device of each pipeline stage, e.g. 0,1 (default 0..N-1)").argument("LIST"));
  options.addOption(Option("pp-groups", "", "with --pp: 2 = the running sequences form two groups whose steps "
                                            "alternate, one group's next step entering stage 0 while the other's is "
                                            "in stage 1; 1 = one step at a time (default 2 with --pp, else 1)")
                        .argument("N"));
  options.addOption(
      Option("plugin-dir", "", "directory to search for plugins first, repeatable").argument("DIR").repeatable(true));
  options.addOption(Option("list-plugins", "", "load plugins, print what loaded and what was refused, and exit"));
  options.addOption(
      Option("registry", "", "registry database (default $MEMRA_REGISTRY, else $MEMRA_HOME/registry.db)")
          .argument("PATH"));
  options.addOption(Option("max-body-bytes", "", "largest request body accepted, in bytes (default 8388608)")
                        .argument("N"));
  options.addOption(Option("drain-timeout-ms", "",
                           "on SIGTERM/SIGINT, how long to let running requests finish (default 30000)")
                        .argument("MS"));
  options.addOption(Option("threads", "",
                           "HTTP worker threads: requests answered at once, a stream holding one until it ends; "
                           "reading requests and /health, /ready, /metrics need none of them (default auto: every "
                           "model's --max-running + --max-waiting, plus 32)")
                        .argument("N"));
  options.addOption(Option("header-timeout-ms", "",
                           "a request's head must arrive within this of its first byte, else 408 (default 10000)")
                        .argument("MS"));
  options.addOption(Option("body-timeout-ms", "",
                           "a request's body must arrive within this of its head, else 408 (default 60000)")
                        .argument("MS"));
  options.addOption(Option("min-receive-rate", "",
                           "a request must arrive at this many bytes/s on average once it is 2 s old, else 408 "
                           "(default 1024; 0 = off)")
                        .argument("BYTES"));
  options.addOption(Option("max-connections", "", "open client connections in all; more get 503 (default 4096)")
                        .argument("N"));
  options.addOption(Option("max-client-connections", "",
                           "open connections per client address; more get 503 (default 256; 0 = no limit)")
                        .argument("N"));
  options.addOption(Option("log-level", "", "error, warning, information, debug or trace (default information)")
                        .argument("LEVEL"));
  options.addOption(Option("enable-test-routes", "",
                           "TESTS ONLY: add POST /debug/sleep?ms=N and GET /debug/throw; never in production"));
  options.addOption(Option("hash-key", "", "print the sha256 hex of KEY for the key file and exit ('-' reads stdin)")
                        .argument("KEY"));
}

void HostApp::handleOption(const std::string& name, const std::string& value) {
  ServerApplication::handleOption(name, value);
  if (name == "help") {
    help_ = true;
    stopOptionsProcessing();
  } else if (name == "version") {
    version_ = true;
  } else {
    flags_.emplace_back(name, value);
  }
}

void HostApp::print_help() const {
  Poco::Util::HelpFormatter help(options());
  help.setCommand("memra-host");
  help.setUsage("[FLAGS]");
  help.setHeader("memra-host: OpenAI-compatible HTTP server of the memra inference engine.");
  help.setWidth(100);
  help.format(std::cout);
  print_environment_help(std::cout);
}

int HostApp::main(const std::vector<std::string>& args) {
  if (help_) {
    print_help();
    return EXIT_OK;
  }
  if (version_) {
    std::cout << "memra-host " << MEMRA_VERSION << "\n";
    return EXIT_OK;
  }
  if (!args.empty()) {
    std::cerr << "memra-host: unexpected argument '" << args.front()
              << "' (models are given with --model [ALIAS=]PATH); run 'memra-host --help'\n";
    return EXIT_USAGE;
  }
  HostOptions options;
  Status status = apply_environment(options, process_env);
  for (const auto& [name, value] : flags_) {
    if (!status) break;
    status = apply_flag(options, name, value);
  }
  if (status) status = check_options(options);
  if (!status) {
    std::cerr << "memra-host: " << status.error().message << "\nRun 'memra-host --help' for the list of flags.\n";
    return EXIT_USAGE;
  }

  if (options.hash_key) {
    std::string key = *options.hash_key;
    if (key == "-") {
      auto read = read_key_from_stdin();
      if (!read) {
        std::cerr << "memra-host: " << read.error().message << "\n";
        return EXIT_USAGE;
      }
      key = *read;
    }
    if (key.empty()) {
      std::cerr << "memra-host: --hash-key needs a non-empty key\n";
      return EXIT_USAGE;
    }
    std::cout << sha256_hex(key) << std::endl;
    return EXIT_OK;
  }

  setup_logging(options.log_level);
  StartupModules modules(log());
  if (options.list_plugins) {
    if (auto loaded = modules.load_plugins(options.plugin_dirs); !loaded) {
      log().error(loaded.error().message);
      return EXIT_CONFIG;
    }
    const auto report = modules.plugin_report();
    if (report.empty()) std::cout << "no plugins found\n";
    for (const auto& line : report) std::cout << line << "\n";
    std::cout.flush();
    return EXIT_OK;
  }

  log().information("memra-host %s starting (pid %s)", std::string(MEMRA_VERSION), std::to_string(Poco::Process::id()));

  // TLS files are checked before the models load (minutes), so a bad path fails fast.
  std::shared_ptr<Poco::Net::Context> tls;
  if (!options.tls_cert.empty()) {
    TlsContextResult loaded = load_tls_context({options.tls_cert, options.tls_key});
    if (!loaded.context) {
      log().error("%s. Give a readable PEM certificate and its key with --tls-cert FILE --tls-key FILE.", loaded.error);
      return EXIT_CONFIG;
    }
    tls = std::move(loaded.context);
    log().information("TLS: on (1.2 or newer): certificate %s, key %s; SIGHUP reads them again", options.tls_cert,
                      options.tls_key);
  }

  std::unique_ptr<KeyRing> keys;
  if (!options.api_keys_file.empty()) {
    auto loaded = KeyStore::load_file(options.api_keys_file);
    if (!loaded) {
      log().error(loaded.error().message);
      return EXIT_CONFIG;
    }
    std::vector<std::string> tenants;
    for (const auto& k : loaded->keys()) tenants.push_back(k.tenant + (k.disabled ? " (disabled)" : ""));
    log().information("auth: on: %s key(s), %s enabled, from %s; tenants: %s; the file is re-read when it changes",
                      std::to_string(loaded->keys().size()), std::to_string(loaded->enabled_count()),
                      options.api_keys_file, join(tenants, ", "));
    keys = std::make_unique<KeyRing>(std::move(*loaded), options.api_keys_file, log());
  } else {
    log().warning(
        "auth: off: no --api-keys / MEMRA_API_KEYS given, so every route is open to anyone who can reach %s",
        options.host);
  }

  if (auto opened = modules.open_registry(options.registry_path); !opened) {
    log().error(opened.error().message);
    return EXIT_CONFIG;
  }
  if (auto loaded = modules.load_plugins(options.plugin_dirs); !loaded) {
    log().error(loaded.error().message);
    return EXIT_CONFIG;
  }

  std::vector<ModelSpec> specs = options.models;
  const bool default_model = specs.empty();
  if (default_model) {
    const auto dir = default_model_dir();
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      log().error("no model given and the embedded default model is missing: %s does not exist (it is staged by the "
                  "build and installed to share/memra/default_model). Give a model with --model [ALIAS=]PATH or "
                  "MEMRA_MODELS=\"alias=path,...\"",
                  dir.string());
      return EXIT_NOINPUT;
    }
    log().information("no --model / MEMRA_MODELS given: serving the embedded default model %s from %s (a small "
                      "Qwen3 trained on public-domain English: it answers in English sentences but knows nothing)",
                      std::string(kDefaultModelAlias), dir.string());
    specs.push_back({kDefaultModelAlias, dir.string(), ""});
  }
  for (const auto& t : options.chat_templates) {
    if (!t.alias.empty() && std::none_of(specs.begin(), specs.end(), [&](const auto& m) { return m.alias == t.alias; })) {
      log().error("--chat-template %s=%s names no served model; the aliases are those of --model ALIAS=PATH", t.alias,
                  t.path);
      return EXIT_USAGE;
    }
  }
  ModelSet models;
  {
    StartupStopWatch stop;  // SIGTERM during a (long) first load stops the start, leaving nothing half-written
    for (const auto& spec : specs) {
      LoadOutcome loaded = modules.load_model(spec, options, &stop.requested());
      if (stop.requested()) {
        log().warning("%s during model loading: stopping the start (nothing is served; an interrupted first-load "
                      "repack removed what it had written)",
                      std::string(stop.signal() == SIGINT ? "SIGINT" : "SIGTERM"));
        return EXIT_OK;
      }
      if (!loaded.model) {
        log().error(loaded.error.message);
        switch (loaded.error.kind) {
          case LoadFailure::backend_unavailable: return EXIT_UNAVAILABLE;
          case LoadFailure::gate_refused: return EXIT_NOPERM;
          case LoadFailure::bad_model: return EXIT_NOINPUT;
        }
      }
      models.add(std::move(loaded.model));
    }
  }
  if (options.enable_test_routes) {
    log().warning("test routes are enabled (--enable-test-routes): POST /debug/sleep, GET /debug/throw");
  }
  return serve(options, modules.plugins_loaded(), keys.get(), models, default_model, std::move(tls));
}

int HostApp::serve(const HostOptions& options, int plugins_loaded, KeyRing* keys, ModelSet& models,
                   bool default_model, std::shared_ptr<Poco::Net::Context> tls) {
  const double start_time =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  Metrics metrics(start_time);
  metrics.set_plugins_loaded(plugins_loaded);
  metrics.set_models_loaded(static_cast<int>(models.all().size()));
  ServerState state;
  TenantAdmission admission(options.tenant_queue);
  ResponseStore responses(kStoredResponsesPerTenant, kStoredResponseBytesPerTenant);
  RouterConfig config;
  config.max_body_bytes = options.max_body_bytes;
  config.enable_test_routes = options.enable_test_routes;
  config.models = &models;
  config.admission = &admission;
  config.responses = &responses;
  config.models_ready = !models.empty();  // loaded before serving; each scheduler thread runs from its creation
  config.version = MEMRA_VERSION;
  config.default_max_tokens = options.default_max_tokens;
  config.queue_timeout_ms = options.queue_timeout_ms > 0 ? options.queue_timeout_ms : std::numeric_limits<int>::max();
  Router router(config, keys, metrics, state);
  if (keys != nullptr) keys->watch(options.keys_reload_ms);

  Poco::Net::ServerSocket socket;
  try {
    // SO_REUSEADDR (restart while old connections sit in TIME_WAIT) but not
    // SO_REUSEPORT, which would let a second memra-host share the port silently.
    socket.bind(Poco::Net::SocketAddress(options.host, options.port), /*reuseAddress=*/true, /*reusePort=*/false);
    socket.listen(128);
  } catch (const Poco::Exception& e) {
    log().error("cannot listen on %s:%s: %s. Pick another --port (0 = any free port) or stop what uses it.",
                options.host, std::to_string(options.port), e.displayText());
    return EXIT_OSERR;
  }

  raise_descriptor_limit(options.max_connections);
  // A request holds its worker while it waits in a scheduler's queue and while it
  // streams, so by default there is a worker for every sequence the schedulers can hold
  // (running + waiting): the HTTP queue then never stands in front of the schedulers'
  // priority order. One choice per request: n > 1 choices share one worker.
  int threads = options.threads;
  if (threads <= 0) {
    std::int64_t want = 32;
    for (std::size_t i = 0; i < models.all().size(); ++i) want += options.max_running + options.max_waiting;
    threads = static_cast<int>(std::clamp<std::int64_t>(want, 16, 4096));
  }
  FrontendOptions fo;
  fo.worker_threads = threads;
  fo.max_body_bytes = options.max_body_bytes;
  fo.header_timeout_ms = options.header_timeout_ms;
  fo.body_timeout_ms = options.body_timeout_ms;
  fo.min_receive_rate = options.min_receive_rate;
  fo.max_connections = options.max_connections;
  fo.max_client_connections = options.max_client_connections;
  fo.server_header = std::string("memra-host/") + MEMRA_VERSION;
  HttpFrontend frontend(router, state, tls ? -1 : socket.impl()->sockfd(), fo);
  frontend.start();
  std::unique_ptr<TlsListener> tls_listener;
  if (tls) {
    TlsRelayOptions to;
    to.handshake_timeout_ms = options.header_timeout_ms;
    to.max_connections = options.max_connections;
    tls_listener = std::make_unique<TlsListener>(socket.impl()->sockfd(), frontend,
                                                 TlsFiles{options.tls_cert, options.tls_key}, std::move(tls), to);
    tls_listener->start();
  }
  ReloadSignalWatch reload_watch([&] {
    if (!tls_listener) {
      log().information("SIGHUP: nothing to reload (no --tls-cert; the API key file is re-read when it changes)");
      return;
    }
    const std::string error = tls_listener->reload();
    if (error.empty()) {
      log().information("SIGHUP: TLS certificate %s and key %s read again; new connections use them",
                        options.tls_cert, options.tls_key);
    } else {
      log().error("SIGHUP: %s; still serving the previous certificate", error);
    }
  });

  const Poco::Net::SocketAddress bound = socket.address();
  const std::string host = bound.family() == Poco::Net::SocketAddress::IPv6 ? "[" + bound.host().toString() + "]"
                                                                             : bound.host().toString();
  const std::string url = std::string(tls_listener ? "https://" : "http://") + host + ":" + std::to_string(bound.port());
  // The one machine-readable line on stdout; tests and scripts parse it.
  std::cout << "memra-host listening on " << url << std::endl;
  log().information("listening on %s: %s worker threads (a stream holds one until it ends), /health and /ready "
                    "answered by the connection loop, /metrics by 2 threads of its own; up to %s connections (%s per "
                    "client); request heads within %s ms, bodies within %s ms, at least %s bytes/s; body limit %s bytes",
                    url, std::to_string(threads), std::to_string(options.max_connections),
                    options.max_client_connections > 0 ? std::to_string(options.max_client_connections) : std::string("any"),
                    std::to_string(options.header_timeout_ms), std::to_string(options.body_timeout_ms),
                    std::to_string(options.min_receive_rate), std::to_string(options.max_body_bytes));
  if (default_model) print_examples(url, keys != nullptr);

  const int sig = wait_for_termination_signal();
  const char* name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
  state.begin_drain();
  metrics.set_draining(true);
  log().information("%s: draining: %s request(s) in flight; new requests get 503; waiting up to %s ms", std::string(name),
                    std::to_string(state.admitted()), std::to_string(options.drain_timeout_ms));

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.drain_timeout_ms);
  while (state.admitted() > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      log().error("drain timeout (%s ms) passed with %s request(s) still running; ending them (streams get an error "
                  "event and [DONE]) and exiting",
                  std::to_string(options.drain_timeout_ms), std::to_string(state.admitted()));
      cut_and_exit(models, state);
    }
    if (wait_for_termination_signal_for(static_cast<int>(std::min<long>(left.count(), 50)))) {
      log().warning("second termination signal: exiting now without %s running request(s)",
                    std::to_string(state.admitted()));
      exit_now(EXIT_TEMPFAIL);
    }
  }
  // Nothing admitted is running: close the listener and idle keep-alive connections.
  if (tls_listener) tls_listener->stop_accepting();
  frontend.stop();
  if (tls_listener) tls_listener->join();
  log().information("drained: every admitted request finished; exiting");
  return EXIT_OK;
}

}  // namespace memra::server
