#include "host/server/host_options.hpp"

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "host/engine/kv_dtype.hpp"

namespace memra::server {
namespace {

Error usage(std::string message) { return make_error(ErrorCode::invalid_argument, std::move(message)); }

// An integer in [lo, hi]; `what` names the flag or variable in the error.
Result<std::int64_t> parse_int(std::string_view text, std::string_view what, std::int64_t lo, std::int64_t hi) {
  std::int64_t value = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < lo || value > hi) {
    return usage(std::string(what) + " must be an integer from " + std::to_string(lo) + " to " +
                 std::to_string(hi) + ", got '" + std::string(text) + "'");
  }
  return value;
}

Status check_unique_aliases(const std::vector<ModelSpec>& models) {
  std::set<std::string> seen;
  for (const auto& m : models) {
    if (!seen.insert(m.alias).second) {
      return usage("model alias '" + m.alias + "' is given twice; name each model with ALIAS=PATH");
    }
  }
  return {};
}

// The flag/variable pairs sharing a setter: long flag name -> env var.
struct Setting {
  const char* flag;
  const char* env;
};
constexpr Setting kSettings[] = {
    {"host", "MEMRA_HOST"},
    {"port", "MEMRA_PORT"},
    {"api-keys", "MEMRA_API_KEYS"},
    {"tls-cert", "MEMRA_TLS_CERT"},
    {"tls-key", "MEMRA_TLS_KEY"},
    {"registry", "MEMRA_REGISTRY"},
    {"max-body-bytes", "MEMRA_MAX_BODY_BYTES"},
    {"drain-timeout-ms", "MEMRA_DRAIN_TIMEOUT_MS"},
    {"threads", "MEMRA_THREADS"},
    {"header-timeout-ms", "MEMRA_HEADER_TIMEOUT_MS"},
    {"body-timeout-ms", "MEMRA_BODY_TIMEOUT_MS"},
    {"min-receive-rate", "MEMRA_MIN_RECEIVE_RATE"},
    {"max-connections", "MEMRA_MAX_CONNECTIONS"},
    {"max-client-connections", "MEMRA_MAX_CLIENT_CONNECTIONS"},
    {"log-level", "MEMRA_LOG_LEVEL"},
    {"backend", "MEMRA_BACKEND"},
    {"max-context", "MEMRA_MAX_CONTEXT"},
    {"kv-cache-tokens", "MEMRA_KV_CACHE_TOKENS"},
    {"gpu-memory-fraction", "MEMRA_GPU_MEMORY_FRACTION"},
    {"kv-dtype", "MEMRA_KV_DTYPE"},
    {"max-running", "MEMRA_MAX_RUNNING"},
    {"max-waiting", "MEMRA_MAX_WAITING"},
    {"max-step-tokens", "MEMRA_MAX_STEP_TOKENS"},
    {"tenant-queue", "MEMRA_TENANT_QUEUE"},
    {"default-max-tokens", "MEMRA_DEFAULT_MAX_TOKENS"},
    {"queue-timeout-ms", "MEMRA_QUEUE_TIMEOUT_MS"},
    {"backfill-ms", "MEMRA_BACKFILL_MS"},
    {"spec", "MEMRA_SPEC"},
    {"spec-k", "MEMRA_SPEC_K"},
    {"draft", "MEMRA_DRAFT"},
    {"spec-verify-cost", "MEMRA_SPEC_VERIFY_COST"},
    {"spec-max-batch", "MEMRA_SPEC_MAX_BATCH"},
    {"pp", "MEMRA_PP"},
    {"pp-split", "MEMRA_PP_SPLIT"},
    {"pp-devices", "MEMRA_PP_DEVICES"},
    {"pp-groups", "MEMRA_PP_GROUPS"},
};

// "a,b,c" of integers in [lo, hi].
Result<std::vector<std::int64_t>> parse_int_list(const std::string& value, const std::string& what, std::int64_t lo,
                                                 std::int64_t hi) {
  std::vector<std::int64_t> out;
  std::size_t p = 0;
  while (p <= value.size()) {
    const std::size_t q = std::min(value.find(',', p), value.size());
    auto n = parse_int(value.substr(p, q - p), what, lo, hi);
    if (!n) return n.error();
    out.push_back(*n);
    p = q + 1;
  }
  return out;
}

// Sets one value; `what` is "--flag" or "VAR" for messages.
Status set_value(HostOptions& o, std::string_view name, const std::string& value, const std::string& what) {
  if (name == "host") {
    if (value.empty()) return usage(what + " must not be empty (e.g. 127.0.0.1 or 0.0.0.0)");
    o.host = value;
  } else if (name == "port") {
    auto port = parse_int(value, what, 0, 65535);
    if (!port) return port.error();
    o.port = static_cast<std::uint16_t>(*port);
  } else if (name == "api-keys") {
    o.api_keys_file = value;
  } else if (name == "tls-cert") {
    if (value.empty()) return usage(what + " must not be empty (a PEM certificate file)");
    o.tls_cert = value;
  } else if (name == "tls-key") {
    if (value.empty()) return usage(what + " must not be empty (a PEM private key file)");
    o.tls_key = value;
  } else if (name == "registry") {
    o.registry_path = value;
  } else if (name == "max-body-bytes") {
    auto bytes = parse_int(value, what, 1, static_cast<std::int64_t>(kMaxBodyBytesLimit));
    if (!bytes) return bytes.error();
    o.max_body_bytes = static_cast<std::size_t>(*bytes);
  } else if (name == "drain-timeout-ms") {
    auto ms = parse_int(value, what, 0, 3600000);
    if (!ms) return ms.error();
    o.drain_timeout_ms = static_cast<int>(*ms);
  } else if (name == "threads") {
    if (value == "auto") {
      o.threads = 0;
      return {};
    }
    auto n = parse_int(value, what, 2, 4096);
    if (!n) return n.error();
    o.threads = static_cast<int>(*n);
  } else if (name == "header-timeout-ms") {
    auto ms = parse_int(value, what, 100, 600000);
    if (!ms) return ms.error();
    o.header_timeout_ms = static_cast<int>(*ms);
  } else if (name == "body-timeout-ms") {
    auto ms = parse_int(value, what, 100, 3600000);
    if (!ms) return ms.error();
    o.body_timeout_ms = static_cast<int>(*ms);
  } else if (name == "min-receive-rate") {
    auto n = parse_int(value, what, 0, std::int64_t{1} << 30);
    if (!n) return n.error();
    o.min_receive_rate = *n;
  } else if (name == "max-connections") {
    auto n = parse_int(value, what, 16, 1 << 20);
    if (!n) return n.error();
    o.max_connections = static_cast<int>(*n);
  } else if (name == "max-client-connections") {
    auto n = parse_int(value, what, 0, 1 << 20);
    if (!n) return n.error();
    o.max_client_connections = static_cast<int>(*n);
  } else if (name == "backend") {
    auto backend = parse_backend(value);
    if (!backend) return usage(what + ": " + backend.error().message);
    o.backend = *backend;
  } else if (name == "max-context") {
    auto n = parse_int(value, what, 0, 1 << 20);
    if (!n) return n.error();
    o.max_context = *n;
  } else if (name == "kv-cache-tokens") {
    auto n = parse_int(value, what, 0, std::int64_t{1} << 32);
    if (!n) return n.error();
    o.kv_cache_tokens = *n;
  } else if (name == "gpu-memory-fraction") {
    char* end = nullptr;
    const double x = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size() || !(x > 0.0 && x <= 1.0))
      return usage(what + " must be a number in (0, 1] (the share of the device's memory memra may hold), got '" + value + "'");
    o.gpu_memory_fraction = x;
  } else if (name == "kv-dtype") {
    const auto dtype = engine::parse_kv_dtype(value);
    if (!dtype) return usage(what + " must be f16, bf16, fp8 or f32, got '" + value + "'");
    o.kv_dtype = *dtype;
  } else if (name == "max-running") {
    auto n = parse_int(value, what, 1, 4096);
    if (!n) return n.error();
    o.max_running = *n;
  } else if (name == "max-waiting") {
    auto n = parse_int(value, what, 1, 1 << 20);
    if (!n) return n.error();
    o.max_waiting = *n;
  } else if (name == "max-step-tokens") {
    auto n = parse_int(value, what, 1, 1 << 20);
    if (!n) return n.error();
    o.max_step_tokens = *n;
  } else if (name == "tenant-queue") {
    auto n = parse_int(value, what, 0, 1 << 20);
    if (!n) return n.error();
    o.tenant_queue = *n;
  } else if (name == "default-max-tokens") {
    auto n = parse_int(value, what, 0, 1 << 20);
    if (!n) return n.error();
    o.default_max_tokens = *n;
  } else if (name == "queue-timeout-ms") {
    auto ms = parse_int(value, what, 0, 3600000);
    if (!ms) return ms.error();
    o.queue_timeout_ms = static_cast<int>(*ms);
  } else if (name == "backfill-ms") {
    auto ms = parse_int(value, what, 0, 3600000);
    if (!ms) return ms.error();
    o.backfill_ms = static_cast<int>(*ms);
  } else if (name == "spec") {
    auto kind = parse_spec_kind(value);
    if (!kind) return usage(what + ": " + kind.error().message);
    o.spec = *kind;
  } else if (name == "spec-k") {
    auto n = parse_int(value, what, 1, 64);
    if (!n) return n.error();
    o.spec_k = *n;
  } else if (name == "draft") {
    if (value.empty()) return usage(what + " must not be empty (a draft model path)");
    o.draft_path = value;
  } else if (name == "spec-verify-cost") {
    if (value == "auto") {
      o.spec_verify_cost = -1.0;  // measured from step times
      return {};
    }
    char* end = nullptr;
    const double x = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size() || !(x >= 0.0 && x <= 100.0))
      return usage(what + " must be auto or a number from 0 to 100 (cost of one more verify token in plain decode steps), got '" +
                   value + "'");
    o.spec_verify_cost = x;
  } else if (name == "spec-max-batch") {
    auto n = parse_int(value, what, 0, 4096);
    if (!n) return n.error();
    o.spec_max_batch = *n;
  } else if (name == "pp") {
    auto n = parse_int(value, what, 1, 64);
    if (!n) return n.error();
    o.pipeline_stages = static_cast<std::int32_t>(*n);
  } else if (name == "pp-split") {
    auto v = parse_int_list(value, what + " (layers per stage, e.g. 18 or 12,12,12)", 1, 1 << 20);
    if (!v) return v.error();
    o.pp_split = *v;
  } else if (name == "pp-devices") {
    auto v = parse_int_list(value, what + " (CUDA device per stage, e.g. 0,1)", 0, 1023);
    if (!v) return v.error();
    o.pp_devices.assign(v->begin(), v->end());
  } else if (name == "pp-groups") {
    auto n = parse_int(value, what, 1, 2);
    if (!n) return n.error();
    o.pp_groups = static_cast<std::int32_t>(*n);
  } else if (name == "log-level") {
    auto level = parse_log_level(value);
    if (!level) return usage(what + ": " + level.error().message);
    o.log_level = *level;
  } else {
    return usage("unknown setting " + what);
  }
  return {};
}

}  // namespace

