#include "host/server/http_frontend.hpp"

#include <Poco/Exception.h>
#include <Poco/Logger.h>
#include <Poco/URI.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <vector>

#include "host/server/http_framing.hpp"
#include "host/server/http_wire.hpp"
#include "host/server/memory_return.hpp"
#include "host/server/task_pool.hpp"

namespace memra::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

Poco::Logger& logger() { return Poco::Logger::get("memra-host"); }

constexpr auto kTick = milliseconds(100);         // deadline checks
constexpr auto kLinger = milliseconds(2000);      // reading and dropping after a final reply
constexpr auto kStopGrace = milliseconds(2000);   // requests still writing when stop() is called
constexpr std::size_t kReadPerEvent = 1 << 20;    // fairness between connections
constexpr auto kRefusalLogEvery = std::chrono::seconds(10);

enum class Phase {
  idle,    // between requests (or before the first): no byte of a request yet
  head,    // reading a request's head
  body,    // reading its body
  busy,    // the request is being answered (by the loop or a thread)
  linger,  // a final reply went out: the write side is shut, input is dropped until EOF
};

// Which capacity answers a request.
enum class Lane { loop, probes, workers };

Lane lane_of(const Poco::Net::HTTPRequest& request) {
  const std::string& method = request.getMethod();
  if (method != "GET" && method != "HEAD") return Lane::workers;
  std::string path;
  try {
    path = Poco::URI(request.getURI()).getPath();
  } catch (const Poco::Exception&) {
    return Lane::workers;  // the router answers the bad URI
  }
  if (path == "/health" || path == "/ready") return Lane::loop;
  if (path == "/metrics") return Lane::probes;
  return Lane::workers;
}

}  // namespace

std::string peer_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, text, sizeof text);
  } else if (addr.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, text, sizeof text);
  }
  return text;
}

struct Connection {
  int fd = -1;
  std::string peer;
  Phase phase = Phase::idle;
  std::string in;                 // received and not yet consumed
  std::string out;                // the loop's own bytes to send (replies it wrote, 100 Continue)
  bool close_after_out = false;   // linger once `out` is sent
  bool eof = false;               // the client shut its sending side
  Clock::time_point since;        // idle: since the last reply; head: the request's first byte; body: the head's end
  Clock::time_point started;      // the request's first byte (the rate floor's start)
  Clock::time_point out_since;    // when `out` started waiting for room
  std::uint64_t received = 0;     // bytes read on this connection
  std::uint64_t request_first = 0;  // `received` at the request's first byte
  Poco::Net::HTTPRequest request;
  BodyFraming framing;
  ChunkedDecoder chunked;
  std::string body;
  bool overflowed = false;        // a chunked body passed the limit: 413, then close
  bool parsed = false;            // `request` holds this request's head
  bool registered = false;        // in the epoll set
  std::uint32_t watched = 0;      // the events it is registered for
  bool advancing = false;         // advance() runs (replies sent inside it do not re-enter it)
  bool closed = false;
};

struct HttpFrontend::Impl {
  Impl(Router& r, ServerState& s, int fd, FrontendOptions o)
      : router(r), state(s), listen_fd(fd), options(std::move(o)) {}

  Router& router;
  ServerState& state;
  int listen_fd;
  FrontendOptions options;
  int epoll_fd = -1;
  int wake_fd = -1;
  std::thread loop_thread;
  std::atomic<bool> stopping{false};
  std::unique_ptr<TaskPool> workers, probes;

  // Loop thread only.
  std::unordered_map<int, std::shared_ptr<Connection>> connections;
  std::map<std::string, int> per_client;
  bool listening = true;
  Clock::time_point accept_paused_until{};
  Clock::time_point last_sweep{};
  Clock::time_point stop_started{};
  std::map<std::string, std::int64_t> refusals_since_log;
  Clock::time_point last_refusal_log{};
  std::atomic<std::size_t> open{0};

