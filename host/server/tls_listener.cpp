#include "host/server/tls_listener.hpp"

#include <Poco/Exception.h>
#include <Poco/Logger.h>
#include <Poco/Net/Context.h>
#include <Poco/Net/NetSSL.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string_view>

#include "host/server/http_frontend.hpp"

namespace memra::server {
namespace {

Poco::Logger& logger() { return Poco::Logger::get("memra-host"); }

void set_timeout(int fd, int option, int ms) {
  timeval tv{ms / 1000, static_cast<suseconds_t>(ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv);
}

std::string openssl_reason() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no reason given" : out;
}

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// What a plain-HTTP client gets on the TLS port, before the close.
constexpr std::string_view kPlainHttpBody = "This port speaks TLS: use https:// instead of http://\n";
const std::string kPlainHttpReply = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                                    "Content-Length: " + std::to_string(kPlainHttpBody.size()) + "\r\n\r\n" +
                                    std::string(kPlainHttpBody);

std::once_flag ssl_once;

}  // namespace

TlsContextResult load_tls_context(const TlsFiles& files) {
  const std::pair<const char*, const std::string*> parts[] = {{"certificate (--tls-cert)", &files.cert},
                                                              {"key (--tls-key)", &files.key}};
  for (const auto& [what, path] : parts) {
    std::ifstream in(*path, std::ios::binary);
    if (!in || in.peek() == std::ifstream::traits_type::eof()) {
      const std::string why = !in ? std::strerror(errno) : "the file is empty or not readable";
      return {nullptr, std::string("cannot read the TLS ") + what + " " + *path + ": " + why};
    }
  }
  std::call_once(ssl_once, [] { Poco::Net::initializeSSL(); });
  try {
    Poco::Net::Context::Params params;
    params.certificateFile = files.cert;
    params.privateKeyFile = files.key;
    params.verificationMode = Poco::Net::Context::VERIFY_NONE;  // clients are not asked for certificates
    params.loadDefaultCAs = false;
    params.cipherList = "HIGH:!aNULL:!MD5:!RC4:!3DES";
    auto context = std::make_shared<Poco::Net::Context>(Poco::Net::Context::TLS_SERVER_USE, params);
    context->requireMinimumProtocol(Poco::Net::Context::PROTO_TLSV1_2);
    if (SSL_CTX_check_private_key(context->sslContext()) != 1) {
      return {nullptr, "the TLS key " + files.key + " does not belong to the certificate " + files.cert + ": " +
                           openssl_reason()};
    }
    return {context, ""};
  } catch (const Poco::Exception& e) {
    ERR_clear_error();
    return {nullptr, "cannot use the TLS certificate " + files.cert + " with the key " + files.key + ": " +
                         e.displayText()};
  }
}

TlsListener::TlsListener(int listen_fd, HttpFrontend& frontend, TlsFiles files,
                         std::shared_ptr<Poco::Net::Context> context, TlsRelayOptions options)
    : listen_fd_(listen_fd),
      frontend_(frontend),
      files_(std::move(files)),
      options_(options),
      context_(std::move(context)) {}

TlsListener::~TlsListener() {
  stop_accepting();
  join();
}

void TlsListener::start() { accept_thread_ = std::thread([this] { accept_loop(); }); }

std::shared_ptr<Poco::Net::Context> TlsListener::current() const {
  std::lock_guard lock(mu_);
  return context_;
}

std::string TlsListener::reload() {
  TlsContextResult loaded = load_tls_context(files_);
  if (!loaded.context) return loaded.error;
  std::lock_guard lock(mu_);
  context_ = std::move(loaded.context);
  return "";
}

void TlsListener::stop_accepting() {
  accepting_ = false;
  if (accept_thread_.joinable()) accept_thread_.join();
}

void TlsListener::join() {
  stopping_ = true;
  std::unique_lock lock(mu_);
  if (!relays_done_.wait_for(lock, std::chrono::seconds(5), [this] { return relays_ == 0; })) {
    logger().warning("TLS: %s connection relay(s) still running at shutdown", std::to_string(relays_));
    // They hold `this`: wait on, they end within their socket timeouts.
    relays_done_.wait(lock, [this] { return relays_ == 0; });
  }
}

void TlsListener::accept_loop() {
  while (accepting_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    {
      std::lock_guard lock(mu_);
      if (relays_ >= options_.max_connections) {
        ::close(fd);
        continue;
      }
      ++relays_;
    }
    try {
      std::thread([this, fd, context = current()] { relay(fd, context); }).detach();
    } catch (const std::exception&) {
      ::close(fd);
      std::lock_guard lock(mu_);
      --relays_;
      relays_done_.notify_all();
    }
  }
}

void TlsListener::relay(int fd, std::shared_ptr<Poco::Net::Context> context) {
  struct Done {
    TlsListener* self;
    ~Done() {
      std::lock_guard lock(self->mu_);
      --self->relays_;
      self->relays_done_.notify_all();
    }
  } done{this};
  const std::string peer = peer_address(fd);
  set_timeout(fd, SO_RCVTIMEO, options_.handshake_timeout_ms);
  set_timeout(fd, SO_SNDTIMEO, options_.send_timeout_ms);
  SSL* ssl = SSL_new(context->sslContext());
  if (ssl == nullptr) {
    ERR_clear_error();
    ::close(fd);
    return;
  }
  SSL_set_fd(ssl, fd);
  if (SSL_accept(ssl) != 1) {
    const unsigned long first = ERR_peek_error();
    const bool plain_http = ERR_GET_LIB(first) == ERR_LIB_SSL && ERR_GET_REASON(first) == SSL_R_HTTP_REQUEST;
    const std::string reason = openssl_reason();
    if (logger().debug()) logger().debug("TLS: handshake with %s failed: %s", peer, reason);
    SSL_free(ssl);
    if (plain_http) {
      // Say why, then close after the client's bytes are read (a close with unread
      // input would reset the connection under the reply).
      (void)write_all(fd, kPlainHttpReply.data(), kPlainHttpReply.size());
      ::shutdown(fd, SHUT_WR);
      set_timeout(fd, SO_RCVTIMEO, 200);
      char sink[4096];
      for (int i = 0; i < 64 && ::recv(fd, sink, sizeof sink, 0) > 0; ++i) {
      }
    }
    ::close(fd);
    return;
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    logger().error("TLS: cannot make a socket pair for %s: %s", peer, std::string(std::strerror(errno)));
    SSL_free(ssl);
    ::close(fd);
    return;
  }
  frontend_.adopt(pair[0], peer);
  const int local = pair[1];
  bool client_open = true;
  char buf[16384];
  while (true) {
    bool from_client = false, from_server = false;
    if (client_open && SSL_pending(ssl) > 0) {
      from_client = true;
    } else {
      pollfd p[2] = {{client_open ? fd : -1, POLLIN, 0}, {local, POLLIN, 0}};
      const int n = ::poll(p, 2, 250);
      if (n < 0 && errno != EINTR) break;
      if (n <= 0) {
        if (stopping_) break;
        continue;
      }
      from_client = p[0].revents != 0;
      from_server = p[1].revents != 0;
    }
    if (from_client) {
      const int n = SSL_read(ssl, buf, sizeof buf);
      if (n > 0) {
        if (!write_all(local, buf, static_cast<std::size_t>(n))) break;
      } else {
        const int err = SSL_get_error(ssl, n);
        if (err == SSL_ERROR_ZERO_RETURN) {
          client_open = false;  // close_notify: no more requests, the answers may still go out
          ::shutdown(local, SHUT_WR);
        } else if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
          break;  // gone, reset, or a protocol error
        }
        ERR_clear_error();
      }
    }
    if (from_server) {
      const ssize_t n = ::read(local, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        (void)SSL_shutdown(ssl);  // the front end closed the connection
        break;
      }
      if (SSL_write(ssl, buf, static_cast<int>(n)) <= 0) break;
    }
  }
  ERR_clear_error();
  ::close(local);
  SSL_free(ssl);
  ::close(fd);
}

}  // namespace memra::server
