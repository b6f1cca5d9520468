// TLS (rediss://) against real redis-server processes listening with TLS: success
// with verification, each verification failure as tls_error / errc::tls_failed,
// mutual TLS, configuration errors, the wrong protocol on either side, a stalled
// handshake, mixed quorums, reconnects, and many pipelined operations; handshakes
// reset or trickled by a proxy, a throwing credentials provider, late replies rolled back.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fake_listener.h"
#include "fault_proxy.h"
#include "test_util.h"
#include "tls_certs.h"

namespace redlock::test {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

const tls_certs& certs() { return tls_certs::get(); }

node_config tls_config(const std::string& cert, const std::string& key,
                       const std::string& auth_clients = "no") {
  node_config c;
  c.tls = true;
  c.tls_cert_file = cert;
  c.tls_key_file = key;
  c.tls_ca_file = certs().ca_file;
  c.tls_auth_clients = auth_clients;
  return c;
}

// A client of `uris` trusting the test CA.
client_options tls_options_for(const std::vector<std::string>& uris) {
  client_options o = options_for(uris);
  o.tls.ca_file = certs().ca_file;
  return o;
}

std::string unique(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(++n) + "-" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

::testing::AssertionResult contains(const std::string& haystack, const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << haystack << "' does not contain '" << needle << "'";
}

// An acquire on a fresh client fails with tls_failed, every node tls_error with a
// detail containing `cause`; the report's message names each node and the cause;
// the retry policy does not retry it. `max_attempts`: 1 for a failure the client
// sees itself (verification); 2 for the server's refusal of a client
// certificate, which, when the server's alert is lost to a reset, is concluded
// only on the second such attempt in a row (the first is a connection error that
// the policy retries: a network reset after a CertificateRequest looks the same).
void expect_tls_failure(const client_options& given, const std::string& cause, int max_attempts = 1) {
  // A handshake that merely takes long (ASan, a loaded machine) must not time out
  // first: that is a connection error, retried, not the verdict under test.
  client_options o = given;
  o.connect_timeout = std::max(o.connect_timeout, std::chrono::milliseconds(5000));
  client c(o);
  acquire_options a = once();
  a.retry.max_attempts = 3;
  a.retry.base_delay = 10ms;
  const auto r = c.acquire(unique("tls-fail"), a);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.report.error, errc::tls_failed) << r.report.message();
  EXPECT_GE(r.report.attempts, 1);
  EXPECT_LE(r.report.attempts, max_attempts) << "tls_failed is permanent: never retried";
  // The outcome is decided once the TLS errors alone rule out a quorum: a node may
  // still be pending then.
  const int quorum = static_cast<int>(o.nodes.size() / 2 + 1);
  EXPECT_GE(r.report.count(node_status::tls_error), quorum) << r.report.message();
  EXPECT_EQ(r.report.count(node_status::tls_error) + r.report.count(node_status::pending),
            static_cast<int>(o.nodes.size()))
      << r.report.message();
  for (const node_result& nr : r.report.nodes) {
    if (nr.status == node_status::pending) continue;
    EXPECT_TRUE(contains(nr.detail, cause));
    EXPECT_TRUE(contains(r.report.message(), nr.node + ": TLS error ("));
  }
  EXPECT_TRUE(contains(r.report.message(), "TLS error"));
  EXPECT_TRUE(contains(r.report.message(), cause));
}

// --- three TLS nodes with a good certificate (SAN localhost, 127.0.0.1) ---

class TlsNodes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new redis_cluster(3, tls_config(certs().server_cert, certs().server_key));
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    for (std::size_t i = 0; i < cluster_->size(); ++i) {
      if (!(*cluster_)[i].running()) (*cluster_)[i].start();
    }
  }
  static redis_cluster& nodes() { return *cluster_; }
  static redis_cluster* cluster_;
};
redis_cluster* TlsNodes::cluster_ = nullptr;

