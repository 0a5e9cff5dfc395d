// TLS on the listener (--tls-cert / --tls-key; docs/SERVING.md, "TLS"): a self-signed
// certificate made by openssl in the test; curl and the openai npm client over HTTPS,
// plain HTTP to the TLS port closed at once, SIGHUP swapping the served certificate,
// bad certificate/key paths stopping the start with exit 78 and the reason, one flag
// without the other exit 64. Skips without openssl (curl, node: those checks only).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "serving_client.hpp"
#include "tests/support/command.hpp"

namespace memra::server::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::memra::testing::run_command;
using ::memra::testing::Stderr;

std::string quote(const std::string& s) { return "'" + s + "'"; }

bool have(const std::string& tool) { return run_command("command -v " + tool + " >/dev/null 2>&1").ok(); }

// A self-signed certificate for localhost: DIR/NAME.crt and DIR/NAME.key.
bool make_cert(const fs::path& dir, const std::string& name, std::string* why) {
  const auto r = run_command("cd " + quote(dir.string()) +
                                 " && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
                                 " -addext subjectAltName=DNS:localhost -keyout " + name + ".key -out " + name + ".crt",
                             Stderr::merge);
  if (!r.ok()) *why = "openssl req failed: " + r.out;
  return r.ok();
}

std::string fingerprint_of_file(const fs::path& cert) {
  const auto r = run_command("openssl x509 -noout -fingerprint -sha256 -in " + quote(cert.string()), Stderr::merge);
  return r.out;
}

// The SHA-256 fingerprint of the certificate the server presents.
std::string served_fingerprint(int port) {
  const auto r = run_command("openssl s_client -connect 127.0.0.1:" + std::to_string(port) +
                             " -servername localhost </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256");
  return r.out;
}

class ServingTls : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have("openssl")) GTEST_SKIP() << "openssl is not installed: cannot make a test certificate";
    std::string why;
    ASSERT_TRUE(make_cert(dir_.path(), "a", &why)) << why;
    cert_ = dir_.path() / "a.crt";
    key_ = dir_.path() / "a.key";
  }
  std::unique_ptr<HostProcess> start() {
    std::string why;
    auto host = HostProcess::start(
        with_tiny_random_model({"--tls-cert", cert_.string(), "--tls-key", key_.string()}), {}, &why);
    EXPECT_TRUE(host) << why;
    if (host) EXPECT_NE(host->listening_line().find("https://"), std::string::npos) << host->listening_line();
    return host;
  }
  TempDir dir_;
  fs::path cert_, key_;
};

TEST_F(ServingTls, CurlAndTheOpenaiClientSpeakHttps) {
  auto host = start();
  ASSERT_TRUE(host);
  const std::string base = "https://localhost:" + std::to_string(host->port());
  if (have("curl")) {
    const auto r = run_command("curl -sS --max-time 20 --cacert " + quote(cert_.string()) + " " + base + "/v1/models",
                               Stderr::merge);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("\"memra-tiny-random\""), std::string::npos) << r.out;
    // TLS 1.2 is served, 1.1 refused (the floor; OpenSSL 3's own defaults refuse 1.1 as well).
    const auto v12 = run_command("curl -sS --max-time 20 --tlsv1.2 --tls-max 1.2 --cacert " + quote(cert_.string()) +
                                     " " + base + "/health",
                                 Stderr::merge);
    EXPECT_EQ(v12.exit_code, 0) << v12.out;
    const auto old = run_command("curl -sS --max-time 20 --tlsv1.1 --tls-max 1.1 --cacert " + quote(cert_.string()) +
                                     " " + base + "/v1/models",
                                 Stderr::merge);
    EXPECT_NE(old.exit_code, 0) << old.out;
  } else {
    std::cout << "[ SKIPPED  ] the curl part: curl is not installed\n";
  }
  const fs::path modules = fs::path(MEMRA_NODE_DIR) / "node_modules/openai/index.mjs";
  if (!have("node") || !fs::exists(modules)) {
    std::cout << "[ SKIPPED  ] the openai client part: node or the openai package is missing (scripts/setup)\n";
    return;
  }
  const std::string script = std::string(MEMRA_SOURCE_ROOT) + "/tests/serving/tls_client.mjs";
  const auto r = run_command("NODE_EXTRA_CA_CERTS=" + quote(cert_.string()) + " MEMRA_NODE_DIR=" +
                                 quote(MEMRA_NODE_DIR) + " timeout 120 node " + quote(script) + " " +
                                 quote(base + "/v1"),
                             Stderr::merge);
  EXPECT_EQ(r.exit_code, 0) << r.out << "\nmemra-host log:\n" << host->log();
  EXPECT_NE(r.out.find("# pass 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# fail 0"), std::string::npos) << r.out;
}