std::optional<std::string> process_env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

Result<BackendChoice> parse_backend(std::string_view text) {
  if (text == "auto") return BackendChoice::auto_select;
  if (text == "cpu") return BackendChoice::cpu;
  if (text == "cuda") return BackendChoice::cuda;
  return usage("unknown backend '" + std::string(text) + "'; use auto, cpu or cuda");
}

Result<std::string> parse_log_level(std::string_view text) {
  static const std::set<std::string, std::less<>> kLevels = {"none",    "fatal",       "critical", "error", "warning",
                                                             "notice",  "information", "debug",    "trace"};
  if (text == "info") return std::string("information");
  if (kLevels.count(text) != 0) return std::string(text);
  return usage("unknown log level '" + std::string(text) +
               "'; use one of error, warning, notice, information (info), debug, trace, none");
}

Result<std::string> parse_spec_kind(std::string_view text) {
  if (text == "off" || text == "ngram" || text == "draft" || text == "mtp") return std::string(text);
  return usage("unknown speculative decoding mode '" + std::string(text) + "'; use off, ngram, draft or mtp");
}

Result<ModelSpec> parse_model_spec(std::string_view text) {
  ModelSpec spec;
  if (const auto plus = text.rfind('+'); plus != std::string_view::npos) {
    spec.draft = std::string(text.substr(plus + 1));
    if (spec.draft.empty()) return usage("model '" + std::string(text) + "': the draft path after '+' is empty; use ALIAS=PATH+DRAFT");
    text = text.substr(0, plus);
  }
  const auto eq = text.find('=');
  if (eq != std::string_view::npos) {
    spec.alias = std::string(text.substr(0, eq));
    spec.path = std::string(text.substr(eq + 1));
    if (spec.alias.empty()) return usage("model '" + std::string(text) + "': the alias before '=' is empty");
  } else {
    spec.path = std::string(text);
  }
  if (spec.path.empty()) return usage("model '" + std::string(text) + "': the path is empty; use [ALIAS=]PATH");
  if (spec.alias.empty()) {
    std::filesystem::path p(spec.path);
    if (!p.has_filename()) p = p.parent_path();  // "dir/" -> "dir"
    // Strip only the known model extensions: "qwen3-0.6b" keeps its ".6b".
    const std::string ext = p.extension().string();
    const bool known_ext = ext == ".gguf" || ext == ".memra" || ext == ".safetensors";
    spec.alias = known_ext ? p.stem().string() : p.filename().string();
    if (spec.alias.empty()) return usage("model '" + std::string(text) + "': cannot derive an alias; use ALIAS=PATH");
  }
  return spec;
}