TEST_F(TlsNodes, acquire_extend_release_over_verified_tls) {
  for (const std::string& u : nodes().uris()) ASSERT_EQ(u.rfind("rediss://127.0.0.1:", 0), 0u) << u;
  client c(tls_options_for(nodes().uris()));
  const std::string res = unique("basic");
  auto r = c.acquire(res, once(10000ms));
  ASSERT_TRUE(r) << r.report.message();
  const lease l = r.lock.info();
  EXPECT_TRUE(eventually([&] { return nodes().count_value(res, l.token) == 3; }));
  const report e = r.lock.extend(20000ms);
  ASSERT_TRUE(e) << e.message();
  // The extension was decided on a quorum: a third node may apply it a moment later.
  EXPECT_TRUE(eventually([&] {
    for (int i = 0; i < 3; ++i) {
      if (nodes()[i].pttl(res) <= 10000) return false;
    }
    return true;
  }));
  const report rel = r.lock.release();
  ASSERT_TRUE(rel) << rel.message();
  EXPECT_TRUE(eventually([&] { return nodes().count_key(res) == 0; }));
}

TEST_F(TlsNodes, localhost_name_verifies_against_the_dns_san) {
  std::vector<std::string> uris;
  for (std::size_t i = 0; i < nodes().size(); ++i)
    uris.push_back("rediss://localhost:" + std::to_string(nodes()[i].port()));
  client c(tls_options_for(uris));
  auto r = c.acquire(unique("by-name"), once());
  ASSERT_TRUE(r) << r.report.message();
}

TEST_F(TlsNodes, many_pipelined_operations_with_large_records_complete) {
  // 300 acquires in flight at once on each connection (the fan-out pipelines
  // them), with resource names of 6 KiB: several TLS records per write, and
  // replies arriving in partial reads.
  client_options o = tls_options_for(nodes().uris());
  // The last of 300 pipelined 6 KiB requests is answered after the 299 before it: on a
  // busy machine under a sanitizer that took over the suite's 150 ms command timeout
  // (timeouts, not a framing bug). What this test pins is that every reply is parsed
  // from TLS records split across reads, so the bound is the test's own 30 s deadline.
  o.command_timeout = 10000ms;
  constexpr int kOps = 300;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0, ok = 0;
  std::vector<lease> leases;
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  const std::string pad(6 * 1024, 'x');
  for (int i = 0; i < kOps; ++i) {
    c.acquire_async(unique("pipe") + pad + std::to_string(i), once(20000ms), [&](acquire_result r) {
      std::lock_guard<std::mutex> lk(mu);
      ++done;
      if (r) {
        ++ok;
        leases.push_back(r.lock.detach());
      }
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 30s, [&] { return done == kOps; })) << done << " of " << kOps;
  }
  EXPECT_EQ(ok, kOps);
  int released = 0;
  for (const lease& l : leases) released += c.release(l) ? 1 : 0;
  EXPECT_EQ(released, kOps);
}

TEST_F(TlsNodes, reconnects_after_a_tls_server_restart) {
  client_options o = tls_options_for(nodes().uris());
  o.restart_quarantine = 0ms;  // the restart guard is not what this test is about
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  nodes()[0].restart(false);
  nodes()[1].restart(false);
  acquire_options a = once();
  a.retry.max_attempts = 20;
  a.retry.base_delay = 20ms;
  a.retry.max_delay = 100ms;
  auto r = c.acquire(unique("restart"), a);
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_TRUE(eventually([&] { return c.inspect("probe").report.count(node_status::ok) == 3; }));
  EXPECT_GE(c.stats().reconnects, 2u);
}

TEST_F(TlsNodes, mixed_tls_and_plain_nodes_form_one_quorum) {
  redis_node plain;
  const std::vector<std::string> uris = {nodes()[0].uri(), plain.uri(), nodes()[1].uri()};
  client c(tls_options_for(uris));
  const std::string res = unique("mixed");
  auto r = c.acquire(res, once());
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_TRUE(eventually([&] { return plain.get(res) == r.lock.info().token; }));
  EXPECT_TRUE(eventually([&] { return nodes()[0].get(res) == r.lock.info().token; }));
  EXPECT_TRUE(eventually([&] { return nodes()[1].get(res) == r.lock.info().token; }));
  EXPECT_TRUE(r.lock.release());
}