  // Connections handed back by the threads that answered them.
  enum class After { keep, linger, drop };
  std::mutex resume_mu;
  std::vector<std::pair<std::shared_ptr<Connection>, After>> resumed;
  // Sockets handed in by adopt() (the TLS relay), taken by the loop.
  std::vector<std::pair<int, std::string>> adopted;
  bool adopt_closed = false;  // under resume_mu: stop() began

  // ---- setup ----
  void start();
  void stop();
  void loop();

  // ---- the loop ----
  void accept_ready(Clock::time_point now);
  void admit(int fd, std::string peer, Clock::time_point now);
  void take_adopted(Clock::time_point now);
  void take_resumed(Clock::time_point now);
  void on_event(Connection& c, std::uint32_t events, Clock::time_point now);
  bool read_ready(Connection& c);
  void advance(Connection& c, Clock::time_point now);
  bool step(Connection& c, Clock::time_point now);
  void dispatch(Connection& c, Clock::time_point now);
  void answer_here(Connection& c, Clock::time_point now);
  void refuse(Connection& c, const ApiError& error, const std::string& reason, Clock::time_point now);
  void queue_out(Connection& c, std::string bytes, bool close, Clock::time_point now);
  void flush(Connection& c, Clock::time_point now);
  void reply_sent(Connection& c, Clock::time_point now);
  void start_linger(Connection& c, Clock::time_point now);
  void sweep(Clock::time_point now);
  void watch(Connection& c, std::uint32_t events);
  void unwatch(Connection& c);
  void close_connection(int fd);
  void note_refusal(const std::string& reason, const std::string& peer, Clock::time_point now);

  // ---- threads ----
  After answer(Connection& c);
  void resume(std::shared_ptr<Connection> c, After after);
  void wake();
};

// ---------------------------------------------------------------------------------

void HttpFrontend::Impl::start() {
  if (listen_fd >= 0) {
    const int flags = ::fcntl(listen_fd, F_GETFL, 0);
    ::fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK);
  }
  epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd < 0 || wake_fd < 0) throw Poco::SystemException("cannot create the HTTP event loop", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd;
  if (listen_fd >= 0) ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
  ev.data.fd = wake_fd;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev);
  workers = std::make_unique<TaskPool>("memra-http", options.worker_threads, options.max_queued);
  probes = std::make_unique<TaskPool>("memra-probe", options.probe_threads, 64);
  loop_thread = std::thread([this] { loop(); });
  pthread_setname_np(loop_thread.native_handle(), "memra-http-loop");
}

void HttpFrontend::Impl::stop() {
  if (!loop_thread.joinable()) return;
  {
    std::lock_guard lock(resume_mu);
    adopt_closed = true;
  }
  stopping = true;
  wake();
  loop_thread.join();
  workers.reset();  // joins: every task has handed its connection back by now
  probes.reset();
  for (auto& [fd, c] : connections) ::close(fd);
  connections.clear();
  for (auto& [fd, peer] : adopted) ::close(fd);
  adopted.clear();
  open = 0;
  if (epoll_fd >= 0) ::close(epoll_fd);
  if (wake_fd >= 0) ::close(wake_fd);
  epoll_fd = wake_fd = -1;
}

void HttpFrontend::Impl::wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
}

void HttpFrontend::Impl::loop() {
  std::vector<epoll_event> events(256);
  while (true) {
    const bool idle = connections.empty() && !stopping;
    const int n = ::epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()),
                               idle && listening ? -1 : static_cast<int>(kTick.count()));
    const Clock::time_point now = Clock::now();
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd && listen_fd >= 0) {
        accept_ready(now);
      } else if (fd == wake_fd) {
        std::uint64_t count;
        [[maybe_unused]] const ssize_t r = ::read(wake_fd, &count, sizeof count);
      } else if (auto it = connections.find(fd); it != connections.end()) {
        auto keep = it->second;  // on_event may close it
        on_event(*keep, events[i].events, now);
      }
    }
    take_resumed(now);
    take_adopted(now);
    if (stopping) {
      if (stop_started == Clock::time_point{}) {
        stop_started = now;
        if (listening && listen_fd >= 0) ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
        listening = false;
      }
      std::vector<int> idle_fds;
      for (const auto& [fd, c] : connections)
        if (c->phase != Phase::busy) idle_fds.push_back(fd);
      for (int fd : idle_fds) close_connection(fd);
      if (connections.empty() || now - stop_started > kStopGrace) return;
      continue;
    }
    if (!listening && now >= accept_paused_until) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = listen_fd;
      if (listen_fd >= 0) ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
      listening = true;
    }
    if (now - last_sweep >= kTick) sweep(now);
  }
}

