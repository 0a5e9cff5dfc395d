// The server's Prometheus metrics (prefix memra_), rendered in the text
// exposition format for GET /metrics. prometheus-cpp stays behind this pimpl so
// its headers are compiled in one file only.
#pragma once

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

  // The whole registry in Prometheus text format 0.0.4.
  std::string render() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// GET/POST/... as-is for the standard methods, "other" for anything else.
std::string_view normalise_method(std::string_view method);

}  // namespace memra::server