TEST_F(TlsNodes, plain_redis_uri_to_a_tls_server_fails_within_connect_timeout) {
  std::vector<std::string> uris;
  for (std::size_t i = 0; i < nodes().size(); ++i)
    uris.push_back("redis://127.0.0.1:" + std::to_string(nodes()[i].port()));
  client_options o = tls_options_for(uris);
  client c(o);
  const auto t0 = steady_clock::now();
  auto r = c.acquire(unique("plain-to-tls"), once());
  const auto took = duration_cast<milliseconds>(steady_clock::now() - t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
  for (const node_result& nr : r.report.nodes) {
    if (nr.status == node_status::pending) continue;
    EXPECT_TRUE(nr.status == node_status::connection_error || nr.status == node_status::timeout)
        << nr.node << ": " << to_string(nr.status) << " " << nr.detail;
  }
  EXPECT_LT(took, o.connect_timeout + o.command_timeout + 1500ms) << r.report.message();
}

TEST_F(TlsNodes, plain_redis_uri_to_a_tls_server_hints_at_rediss_every_time) {
  std::vector<std::string> uris;
  for (std::size_t i = 0; i < nodes().size(); ++i)
    uris.push_back("redis://127.0.0.1:" + std::to_string(nodes()[i].port()));
  for (int i = 0; i < 10; ++i) {
    SCOPED_TRACE(::testing::Message() << "round " << i);
    client c(tls_options_for(uris));
    auto r = c.acquire(unique("plain-to-tls-hint"), once());
    ASSERT_FALSE(r);
    for (const node_result& nr : r.report.nodes) {
      if (nr.status == node_status::pending) continue;
      EXPECT_EQ(nr.status, node_status::connection_error) << nr.detail;
      EXPECT_TRUE(contains(nr.detail, "before any reply (if the node only speaks TLS, use rediss://)"));
    }
  }
}

TEST(TlsTransport, a_plain_peer_that_answers_garbage_or_nothing_gets_no_rediss_hint) {
  // (A peer that accepts and closes at once may reset the stream like a TLS node
  // does, and gets the hint: it is worded as a condition.)
  fake_listener garbage(fake_listener::mode::garbage);
  fake_listener silent(fake_listener::mode::silent);
  client_options o = options_for({garbage.uri(), silent.uri()});
  o.connect_timeout = 300ms;
  client c(o);
  auto r = c.acquire(unique("plain-peers"), once());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.report.nodes[0].status, node_status::protocol_error) << r.report.message();
  EXPECT_FALSE(contains(r.report.nodes[0].detail, "rediss://"));
  EXPECT_NE(r.report.nodes[1].status, node_status::ok) << r.report.message();
  EXPECT_FALSE(contains(r.report.nodes[1].detail, "rediss://"));
}

// --- verification failures: every node tls_error, errc::tls_failed ---

TEST(TlsVerify, unknown_ca_is_a_tls_error) {
  redis_cluster cl(3, tls_config(certs().unknown_ca_cert, certs().unknown_ca_key));
  expect_tls_failure(tls_options_for(cl.uris()), "signed by an unknown CA");
}

TEST(TlsVerify, system_store_does_not_trust_the_test_ca) {
  redis_cluster cl(3, tls_config(certs().server_cert, certs().server_key));
  client_options o = options_for(cl.uris());  // no ca_file: the system's default store
  expect_tls_failure(o, "signed by an unknown CA");
}

TEST(TlsVerify, hostname_mismatch_is_a_tls_error_naming_the_name) {
  redis_cluster cl(3, tls_config(certs().wrong_name_cert, certs().wrong_name_key));
  expect_tls_failure(tls_options_for(cl.uris()), "does not match the name '127.0.0.1'");
  std::vector<std::string> by_name;
  for (std::size_t i = 0; i < cl.size(); ++i)
    by_name.push_back("rediss://localhost:" + std::to_string(cl[i].port()));
  expect_tls_failure(tls_options_for(by_name), "does not match the name 'localhost'");
}

TEST(TlsVerify, expired_certificate_is_a_tls_error) {
  redis_cluster cl(3, tls_config(certs().expired_cert, certs().expired_key));
  expect_tls_failure(tls_options_for(cl.uris()), "has expired");
}

TEST(TlsVerify, ip_address_without_an_ip_san_fails_and_server_name_overrides_it) {
  redis_cluster cl(3, tls_config(certs().dns_only_cert, certs().dns_only_key));
  expect_tls_failure(tls_options_for(cl.uris()), "does not match the name '127.0.0.1'");
  client_options o = tls_options_for(cl.uris());
  o.tls.server_name = "localhost";
  client c(o);
  auto r = c.acquire(unique("server-name"), once());
  ASSERT_TRUE(r) << r.report.message();
}