void HttpFrontend::Impl::accept_ready(Clock::time_point now) {
  while (true) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop accepting for a moment instead of spinning on the listener.
        note_refusal("connection_limit", "(accept failed: " + std::string(std::strerror(errno)) + ")", now);
        ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
        listening = false;
        accept_paused_until = now + kTick;
      }
      return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // SSE events leave at once
    admit(fd, peer_address(fd), now);
  }
}

void HttpFrontend::Impl::take_adopted(Clock::time_point now) {
  std::vector<std::pair<int, std::string>> taken;
  {
    std::lock_guard lock(resume_mu);
    taken.swap(adopted);
  }
  for (auto& [fd, peer] : taken) {
    if (stopping) {
      ::close(fd);
      continue;
    }
    admit(fd, std::move(peer), now);
  }
}

void HttpFrontend::Impl::admit(int fd, std::string peer, Clock::time_point now) {
  {
    const bool over_total = static_cast<int>(connections.size()) >= options.max_connections;
    const bool over_client = options.max_client_connections > 0 && per_client[peer] >= options.max_client_connections;
    if (over_total || over_client) {
      // Best effort, without waiting: the socket's buffer is empty, so the reply fits.
      const ApiError error = errors::too_many_connections(
          over_total ? std::to_string(options.max_connections) + " in all, memra-host --max-connections"
                     : std::to_string(options.max_client_connections) + " from " + peer +
                           ", memra-host --max-client-connections");
      (void)send_some(fd, bare_error_bytes(error, options.server_header));
      ::close(fd);
      router.metrics().record_request("rejected", "other", error.status, 0.0);
      note_refusal(over_total ? "connection_limit" : "client_connection_limit", peer, now);
      if (per_client[peer] == 0) per_client.erase(peer);
      return;
    }
    auto c = std::make_shared<Connection>();
    c->fd = fd;
    c->peer = std::move(peer);
    c->since = now;
    ++per_client[c->peer];
    connections.emplace(fd, c);
    open = connections.size();
    watch(*c, EPOLLIN | EPOLLRDHUP);
  }
}

// Registers the connection for `events`; after the client's EOF, input is never
// watched again (a level-triggered EOF would wake the loop forever).
void HttpFrontend::Impl::watch(Connection& c, std::uint32_t events) {
  if (c.eof) events &= ~static_cast<std::uint32_t>(EPOLLIN | EPOLLRDHUP);
  if (c.registered && c.watched == events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = c.fd;
  ::epoll_ctl(epoll_fd, c.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c.fd, &ev);
  c.registered = true;
  c.watched = events;
}

void HttpFrontend::Impl::unwatch(Connection& c) {
  if (!c.registered) return;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
  c.registered = false;
  c.watched = 0;
}

void HttpFrontend::Impl::close_connection(int fd) {
  auto it = connections.find(fd);
  if (it == connections.end()) return;
  Connection& c = *it->second;
  unwatch(c);
  ::close(fd);
  c.closed = true;
  if (auto pc = per_client.find(c.peer); pc != per_client.end() && --pc->second <= 0) per_client.erase(pc);
  connections.erase(it);
  open = connections.size();
}

void HttpFrontend::Impl::on_event(Connection& c, std::uint32_t events, Clock::time_point now) {
  if ((events & EPOLLOUT) && !c.out.empty()) {
    flush(c, now);
    if (c.closed) return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    if (!read_ready(c)) {
      close_connection(c.fd);
      return;
    }
    if (c.phase == Phase::linger) {
      c.in.clear();
      if (c.eof) close_connection(c.fd);
      return;
    }
    advance(c, now);
  }
}

// Reads what is there (up to kReadPerEvent); false when the socket failed.
bool HttpFrontend::Impl::read_ready(Connection& c) {
  char buf[64 * 1024];
  std::size_t got = 0;
  while (got < kReadPerEvent) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
      c.received += static_cast<std::uint64_t>(n);
      if (c.phase != Phase::linger) c.in.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      c.eof = true;
      if (c.registered) watch(c, c.watched);  // drops input interest
      return true;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    return false;
  }
  return true;
}

