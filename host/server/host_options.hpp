// memra-host's settings: defaults, then MEMRA_* environment variables, then
// command-line flags (the later layer wins). docs/FLAGS.md documents each one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"
#include "host/engine/kv_dtype.hpp"
#include "memra/abi.h"

namespace memra::server {

struct ModelSpec {
  std::string alias;  // the name clients send as "model"
  std::string path;   // checkpoint or .memra directory
  std::string draft;  // its draft model for speculative decoding ("" = none): ALIAS=PATH+DRAFT
};

// --chat-template [ALIAS=]FILE: a Jinja chat template used instead of the one the
// model ships (or where it ships none). No alias: every model without its own.
struct ChatTemplateSpec {
  std::string alias;  // "" = every model
  std::string path;
};

enum class BackendChoice { auto_select, cpu, cuda };

struct HostOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  std::string api_keys_file;  // "" = auth off
  // TLS on the listener (docs/SERVING.md, "TLS"): both or neither; "" = plain HTTP.
  std::string tls_cert;  // PEM certificate (chain)
  std::string tls_key;   // PEM private key
  std::vector<ModelSpec> models;
  std::vector<ChatTemplateSpec> chat_templates;  // --chat-template, in the order given
  std::vector<std::string> plugin_dirs;  // --plugin-dir (MEMRA_PLUGIN_PATH is read by the plugin host)
  std::string registry_path;             // "" = the registry's default path
  std::size_t max_body_bytes = std::size_t{8} << 20;
  int drain_timeout_ms = 30000;
  int threads = 0;  // HTTP workers; 0 = by design: every model's max_running + max_waiting, plus 32
  // The HTTP front end (docs/SERVING.md, "Threads and connections").
  int header_timeout_ms = 10000;           // a request's head, from its first byte
  int body_timeout_ms = 60000;             // its body, from the end of the head
  std::int64_t min_receive_rate = 1024;    // bytes/s over a request's read, after 2 s; 0 = off
  int max_connections = 4096;
  int max_client_connections = 256;        // per client address; 0 = no limit
  // Engine and scheduler (docs/FLAGS.md).
  BackendChoice backend = BackendChoice::auto_select;
  bool allow_generic = false;
  bool repack_on_load = true;  // --no-repack: serve checkpoints in place, without a .memra repack
  // The memory plan (docs/SERVING.md, "Memory plan"; engine/memory_plan.hpp).
  std::int64_t max_context = 0;        // 0 = the model's positions when one sequence of them fits
  std::int64_t kv_cache_tokens = 0;    // 0 = from free memory, at most max_running sequences at full context
  double gpu_memory_fraction = 0.9;    // of the device's memory memra may hold in all
  memra_dtype kv_dtype = engine::kDefaultKvDtype;  // --kv-dtype f16|bf16|fp8|f32: the KV cache's element type
  std::int64_t max_running = 16;
  std::int64_t max_waiting = 256;
  std::int64_t max_step_tokens = 512;
  std::int64_t tenant_queue = 64;      // waiting requests per tenant before 429 at once
  std::int64_t default_max_tokens = 1024;  // a request without max_tokens (token_budget.hpp); 0 = the context left
  int queue_timeout_ms = 30000;        // longest wait in a scheduler's queue before 503; 0 = no limit
  int backfill_ms = 5000;              // a queued sequence that does not fit is passed by smaller ones this long
  // Speculative decoding (docs/SERVING.md). spec "" = per model: draft where the
  // model has one (ALIAS=PATH+DRAFT, or --draft), else off.
  std::string spec;                    // "", off, ngram, draft, mtp
  std::string draft_path;              // --draft: the draft for models without their own
  std::int64_t spec_k = 4;             // drafts per verify step
  double spec_verify_cost = -1.0;      // fallback cost model (engine/spec_policy.hpp); < 0: measured
  std::int64_t spec_max_batch = 4;     // no speculation while more sequences run
  // Pipeline stages (docs/ARCHITECTURE.md, "Pipeline stages"): layers split over
  // pipeline_stages CUDA devices (or CPU stages), by memory unless pp_split is given.
  std::int32_t pipeline_stages = 1;
  std::vector<std::int64_t> pp_split;  // layers per stage; empty = balanced by memory
  std::vector<int> pp_devices;         // device of each stage; empty = 0..N-1
  std::int32_t pp_groups = 0;          // rolling scheduler groups; 0 = 2 with pipeline stages, else 1
  int keys_reload_ms = 1000;           // key file mtime poll period
  std::string log_level = "information";
  bool enable_test_routes = false;
  bool list_plugins = false;
  std::optional<std::string> hash_key;  // "-" = read the key from stdin

  bool models_from_flags = false;  // a --model flag replaces MEMRA_MODELS
};

inline constexpr std::size_t kMaxBodyBytesLimit = std::size_t{1} << 30;

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
// The process environment (unset and empty both read as nullopt).
std::optional<std::string> process_env(const std::string& name);

// Applies MEMRA_HOST, MEMRA_PORT, MEMRA_API_KEYS, MEMRA_MODELS, MEMRA_REGISTRY, ... (see docs/FLAGS.md).
Status apply_environment(HostOptions& options, const EnvLookup& env);
// Applies one command-line flag by its long name ("port", "model", ...).
Status apply_flag(HostOptions& options, const std::string& name, const std::string& value);
// Checks between settings once every layer is applied: --tls-cert and --tls-key come together.
Status check_options(const HostOptions& options);

// "[ALIAS=]PATH[+DRAFT]"; without an alias the file name is used, minus
// .gguf/.memra/.safetensors. "+DRAFT" (split at the last '+') names the model's
// draft model for speculative decoding; a path holding '+' needs --draft instead.
Result<ModelSpec> parse_model_spec(std::string_view text);
// "[ALIAS=]FILE" (--chat-template). An '=' before the first '/' separates an alias.
Result<ChatTemplateSpec> parse_chat_template_spec(std::string_view text);
// The template file for `alias`: its own --chat-template ALIAS=FILE, else the
// alias-less one, else "" (the model's own template).
std::string chat_template_for(const HostOptions& options, const std::string& alias);

// "alias=path,alias2=path2" (MEMRA_MODELS).
Result<std::vector<ModelSpec>> parse_model_list(std::string_view text);
// "off", "ngram", "draft" or "mtp".
Result<std::string> parse_spec_kind(std::string_view text);
// "auto", "cpu" or "cuda".
Result<BackendChoice> parse_backend(std::string_view text);
// Poco level names; "info" is accepted for "information".
Result<std::string> parse_log_level(std::string_view text);

}  // namespace memra::server