Result<std::vector<ModelSpec>> parse_model_list(std::string_view text) {
  std::vector<ModelSpec> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const auto item = text.substr(start, comma - start);
    if (!item.empty()) {
      auto spec = parse_model_spec(item);
      if (!spec) return spec.error();
      out.push_back(std::move(*spec));
    }
    start = comma + 1;
  }
  MEMRA_TRY(check_unique_aliases(out));
  return out;
}

Result<ChatTemplateSpec> parse_chat_template_spec(std::string_view text) {
  ChatTemplateSpec spec;
  const std::size_t eq = text.find('=');
  if (eq != std::string_view::npos && text.substr(0, eq).find('/') == std::string_view::npos) {
    spec.alias = std::string(text.substr(0, eq));
    spec.path = std::string(text.substr(eq + 1));
    if (spec.alias.empty()) return usage("--chat-template '" + std::string(text) + "': the alias before '=' is empty");
  } else {
    spec.path = std::string(text);
  }
  if (spec.path.empty()) return usage("--chat-template '" + std::string(text) + "': the file is empty; use [ALIAS=]FILE");
  return spec;
}

std::string chat_template_for(const HostOptions& options, const std::string& alias) {
  std::string any;
  for (const auto& t : options.chat_templates) {
    if (t.alias == alias) return t.path;
    if (t.alias.empty()) any = t.path;
  }
  return any;
}

