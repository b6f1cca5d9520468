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
#include <memory>
#include <mutex>
#include <string>
#include <stdexcept>
#include <thread>
#include <vector>

#include "fault_proxy.h"
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
  // trickle > 0: instead, every connection gets the server's bytes one at a time,
  // one every `trickle` (a server, or a path, that keeps the handshake alive but
  // never finishes it within any reasonable time).
  handshake_cutter(int target_port, int cut, milliseconds trickle = milliseconds(0))
      : target_(target_port), cut_(cut), trickle_(trickle) {
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
    std::string held;  // trickle: server bytes not yet passed on
    auto next = clk::now();
    while (!stop_) {
      if (trickle_.count() > 0 && !held.empty() && clk::now() >= next) {
        if (::write(c, held.data(), 1) != 1) break;
        held.erase(0, 1);
        next = clk::now() + trickle_;
      }
      pollfd p[2] = {{c, POLLIN, 0}, {u, POLLIN, 0}};
      if (::poll(p, 2, 5) <= 0) continue;
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
        if (trickle_.count() > 0) {
          held.append(buf, static_cast<size_t>(k));
        } else if (::write(c, buf, static_cast<size_t>(k)) != k) {
          break;
        }
      }
    }
    ::close(c);
    ::close(u);
  }

  int target_;
  int cut_;
  milliseconds trickle_;
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
// DISABLED (review 11, open defect; fails on 6cb9606 as committed in c6a8070):
// lib/tls.cc tls_link::client_cert_refused() infers "the server refused our client
// certificate" from (CertificateRequest seen) && (no decrypted data, no TLS 1.3
// session ticket) && (not established || TLS 1.3), and classify()/on_link_down()/
// read_records() then report node_status::tls_error, which connection::on_link_down
// treats as permanent (longest backoff) and operations.cc turns into
// errc::tls_failed (never retried). A network reset after the CertificateRequest
// — on *every* handshake with a server whose tls-auth-clients is yes (the Redis
// default) or optional — satisfies the same condition. One observation cannot tell
// them apart (the real refusal's alert is often lost to the RST our AUTH causes),
// so the fix needs a policy decision: e.g. infer the refusal only when it repeats
// on consecutive attempts to the same node (a per-address counter in
// tls_context::impl, reset by any attempt that got data or a ticket), reporting the
// first as connection_error "connection lost during the TLS handshake after the
// server asked for a client certificate". That makes a real refusal cost one
// retried attempt: tls_test's expect_tls_failure (attempts == 1) would change.
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
// DISABLED (review 11, open defect; fails on 6cb9606 as committed in c6a8070):
// lib/tls.cc tls_link::client_cert_refused() infers "the server refused our client
// certificate" from (CertificateRequest seen) && (no decrypted data, no TLS 1.3
// session ticket) && (not established || TLS 1.3), and classify()/on_link_down()/
// read_records() then report node_status::tls_error, which connection::on_link_down
// treats as permanent (longest backoff) and operations.cc turns into
// errc::tls_failed (never retried). A network reset after the CertificateRequest
// — on *every* handshake with a server whose tls-auth-clients is yes (the Redis
// default) or optional — satisfies the same condition. One observation cannot tell
// them apart (the real refusal's alert is often lost to the RST our AUTH causes),
// so the fix needs a policy decision: e.g. infer the refusal only when it repeats
// on consecutive attempts to the same node (a per-address counter in
// tls_context::impl, reset by any attempt that got data or a ticket), reporting the
// first as connection_error "connection lost during the TLS handshake after the
// server asked for a client certificate". That makes a real refusal cost one
// retried attempt: tls_test's expect_tls_failure (attempts == 1) would change.
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

// Guarantee: connect_timeout covers connect + TLS handshake + AUTH/INFO. Attack: the
// server's handshake bytes arrive one every 100 ms (the session never stalls for
// long, so no idle timer would fire). The acquire must be decided within about
// connect_timeout + command_timeout, and the client must close promptly with the
// handshake in flight (ASan: no use of the freed TLS session).
TEST(Review11Tls, a_trickled_handshake_is_bounded_by_connect_timeout_and_close_is_prompt) {
  redis_node node(tls_config("no"));
  handshake_cutter relay(node.port(), 0, 100ms);
  client_options o = options_for({"rediss://127.0.0.1:" + std::to_string(relay.port())});
  o.tls.ca_file = certs().ca_file;
  o.connect_timeout = 400ms;
  o.command_timeout = 150ms;
  {
    auto c = std::make_unique<client>(o);
    const auto t0 = clk::now();
    const auto r = c->acquire(unique("trickle"), once());
    const auto took = std::chrono::duration_cast<milliseconds>(clk::now() - t0);
    EXPECT_FALSE(r);
    EXPECT_LE(took.count(), 400 + 150 + 300) << r.report.message();
    EXPECT_NE(r.report.error, errc::tls_failed) << r.report.message();
    // Let a second attempt's handshake get under way, then close with it in flight.
    std::this_thread::sleep_for(250ms);
    const auto t1 = clk::now();
    c.reset();
    EXPECT_LE(std::chrono::duration_cast<milliseconds>(clk::now() - t1).count(), 1000);
  }
  EXPECT_GE(relay.accepted(), 1);
}

