// Hostile clients and load against the real memra-host (CPU backend, the tiny random
// test model, loopback): slow clients that drip a request a byte at a time
// (slowloris) must not hold the server, and the probes must answer in well under a
// second whatever the load.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "serving_client.hpp"

namespace memra::server::testing {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kModel = "memra-tiny-random";

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Seconds one GET takes on a fresh connection (a probe's view), or a large number on failure.
double probe_seconds(int port, const std::string& path, int* status = nullptr) {
  const auto t = Clock::now();
  try {
    const HttpResponse r = http(port, get(path), 5000);
    if (status) *status = r.status;
    return seconds_since(t);
  } catch (const std::exception&) {
    if (status) *status = 0;
    return 99.0;
  }
}

// A slow client: sends a request's first bytes, then one more piece every `every`,
// never finishing. Head drips send one header line at a time; body drips send a
// complete head declaring a body, then one body byte at a time.
struct Drip {
  int fd = -1;
  bool body = false;
  Clock::time_point opened, last_send;
  std::string got;  // what the server sent back
  int pieces = 0;
};

void open_drip(Drip& d, int port, bool body) {
  d = Drip{};
  d.fd = connect_loopback(port);
  d.body = body;
  d.opened = d.last_send = Clock::now();
  const std::string first = body ? "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                   "Content-Length: 100000\r\n\r\n{"
                                 : "POST /v1/chat/completions HTTP/1.1\r\n";
  if (d.fd >= 0) (void)::send(d.fd, first.data(), first.size(), MSG_NOSIGNAL);
}

// ~70 connections drip for ~30 s, reconnecting whenever the server closes one; all
// the while /health must answer in under a second, and a real request must complete.
TEST(ServingHostile, SlowClientsCannotHoldTheServerAndHealthAnswersInUnderASecond) {
  std::string why;
  auto host = HostProcess::start(with_tiny_random_model(), {}, &why);
  ASSERT_TRUE(host) << why;
  const int port = host->port();
  constexpr int kDrips = 70;
  constexpr auto kDuration = 30s;
  constexpr auto kEvery = 3s;  // under 1 byte/s on average: well below any honest client

  std::vector<Drip> drips(kDrips);
  for (int i = 0; i < kDrips; ++i) open_drip(drips[i], port, i % 2 == 1);

  std::atomic<bool> done{false};
  double worst_health = 0.0;
  int health_checks = 0, health_failures = 0;
  std::thread prober([&] {
    while (!done) {
      int status = 0;
      const double s = probe_seconds(port, "/health", &status);
      worst_health = std::max(worst_health, s);
      ++health_checks;
      if (status != 200) ++health_failures;
      std::this_thread::sleep_for(200ms);
    }
  });

  int closed_by_server = 0, got_408 = 0, max_open = 0;
  double longest_life = 0.0;
  bool completion_ok = false;
  const auto start = Clock::now();
  while (Clock::now() - start < kDuration) {
    std::vector<pollfd> fds;
    for (const Drip& d : drips) fds.push_back({d.fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    int open_now = 0;
    for (int i = 0; i < kDrips; ++i) {
      Drip& d = drips[i];
      bool closed = d.fd < 0;
      if (!closed && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        char buf[4096];
        const ssize_t n = ::recv(d.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) d.got.append(buf, static_cast<size_t>(n));
        if (n == 0 || (n < 0 && errno != EAGAIN)) closed = true;
      }
      if (!closed && Clock::now() - d.last_send >= kEvery) {
        const std::string piece = d.body ? "x" : "X-Drip-" + std::to_string(d.pieces) + ": y\r\n";
        ++d.pieces;
        d.last_send = Clock::now();
        if (::send(d.fd, piece.data(), piece.size(), MSG_NOSIGNAL) < 0) closed = true;
      }
      if (closed) {
        if (d.fd >= 0) {
          ++closed_by_server;
          if (d.got.rfind("HTTP/1.1 408", 0) == 0) ++got_408;
          longest_life = std::max(longest_life, seconds_since(d.opened));
          ::close(d.fd);
        }
        open_drip(d, port, d.body);  // the attacker comes straight back
      }
      open_now += d.fd >= 0;
    }
    max_open = std::max(max_open, open_now);
    // Halfway through, a real request: a worker must be free for it.
    if (!completion_ok && Clock::now() - start > kDuration / 2) {
      const HttpResponse r = http(port, post("/v1/chat/completions",
                                             nlohmann::json{{"model", kModel},
                                                            {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                                            {"max_tokens", 4}}
                                                 .dump()),
                                  10000);
      completion_ok = r.status == 200;
      EXPECT_EQ(r.status, 200) << r.body;
    }
  }
  done = true;
  prober.join();
  for (Drip& d : drips)
    if (d.fd >= 0) ::close(d.fd);

  EXPECT_EQ(max_open, kDrips) << "the attack never had all its connections open";
  EXPECT_GT(health_checks, 50);
  EXPECT_EQ(health_failures, 0);
  EXPECT_LT(worst_health, 1.0) << "/health took " << worst_health << " s under the slow clients";
  EXPECT_TRUE(completion_ok);
  // The server cut the drips (else the attack holds its connections forever), each with
  // a 408 and within the head deadline (10 s) plus a tick.
  EXPECT_GE(closed_by_server, kDrips);
  EXPECT_EQ(got_408, closed_by_server) << "some drip connections were closed without a 408";
  EXPECT_LT(longest_life, 11.0);
  const std::string metrics = scrape(port);
  EXPECT_GE(sample_sum(metrics, "memra_http_refused_total", {{"reason", "slow_client"}}) +
                sample_sum(metrics, "memra_http_refused_total", {{"reason", "header_timeout"}}) +
                sample_sum(metrics, "memra_http_refused_total", {{"reason", "body_timeout"}}),
            static_cast<double>(closed_by_server));
  if (HasFailure()) std::cerr << host->log();
}

// 100 streams at once on a server with 16 worker threads (so streams fill every worker
// and queue): /health, /ready and /metrics still answer in under a second each, and
// every stream completes.
TEST(ServingHostile, ProbesAnswerInUnderASecondBeside100Streams) {
  std::string why;
  auto host = HostProcess::start(with_tiny_random_model({"--threads", "16"}), {}, &why);
  ASSERT_TRUE(host) << why;
  const int port = host->port();
  constexpr int kStreams = 100;
  const std::string body = nlohmann::json{{"model", kModel},
                                          {"messages", {{{"role", "user"}, {"content", "tell me a long story"}}}},
                                          {"max_tokens", 48},
                                          {"ignore_eos", true},
                                          {"stream", true}}
                               .dump();
  std::atomic<int> finished{0}, complete{0};
  std::vector<std::thread> streams;
  for (int i = 0; i < kStreams; ++i)
    streams.emplace_back([&] {
      try {
        const SseResult r = sse_post(port, "/v1/chat/completions", body, "", {}, 120000);
        if (r.status == 200 && r.done) ++complete;
      } catch (const std::exception&) {
      }
      ++finished;
    });

  double worst[3] = {0, 0, 0};
  const char* paths[3] = {"/health", "/ready", "/metrics"};
  int probes = 0, bad = 0;
  double most_queued = 0;
  while (finished < kStreams) {
    for (int p = 0; p < 3; ++p) {
      int status = 0;
      worst[p] = std::max(worst[p], probe_seconds(port, paths[p], &status));
      bad += status != 200;
      ++probes;
    }
    most_queued = std::max(most_queued, sample_sum(scrape(port), "memra_http_requests_queued"));
    std::this_thread::sleep_for(100ms);
  }
  for (auto& t : streams) t.join();
  EXPECT_EQ(complete, kStreams);
  EXPECT_GT(probes, 9);
  EXPECT_EQ(bad, 0);
  for (int p = 0; p < 3; ++p) EXPECT_LT(worst[p], 1.0) << paths[p] << " took " << worst[p] << " s beside the streams";
  // The load was real: every worker held a stream and more waited.
  EXPECT_GT(most_queued, 0.0);
  if (HasFailure()) std::cerr << host->log();
}

// SIGTERM with a stream running and a drain timeout shorter than it: the stream ends
// with an error event (server_shutting_down) and [DONE], not a cut connection, and
// the process exits 75.
TEST(ServingHostile, AStreamCutByTheDrainTimeoutGetsAnErrorEventAndDone) {
  std::string why;
  auto host = HostProcess::start(with_tiny_random_model({"--drain-timeout-ms", "300"}), {}, &why);
  ASSERT_TRUE(host) << why;
  const std::string body = nlohmann::json{{"model", kModel},
                                          {"messages", {{{"role", "user"}, {"content", "go on"}}}},
                                          {"max_tokens", 4000},
                                          {"ignore_eos", true},
                                          {"stream", true}}
                               .dump();
  std::promise<void> first_text;
  bool told = false;
  auto stream = std::async(std::launch::async, [&] {
    return sse_post(host->port(), "/v1/chat/completions", body, "", [&](const std::string& data) {
      if (!told && data.find("\"content\":\"\"") == std::string::npos) {
        told = true;
        first_text.set_value();
      }
      return true;
    });
  });
  first_text.get_future().wait();
  host->signal(SIGTERM);
  const SseResult r = stream.get();
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.done) << "the stream was cut without [DONE]";
  ASSERT_FALSE(r.events.empty());
  const nlohmann::json last = nlohmann::json::parse(r.events.back());
  EXPECT_EQ(last["error"]["code"], "server_shutting_down") << r.events.back();
  EXPECT_LT(r.events.size(), 4000u) << "the stream was not cut";
  const auto code = host->wait_exit(10000);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 75) << host->log();
}

}  // namespace
}  // namespace memra::server::testing