TEST_F(ServingTls, PlainHttpToTheTlsPortIsClosedPromptly) {
  auto host = start();
  ASSERT_TRUE(host);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(host->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string request = "GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n";
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  const auto t0 = std::chrono::steady_clock::now();
  std::string got;
  char buf[4096];
  bool eof = false;
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) eof = true;
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  ::close(fd);
  EXPECT_TRUE(eof) << "no clean close (timeout or reset); got: " << got;
  EXPECT_LT(took, 2s);
  EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
  EXPECT_NE(got.find("use https://"), std::string::npos) << got;
  // The server still serves TLS afterwards.
  EXPECT_FALSE(served_fingerprint(host->port()).empty());
}

TEST_F(ServingTls, SighupSwapsTheServedCertificate) {
  auto host = start();
  ASSERT_TRUE(host);
  const std::string first = fingerprint_of_file(cert_);
  ASSERT_NE(first.find("Fingerprint"), std::string::npos) << first;
  EXPECT_EQ(served_fingerprint(host->port()), first);
  // A new pair at the same paths, then SIGHUP.
  std::string why;
  ASSERT_TRUE(make_cert(dir_.path(), "a", &why)) << why;
  const std::string second = fingerprint_of_file(cert_);
  ASSERT_NE(second, first);
  EXPECT_EQ(served_fingerprint(host->port()), first);  // not before the signal
  host->signal(SIGHUP);
  std::string served;
  for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
    served = served_fingerprint(host->port());
    if (served == second) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(served, second) << host->log();
  // A reload that fails keeps the certificate in use, and says why.
  { std::ofstream(cert_) << "not a certificate\n"; }
  host->signal(SIGHUP);
  for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
    if (host->log().find("still serving the previous certificate") != std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_NE(host->log().find("still serving the previous certificate"), std::string::npos) << host->log();
  EXPECT_EQ(served_fingerprint(host->port()), second);
  // The process is alive and drains as usual.
  host->signal(SIGTERM);
  EXPECT_EQ(host->wait_exit(20000), std::optional<int>(0)) << host->log();
}

TEST_F(ServingTls, BadCertificateOrKeyStopsTheStart) {
  const std::string missing = (dir_.path() / "missing.crt").string();
  auto r = run_host({"--tls-cert", missing, "--tls-key", key_.string()});
  EXPECT_EQ(r.exit_code, 78) << r.err;
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;

  const auto garbage = dir_.write("garbage.crt", "not a certificate\n");
  r = run_host({"--tls-cert", garbage.string(), "--tls-key", key_.string()});
  EXPECT_EQ(r.exit_code, 78) << r.err;
  EXPECT_NE(r.err.find(garbage.string()), std::string::npos) << r.err;

  std::string why;
  ASSERT_TRUE(make_cert(dir_.path(), "b", &why)) << why;
  r = run_host({"--tls-cert", cert_.string(), "--tls-key", (dir_.path() / "b.key").string()});
  EXPECT_EQ(r.exit_code, 78) << r.err;
  EXPECT_NE(r.err.find("does not belong to the certificate"), std::string::npos) << r.err;

  const fs::path unreadable = dir_.path() / "unreadable.key";
  fs::copy_file(key_, unreadable);
  fs::permissions(unreadable, fs::perms::none);
  if (::access(unreadable.c_str(), R_OK) != 0) {  // root reads it anyway
    r = run_host({"--tls-cert", cert_.string(), "--tls-key", unreadable.string()});
    EXPECT_EQ(r.exit_code, 78) << r.err;
    EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
  }

  r = run_host({"--tls-cert", cert_.string()});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("--tls-cert is given without --tls-key"), std::string::npos) << r.err;
  r = run_host({}, {{"MEMRA_TLS_KEY", key_.string()}});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("--tls-key is given without --tls-cert"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace memra::server::testing