void HttpFrontend::Impl::advance(Connection& c, Clock::time_point now) {
  if (c.advancing) return;  // a reply sent from inside the loop below: it goes on by itself
  c.advancing = true;
  while (!c.closed && c.out.empty() && c.phase != Phase::busy && c.phase != Phase::linger && step(c, now)) {
  }
  c.advancing = false;
}

// One move of the read state machine; false when it must wait for bytes (or is done).
bool HttpFrontend::Impl::step(Connection& c, Clock::time_point now) {
  if (c.phase == Phase::idle) {
    c.in.erase(0, leading_empty_lines(c.in));
    if (c.in.empty()) {
      if (c.eof) close_connection(c.fd);
      return false;
    }
    c.phase = Phase::head;
    c.since = c.started = now;
    c.request_first = c.received - c.in.size();
    c.parsed = false;
  }
  if (c.phase == Phase::head) {
    const std::size_t end = find_head_end(c.in);
    if (end == std::string::npos || end > options.max_header_bytes) {
      if (c.in.size() > options.max_header_bytes || end != std::string::npos) {
        refuse(c, errors::framing(431, "request_header_fields_too_large",
                                  "the request head is over " + std::to_string(options.max_header_bytes) + " bytes"),
               "bad_request", now);
      } else if (c.eof) {
        close_connection(c.fd);
      }
      return false;
    }
    c.request = Poco::Net::HTTPRequest();
    if (auto bad = parse_head(std::string_view(c.in).substr(0, end), c.request)) {
      refuse(c, errors::framing(bad->status, bad->code, bad->message), "bad_request", now);
      return false;
    }
    c.parsed = true;
    const FramingResult framing = body_framing(c.request);
    if (framing.error) {
      refuse(c, errors::framing(framing.error->status, framing.error->code, framing.error->message), "bad_request", now);
      return false;
    }
    c.in.erase(0, end);
    c.framing = framing.framing;
    c.body.clear();
    c.chunked = ChunkedDecoder();
    c.overflowed = false;
    // The router may refuse without reading (no key, wrong route or type, a declared
    // length over the limit): then the body stays unread and the connection closes
    // after the answer, so its bytes are never taken for a request.
    if (c.framing.kind == BodyFraming::Kind::none || !router.reads_body(c.request)) {
      dispatch(c, now);
      return true;
    }
    if (c.request.getExpectContinue()) {
      // Nothing else is being sent on the connection now, so the line fits the socket.
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      const auto sent = send_some(c.fd, kContinue);
      if (!sent || *sent != kContinue.size()) {
        close_connection(c.fd);
        return false;
      }
    }
    c.phase = Phase::body;
    c.since = now;
  }
  // Phase::body
  if (c.framing.kind == BodyFraming::Kind::length) {
    const std::size_t want = static_cast<std::size_t>(c.framing.length) - c.body.size();
    const std::size_t take = std::min(want, c.in.size());
    c.body.append(c.in, 0, take);
    c.in.erase(0, take);
    if (c.body.size() == c.framing.length) {
      dispatch(c, now);
      return true;
    }
  } else {
    // One byte over the limit is kept, so the router sees the body is too large (413).
    const std::size_t used = c.chunked.feed(c.in, c.body, options.max_body_bytes + 1);
    c.in.erase(0, used);
    if (c.chunked.step() == ChunkedDecoder::Step::error) {
      refuse(c, errors::framing(400, "invalid_chunked_body", "the chunked body is malformed: " + c.chunked.error()),
             "bad_request", now);
      return false;
    }
    // A chunk announced past what the limit and the discard budget allow: 413 now, not
    // after its data (the body stays unread and the connection closes after the answer).
    if (c.chunked.declared() > options.max_body_bytes + options.discard_budget) {
      refuse(c, errors::body_too_large(options.max_body_bytes, "(chunked) announces a chunk that takes it past"),
             "bad_request", now);
      return false;
    }
    c.overflowed = c.body.size() > options.max_body_bytes;
    if (c.chunked.step() == ChunkedDecoder::Step::done || c.chunked.overflow() > options.discard_budget) {
      dispatch(c, now);
      return true;
    }
  }
  if (c.eof) close_connection(c.fd);  // the client stopped sending in the middle of its body
  return false;
}