TEST(TlsVerify, a_certificate_with_a_subject_cn_and_no_san_is_rejected_by_name) {
  // CN=localhost, no subjectAltName: the name is matched against SANs only (as
  // browsers and RFC 6125 do), never against the subject's common name.
  redis_cluster cl(3, tls_config(certs().cn_only_cert, certs().cn_only_key));
  std::vector<std::string> by_name;
  for (std::size_t i = 0; i < cl.size(); ++i)
    by_name.push_back("rediss://localhost:" + std::to_string(cl[i].port()));
  expect_tls_failure(tls_options_for(by_name), "has no subject alternative name");
  expect_tls_failure(tls_options_for(by_name), "does not match the name 'localhost'");
  client_options o = tls_options_for(cl.uris());
  o.tls.server_name = "localhost";
  expect_tls_failure(o, "has no subject alternative name");
  // The same name in a SAN verifies (a certificate with SANs and the same CN).
  redis_cluster good(3, tls_config(certs().dns_only_cert, certs().dns_only_key));
  std::vector<std::string> good_uris;
  for (std::size_t i = 0; i < good.size(); ++i)
    good_uris.push_back("rediss://localhost:" + std::to_string(good[i].port()));
  client c(tls_options_for(good_uris));
  auto r = c.acquire(unique("san"), once());
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_TRUE(r.lock.release());
}

TEST(TlsVerify, a_hashed_ca_dir_alone_verifies_the_node) {
  redis_cluster cl(3, tls_config(certs().server_cert, certs().server_key));
  client_options o = options_for(cl.uris());
  o.tls.ca_dir = certs().ca_dir;
  client c(o);
  auto r = c.acquire(unique("ca-dir"), once());
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_TRUE(r.lock.release());
  // The same directory does not vouch for another CA's certificate.
  redis_cluster other(3, tls_config(certs().unknown_ca_cert, certs().unknown_ca_key));
  client_options u = options_for(other.uris());
  u.tls.ca_dir = certs().ca_dir;
  expect_tls_failure(u, "signed by an unknown CA");
}

TEST(TlsVerify, insecure_mode_accepts_an_unknown_ca) {
  redis_cluster cl(3, tls_config(certs().unknown_ca_cert, certs().unknown_ca_key));
  client_options o = options_for(cl.uris());
  o.tls.insecure_skip_verify_for_tests_only = true;
  o.connect_timeout = 5000ms;  // a slow handshake (ASan, a loaded machine) is not what is tested
  o.command_timeout = 2000ms;
  client c(o);
  auto r = c.acquire(unique("insecure"), once());
  ASSERT_TRUE(r) << r.report.message();
}

TEST(TlsVerify, one_bad_node_of_three_is_unavailable_not_tls_failed) {
  redis_cluster good(2, tls_config(certs().server_cert, certs().server_key));
  redis_node bad(tls_config(certs().expired_cert, certs().expired_key));
  client c(tls_options_for({good[0].uri(), good[1].uri(), bad.uri()}));
  auto r = c.acquire(unique("one-bad"), once());
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_TRUE(eventually([&] { return c.inspect("probe").report.nodes[2].status == node_status::tls_error; }));
  ASSERT_TRUE(r.lock.release());
  // Two bad nodes of three (one stopped, one bad certificate): no quorum, but
  // the TLS error alone does not rule one out: unavailable.
  good[1].kill();
  auto r2 = c.acquire(unique("one-bad"), once());
  EXPECT_EQ(r2.report.error, errc::unavailable) << r2.report.message();
}

// --- mutual TLS ---

TEST(TlsMutual, missing_client_certificate_is_reported_as_such_every_time) {
  redis_cluster cl(3, tls_config(certs().server_cert, certs().server_key, "yes"));
  for (int i = 0; i < 8; ++i) {
    SCOPED_TRACE(::testing::Message() << "round " << i);
    expect_tls_failure(tls_options_for(cl.uris()), "requires a client certificate (mutual TLS)", 2);
  }
}

TEST(TlsMutual, missing_client_certificate_over_tls12_is_reported_as_such) {
  node_config cfg = tls_config(certs().server_cert, certs().server_key, "yes");
  cfg.tls_protocols = "TLSv1.2";
  redis_cluster cl(3, cfg);
  for (int i = 0; i < 3; ++i) {
    expect_tls_failure(tls_options_for(cl.uris()), "requires a client certificate (mutual TLS)", 2);
  }
}

TEST(TlsMutual, client_certificate_is_accepted) {
  redis_cluster cl(3, tls_config(certs().server_cert, certs().server_key, "yes"));
  client_options o = tls_options_for(cl.uris());
  o.tls.cert_file = certs().client_cert;
  o.tls.key_file = certs().client_key;
  client c(o);
  const std::string res = unique("mtls");
  auto r = c.acquire(res, once());
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_TRUE(eventually([&] { return cl.count_key(res) == 3; }));
  EXPECT_TRUE(r.lock.release());
}