// Guarantee: a credentials_provider that throws fails that attempt only; it is
// retried with backoff; it runs on the loop thread; the lock is then taken. Over
// TLS the provider runs inside the TLS link's read callback (step_handshake ->
// on_link_up), and its failure destroys that link from inside its own callback
// (ASan). A provider returning a different user on each call is honoured.
TEST(Review11Tls, a_throwing_credentials_provider_over_tls_fails_only_that_attempt) {
  node_config cfg = tls_config("no");
  cfg.acl_users = {"user alice on >alicepw ~* +@all", "user bob on >bobpw ~* +@all"};
  redis_node node(cfg);
  client_options o = options_for({"rediss://127.0.0.1:" + std::to_string(node.port())});
  o.tls.ca_file = certs().ca_file;
  std::atomic<int> calls{0};
  std::mutex mu;
  std::vector<std::thread::id> threads;
  o.credentials_provider = [&](const std::string& n) -> credentials {
    EXPECT_EQ(n.find("pw"), std::string::npos) << n;
    {
      std::lock_guard<std::mutex> g(mu);
      threads.push_back(std::this_thread::get_id());
    }
    const int k = ++calls;
    if (k <= 3) throw std::runtime_error("vault says: alicepw");
    if (k % 2 == 0) return {"alice", "alicepw"};
    return {"bob", "bobpw"};
  };
  client c(o);
  acquire_options a;
  a.ttl = 10000ms;
  a.retry.max_attempts = 50;
  a.retry.base_delay = 20ms;
  a.retry.deadline = 3000ms;
  const auto r = c.acquire(unique("provider"), a);
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_GE(calls.load(), 4);
  std::lock_guard<std::mutex> g(mu);
  for (const auto& t : threads) EXPECT_NE(t, std::this_thread::get_id());
}

// Guarantee: every deadline respected and partial acquisitions rolled back over
// TLS. Attack: two of three TLS nodes behind a proxy that delays every chunk past
// command_timeout (the replies arrive late, after the decision), then pass again.
// The acquire is decided within command_timeout (+ slack); the late grants are
// rolled back (no key left anywhere once the replies land), and a second client
// can then take the lock.
TEST(Review11Tls, late_tls_replies_after_the_command_timeout_are_rolled_back) {
  redis_cluster nodes(3, tls_config("no"));
  fault_proxy p1(nodes[1].port()), p2(nodes[2].port());
  const std::vector<std::string> uris = {nodes.uris()[0], "rediss://127.0.0.1:" + std::to_string(p1.port()),
                                         "rediss://127.0.0.1:" + std::to_string(p2.port())};
  client_options o = options_for(uris);
  o.tls.ca_file = certs().ca_file;
  o.command_timeout = 150ms;
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  const std::string res = unique("late");
  p1.latency(400ms);
  p2.latency(400ms);
  const auto t0 = clk::now();
  const auto r = c.acquire(res, once());
  const auto took = std::chrono::duration_cast<milliseconds>(clk::now() - t0);
  EXPECT_FALSE(r) << r.report.message();
  EXPECT_LE(took.count(), 150 + 250) << r.report.message();
  p1.pass();
  p2.pass();
  EXPECT_TRUE(eventually([&] { return nodes.count_key(res) == 0; }, 5000ms))
      << "a late grant over TLS was not rolled back: " << nodes.count_key(res) << " keys left";
  client other(o);
  ASSERT_TRUE(wait_connected(other));
  const auto r2 = other.acquire(res, once());
  EXPECT_TRUE(r2) << r2.report.message();
}

// Guarantee (safety.md, eviction check): fenced acquires give no vote to a node
// whose maxmemory-policy may evict fence counters, read in every handshake.
// Attack: the nodes are noeviction when the client connects; a majority is
// switched to allkeys-lru by CONFIG SET and their connections are cut; the fenced
// acquire is made at once, while the client may still be reconnecting (its check
// before send sees the policy cleared by on_link_up as "unknown"). The grants must
// still be judged at their replies with the new policy: no fenced lock.
TEST(Review11Eviction, a_policy_changed_between_connects_excludes_the_node_from_fenced_acquires) {
  redis_cluster nodes(3);
  client_options o = options_for(nodes.uris());
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  acquire_options a = once();
  a.fencing = true;
  {
    auto first = c.acquire(unique("fenced-before"), a);
    ASSERT_TRUE(first) << first.report.message();
  }
  for (int i = 0; i < 2; ++i) {
    nodes[static_cast<std::size_t>(i)].command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
    nodes[static_cast<std::size_t>(i)].command({"CLIENT", "KILL", "TYPE", "normal"});
  }
  const auto r = c.acquire(unique("fenced-after"), a);
  EXPECT_FALSE(r) << "a fenced lock granted by a majority of allkeys-lru nodes: " << r.report.message();
  // And once reconnected, too.
  std::this_thread::sleep_for(300ms);
  const auto r2 = c.acquire(unique("fenced-later"), a);
  EXPECT_FALSE(r2) << r2.report.message();
  // A plain acquire is still allowed (warned about, not refused).
  const auto plain = c.acquire(unique("plain"), once());
  EXPECT_TRUE(plain) << plain.report.message();
}

}  // namespace
}  // namespace redlock::test