void HttpFrontend::Impl::dispatch(Connection& c, Clock::time_point now) {
  c.phase = Phase::busy;
  const Lane lane = lane_of(c.request);
  if (lane == Lane::loop) return answer_here(c, now);
  unwatch(c);  // the answering thread owns the socket until it hands it back
  auto shared = connections.at(c.fd);
  TaskPool& pool = lane == Lane::probes ? *probes : *workers;
  const bool taken = pool.submit([this, shared] {
    const After after = answer(*shared);
    resume(shared, after);
  });
  if (!taken) {
    watch(c, EPOLLIN | EPOLLRDHUP);
    ApiError error = errors::server_overloaded(
        std::to_string(pool.threads()) + " HTTP threads busy and " + std::to_string(options.max_queued) +
        " requests queued (memra-host --threads)");
    Reply reply = error_reply(error);
    reply.add_header("Retry-After", "1");
    router.metrics().record_request("rejected", c.request.getMethod(), reply.status, 0.0);
    note_refusal("overloaded", c.peer, now);
    queue_out(c, reply_bytes(reply, c.request, false, options.server_header), true, now);
  }
}

// /health and /ready: answered by the loop itself (they neither block nor stream).
void HttpFrontend::Impl::answer_here(Connection& c, Clock::time_point now) {
  ServerState::Admission admission = state.try_admit();
  std::istringstream body(c.body);
  Reply reply = admission ? router.handle(c.request, body) : router.reject_draining(c.request);
  if (reply.stream) reply = error_reply(errors::internal("a probe route tried to stream"));
  const bool keep = c.request.getKeepAlive() && !reply.close_connection && !c.overflowed && !c.eof;
  queue_out(c, reply_bytes(reply, c.request, keep, options.server_header), !keep, now);
}

// A thread's whole answer: route, then write. Returns what the loop does next.
HttpFrontend::Impl::After HttpFrontend::Impl::answer(Connection& c) {
  const milliseconds timeout(options.send_timeout_ms);
  // Admitted before the drain check; held until the reply is written, so the drain
  // waits for the bytes to leave, not just for the route to return.
  ServerState::Admission admission = state.try_admit();
  const int fd = c.fd;
  Reply reply = [&] {
    std::istringstream body(c.body);
    return admission ? router.handle(c.request, body, [fd] { return peer_closed(fd); })
                     : router.reject_draining(c.request);
  }();
  const bool keep = c.request.getKeepAlive() && !reply.close_connection && !c.overflowed && !stopping;
  if (!reply.stream) {
    // The request's memory is free by now; it goes back before the answer leaves, so a
    // client that sees the answer sees the memory returned too.
    return_memory_after(c.body.size());
    if (!send_all(fd, reply_bytes(reply, c.request, keep, options.server_header), timeout)) return After::drop;
    return keep ? After::keep : After::linger;
  }
  const bool http10 = c.request.getVersion() == Poco::Net::HTTPMessage::HTTP_1_0;
  const BodyMode mode = http10 ? BodyMode::until_close : BodyMode::chunked;
  SocketSink sink(fd, mode == BodyMode::chunked, timeout);
  // The stream runs even when its head could not be sent, so the route's cleanup and
  // bookkeeping happen (its first write fails at once).
  if (!send_all(fd, reply_head(reply, c.request, keep, mode, options.server_header), timeout)) sink.set_broken();
  reply.stream(sink);
  const bool sent = sink.finish();
  return_memory_after(c.body.size());
  if (!sent) return After::drop;
  return keep && mode == BodyMode::chunked ? After::keep : After::linger;
}

