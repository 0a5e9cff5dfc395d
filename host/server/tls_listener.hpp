// TLS on memra-host's listener (--tls-cert / --tls-key; docs/SERVING.md, "TLS").
// A thread accepts on the public socket; each connection's TLS handshake and records
// are handled by a relay thread of its own (OpenSSL through Poco NetSSL's Context),
// which hands the decrypted byte stream to the HTTP front end over a socket pair
// (HttpFrontend::adopt), so everything behind it — limits, timeouts, routes, streams —
// is the same as over plain HTTP. TLS 1.2 is the floor. reload() (SIGHUP) reads the
// certificate and key again: connections accepted after it use them, open ones keep
// theirs; a reload that fails keeps the old pair.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace Poco::Net {
class Context;
}

namespace memra::server {

class HttpFrontend;

struct TlsFiles {
  std::string cert;  // PEM: the certificate, then any intermediates
  std::string key;   // PEM: its private key (unencrypted)
};

// A server context for `files`, or the reason it cannot be made (the path and why:
// missing, unreadable, not a certificate, key does not match).
struct TlsContextResult {
  std::shared_ptr<Poco::Net::Context> context;
  std::string error;
};
TlsContextResult load_tls_context(const TlsFiles& files);

struct TlsRelayOptions {
  int handshake_timeout_ms = 10000;  // the client's hello and handshake, from accept
  int send_timeout_ms = 30000;       // a client that takes no bytes for this long is dropped
  int max_connections = 4096;        // handshakes and relays in all
};

class TlsListener {
 public:
  // `listen_fd`: bound and listening (not closed here). `context` from load_tls_context.
  TlsListener(int listen_fd, HttpFrontend& frontend, TlsFiles files, std::shared_ptr<Poco::Net::Context> context,
              TlsRelayOptions options);
  ~TlsListener();  // stop_accepting() and join()
  TlsListener(const TlsListener&) = delete;
  TlsListener& operator=(const TlsListener&) = delete;

  void start();
  // Reads the files again; "" on success, else the reason (the old pair stays).
  std::string reload();
  void stop_accepting();
  // After the front end stopped: waits (up to 3 s) for every relay to end.
  void join();

 private:
  void accept_loop();
  void relay(int fd, std::shared_ptr<Poco::Net::Context> context);
  std::shared_ptr<Poco::Net::Context> current() const;

  int listen_fd_;
  HttpFrontend& frontend_;
  TlsFiles files_;
  TlsRelayOptions options_;
  mutable std::mutex mu_;
  std::shared_ptr<Poco::Net::Context> context_;
  std::condition_variable relays_done_;
  int relays_ = 0;  // under mu_
  std::atomic<bool> accepting_{true}, stopping_{false};
  std::thread accept_thread_;
};

}  // namespace memra::server
