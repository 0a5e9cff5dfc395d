#include "host/server/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <array>

#ifndef MEMRA_VERSION
#define MEMRA_VERSION "unknown"
#endif

namespace memra::server {

struct Metrics::Impl {
  prometheus::Registry registry;
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& duration;
  prometheus::Gauge& in_flight;
  prometheus::Gauge& draining;
  prometheus::Gauge& models_loaded;
  prometheus::Gauge& plugins_loaded;
  const prometheus::Histogram::BucketBoundaries buckets{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300};
  const prometheus::Histogram::BucketBoundaries latency_buckets{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                                0.1,    0.25,  0.5,    1,     2.5,  5,     10, 30};

  prometheus::Family<prometheus::Counter>& http_refused = counter("memra_http_refused_total",
      "Connections or requests the HTTP front end refused before routing, by reason");
  prometheus::Gauge& http_connections =
      gauge("memra_http_connections", "Open client connections").Add({});
  prometheus::Gauge& http_workers_busy =
      gauge("memra_http_workers_busy", "HTTP worker threads handling a request (a stream holds one until it ends)").Add({});
  prometheus::Gauge& http_queued =
      gauge("memra_http_requests_queued", "Complete requests waiting for a free HTTP worker thread").Add({});
  prometheus::Family<prometheus::Counter>& prompt_tokens = counter("memra_prompt_tokens_total",
      "Prompt tokens of completed and cancelled requests, by model and tenant");
  prometheus::Family<prometheus::Counter>& generated_tokens = counter("memra_generation_tokens_total",
      "Tokens generated, by model and tenant");
  prometheus::Family<prometheus::Counter>& cached_tokens = counter("memra_prefix_cache_hit_tokens_total",
      "Prompt tokens served from the prefix cache instead of being computed, by model and tenant");
  prometheus::Family<prometheus::Counter>& rejections = counter("memra_admission_rejections_total",
      "Requests refused by admission, by tenant and reason (tenant_queue_full, tenant_queue_timeout, "
      "tenant_kv_budget, device_full)");
  prometheus::Family<prometheus::Counter>& completions = counter("memra_completions_total",
      "Choices finished, by model and finish_reason (stop, length, cancelled, error)");
  prometheus::Family<prometheus::Counter>& embeddings = counter("memra_embeddings_total",
      "Vectors returned by /v1/embeddings, by model");
  prometheus::Family<prometheus::Histogram>& ttft = histogram("memra_time_to_first_token_seconds",
      "Time from a completion request's admission to its first generated token, per choice, by model");
  prometheus::Family<prometheus::Histogram>& itl = histogram("memra_inter_token_latency_seconds",
      "Time between consecutive generated tokens of a choice as the server receives them, by model");
  prometheus::Family<prometheus::Histogram>& queue_wait = histogram("memra_queue_wait_seconds",
      "Time a completion request waited for its tenant's admission, by model and tenant");
  prometheus::Family<prometheus::Gauge>& sched_running = gauge("memra_scheduler_running",
      "Sequences the scheduler is running (prefill or decode), by model");
  prometheus::Family<prometheus::Gauge>& sched_waiting = gauge("memra_scheduler_waiting",
      "Sequences waiting in the scheduler's queue for KV room (queue depth), by model");
  prometheus::Family<prometheus::Gauge>& kv_used = gauge("memra_kv_blocks_used",
      "KV-cache blocks held by sequences or the prefix cache, by model");
  prometheus::Family<prometheus::Gauge>& kv_free = gauge("memra_kv_blocks_free", "KV-cache blocks free, by model");
  prometheus::Family<prometheus::Gauge>& prefix_blocks = gauge("memra_prefix_cache_blocks",
      "KV-cache blocks kept by the prefix cache, by model");
  prometheus::Family<prometheus::Gauge>& hit_ratio = gauge("memra_prefix_cache_hit_ratio",
      "Prompt tokens served from the prefix cache / prompt tokens admitted, since start, by model");
  prometheus::Family<prometheus::Counter>& spec_drafted = counter("memra_spec_drafted_tokens_total",
      "Speculative decoding: drafted tokens fed to verify steps, by model");
  prometheus::Family<prometheus::Counter>& spec_accepted = counter("memra_spec_accepted_tokens_total",
      "Speculative decoding: drafted tokens accepted by verification, by model");
  prometheus::Family<prometheus::Gauge>& spec_rate = gauge("memra_spec_acceptance_rate",
      "Speculative decoding: drafted tokens accepted / drafted since start (0 before any draft, and for models "
      "served without speculation), by model");
  prometheus::Family<prometheus::Gauge>& memory_bytes = gauge("memra_memory_plan_bytes",
      "The memory plan at load, by model and part: device_total, weights, workspace (the dry step's scratch), "
      "budget (what the KV cache and state could take), kv_cache, recurrent_state");
  prometheus::Family<prometheus::Gauge>& context_tokens = gauge("memra_context_tokens",
      "Tokens per sequence (the context the memory plan gave), by model");
  prometheus::Family<prometheus::Gauge>& kv_cache_tokens = gauge("memra_kv_cache_tokens",
      "Tokens the KV cache holds in all (its blocks x block size), by model");
  // The Model Server Protocol of the Gateway API Inference Extension (docs/SERVING.md,
  // "Behind a router"): server-wide totals an endpoint picker reads per replica.
  prometheus::Gauge& requests_waiting = gauge("memra_requests_waiting",
      "Requests waiting in every model's scheduler queue (the protocol's TotalQueuedRequests)").Add({});
  prometheus::Gauge& requests_running = gauge("memra_requests_running",
      "Requests every model's scheduler runs (the protocol's TotalRunningRequests)").Add({});
  prometheus::Gauge& kv_usage = gauge("memra_kv_cache_usage_ratio",
      "KV-cache blocks in use over all blocks, every model, from 0 to 1 (the protocol's KVCacheUtilization)").Add({});
  prometheus::Family<prometheus::Gauge>& cache_config = gauge("memra_cache_config_info",
      "Always 1; block_size (tokens per KV block) and num_gpu_blocks (blocks in all), by model");
  prometheus::Family<prometheus::Gauge>& tenant_running = gauge("memra_tenant_requests_running",
      "Requests admitted for a tenant and not finished yet");
  prometheus::Family<prometheus::Gauge>& tenant_waiting = gauge("memra_tenant_requests_waiting",
      "Requests waiting in a tenant's admission queue");
  prometheus::Family<prometheus::Gauge>& tenant_kv = gauge("memra_tenant_kv_tokens",
      "KV tokens (prompt + max_tokens) a tenant's admitted requests hold");

