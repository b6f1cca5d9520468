// Adversarial review of the TLS / credentials / eviction-check change
// (6496edc..6cb9606): reproductions against real redis-server processes. Each
// test states the guarantee it attacks.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tls_certs.h"

namespace redlock::test {
namespace {

using std::chrono::milliseconds;
using clk = std::chrono::steady_clock;

const tls_certs& certs() { return tls_certs::get(); }

node_config tls_config(const std::string& auth_clients) {
  node_config c;
  c.tls = true;
  c.tls_cert_file = certs().server_cert;
  c.tls_key_file = certs().server_key;
  c.tls_ca_file = certs().ca_file;
  c.tls_auth_clients = auth_clients;
  return c;
}

std::string unique(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(++n) + "-" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

// A TCP relay on 127.0.0.1 in front of one server, one connection at a time, on
// its own thread. The first `cut` connections it accepts are cut with a RST in
// the middle of the TLS handshake: the client's first flight (ClientHello) is
// forwarded, the server's answer (ServerHello ... CertificateRequest ... Finished)
// is forwarded in full, and when the client sends its second flight the relay
// resets the client's side — a plain network failure (a middlebox, a NAT timeout,
// a server restart) after the server asked for a client certificate. Later
// connections are relayed both ways untouched. Every wait is bounded (poll 20 ms).
class handshake_cutter {
 public:
  handshake_cutter(int target_port, int cut) : target_(target_port), cut_(cut) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_, 8) != 0)
      throw std::runtime_error("relay: bind/listen");
    socklen_t len = sizeof a;
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~handshake_cutter() {
    stop_ = true;
    thread_.join();
    ::close(listen_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }
  int cuts() const { return cuts_; }

 private:
  static void rst(int fd) {
    linger l{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd);
  }
  int connect_upstream() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(target_));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
  void run() {
    while (!stop_) {
      pollfd p{listen_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept(listen_, nullptr, nullptr);
      if (c < 0) continue;
      const int n = ++accepted_;
      const int u = connect_upstream();
      if (u < 0) {
        ::close(c);
        continue;
      }
      relay(c, u, n <= cut_);
    }
  }
  // Relays one connection until either side closes (or stop_).
  void relay(int c, int u, bool cut) {
    int client_reads = 0;
    char buf[65536];
    while (!stop_) {
      pollfd p[2] = {{c, POLLIN, 0}, {u, POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      if (p[0].revents != 0) {
        const ssize_t k = ::read(c, buf, sizeof buf);
        if (k <= 0) break;
        if (cut && ++client_reads == 2) {
          ++cuts_;
          rst(c);
          ::close(u);
          return;
        }
        if (::write(u, buf, static_cast<size_t>(k)) != k) break;
      }
      if (p[1].revents != 0) {
        const ssize_t k = ::read(u, buf, sizeof buf);
        if (k <= 0) break;
        if (::write(c, buf, static_cast<size_t>(k)) != k) break;
      }
    }
    ::close(c);
    ::close(u);
  }

  int target_;
  int cut_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> cuts_{0};
  std::thread thread_;
};

// Guarantee (error.h): tls_failed means TLS "could not be established with
// verification" (unknown CA, name, expiry, a client certificate required and not
// given) and is never retried; node_status::tls_error is the permanent status
// (longest backoff). Attack: a server that merely *asks* for a client
// certificate (tls-auth-clients optional: any client may connect without one)
// and a connection reset by the network right after its CertificateRequest. That
// is a transient failure; the next connection succeeds. The inference "asked for
// a certificate and ended the session before any reply" takes it for the server
// refusing a certificate: the node is tls_error ("requires a client certificate",
// which is false), the acquire fails with tls_failed and is not retried although
// the retry policy allows it and the node is healthy.
TEST(Review11Tls, a_reset_mid_handshake_on_an_optional_client_auth_server_is_transient_not_tls_failed) {
  redis_node node(tls_config("optional"));
  handshake_cutter relay(node.port(), 1);
  client_options o = options_for({"rediss://127.0.0.1:" + std::to_string(relay.port())});
  o.tls.ca_file = certs().ca_file;
  client c(o);
  acquire_options a;
  a.ttl = 10000ms;
  a.retry.max_attempts = 20;
  a.retry.base_delay = 20ms;
  a.retry.deadline = 3000ms;
  const auto r = c.acquire(unique("cut"), a);
  EXPECT_EQ(relay.cuts(), 1);
  EXPECT_NE(r.report.error, errc::tls_failed) << r.report.message();
  EXPECT_TRUE(r) << "the node is healthy and takes connections without a certificate; one reset "
                    "mid-handshake must be retried: "
                 << r.report.message();
}

// Same attack, on a server that requires client certificates (the Redis
// default) with a client that has a valid one: a network reset mid-handshake is
// reported as "the server rejected the client certificate" — the operator is
// told to replace a certificate that is fine — and not retried.
TEST(Review11Tls, a_reset_mid_handshake_with_a_valid_client_certificate_is_not_a_rejected_certificate) {
  redis_node node(tls_config("yes"));
  handshake_cutter relay(node.port(), 1);
  client_options o = options_for({"rediss://127.0.0.1:" + std::to_string(relay.port())});
  o.tls.ca_file = certs().ca_file;
  o.tls.cert_file = certs().client_cert;
  o.tls.key_file = certs().client_key;
  client c(o);
  acquire_options a;
  a.ttl = 10000ms;
  a.retry.max_attempts = 20;
  a.retry.base_delay = 20ms;
  a.retry.deadline = 3000ms;
  const auto r = c.acquire(unique("cut-mtls"), a);
  EXPECT_EQ(relay.cuts(), 1);
  EXPECT_NE(r.report.error, errc::tls_failed) << r.report.message();
  EXPECT_EQ(r.report.message().find("rejected the client certificate"), std::string::npos) << r.report.message();
  EXPECT_TRUE(r) << r.report.message();
}

}  // namespace
}  // namespace redlock::test