void HttpFrontend::Impl::resume(std::shared_ptr<Connection> c, After after) {
  {
    std::lock_guard<std::mutex> lock(resume_mu);
    resumed.emplace_back(std::move(c), after);
  }
  wake();
}

void HttpFrontend::Impl::take_resumed(Clock::time_point now) {
  std::vector<std::pair<std::shared_ptr<Connection>, After>> batch;
  {
    std::lock_guard<std::mutex> lock(resume_mu);
    batch.swap(resumed);
  }
  for (auto& [c, after] : batch) {
    if (after == After::drop || stopping) {
      close_connection(c->fd);
    } else if (after == After::linger) {
      start_linger(*c, now);
    } else {
      reply_sent(*c, now);
    }
  }
}

void HttpFrontend::Impl::refuse(Connection& c, const ApiError& error, const std::string& reason, Clock::time_point now) {
  c.phase = Phase::busy;
  router.metrics().record_request("rejected", c.parsed ? c.request.getMethod() : "other", error.status, 0.0);
  note_refusal(reason, c.peer, now);
  queue_out(c, bare_error_bytes(error, options.server_header), true, now);
}

void HttpFrontend::Impl::queue_out(Connection& c, std::string bytes, bool close, Clock::time_point now) {
  c.out = std::move(bytes);
  c.close_after_out = close;
  c.out_since = now;
  flush(c, now);
}

void HttpFrontend::Impl::flush(Connection& c, Clock::time_point now) {
  const auto sent = send_some(c.fd, c.out);
  if (!sent) return close_connection(c.fd);
  c.out.erase(0, *sent);
  // Input waits in the kernel meanwhile: a client that pipelines without reading
  // its replies is held back by TCP, not by our memory.
  if (!c.out.empty()) return watch(c, EPOLLOUT);
  if (c.close_after_out) return start_linger(c, now);
  reply_sent(c, now);
}

// The reply went out and the connection stays: the next request may already be buffered.
void HttpFrontend::Impl::reply_sent(Connection& c, Clock::time_point now) {
  c.phase = Phase::idle;
  c.since = now;
  c.body.clear();
  c.body.shrink_to_fit();
  if (c.eof && c.in.empty()) return close_connection(c.fd);
  watch(c, c.eof ? EPOLLRDHUP : EPOLLIN | EPOLLRDHUP);
  advance(c, now);
}

// After a final reply: shut the write side (the client reads the reply, then EOF) and
// drop what it still sends, so closing does not reset the connection under the reply.
void HttpFrontend::Impl::start_linger(Connection& c, Clock::time_point now) {
  ::shutdown(c.fd, SHUT_WR);
  c.phase = Phase::linger;
  c.since = now;
  c.in.clear();
  if (c.eof) return close_connection(c.fd);
  watch(c, EPOLLIN | EPOLLRDHUP);
}