  prometheus::Family<prometheus::Counter>& counter(const char* name, const char* help) {
    return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
  }
  prometheus::Family<prometheus::Histogram>& histogram(const char* name, const char* help) {
    return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
  }
  prometheus::Family<prometheus::Gauge>& gauge(const char* name, const char* help) {
    return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
  }

  explicit Impl(double start_time)
      : requests(prometheus::BuildCounter()
                     .Name("memra_http_requests_total")
                     .Help("HTTP requests answered, by route pattern, method and status code")
                     .Register(registry)),
        duration(prometheus::BuildHistogram()
                     .Name("memra_http_request_duration_seconds")
                     .Help("Time from request headers read to response built, by route pattern")
                     .Register(registry)),
        in_flight(prometheus::BuildGauge()
                      .Name("memra_http_requests_in_flight")
                      .Help("HTTP requests being handled right now")
                      .Register(registry)
                      .Add({})),
        draining(prometheus::BuildGauge()
                     .Name("memra_server_draining")
                     .Help("1 while the server drains after SIGTERM/SIGINT, else 0")
                     .Register(registry)
                     .Add({})),
        models_loaded(prometheus::BuildGauge()
                          .Name("memra_models_loaded")
                          .Help("Models loaded and served")
                          .Register(registry)
                          .Add({})),
        plugins_loaded(prometheus::BuildGauge()
                           .Name("memra_plugins_loaded")
                           .Help("Plugins registered at start")
                           .Register(registry)
                           .Add({})) {
    prometheus::BuildGauge()
        .Name("memra_process_start_time_seconds")
        .Help("Start time of the process since the Unix epoch, in seconds")
        .Register(registry)
        .Add({})
        .Set(start_time);
    prometheus::BuildGauge()
        .Name("memra_build_info")
        .Help("Always 1; the labels describe this build")
        .Register(registry)
        .Add({{"version", MEMRA_VERSION}})
        .Set(1);
    // Every refusal reason from the start at 0, so a rate() sees the first one.
    for (const char* reason : {"header_timeout", "body_timeout", "slow_client", "bad_request", "connection_limit",
                               "client_connection_limit", "overloaded"})
      http_refused.Add({{"reason", reason}});
  }
};

Metrics::Metrics(double start_time_seconds) : impl_(std::make_unique<Impl>(start_time_seconds)) {}
Metrics::~Metrics() = default;

void Metrics::record_request(std::string_view route, std::string_view method, int status, double seconds) {
  impl_->requests
      .Add({{"route", std::string(route)}, {"method", std::string(normalise_method(method))},
            {"status", std::to_string(status)}})
      .Increment();
  impl_->duration.Add({{"route", std::string(route)}}, impl_->buckets).Observe(seconds);
}

void Metrics::add_in_flight(int delta) { impl_->in_flight.Increment(delta); }
void Metrics::set_draining(bool draining) { impl_->draining.Set(draining ? 1 : 0); }
void Metrics::set_models_loaded(int count) { impl_->models_loaded.Set(count); }
void Metrics::set_plugins_loaded(int count) { impl_->plugins_loaded.Set(count); }

void Metrics::add_http_refusal(const std::string& reason) { impl_->http_refused.Add({{"reason", reason}}).Increment(); }

void Metrics::set_http_load(std::int64_t connections, std::int64_t workers_busy, std::int64_t queued) {
  impl_->http_connections.Set(static_cast<double>(connections));
  impl_->http_workers_busy.Set(static_cast<double>(workers_busy));
  impl_->http_queued.Set(static_cast<double>(queued));
}

void Metrics::add_tokens(const std::string& model, const std::string& tenant, std::int64_t prompt,
                         std::int64_t generated, std::int64_t cached) {
  const prometheus::Labels labels{{"model", model}, {"tenant", tenant}};
  impl_->prompt_tokens.Add(labels).Increment(static_cast<double>(prompt));
  impl_->generated_tokens.Add(labels).Increment(static_cast<double>(generated));
  impl_->cached_tokens.Add(labels).Increment(static_cast<double>(cached));
}

void Metrics::observe_ttft(const std::string& model, double seconds) {
  impl_->ttft.Add({{"model", model}}, impl_->latency_buckets).Observe(seconds);
}

void Metrics::observe_inter_token(const std::string& model, double seconds) {
  impl_->itl.Add({{"model", model}}, impl_->latency_buckets).Observe(seconds);
}

void Metrics::observe_queue_wait(const std::string& model, const std::string& tenant, double seconds) {
  impl_->queue_wait.Add({{"model", model}, {"tenant", tenant}}, impl_->latency_buckets).Observe(seconds);
}

void Metrics::add_rejection(const std::string& tenant, const std::string& reason) {
  impl_->rejections.Add({{"tenant", tenant}, {"reason", reason}}).Increment();
}

void Metrics::add_spec_tokens(const std::string& model, std::int64_t drafted, std::int64_t accepted) {
  const prometheus::Labels labels{{"model", model}};
  impl_->spec_drafted.Add(labels).Increment(static_cast<double>(drafted));
  impl_->spec_accepted.Add(labels).Increment(static_cast<double>(accepted));
}

void Metrics::add_completion(const std::string& model, const std::string& finish_reason) {
  impl_->completions.Add({{"model", model}, {"finish_reason", finish_reason}}).Increment();
}

void Metrics::add_embeddings(const std::string& model, std::int64_t vectors) {
  impl_->embeddings.Add({{"model", model}}).Increment(static_cast<double>(vectors));
}

void Metrics::set_scheduler(const std::string& model, const SchedulerGauges& g) {
  const prometheus::Labels labels{{"model", model}};
  impl_->sched_running.Add(labels).Set(static_cast<double>(g.running));
  impl_->sched_waiting.Add(labels).Set(static_cast<double>(g.waiting));
  impl_->kv_used.Add(labels).Set(static_cast<double>(g.kv_blocks_total - g.kv_blocks_free));
  impl_->kv_free.Add(labels).Set(static_cast<double>(g.kv_blocks_free));
  impl_->prefix_blocks.Add(labels).Set(static_cast<double>(g.prefix_cache_blocks));
  impl_->hit_ratio.Add(labels).Set(g.prompt_tokens > 0 ? static_cast<double>(g.prefix_hit_tokens) /
                                                             static_cast<double>(g.prompt_tokens)
                                                       : 0.0);
  // Every model has the speculative series (0 while it does not speculate), so a
  // dashboard need not know which models do.
  impl_->spec_drafted.Add(labels);
  impl_->spec_accepted.Add(labels);
  impl_->spec_rate.Add(labels).Set(g.spec_drafted > 0 ? static_cast<double>(g.spec_accepted) /
                                                            static_cast<double>(g.spec_drafted)
                                                      : 0.0);
}

void Metrics::set_protocol(const ProtocolGauges& g) {
  impl_->requests_waiting.Set(static_cast<double>(g.waiting));
  impl_->requests_running.Set(static_cast<double>(g.running));
  impl_->kv_usage.Set(g.kv_blocks_total > 0 ? static_cast<double>(g.kv_blocks_used) / static_cast<double>(g.kv_blocks_total)
                                            : 0.0);
}

void Metrics::set_cache_config(const std::string& model, std::int64_t block_size, std::int64_t num_blocks) {
  impl_->cache_config
      .Add({{"model", model}, {"block_size", std::to_string(block_size)}, {"num_gpu_blocks", std::to_string(num_blocks)}})
      .Set(1);
}

void Metrics::set_memory(const std::string& model, const MemoryGauges& g) {
  const std::pair<const char*, double> parts[] = {{"device_total", g.device_total}, {"weights", g.weights},
                                                  {"workspace", g.workspace},       {"budget", g.budget},
                                                  {"kv_cache", g.kv_cache},         {"recurrent_state", g.recurrent_state}};
  for (const auto& [part, bytes] : parts) impl_->memory_bytes.Add({{"model", model}, {"part", part}}).Set(bytes);
  impl_->context_tokens.Add({{"model", model}}).Set(static_cast<double>(g.context));
  impl_->kv_cache_tokens.Add({{"model", model}}).Set(static_cast<double>(g.kv_cache_tokens));
}

void Metrics::set_tenant(const std::string& tenant, std::int64_t running, std::int64_t waiting,
                         std::int64_t kv_tokens) {
  const prometheus::Labels labels{{"tenant", tenant}};
  impl_->tenant_running.Add(labels).Set(static_cast<double>(running));
  impl_->tenant_waiting.Add(labels).Set(static_cast<double>(waiting));
  impl_->tenant_kv.Add(labels).Set(static_cast<double>(kv_tokens));
}

std::string Metrics::render() const { return prometheus::TextSerializer().Serialize(impl_->registry.Collect()); }

std::string_view normalise_method(std::string_view method) {
  static constexpr std::array<std::string_view, 9> kKnown = {"GET",     "HEAD",   "POST",  "PUT",  "DELETE",
                                                             "OPTIONS", "PATCH", "TRACE", "CONNECT"};
  for (auto known : kKnown) {
    if (method == known) return known;
  }
  return "other";
}

}  // namespace memra::server
