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
