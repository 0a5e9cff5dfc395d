// The server's Prometheus metrics (prefix memra_), rendered in the text
// exposition format for GET /metrics. prometheus-cpp stays behind this pimpl so
// its headers are compiled in one file only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace memra::server {

class Metrics {
 public:
  // `start_time_seconds`: process start as Unix time (memra_process_start_time_seconds).
  explicit Metrics(double start_time_seconds);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // One finished request. `route` is the matched route pattern or "unmatched";
  // `method` is normalised to a fixed set so labels stay bounded.
  void record_request(std::string_view route, std::string_view method, int status, double seconds);
  void add_in_flight(int delta);
  void set_draining(bool draining);
  void set_models_loaded(int count);
  void set_plugins_loaded(int count);
  // ---- the HTTP front end (http_frontend.cpp) ----
  // reason: header_timeout, body_timeout, slow_client, bad_request, connection_limit,
  // client_connection_limit, overloaded (every worker busy and the queue full)
  void add_http_refusal(const std::string& reason);
  void set_http_load(std::int64_t connections, std::int64_t workers_busy, std::int64_t queued);

  // ---- serving (labels: model alias, tenant name or "anonymous") ----
  void add_tokens(const std::string& model, const std::string& tenant, std::int64_t prompt, std::int64_t generated,
                  std::int64_t cached);
  void observe_ttft(const std::string& model, double seconds);
  void observe_inter_token(const std::string& model, double seconds);
  void observe_queue_wait(const std::string& model, const std::string& tenant, double seconds);
  // reason: tenant_queue_full, tenant_queue_timeout, tenant_kv_budget, device_full
  void add_rejection(const std::string& tenant, const std::string& reason);
  // Speculative decoding: drafts verified and accepted (memra_spec_*_tokens_total).
  void add_spec_tokens(const std::string& model, std::int64_t drafted, std::int64_t accepted);
  // finish_reason: stop, length, cancelled (client went away), error
  void add_completion(const std::string& model, const std::string& finish_reason);
  // Vectors /v1/embeddings returned.
  void add_embeddings(const std::string& model, std::int64_t vectors);

  struct SchedulerGauges {
    std::int64_t running = 0, waiting = 0;
    std::int64_t kv_blocks_total = 0, kv_blocks_free = 0, prefix_cache_blocks = 0;
    std::int64_t prefix_hit_tokens = 0, prompt_tokens = 0;  // cumulative, for the hit ratio
    std::int64_t spec_drafted = 0, spec_accepted = 0;      // cumulative, for the acceptance rate
  };
  void set_scheduler(const std::string& model, const SchedulerGauges& g);
  // The model's memory plan (docs/SERVING.md, "Memory plan"): bytes by part and the context.
  struct MemoryGauges {
    double weights = 0, workspace = 0, kv_cache = 0, recurrent_state = 0, budget = 0, device_total = 0;
    std::int64_t context = 0, kv_cache_tokens = 0;
  };
  void set_memory(const std::string& model, const MemoryGauges& g);
  // The Model Server Protocol's totals (docs/SERVING.md, "Behind a router"): sums over
  // every model's scheduler and KV cache.
  struct ProtocolGauges {
    std::int64_t running = 0, waiting = 0, kv_blocks_used = 0, kv_blocks_total = 0;
  };
  void set_protocol(const ProtocolGauges& g);
  // memra_cache_config_info{model, block_size, num_gpu_blocks} = 1 (fixed at load).
  void set_cache_config(const std::string& model, std::int64_t block_size, std::int64_t num_blocks);
  void set_tenant(const std::string& tenant, std::int64_t running, std::int64_t waiting, std::int64_t kv_tokens);

  // The whole registry in Prometheus text format 0.0.4.
  std::string render() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// GET/POST/... as-is for the standard methods, "other" for anything else.
std::string_view normalise_method(std::string_view method);

}  // namespace memra::server