Status check_options(const HostOptions& options) {
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return usage(options.tls_cert.empty() ? "--tls-key is given without --tls-cert (MEMRA_TLS_CERT): TLS needs both"
                                          : "--tls-cert is given without --tls-key (MEMRA_TLS_KEY): TLS needs both");
  }
  return {};
}

Status apply_environment(HostOptions& options, const EnvLookup& env) {
  for (const auto& s : kSettings) {
    if (auto value = env(s.env)) MEMRA_TRY(set_value(options, s.flag, *value, std::string(s.env)));
  }
  if (auto models = env("MEMRA_MODELS")) {
    auto list = parse_model_list(*models);
    if (!list) return usage("MEMRA_MODELS: " + list.error().message);
    options.models = std::move(*list);
  }
  return {};
}

Status apply_flag(HostOptions& options, const std::string& name, const std::string& value) {
  if (name == "model") {
    if (!options.models_from_flags) options.models.clear();  // flags replace MEMRA_MODELS
    options.models_from_flags = true;
    auto spec = parse_model_spec(value);
    if (!spec) return usage("--model: " + spec.error().message);
    options.models.push_back(std::move(*spec));
    return check_unique_aliases(options.models);
  }
  if (name == "chat-template") {
    auto spec = parse_chat_template_spec(value);
    if (!spec) return spec.error();
    for (const auto& t : options.chat_templates) {
      if (t.alias == spec->alias) {
        return usage("--chat-template is given twice for " +
                     (spec->alias.empty() ? std::string("every model") : "model '" + spec->alias + "'"));
      }
    }
    options.chat_templates.push_back(std::move(*spec));
    return {};
  }
  if (name == "plugin-dir") {
    if (value.empty()) return usage("--plugin-dir must not be empty");
    options.plugin_dirs.push_back(value);
    return {};
  }
  if (name == "list-plugins") {
    options.list_plugins = true;
    return {};
  }
  if (name == "no-repack") {
    options.repack_on_load = false;
    return {};
  }
  if (name == "allow-generic") {
    options.allow_generic = true;
    return {};
  }
  if (name == "enable-test-routes") {
    options.enable_test_routes = true;
    return {};
  }
  if (name == "hash-key") {
    options.hash_key = value;
    return {};
  }
  return set_value(options, name, value, "--" + name);
}

}  // namespace memra::server