void HttpFrontend::Impl::sweep(Clock::time_point now) {
  last_sweep = now;
  std::vector<int> to_close;
  std::vector<std::pair<int, std::pair<ApiError, std::string>>> to_refuse;
  for (const auto& [fd, cp] : connections) {
    Connection& c = *cp;
    const auto age = now - c.since;
    if (c.phase == Phase::busy && c.registered && !c.out.empty() &&
        now - c.out_since > milliseconds(options.send_timeout_ms)) {
      to_close.push_back(fd);  // it does not read its reply
      continue;
    }
    switch (c.phase) {
      case Phase::idle:
        if (age > milliseconds(options.idle_timeout_ms)) to_close.push_back(fd);
        break;
      case Phase::linger:
        if (age > kLinger) to_close.push_back(fd);
        break;
      case Phase::busy:
        break;
      case Phase::head:
      case Phase::body: {
        if (!c.out.empty()) break;
        const bool head = c.phase == Phase::head;
        if (age > milliseconds(head ? options.header_timeout_ms : options.body_timeout_ms)) {
          to_refuse.push_back({fd, {errors::request_timeout(head ? "header_timeout" : "body_timeout",
                                                            head ? "the request head did not arrive within " +
                                                                       std::to_string(options.header_timeout_ms) + " ms"
                                                                 : "the request body did not arrive within " +
                                                                       std::to_string(options.body_timeout_ms) +
                                                                       " ms of its head"),
                                    head ? "header_timeout" : "body_timeout"}});
          break;
        }
        // The rate floor, over the whole read of this request so far.
        const auto reading = now - c.started;
        const double seconds = std::chrono::duration<double>(reading).count();
        if (options.min_receive_rate > 0 && reading > milliseconds(options.rate_grace_ms)) {
          const double bytes = static_cast<double>(c.received - c.request_first);
          if (bytes < static_cast<double>(options.min_receive_rate) * seconds)
            to_refuse.push_back({fd, {errors::request_timeout("slow_client",
                                                              "the request arrived at under " +
                                                                  std::to_string(options.min_receive_rate) + " bytes/s"),
                                      "slow_client"}});
        }
        break;
      }
    }
  }
  for (int fd : to_close) close_connection(fd);
  for (auto& [fd, why] : to_refuse)
    if (auto it = connections.find(fd); it != connections.end()) {
      auto keep = it->second;
      refuse(*keep, why.first, why.second, now);
    }
  router.metrics().set_http_load(static_cast<std::int64_t>(connections.size()), workers->busy(),
                                 static_cast<std::int64_t>(workers->queued()));
  if (!refusals_since_log.empty() && now - last_refusal_log >= kRefusalLogEvery) {
    std::string counts;
    for (const auto& [reason, n] : refusals_since_log) counts += (counts.empty() ? "" : ", ") + reason + " " + std::to_string(n);
    logger().warning("HTTP: refused connections or requests in the last %s s: %s (memra_http_refused_total)",
                     std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kRefusalLogEvery).count()), counts);
    refusals_since_log.clear();
    last_refusal_log = now;
  }
}

void HttpFrontend::Impl::note_refusal(const std::string& reason, const std::string& peer, Clock::time_point now) {
  router.metrics().add_http_refusal(reason);
  if (logger().debug()) logger().debug("HTTP: refused %s: %s", peer, reason);
  // The first one at once, then a summary at most every 10 s (a flood stays a few lines).
  if (refusals_since_log.empty() && now - last_refusal_log >= kRefusalLogEvery) {
    logger().warning("HTTP: refused a connection or request from %s: %s (further ones are summed up every %s s)", peer,
                     reason, std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kRefusalLogEvery).count()));
    last_refusal_log = now;
    return;
  }
  ++refusals_since_log[reason];
}

// ---------------------------------------------------------------------------------

HttpFrontend::HttpFrontend(Router& router, ServerState& state, int listen_fd, FrontendOptions options)
    : impl_(std::make_unique<Impl>(router, state, listen_fd, std::move(options))) {}

HttpFrontend::~HttpFrontend() { stop(); }

void HttpFrontend::start() { impl_->start(); }
void HttpFrontend::stop() { impl_->stop(); }
void HttpFrontend::adopt(int fd, std::string peer) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  {
    std::lock_guard lock(impl_->resume_mu);
    if (!impl_->adopt_closed) {
      impl_->adopted.emplace_back(fd, std::move(peer));
      fd = -1;
    }
  }
  if (fd >= 0) {
    ::close(fd);
    return;
  }
  impl_->wake();
}
std::size_t HttpFrontend::connections() const { return impl_->open.load(); }

}  // namespace memra::server