// The server does not trust our client certificate's CA. Under TLS 1.3 the client's
// side of the handshake is done before the server has looked at the certificate:
// its alert may come after our first request, or be lost to a reset.
void expect_client_certificate_rejected(const std::string& protocols, int rounds) {
  node_config cfg = tls_config(certs().server_cert, certs().server_key, "yes");
  cfg.tls_protocols = protocols;
  redis_cluster cl(3, cfg);
  client_options o = tls_options_for(cl.uris());
  o.tls.cert_file = certs().other_client_cert;
  o.tls.key_file = certs().other_client_key;
  for (int i = 0; i < rounds; ++i) {
    SCOPED_TRACE(::testing::Message() << "round " << i);
    expect_tls_failure(o, "the server rejected the client certificate", 2);
  }
}

TEST(TlsMutual, rejected_client_certificate_is_reported_as_such_every_time) {
  expect_client_certificate_rejected("", 10);
}

TEST(TlsMutual, rejected_client_certificate_over_tls12_is_reported_as_such_every_time) {
  expect_client_certificate_rejected("TLSv1.2", 10);
}

TEST(TlsMutual, rejected_client_certificate_over_tls13_is_reported_as_such_every_time) {
  expect_client_certificate_rejected("TLSv1.3", 10);
}

TEST(TlsMutual, optional_client_certificate_works_without_one) {
  redis_cluster cl(3, tls_config(certs().server_cert, certs().server_key, "optional"));
  client c(tls_options_for(cl.uris()));
  auto r = c.acquire(unique("optional"), once());
  ASSERT_TRUE(r) << r.report.message();
}

// --- configuration errors: config_error naming the file, at construction ---

void expect_config_error(const client_options& o, const std::string& needle) {
  try {
    client c(o);
    ADD_FAILURE() << "no config_error; expected one containing '" << needle << "'";
  } catch (const config_error& e) {
    EXPECT_TRUE(contains(e.what(), needle));
  }
}

TEST(TlsConfig, bad_files_are_config_errors_naming_the_file) {
  const std::vector<std::string> uris = {"rediss://127.0.0.1:1"};
  client_options o = options_for(uris);
  o.tls.ca_file = "/nonexistent/ca.pem";
  expect_config_error(o, "tls ca_file '/nonexistent/ca.pem': cannot read");

  o.tls.ca_file = certs().dir + "/gen.log";  // readable, not a certificate
  expect_config_error(o, "tls ca_file '" + o.tls.ca_file + "'");

  o.tls.ca_file = certs().dir;
  expect_config_error(o, "is a directory");

  o = options_for(uris);
  o.tls.ca_dir = "/nonexistent/certs";
  expect_config_error(o, "tls ca_dir '/nonexistent/certs'");

  o = options_for(uris);
  o.tls.cert_file = certs().client_cert;
  expect_config_error(o, "cert_file and key_file must be given together");

  o.tls.key_file = "/nonexistent/client.key";
  expect_config_error(o, "tls key_file '/nonexistent/client.key': cannot read");

  o.tls.key_file = certs().server_key;  // another certificate's key
  expect_config_error(
      o, "tls key_file '" + certs().server_key + "' does not match cert_file '" + certs().client_cert + "'");

  o = options_for(uris);
  o.tls.cert_file = certs().ca_file + ".missing";
  o.tls.key_file = certs().client_key;
  expect_config_error(o, "tls cert_file '" + o.tls.cert_file + "'");
}

TEST(TlsConfig, tls_options_are_ignored_without_a_rediss_node) {
  redis_node n;
  client_options o = options_for({n.uri()});
  o.tls.ca_file = "/nonexistent/ca.pem";
  client c(o);
  auto r = c.acquire(unique("plain-only"), once());
  EXPECT_TRUE(r) << r.report.message();
}

// --- the wrong protocol or a silent peer behind rediss:// ---

TEST(TlsTransport, plaintext_server_behind_rediss_fails_within_connect_timeout) {
  redis_cluster cl(3);
  std::vector<std::string> uris;
  for (std::size_t i = 0; i < cl.size(); ++i)
    uris.push_back("rediss://127.0.0.1:" + std::to_string(cl[i].port()));
  client_options o = tls_options_for(uris);
  client c(o);
  const auto t0 = steady_clock::now();
  auto r = c.acquire(unique("tls-to-plain"), once());
  const auto took = duration_cast<milliseconds>(steady_clock::now() - t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
  // redis-server reads the ClientHello as an inline command that never ends: the
  // connect deadline ends the attempt (or the server's answer breaks the TLS parse).
  for (const node_result& nr : r.report.nodes) {
    if (nr.status == node_status::pending) continue;
    EXPECT_TRUE(nr.status == node_status::connection_error || nr.status == node_status::timeout)
        << nr.node << ": " << to_string(nr.status) << " " << nr.detail;
    // Either way the detail says what is likely wrong.
    EXPECT_TRUE(contains(nr.detail, "(is the node serving TLS? a plain node "))
        << nr.node << ": " << nr.detail;
  }
  EXPECT_LT(took, o.connect_timeout + o.command_timeout + 1500ms) << r.report.message();
}

TEST(TlsTransport, handshake_stall_fails_within_connect_timeout) {
  // Accepts the TCP connection, reads the ClientHello, never answers.
  fake_listener silent(fake_listener::mode::silent);
  const std::string uri = "rediss://127.0.0.1:" + std::to_string(silent.port());
  client_options o = tls_options_for({uri});
  // Before the client: it starts connecting when made, and the connect timeout
  // counts from there (a loaded machine may take a while to reach the acquire).
  const auto t0 = steady_clock::now();
  client c(o);
  auto r = c.acquire(unique("stall"), once());
  const auto took = duration_cast<milliseconds>(steady_clock::now() - t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
  EXPECT_EQ(r.report.nodes[0].status, node_status::timeout) << r.report.message();
  EXPECT_TRUE(contains(r.report.nodes[0].detail, "connect/handshake took longer than"));
  // A bare timeout gave no hint that the server may not speak TLS at all.
  EXPECT_TRUE(
      contains(r.report.nodes[0].detail,
               "ms: no reply to the TLS ClientHello (is the node serving TLS? a plain node never answers "
               "one: it needs redis://)"));
  EXPECT_GE(took, o.connect_timeout - 50ms);
  EXPECT_LT(took, o.connect_timeout + o.command_timeout + 1500ms) << r.report.message();
  EXPECT_GE(silent.accepted(), 1);
}

TEST(TlsTransport, peer_closing_during_the_handshake_is_a_connection_error) {
  fake_listener closer(fake_listener::mode::close);
  client_options o = tls_options_for({"rediss://127.0.0.1:" + std::to_string(closer.port())});
  client c(o);
  auto r = c.acquire(unique("closer"), once());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.report.nodes[0].status, node_status::connection_error) << r.report.message();
  EXPECT_TRUE(contains(r.report.nodes[0].detail, "during the TLS handshake"));
}

TEST(TlsTransport, garbage_instead_of_a_server_hello_is_a_connection_error) {
  fake_listener garbage(fake_listener::mode::garbage);
  client_options o = tls_options_for({"rediss://127.0.0.1:" + std::to_string(garbage.port())});
  client c(o);
  auto r = c.acquire(unique("garbage"), once());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.report.nodes[0].status, node_status::connection_error) << r.report.message();
  EXPECT_TRUE(contains(r.report.nodes[0].detail, "TLS handshake failed"));
}

}  // namespace
}  // namespace redlock::test

// === Handshakes reset or trickled by a proxy, a throwing credentials provider over TLS, late TLS
// replies rolled back (review 11 of the TLS / credentials change, 6496edc..6cb9606)
namespace redlock::test {
namespace tls_faults {  // the section's helpers stay apart from the file's
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
TEST(TlsHandshakeCut, a_reset_mid_handshake_on_an_optional_client_auth_server_is_transient_not_tls_failed) {
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
TEST(TlsHandshakeCut, a_reset_mid_handshake_with_a_valid_client_certificate_is_not_a_rejected_certificate) {
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
TEST(TlsHandshakeCut, a_trickled_handshake_is_bounded_by_connect_timeout_and_close_is_prompt) {
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
TEST(TlsCredentials, a_throwing_credentials_provider_over_tls_fails_only_that_attempt) {
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
TEST(TlsRollback, late_tls_replies_after_the_command_timeout_are_rolled_back) {
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

}  // namespace
}  // namespace tls_faults
}  // namespace redlock::test
