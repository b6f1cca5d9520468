// A real Redis Cluster as one Redlock node (issue 23, plan item 2: node/cluster_endpoint):
// acquire, extend and release of resources spread over every shard, the keys each shard
// master holds ({prefix+R}, {prefix+R}:fence), a quorum of a cluster and plain nodes,
// MOVED and ASK followed, and a cluster that cannot be reached. The client accepts
// cluster URIs only behind the development switch REDLOCK_PREVIEW_CLUSTER=1
// (lib/api/validate.cc), set here before any client is made.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <set>
#include <string>
#include <vector>

#include "fake_listener.h"
#include "pure/slot.h"
#include "redis_deployment.h"
#include "test_util.h"
#include "wait_util.h"
#include "tls_certs.h"

namespace redlock::test {
namespace {

using detail::key_slot;

const std::string kPrefix = "ce:";

// The key a cluster node keeps for resource `r` (docs/protocol.md "On a Redis Cluster node").
std::string tagged(const std::string& r) { return "{" + kPrefix + r + "}"; }

std::set<std::string> keys_on(int port) {
  const owned_reply r = raw_command(port, {"KEYS", "*"});
  std::set<std::string> out;
  if (r->type != REDIS_REPLY_ARRAY) return {"<KEYS * did not answer an array>"};
  for (std::size_t i = 0; i < r->elements; ++i) out.emplace(r->element[i]->str, r->element[i]->len);
  return out;
}

// INFO errorstats' count of error replies with this prefix (MOVED, ASK) on a node.
long long errors_on(int port, const std::string& prefix) {
  const owned_reply r = raw_command(port, {"INFO", "errorstats"});
  const std::string info(r->str, r->len);
  const std::string field = "errorstat_" + prefix + ":count=";
  const auto at = info.find(field);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + field.size()));
}

client_options cluster_options(const std::vector<std::string>& uris) {
  client_options o = options_for(uris);
  o.key_prefix = kPrefix;
  // Generous for a loaded machine; far below the TTLs used here.
  o.command_timeout = 1000ms;
  o.connect_timeout = 2000ms;
  return o;
}

// The first grant on a cluster made just now, whose replicas may still be syncing
// (CI on a busy machine: "confirmed by 0 of its 1 replicas in the time left"):
// tried again (within 20 s) while it is refused for its replicas.
acquire_result acquire_once_replicated(client& c, const std::string& r, std::chrono::milliseconds ttl) {
  const auto until = std::chrono::steady_clock::now() + 20000ms;
  acquire_result a = c.acquire(r, once(ttl));
  while (!a && a.report.message().find("replicas") != std::string::npos && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(100ms);
    a = c.acquire(r, once(ttl));
  }
  return a;
}

class ClusterEndpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ::setenv("REDLOCK_PREVIEW_CLUSTER", "1", 1); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  // The suite's cluster, made on first need (the tests that move slots make their own).
  static redis_cluster_deployment& cluster() {
    if (cluster_ == nullptr) cluster_ = new redis_cluster_deployment(3, 0);
    return *cluster_;
  }
  static int port_of_master(const std::string& resource) {
    const int m = cluster().master_of(key_slot(tagged(resource)));
    return m < 0 ? -1 : cluster()[static_cast<std::size_t>(m)].port();
  }
  // `per_master` resources on each master (names tried in order, at most 1000).
  static std::map<int, std::vector<std::string>> spread(const std::string& base, std::size_t per_master) {
    std::map<int, std::vector<std::string>> out;
    for (int i = 0; i < 1000; ++i) {
      const std::string r = base + "-" + std::to_string(i);
      auto& v = out[port_of_master(r)];
      if (v.size() < per_master) v.push_back(r);
      std::size_t full = 0;
      for (const auto& [port, rs] : out) full += rs.size() == per_master ? 1 : 0;
      if (full == cluster().size()) break;
    }
    return out;
  }
  static redis_cluster_deployment* cluster_;
};
redis_cluster_deployment* ClusterEndpoint::cluster_ = nullptr;

TEST_F(ClusterEndpoint, one_cluster_node_acquires_extends_and_releases_resources_on_every_shard) {
  const auto by_master = spread("spread", 4);
  ASSERT_EQ(by_master.size(), 3u);
  client c(cluster_options({cluster().uri()}));
  std::map<std::string, lock> held;
  for (const auto& [port, resources] : by_master) {
    ASSERT_EQ(resources.size(), 4u) << "port " << port;
    for (const std::string& r : resources) {
      auto a = c.acquire(r, once(20000ms));
      ASSERT_TRUE(a) << r << ": " << a.report.message();
      ASSERT_EQ(a.report.nodes.size(), 1u);
      EXPECT_EQ(a.report.nodes[0].status, node_status::ok);
      EXPECT_EQ(value_at(port, tagged(r)), a.lock.info().token) << r;
      held.emplace(r, std::move(a.lock));
    }
  }
  // Each master holds exactly the tagged keys of its resources: nothing untagged, nothing elsewhere.
  for (const auto& [port, resources] : by_master) {
    std::set<std::string> expected;
    for (const std::string& r : resources) expected.insert(tagged(r));
    EXPECT_EQ(keys_on(port), expected) << "port " << port;
  }
  for (auto& [r, l] : held) {
    const report e = l.extend(40000ms);
    EXPECT_TRUE(e) << r << ": " << e.message();
    const owned_reply pttl = raw_command(port_of_master(r), {"PTTL", tagged(r)});
    EXPECT_GT(pttl->integer, 25000) << r;
  }
  for (auto& [r, l] : held) {
    const report rel = l.release();
    EXPECT_TRUE(rel) << r << ": " << rel.message();
  }
  for (const auto& [port, resources] : by_master) EXPECT_TRUE(keys_on(port).empty()) << "port " << port;
}

TEST_F(ClusterEndpoint, a_quorum_of_a_cluster_and_two_plain_nodes_keeps_tagged_keys_on_the_cluster_only) {
  redis_cluster plain(2);
  std::vector<std::string> uris = plain.uris();
  uris.insert(uris.begin() + 1, cluster().uri());
  client c(cluster_options(uris));
  const auto by_master = spread("quorum", 2);
  for (const auto& entry : by_master) {
    const int port = entry.first;  // a plain variable: C++17 lambdas cannot capture a structured binding
    for (const std::string& r : entry.second) {
      auto a = c.acquire(r, once(20000ms));
      ASSERT_TRUE(a) << r << ": " << a.report.message();
      // The round may be decided at the quorum of 2: the third grant lands after it.
      EXPECT_GE(a.report.count(node_status::ok), 2) << a.report.message();
      const std::string token = a.lock.info().token;
      EXPECT_TRUE(eventually([&] {
        return value_at(port, tagged(r)) == token && plain[0].get(kPrefix + r) == token &&
               plain[1].get(kPrefix + r) == token;
      })) << r
          << ": not granted on all three nodes";
      EXPECT_FALSE(plain[0].exists(tagged(r)));
      EXPECT_FALSE(plain[1].exists(tagged(r)));
      const report e = a.lock.extend(30000ms);
      EXPECT_TRUE(e) << e.message();
      const report rel = a.lock.release();
      EXPECT_TRUE(rel) << rel.message();
      EXPECT_TRUE(eventually([&] {
        return value_at(port, tagged(r)) == "<nil>" && !plain[0].exists(kPrefix + r) &&
               !plain[1].exists(kPrefix + r);
      })) << r
          << ": a key outlived the release";
    }
  }
}

// probe: a cluster node's members are its shard masters in map order, each with
// its slots (16384 in all) and the replicas its writes wait for.
TEST_F(ClusterEndpoint, probe_lists_the_shard_masters_with_their_slots) {
  client c(cluster_options({cluster().uri()}));
  ASSERT_TRUE(wait_connected(c));
  const probe_result p = c.probe();
  const node_health& h = p.nodes.at(0);
  EXPECT_EQ(h.status, node_status::ok) << h.detail;
  ASSERT_EQ(h.members.size(), 3u);
  int slots = 0;
  std::set<std::string> addresses;
  for (const deployment_member& m : h.members) {
    EXPECT_EQ(m.role, "shard master");
    EXPECT_EQ(m.replicas, 0);
    EXPECT_GT(m.slots, 0);
    slots += m.slots;
    addresses.insert(m.address);
  }
  EXPECT_EQ(slots, detail::kClusterSlots);
  std::set<std::string> expected;
  for (std::size_t i = 0; i < cluster().size(); ++i) expected.insert("127.0.0.1:" + std::to_string(cluster()[i].port()));
  EXPECT_EQ(addresses, expected);
  EXPECT_FALSE(h.master_changed_at.has_value());
}

// rediss+cluster://: a TLS-only cluster (no plain port; bus and replication over TLS
// too, as a managed service runs it). The slot map names each master's TLS port, and
// every shard connection verifies the server's certificate against the client's CA.
TEST_F(ClusterEndpoint, a_tls_cluster_node_locks_on_every_shard_over_tls) {
  const tls_certs& certs = tls_certs::get();
  node_config cfg;
  cfg.tls = true;
  cfg.tls_cert_file = certs.server_cert;
  cfg.tls_key_file = certs.server_key;
  cfg.tls_ca_file = certs.ca_file;
  // The nodes connect to each other's bus as TLS clients: a certificate for that.
  cfg.extra_args = {"--tls-client-cert-file", certs.client_cert, "--tls-client-key-file", certs.client_key};
  redis_cluster_deployment cl(3, 0, cfg);
  ASSERT_EQ(cl.uri().rfind("rediss+cluster://", 0), 0u) << cl.uri();
  client_options o = cluster_options({cl.uri()});
  o.tls.ca_file = certs.ca_file;
  client c(o);
  std::set<int> shards;
  for (int i = 0; i < 200 && shards.size() < cl.size(); ++i) {
    const std::string r = "tls-" + std::to_string(i);
    const int m = cl.master_of(key_slot(tagged(r)));
    ASSERT_GE(m, 0);
    if (shards.count(m) != 0) continue;
    shards.insert(m);
    auto a = c.acquire(r, once(20000ms));
    ASSERT_TRUE(a) << r << ": " << a.report.message();
    EXPECT_EQ(cl[static_cast<std::size_t>(m)].command({"GET", tagged(r)}), a.lock.info().token) << r;
    const report e = a.lock.extend(30000ms);
    EXPECT_TRUE(e) << e.message();
    const report rel = a.lock.release();
    EXPECT_TRUE(rel) << rel.message();
    EXPECT_EQ(cl[static_cast<std::size_t>(m)].command({"EXISTS", tagged(r)}), "0") << r;
  }
  EXPECT_EQ(shards.size(), cl.size()) << "a resource on every shard";
  // Without the CA the shard connections refuse the servers' certificates.
  client untrusting(cluster_options({cl.uri()}));
  auto refused = untrusting.acquire("tls-refused", once(2000ms));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.report.message().find("TLS"), std::string::npos) << refused.report.message();
}

long long subscribers_on(int port, const std::string& channel) {
  const owned_reply r = raw_command(port, {"PUBSUB", "NUMSUB", channel});
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return -1;
  return r->element[1]->integer;
}

// A waiter on a cluster node is woken by the release, not its fallback timer: it
// subscribes to the channel the release script publishes on there, "{L}:released"
// (on the first seed: a cluster delivers classic pub/sub to every node).
TEST_F(ClusterEndpoint, a_waiter_on_a_cluster_node_is_woken_by_the_release) {
  client holder(cluster_options({cluster().uri()})), waiter(cluster_options({cluster().uri()}));
  const std::string r = "woken";
  auto held = holder.acquire(r, once(20000ms));
  ASSERT_TRUE(held) << held.report.message();
  // The fallback (retry delay) far above the wake-up measured.
  const acquire_options w = wait_util::waiting(5000ms, 20000ms, 10000ms);
  auto fut = std::async(std::launch::async, [&] { return waiter.acquire(r, w); });
  const std::string channel = tagged(r) + ":released";
  ASSERT_TRUE(eventually([&] { return subscribers_on(cluster()[0].port(), channel) == 1; }, 5000ms))
      << "the waiter never subscribed to " << channel;
  std::this_thread::sleep_for(50ms);  // its attempt right after subscribing has failed
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_FALSE(held.lock.release().error);
  wait_util::expect_woken_by_the_release(fut, t0);
}

// The first seed (where waiters listen) dies: the waiters' subscriber moves to a
// shard master that is up (the notifier's sweep), so a release still wakes them.
TEST_F(ClusterEndpoint, a_waiters_subscription_moves_off_a_dead_first_seed) {
  redis_cluster_deployment cl(3, 1, {}, 1000ms);
  std::string uri = cl.uri();
  for (std::size_t i = 1; i < cl.size(); ++i) {
    uri += (i == 1 ? "?seed=127.0.0.1:" : "&seed=127.0.0.1:") + std::to_string(cl[i].port());
  }
  // R on a shard node 0 does not serve (node 0 is the first seed, and dies).
  std::string r;
  for (int k = 0; k < 100 && r.empty(); ++k) {
    const std::string c = "seedless-" + std::to_string(k);
    if (cl.master_of(key_slot(tagged(c))) != 0) r = c;
  }
  ASSERT_FALSE(r.empty());
  client holder(cluster_options({uri}));
  client_options wo = cluster_options({uri});
  wo.max_ttl = 3000ms;  // should the waiter's client see node 0's replica promoted: a short quarantine
  wo.notify_idle_close = 2000ms;  // a sweep every second
  client waiter(wo);
  auto held = acquire_once_replicated(holder, r, 60000ms);
  ASSERT_TRUE(held) << held.report.message();
  // The fallback (retry delay) far above the wake-up measured.
  const acquire_options w = wait_util::waiting(15000ms, 60000ms, 2000ms);
  auto fut = std::async(std::launch::async, [&] { return waiter.acquire(r, w); });
  const std::string channel = tagged(r) + ":released";
  ASSERT_TRUE(eventually([&] { return subscribers_on(cl[0].port(), channel) == 1; }, 5000ms))
      << "the waiter never subscribed on the first seed";
  cl[0].kill();
  const auto elsewhere = [&] {
    long long n = 0;
    for (std::size_t i = 1; i < cl.size(); ++i) {
      try {
        n += std::max(0LL, subscribers_on(cl[i].port(), channel));
      } catch (const std::runtime_error&) {
      }
    }
    return n == 1;
  };
  ASSERT_TRUE(eventually(elsewhere, 20000ms)) << "the subscription stayed on the dead seed";
  // The waiter's client sees node 0's replica promoted (its sweep asks the map again
  // every second): its acquires wait out the quarantine (3 s from then), so the
  // release comes after that.
  std::optional<std::chrono::steady_clock::time_point> changed;
  ASSERT_TRUE(eventually(
      [&] {
        const probe_result p = waiter.probe();
        if (p.nodes.size() == 1) changed = p.nodes[0].master_changed_at;
        return changed.has_value();
      },
      20000ms))
      << "the waiter's client never saw the seed's shard fail over";
  std::this_thread::sleep_until(*changed + 3500ms);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_FALSE(held.lock.release().error);
  wait_util::expect_woken_by_the_release(fut, t0);
}

// How a waiter's first seed stops hearing the cluster's releases while its
// subscriber connection to it stays up.
enum class deaf_seed {
  // It leaves the cluster the way `redis-cli --cluster del-node` removes it (CLUSTER
  // FORGET on every other node, CLUSTER RESET SOFT on it): the process stays up,
  // answers, keeps its subscribers, and hears nothing the cluster publishes.
  left_the_cluster,
  // It is paused (a frozen VM, a black-holed link): its connections stay open and
  // silent, and only a request that goes unanswered shows it is gone.
  paused,
};

// A waiter subscribed on its first seed (a replica: it goes without taking slots);
// the seed goes deaf; the subscription must move to a node that hears the cluster,
// and the holder's release wake the waiter, not its fallback.
void waiters_subscription_leaves_a_deaf_first_seed(deaf_seed how) {
  redis_cluster_deployment cl(3, 1, {}, 1000ms);
  std::size_t seed = cl.size();
  int seed_master = -1;
  for (std::size_t m = 0; m < cl.size() && seed == cl.size(); ++m) {
    if (!is_master_at(cl[m].port())) continue;
    const std::vector<std::size_t> reps = cl.replicas_of(m);
    if (reps.empty()) continue;
    seed = reps.front();
    seed_master = static_cast<int>(m);
  }
  ASSERT_LT(seed, cl.size()) << "no replica found";
  // R on another shard than the seed's master (whose replica count drops when it goes).
  std::string r;
  int r_master = -1;
  for (int k = 0; k < 200 && r.empty(); ++k) {
    const std::string c = "deaf-seed-" + std::to_string(k);
    const int m = cl.master_of(key_slot(tagged(c)));
    if (m >= 0 && m != seed_master) {
      r = c;
      r_master = m;
    }
  }
  ASSERT_FALSE(r.empty());
  std::string uri = "redis+cluster://127.0.0.1:" + std::to_string(cl[seed].port());
  bool first = true;
  for (std::size_t i = 0; i < cl.size(); ++i) {
    if (i == seed) continue;
    uri += (first ? "?seed=127.0.0.1:" : "&seed=127.0.0.1:") + std::to_string(cl[i].port());
    first = false;
  }
  client holder(cluster_options({"redis+cluster://127.0.0.1:" +
                                 std::to_string(cl[static_cast<std::size_t>(r_master)].port())}));
  client_options wo = cluster_options({uri});
  wo.max_ttl = 3000ms;  // should the waiter's client see a master change: a short quarantine
  wo.notify_idle_close = 2000ms;  // a sweep (the move, the PING) every second
  client waiter(wo);
  auto held = acquire_once_replicated(holder, r, 60000ms);
  ASSERT_TRUE(held) << held.report.message();
  // The fallback (retry delay) far above the wake-up measured.
  const acquire_options w = wait_util::waiting(15000ms, 60000ms, 2000ms);
  auto fut = std::async(std::launch::async, [&] { return waiter.acquire(r, w); });
  const std::string channel = tagged(r) + ":released";
  ASSERT_TRUE(eventually([&] { return subscribers_on(cl[seed].port(), channel) == 1; }, 5000ms))
      << "the waiter never subscribed on its first seed";
  std::unique_ptr<wait_util::resume_on_exit> resume;
  if (how == deaf_seed::left_the_cluster) {
    // del-node, by hand: every other node forgets the seed (within the 60 s ban, so
    // gossip does not bring it back), then the seed resets itself.
    const std::string id = cl[seed].command({"CLUSTER", "MYID"});
    ASSERT_EQ(id.size(), 40u) << id;
    for (std::size_t i = 0; i < cl.size(); ++i) {
      if (i == seed) continue;
      ASSERT_EQ(cl[i].command({"CLUSTER", "FORGET", id}), "OK") << "node " << i;
    }
    ASSERT_EQ(cl[seed].command({"CLUSTER", "RESET", "SOFT"}), "OK");
    ASSERT_TRUE(cl[seed].running()) << "the seed is meant to stay up (as del-node leaves it)";
  } else {
    cl[seed].pause();  // the sweep's PING must find it
    resume.reset(new wait_util::resume_on_exit{cl[seed]});
  }
  const auto elsewhere = [&] {
    long long n = 0;
    for (std::size_t i = 0; i < cl.size(); ++i) {
      if (i == seed) continue;
      n += std::max(0LL, subscribers_on(cl[i].port(), channel));
    }
    return n == 1;
  };
  ASSERT_TRUE(eventually(elsewhere, 20000ms))
      << (how == deaf_seed::paused
              ? "the subscription stayed on the paused first seed (its connection looks up: nothing is in flight on it)"
              : "the subscription stayed on the first seed, which left the cluster (it hears no release any more)");
  std::this_thread::sleep_for(3500ms);  // any quarantine of the waiter's client is over
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_FALSE(held.lock.release().error);
  wait_util::expect_woken_by_the_release(fut, t0);
}

TEST_F(ClusterEndpoint, a_waiters_subscription_leaves_a_first_seed_that_left_the_cluster) {
  waiters_subscription_leaves_a_deaf_first_seed(deaf_seed::left_the_cluster);
}

TEST_F(ClusterEndpoint, a_waiters_subscription_leaves_a_paused_first_seed) {
  waiters_subscription_leaves_a_deaf_first_seed(deaf_seed::paused);
}

TEST_F(ClusterEndpoint, a_fenced_acquire_keeps_its_counter_in_the_lock_keys_slot) {
  client c(cluster_options({cluster().uri()}));
  const std::string r = "fenced";
  acquire_options o = once(20000ms);
  o.fencing = true;
  auto first = c.acquire(r, o);
  ASSERT_TRUE(first) << first.report.message();
  ASSERT_TRUE(first.lock.fence().has_value());
  const int port = port_of_master(r);
  const std::string counter = tagged(r) + ":fence";
  EXPECT_EQ(key_slot(counter), key_slot(tagged(r)));
  const owned_reply ks = raw_command(port, {"CLUSTER", "KEYSLOT", counter});
  EXPECT_EQ(ks->integer, key_slot(tagged(r)));
  EXPECT_EQ(value_at(port, counter), std::to_string(*first.lock.fence()));
  ASSERT_TRUE(first.lock.release());
  auto second = c.acquire(r, o);
  ASSERT_TRUE(second) << second.report.message();
  ASSERT_TRUE(second.lock.fence().has_value());
  EXPECT_GT(*second.lock.fence(), *first.lock.fence());
  EXPECT_EQ(value_at(port, counter), std::to_string(*second.lock.fence()));
  ASSERT_TRUE(second.lock.release());
  EXPECT_EQ(keys_on(port), std::set<std::string>{counter});
  ASSERT_EQ(raw_command(port, {"DEL", counter})->integer, 1);
}

TEST_F(ClusterEndpoint, an_unreachable_cluster_fails_the_acquire_at_once_naming_the_seed) {
  const int dead = free_port();
  client_options o = cluster_options({"redis+cluster://127.0.0.1:" + std::to_string(dead)});
  client c(o);
  const auto t0 = std::chrono::steady_clock::now();
  auto a = c.acquire("unreachable", once());
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(a);
  ASSERT_EQ(a.report.nodes.size(), 1u);
  EXPECT_EQ(a.report.nodes[0].status, node_status::connection_error);
  const std::string& detail = a.report.nodes[0].detail;
  EXPECT_NE(detail.find("cluster slot map unknown"), std::string::npos) << detail;
  EXPECT_NE(detail.find("127.0.0.1:" + std::to_string(dead)), std::string::npos) << detail;
  EXPECT_LT(took, o.command_timeout) << detail;
}

// A seed that accepts and never answers: the first discovery fails at the connect
// timeout (the requests waiting for it with it: connection_error); a request that
// waits for a later discovery fails at its own command timeout, unsent.
TEST_F(ClusterEndpoint, requests_waiting_for_the_map_time_out_at_their_command_timeout) {
  fake_listener silent(fake_listener::mode::silent);
  client_options o = cluster_options({"redis+cluster://127.0.0.1:" + std::to_string(silent.port())});
  o.connect_timeout = 1000ms;
  o.command_timeout = 100ms;
  client c(o);
  // Between discoveries requests fail at once (connection_error); polled until one
  // is submitted while a discovery is in progress (a discovery lasts the connect
  // timeout, the pause between two at most the reconnect backoff).
  bool timed_out = false;
  eventually(
      [&] {
        const auto t0 = std::chrono::steady_clock::now();
        auto a = c.acquire("waits", once());
        const auto took = std::chrono::steady_clock::now() - t0;
        EXPECT_FALSE(a);
        if (a.report.nodes.size() != 1u) return (ADD_FAILURE() << a.report.message(), true);
        const node_result& n = a.report.nodes[0];
        if (n.status == node_status::timeout) {
          timed_out = true;
          EXPECT_NE(n.detail.find("cluster slot map not known"), std::string::npos) << n.detail;
          EXPECT_LT(took, 900ms) << "the request's own timeout, not the discovery's: " << n.detail;
        } else {
          EXPECT_EQ(n.status, node_status::connection_error) << n.detail;
          EXPECT_NE(n.detail.find("no seed answered"), std::string::npos) << n.detail;
          EXPECT_NE(n.detail.find("connect/handshake took longer than 1000 ms"), std::string::npos)
              << n.detail;
        }
        return timed_out;
      },
      10000ms);
  EXPECT_TRUE(timed_out) << "no request waited for a discovery in progress";
}

TEST_F(ClusterEndpoint, a_dead_first_seed_is_skipped_for_the_next) {
  const int dead = free_port();
  client c(cluster_options({"redis+cluster://127.0.0.1:" + std::to_string(dead) +
                            "?seed=127.0.0.1:" + std::to_string(cluster()[1].port())}));
  auto a = c.acquire("second-seed", once());
  ASSERT_TRUE(a) << a.report.message();
  EXPECT_EQ(value_at(port_of_master("second-seed"), tagged("second-seed")), a.lock.info().token);
  ASSERT_TRUE(a.lock.release());
}

TEST_F(ClusterEndpoint, the_preview_switch_admits_cluster_uris_only_not_sentinel_ones) {
  try {
    client c(cluster_options({"redis+sentinel://127.0.0.1:" + std::to_string(free_port()) + "/mymaster"}));
    ADD_FAILURE() << "a Sentinel URI was accepted";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("a Sentinel-managed master as one node is not supported"),
              std::string::npos)
        << e.what();
  }
}

// A resource whose tagged key is in `slot` (names tried in order, bounded).
std::string resource_in_slot(int slot, const std::string& base) {
  for (int i = 0; i < 2000000; ++i) {
    const std::string r = base + std::to_string(i);
    if (key_slot(tagged(r)) == slot) return r;
  }
  return "";
}

// The slot of `resource` moves from its master to another, the client still
// believing the old map: the old master answers MOVED, the request follows it, and
// later requests of that slot go to the new owner directly.
TEST_F(ClusterEndpoint, a_moved_slot_is_followed_and_later_requests_go_to_the_new_owner) {
  redis_cluster_deployment cl(3, 0);
  client c(cluster_options({cl.uri()}));
  ASSERT_TRUE(wait_connected(c)) << "the cluster node never answered";  // the map is known
  const std::string r = "moved-a";
  const int slot = key_slot(tagged(r));
  const std::string r2 = resource_in_slot(slot, "moved-b");
  ASSERT_FALSE(r2.empty());
  const int from = cl.master_of(slot);
  ASSERT_GE(from, 0);
  const std::size_t to = from == 0 ? 1 : 0;
  const int from_port = cl[static_cast<std::size_t>(from)].port();
  const int to_port = cl[to].port();
  const std::string to_id = raw_command(to_port, {"CLUSTER", "MYID"})->str;
  // The new owner first, then the others (the old owner holds no key of the slot).
  ASSERT_EQ(cl[to].command({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", to_id}), "OK");
  for (std::size_t i = 0; i < cl.size(); ++i) {
    if (i == to) continue;
    ASSERT_EQ(cl[i].command({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", to_id}), "OK") << i;
  }
  ASSERT_TRUE(eventually(
      [&] {
        for (std::size_t i = 0; i < cl.size(); ++i) {
          if (cl.master_of(slot, i) != static_cast<int>(to)) return false;
        }
        return true;
      },
      10000ms))
      << "the masters never agreed on the slot's new owner";
  const long long moved_before = errors_on(from_port, "MOVED");

  auto a = c.acquire(r, once(20000ms));
  ASSERT_TRUE(a) << a.report.message();
  EXPECT_EQ(value_at(to_port, tagged(r)), a.lock.info().token);
  EXPECT_EQ(errors_on(from_port, "MOVED"), moved_before + 1) << "one MOVED, then the new owner";
  const long long from_sets = cl[static_cast<std::size_t>(from)].calls("set");
  const long long from_evalshas = cl[static_cast<std::size_t>(from)].calls("evalsha");

  auto b = c.acquire(r2, once(20000ms));
  ASSERT_TRUE(b) << b.report.message();
  EXPECT_EQ(value_at(to_port, tagged(r2)), b.lock.info().token);
  EXPECT_TRUE(a.lock.extend(30000ms));
  EXPECT_TRUE(a.lock.release());
  EXPECT_TRUE(b.lock.release());
  EXPECT_TRUE(keys_on(to_port).empty());
  EXPECT_EQ(errors_on(from_port, "MOVED"), moved_before + 1) << "later requests went to the new owner";
  EXPECT_EQ(cl[static_cast<std::size_t>(from)].calls("set"), from_sets);
  EXPECT_EQ(cl[static_cast<std::size_t>(from)].calls("evalsha"), from_evalshas);
}

// A slot in migration: its owner answers ASK for a key it does not have, and the
// request is sent once more to the importing node, behind ASKING.
TEST_F(ClusterEndpoint, an_ask_is_followed_with_asking_on_the_importing_node) {
  redis_cluster_deployment cl(3, 0);
  client c(cluster_options({cl.uri()}));
  ASSERT_TRUE(wait_connected(c)) << "the cluster node never answered";
  const std::string r = "asked";
  const int slot = key_slot(tagged(r));
  const int from = cl.master_of(slot);
  ASSERT_GE(from, 0);
  const std::size_t owner = static_cast<std::size_t>(from);
  const std::size_t to = owner == 0 ? 1 : 0;
  const std::string s = std::to_string(slot);
  const std::string to_id = raw_command(cl[to].port(), {"CLUSTER", "MYID"})->str;
  const std::string owner_id = raw_command(cl[owner].port(), {"CLUSTER", "MYID"})->str;
  ASSERT_EQ(cl[to].command({"CLUSTER", "SETSLOT", s, "IMPORTING", owner_id}), "OK");
  ASSERT_EQ(cl[owner].command({"CLUSTER", "SETSLOT", s, "MIGRATING", to_id}), "OK");
  const long long asks_before = errors_on(cl[owner].port(), "ASK");
  const long long asking_before = cl[to].calls("asking");

  // The grant lands on the importing node (behind ASKING) but does not count there
  // (a failover of the source shard would hide it: cluster_endpoint.h), and its
  // rollback is asked of the importing node too.
  auto a = c.acquire(r, once(20000ms));
  ASSERT_FALSE(a) << "a grant through ASK counted: " << a.report.message();
  EXPECT_NE(a.report.message().find("granted through ASK on the importing node"), std::string::npos)
      << a.report.message();
  // The rollback runs after the acquire returned (CI, stop 36: its ASKING had not
  // reached the importing node yet when counted): both counts once it is in.
  EXPECT_TRUE(eventually([&] { return cl[to].calls("asking") >= asking_before + 2; }, 5000ms));
  EXPECT_EQ(errors_on(cl[owner].port(), "ASK"), asks_before + 2) << "the acquire and its rollback";
  EXPECT_EQ(cl[to].calls("asking"), asking_before + 2);
  EXPECT_TRUE(eventually([&] { return keys_on(cl[to].port()).empty(); }, 5000ms)) << "the rollback left the key";
  EXPECT_TRUE(keys_on(cl[owner].port()).empty());
  // A lock held before the migration: its key MIGRATEd to the importing node, its
  // release there through ASK (an extension through ASK counts: the key is the
  // holder's already).
  ASSERT_EQ(cl[owner].command({"CLUSTER", "SETSLOT", s, "STABLE"}), "OK");
  ASSERT_EQ(cl[to].command({"CLUSTER", "SETSLOT", s, "STABLE"}), "OK");
  auto held = c.acquire(r, once(20000ms));
  ASSERT_TRUE(held) << held.report.message();
  ASSERT_EQ(cl[to].command({"CLUSTER", "SETSLOT", s, "IMPORTING", owner_id}), "OK");
  ASSERT_EQ(cl[owner].command({"CLUSTER", "SETSLOT", s, "MIGRATING", to_id}), "OK");
  const owned_reply m = raw_command(cl[owner].port(), {"MIGRATE", "127.0.0.1", std::to_string(cl[to].port()), "", "0",
                                                       "5000", "KEYS", tagged(r)});
  ASSERT_EQ(m->type, REDIS_REPLY_STATUS) << (m->str ? m->str : "");
  // (A plain GET there would be redirected: the key is the importing node's only with ASKING.)
  EXPECT_EQ(keys_on(cl[to].port()), std::set<std::string>{tagged(r)});
  EXPECT_TRUE(held.lock.extend(20000ms)) << "an extension through ASK counts";
  EXPECT_TRUE(held.lock.release());
  EXPECT_TRUE(keys_on(cl[to].port()).empty());
  EXPECT_TRUE(keys_on(cl[owner].port()).empty());
}

// A slot no master serves: its old owner answers CLUSTERDOWN, delivered as the error
// vote it is (no redirect to follow); the other slots still take locks.
TEST_F(ClusterEndpoint, clusterdown_for_an_unserved_slot_is_an_error_vote_and_other_slots_still_work) {
  redis_cluster_deployment cl(3, 0);
  client c(cluster_options({cl.uri()}));
  ASSERT_TRUE(wait_connected(c)) << "the cluster node never answered";
  const std::string r = "unserved";
  const int slot = key_slot(tagged(r));
  for (std::size_t i = 0; i < cl.size(); ++i) {
    ASSERT_EQ(cl[i].command({"CLUSTER", "DELSLOTS", std::to_string(slot)}), "OK") << i;
  }
  auto a = c.acquire(r, once());
  ASSERT_FALSE(a);
  ASSERT_EQ(a.report.nodes.size(), 1u);
  EXPECT_EQ(a.report.nodes[0].status, node_status::server_error) << a.report.message();
  EXPECT_NE(a.report.nodes[0].detail.find("CLUSTERDOWN"), std::string::npos) << a.report.nodes[0].detail;
  std::string other = "served";
  for (int i = 0; key_slot(tagged(other)) == slot && i < 100; ++i) other = "served-" + std::to_string(i);
  auto b = c.acquire(other, once());
  ASSERT_TRUE(b) << b.report.message();
  EXPECT_TRUE(b.lock.release());
}

// Plan item 4 on a cluster: a shard master's grant counts once its replica has it. With
// the replica of R's shard stopped, the cluster node's vote for R fails (and is rolled
// back), while a resource on a shard whose replica runs is granted.
TEST_F(ClusterEndpoint, a_grant_counts_once_the_shards_replica_has_it) {
  redis_cluster_deployment replicated(3, 1);
  const auto on = [&](const std::string& r) { return replicated.master_of(key_slot(tagged(r))); };
  std::string stopped_r, running_r;
  const int stopped_master = on("wait-0");
  for (int i = 0; i < 1000 && (stopped_r.empty() || running_r.empty()); ++i) {
    const std::string r = "wait-" + std::to_string(i);
    if (on(r) == stopped_master && stopped_r.empty()) stopped_r = r;
    if (on(r) != stopped_master && on(r) >= 0 && running_r.empty()) running_r = r;
  }
  ASSERT_FALSE(stopped_r.empty());
  ASSERT_FALSE(running_r.empty());
  const std::vector<std::size_t> replicas = replicated.replicas_of(static_cast<std::size_t>(stopped_master));
  ASSERT_EQ(replicas.size(), 1u);
  // Every replica streaming (a write on each master confirmed by WAIT) before the client comes.
  for (std::size_t m = 0; m < replicated.size(); ++m) {
    if (replicated.replicas_of(m).empty()) continue;
    const int port = replicated[m].port();
    std::string probe;  // a key this master serves
    for (int k = 0; k < 10000 && probe.empty(); ++k) {
      const std::string key = "probe-" + std::to_string(k);
      if (replicated.master_of(key_slot(key)) == static_cast<int>(m)) probe = key;
    }
    ASSERT_FALSE(probe.empty());
    ASSERT_TRUE(eventually(
        [&] {
          redisContext* ctx = redisConnect("127.0.0.1", port);
          if (ctx == nullptr) return false;
          bool ok = false;
          if (ctx->err == 0) {
            auto* set = static_cast<redisReply*>(redisCommand(ctx, "SET %s 1 PX 10000", probe.c_str()));
            if (set != nullptr) freeReplyObject(set);
            auto* w = static_cast<redisReply*>(redisCommand(ctx, "WAIT 1 200"));
            ok = w != nullptr && w->type == REDIS_REPLY_INTEGER && w->integer == 1;
            if (w != nullptr) freeReplyObject(w);
          }
          redisFree(ctx);
          return ok;
        },
        20000ms))
        << "the replica of node " << m << " does not confirm";
  }
  client c(cluster_options({replicated.uri()}));
  ASSERT_TRUE(wait_connected(c));
  auto ok = c.acquire(running_r, once(30000ms));
  ASSERT_TRUE(ok) << ok.report.message();
  const int running_master = replicated[static_cast<std::size_t>(on(running_r))].port();
  for (std::size_t rep : replicated.replicas_of(static_cast<std::size_t>(on(running_r)))) {
    EXPECT_EQ(value_on_replica(replicated[rep].port(), tagged(running_r)), ok.lock.info().token)
        << "the replica had the key when the acquire returned";
  }
  replicated[replicas[0]].pause();
  struct resume_at_exit {
    redis_node& n;
    ~resume_at_exit() { n.resume(); }
  } resume{replicated[replicas[0]]};
  auto bad = c.acquire(stopped_r, once(30000ms));
  ASSERT_FALSE(bad) << "a grant the shard's replica never had counted";
  EXPECT_NE(bad.report.message().find("confirmed by 0 of its 1 replicas"), std::string::npos) << bad.report.message();
  const int stopped_port = replicated[static_cast<std::size_t>(stopped_master)].port();
  EXPECT_TRUE(eventually([&] { return value_at(stopped_port, tagged(stopped_r)) == "<nil>"; }, 5000ms))
      << "the unconfirmed grant was left on the shard master";
  ASSERT_FALSE(ok.lock.release().error);
  EXPECT_EQ(value_at(running_master, tagged(running_r)), "<nil>");
}

// A shard master whose replica died counts nothing until a map asked four node
// timeouts + 10 s after the drop names it again, the node timeout being the largest
// CONFIG GET gave of the node that answered the map and of every shard master (each
// shard's failover runs on its own nodes' setting). Node 0, the seed that answers
// the map, keeps the harness's 1 s; R's master gets 3 s: 22 s, not 14 s (asked of
// node 0 alone, as before stop 36, it counted again after about 14.5 s).
TEST_F(ClusterEndpoint, a_dead_replica_holds_its_master_back_for_the_largest_node_timeout_of_the_masters) {
  redis_cluster_deployment cl(3, 1);
  std::string r;
  int m = -1;
  for (int i = 0; i < 1000 && r.empty(); ++i) {
    const std::string candidate = "settle-" + std::to_string(i);
    const int owner = cl.master_of(key_slot(tagged(candidate)));
    if (owner > 0) {
      r = candidate;
      m = owner;
    }
  }
  ASSERT_FALSE(r.empty()) << "no resource off node 0";
  const std::vector<std::size_t> replicas = cl.replicas_of(static_cast<std::size_t>(m));
  ASSERT_EQ(replicas.size(), 1u);
  const owned_reply set = raw_command(cl[static_cast<std::size_t>(m)].port(), {"CONFIG", "SET", "cluster-node-timeout", "3000"});
  ASSERT_EQ(set->type, REDIS_REPLY_STATUS);
  client c(cluster_options({cl.uri()}));
  ASSERT_TRUE(wait_connected(c));
  std::string last;
  // Once its replica streams, R counts there.
  ASSERT_TRUE(eventually(
      [&] {
        auto a = c.acquire(r, once(20000ms));
        last = a.report.message();
        if (a) (void)a.lock.release();
        return static_cast<bool>(a);
      },
      20000ms))
      << last;
  cl[replicas[0]].kill();
  ASSERT_TRUE(refused_with(c, r, "replicas dropped from 1 to 0", last)) << "the drop was never seen; last: " << last;
  const auto dropped = std::chrono::steady_clock::now();
  const auto counted_after = first_grant_after(c, r, dropped, 45000ms, last);
  ASSERT_TRUE(counted_after) << "the master never counted again; last: " << last;
  std::cerr << "[settle] counted again " << counted_after->count() << " ms after the drop\n";
  // 4 x 3 s + 10 s from when the client saw the drop (before the refusal measured from).
  EXPECT_GE(counted_after->count(), 20000) << "settled on node 0's node timeout, not the largest";
}

// Plan item 5: a long-lived client that sees a shard's master change (the master of
// R's slot killed, its replica promoted by the cluster) gives the cluster node no
// acquire vote for the quarantine (max_ttl here), from when it saw the change: the
// promoted replica may lack a grant it never confirmed. The negative control, a
// client with the guard off (restart_quarantine 0), is granted at once.
TEST_F(ClusterEndpoint, a_master_change_the_client_saw_quarantines_the_nodes_acquires) {
  redis_cluster_deployment cl(3, 1, {}, 1000ms);
  const auto master_of_r = [&](const std::string& r) { return cl.master_of(key_slot(tagged(r))); };
  const std::string r = "failover-r";
  const int m = master_of_r(r);
  ASSERT_GE(m, 0);
  const std::vector<std::size_t> replicas = cl.replicas_of(static_cast<std::size_t>(m));
  ASSERT_EQ(replicas.size(), 1u);
  client_options guarded = cluster_options({cl.uri()});
  guarded.max_ttl = 4000ms;  // the quarantine (restart_quarantine: auto = max_ttl)
  client_options unguarded = guarded;
  unguarded.restart_quarantine = 0ms;
  client b(guarded), d(unguarded);
  ASSERT_TRUE(wait_connected(b));
  ASSERT_TRUE(wait_connected(d));
  {  // both know the map, R's master included
    auto warm = acquire_once_replicated(b, r, 2000ms);
    ASSERT_TRUE(warm) << warm.report.message();
    ASSERT_FALSE(warm.lock.release().error);
  }
  cl[static_cast<std::size_t>(m)].kill();
  const int promoted = cl[replicas[0]].port();
  ASSERT_TRUE(eventually(
      [&] { return raw_command(promoted, {"ROLE"})->element[0]->str == std::string("master"); }, 30000ms))
      << "the replica was not promoted";
  acquire_options retrying;
  retrying.ttl = 2000ms;
  retrying.retry.max_attempts = 20;
  retrying.retry.base_delay = 100ms;
  retrying.retry.max_delay = 200ms;
  retrying.retry.deadline = 2500ms;  // well inside the 4 s quarantine from when b sees the change
  auto refused = b.acquire(r, retrying);
  ASSERT_FALSE(refused) << "a node whose shard master just changed voted";
  EXPECT_NE(refused.report.message().find("a shard's master changed"), std::string::npos)
      << refused.report.message();
  // The negative control: without the quarantine, the promoted master grants as
  // soon as d's map shows it.
  auto granted = d.acquire(r, retrying);
  ASSERT_TRUE(granted) << granted.report.message();
  ASSERT_FALSE(granted.lock.release().error);
  // The quarantine ends: b is granted again (bounded).
  EXPECT_TRUE(eventually([&] { return static_cast<bool>(b.acquire(r, once(2000ms))); }, 10000ms))
      << "the quarantine did not end";
}

// A set on a cluster node runs one script on its keys, which a cluster allows on one
// slot only: a set whose keys hash to different slots is refused before any node is
// asked (nothing on the plain nodes either), and one whose resources share a {tag}
// is acquired and released as one. A key that would have an empty hash tag (it starts
// with '}') is refused, and so is a key_prefix that starts with it.
TEST_F(ClusterEndpoint, a_set_on_a_cluster_node_shares_a_hash_tag_or_is_refused_before_any_request) {
  redis_cluster plain(2);
  std::vector<std::string> uris = plain.uris();
  uris.push_back(cluster().uri());
  client c(cluster_options(uris));
  // Two names on different slots (and so, with 3 masters, usually different shards).
  std::string a = "set-a", b;
  for (int i = 0; i < 100 && b.empty(); ++i) {
    const std::string r = "set-b" + std::to_string(i);
    if (key_slot(tagged(r)) != key_slot(tagged(a))) b = r;
  }
  ASSERT_FALSE(b.empty());
  const auto refused = c.acquire_many({a, b}, once(20000ms));
  EXPECT_FALSE(refused);
  EXPECT_EQ(refused.report.error, errc::invalid_argument);
  EXPECT_NE(refused.report.message().find("different slots"), std::string::npos) << refused.report.message();
  EXPECT_NE(refused.report.message().find(a), std::string::npos) << refused.report.message();
  EXPECT_NE(refused.report.message().find(b), std::string::npos) << refused.report.message();
  // Nothing was sent: no key anywhere (the plain nodes would have granted at once).
  for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i].dbsize(), 0) << "plain node " << i;
  for (std::size_t i = 0; i < cluster().size(); ++i) {
    for (const std::string& k : keys_on(cluster()[i].port())) {
      EXPECT_TRUE(k.find("set-") == std::string::npos) << "cluster node " << i << " holds " << k;
    }
  }

  // One tag: one slot, whatever follows it.
  const std::vector<std::string> tagged_set = {"{orders}:1", "{orders}:2", "{orders}:3"};
  auto held = c.acquire_many(tagged_set, once(20000ms));
  ASSERT_TRUE(held) << held.report.message();
  EXPECT_EQ(held.report.count(node_status::ok) >= 2, true) << held.report.message();
  const int port = port_of_master(tagged_set[0]);
  const std::string token = held.lock.info().token;
  for (const std::string& r : tagged_set) {
    EXPECT_EQ(key_slot(tagged(r)), key_slot(tagged(tagged_set[0]))) << r;
    EXPECT_TRUE(eventually([&] { return value_at(port, tagged(r)) == token && plain[0].get(kPrefix + r) == token; }))
        << r << ": not granted on the cluster's shard and a plain node";
  }
  const report rel = held.lock.release();
  EXPECT_TRUE(rel) << rel.message();
  for (const std::string& r : tagged_set) {
    EXPECT_TRUE(eventually([&] { return value_at(port, tagged(r)) == "<nil>" && !plain[0].exists(kPrefix + r); }))
        << r << ": a key outlived the release";
  }

  // An empty hash tag: "{}..." hashes whole, so the counter would be on another slot.
  client_options no_prefix = cluster_options(uris);
  no_prefix.key_prefix.clear();
  client bare(no_prefix);
  const auto empty_tag = bare.acquire("}x", once(20000ms));
  EXPECT_EQ(empty_tag.report.error, errc::invalid_argument);
  EXPECT_NE(empty_tag.report.message().find("must not start with '}'"), std::string::npos)
      << empty_tag.report.message();
  EXPECT_FALSE(plain[0].exists("}x"));
  client_options bad_prefix = cluster_options(uris);
  bad_prefix.key_prefix = "}app:";
  try {
    client never(bad_prefix);
    ADD_FAILURE() << "a key_prefix starting with '}' was accepted with a cluster node";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("key_prefix '}app:'"), std::string::npos) << e.what();
  }
  // Without a cluster node the same names are fine: plain nodes have no slots.
  client_options plain_only = options_for(plain.uris());
  plain_only.key_prefix = "}app:";
  client fine(plain_only);
  auto both = fine.acquire_many({a, b}, once(20000ms));
  ASSERT_TRUE(both) << both.report.message();
  EXPECT_TRUE(both.lock.release());
}

// The failover scenario over three clusters (3 masters + 1 replica each) as
// the three nodes of a quorum, for the masters that own R's slot.
struct cluster_trio {
  std::vector<std::unique_ptr<redis_cluster_deployment>> clusters;
  std::vector<std::string> uris;     // every node of a cluster as a seed: any may die
  std::vector<std::size_t> masters;  // per cluster: the master of R's slot
  std::vector<std::size_t> replicas;  // per cluster: its replica
};

cluster_trio make_trio(const std::string& r) {
  cluster_trio t;
  // Started side by side: most of a cluster's start is waiting for it to form.
  std::vector<std::future<std::unique_ptr<redis_cluster_deployment>>> starting;
  for (int c = 0; c < 3; ++c) {
    starting.push_back(std::async(std::launch::async,
                                  [] { return std::make_unique<redis_cluster_deployment>(3, 1, node_config{}, 1000ms); }));
  }
  for (auto& f : starting) t.clusters.push_back(f.get());
  for (int c = 0; c < 3; ++c) {
    redis_cluster_deployment& cl = *t.clusters[static_cast<std::size_t>(c)];
    std::string uri = cl.uri();
    for (std::size_t i = 1; i < cl.size(); ++i) {
      uri += (i == 1 ? "?seed=127.0.0.1:" : "&seed=127.0.0.1:") + std::to_string(cl[i].port());
    }
    t.uris.push_back(uri);
    const int m = cl.master_of(key_slot(tagged(r)));
    if (m < 0) throw std::runtime_error("no master for R's slot");
    const std::vector<std::size_t> reps = cl.replicas_of(static_cast<std::size_t>(m));
    if (reps.size() != 1) throw std::runtime_error("R's master has " + std::to_string(reps.size()) + " replicas");
    t.masters.push_back(static_cast<std::size_t>(m));
    t.replicas.push_back(reps[0]);
    // Online is not yet streaming (the first ACK after a diskless sync): ready when a
    // write in R's slot is confirmed by WAIT.
    const int port = cl[static_cast<std::size_t>(m)].port();
    const std::string probe = tagged(r) + ":probe";
    const bool streaming = eventually(
        [&] {
          raw_command(port, {"SET", probe, "1"});
          return raw_command(port, {"WAIT", "1", "200"})->integer == 1;
        },
        20000ms);
    if (!streaming) throw std::runtime_error("R's replica never confirmed a write");
    raw_command(port, {"DEL", probe});
  }
  return t;
}

// Every running node of `cl` names `expected` master of `slot` (bounded). A fresh
// client whose first map came from a node that had not heard of a failover yet sees
// the change at its next map, and quarantines the node: it is then no fresh client.
bool settled(redis_cluster_deployment& cl, int slot, std::size_t expected) {
  return eventually(
      [&] {
        for (std::size_t i = 0; i < cl.size(); ++i) {
          if (!cl[i].running()) continue;
          try {
            if (cl.master_of(slot, i) != static_cast<int>(expected)) return false;
          } catch (const std::runtime_error&) {
            return false;
          }
        }
        return true;
      },
      20000ms);
}

// See tests/integration/sentinel_endpoint_test.cc: SIGSTOP alone leaves a write
// in the stopped replica's socket buffer; 32 MB in R's slot first keep later writes
// in the master's own output buffer, lost with it.
void clog_replication(int master_port, const std::string& r) {
  const std::string filler(std::size_t{4} << 20, 'x');
  for (int i = 0; i < 8; ++i) raw_command(master_port, {"SET", tagged(r) + ":clog-" + std::to_string(i), filler});
}

struct failover_outcome {
  bool a_granted = false;
  std::string a_report;
  bool two_holders = false;  // B was granted R while A's lock was still valid
  std::string b_report;
};

// The replicas of R's masters in clusters 1 and 2 stopped while A takes R; those
// masters killed, the replicas resumed and made masters (CLUSTER FAILOVER TAKEOVER)
// without A's key; a fresh client B tries R. `confirm` off is the negative control
// (REDLOCK_PREVIEW_CONFIRM_REPLICATION=0 for A).
failover_outcome failover_with_stale_replicas(bool confirm) {
  const std::string r = "scenario";
  cluster_trio t = make_trio(r);
  if (confirm) {
    ::unsetenv("REDLOCK_PREVIEW_CONFIRM_REPLICATION");
  } else {
    ::setenv("REDLOCK_PREVIEW_CONFIRM_REPLICATION", "0", 1);
  }
  client a(cluster_options(t.uris));
  ::unsetenv("REDLOCK_PREVIEW_CONFIRM_REPLICATION");
  if (!wait_connected(a)) throw std::runtime_error("A did not connect");
  failover_outcome out;
  for (int c = 0; c < 2; ++c) {
    redis_cluster_deployment& cl = *t.clusters[c];
    cl[t.replicas[c]].pause();
    clog_replication(cl[t.masters[c]].port(), r);
  }
  auto held = a.acquire(r, once(60000ms));
  out.a_granted = static_cast<bool>(held);
  out.a_report = held.report.message();
  for (int c = 0; c < 2; ++c) {
    redis_cluster_deployment& cl = *t.clusters[c];
    cl[t.masters[c]].kill();
    cl[t.replicas[c]].resume();
  }
  for (int c = 0; c < 2; ++c) {
    redis_cluster_deployment& cl = *t.clusters[c];
    const int port = cl[t.replicas[c]].port();
    const bool promoted = eventually(
        [&] {
          if (is_master_at(port)) return true;
          raw_command(port, {"CLUSTER", "FAILOVER", "TAKEOVER"});
          return false;
        },
        30000ms);
    if (!promoted) throw std::runtime_error("the replica of cluster " + std::to_string(c) + " was not promoted");
    if (!settled(cl, key_slot(tagged(r)), t.replicas[c]))
      throw std::runtime_error("cluster " + std::to_string(c) + " never agreed on the promoted master");
  }
  // A fresh client (a new `redlock acquire`): it never saw the old masters. Retried
  // for a while (the clusters may still be settling).
  client b(cluster_options(t.uris));
  for (int i = 0; i < 50; ++i) {
    auto taken = b.acquire(r, once(10000ms));
    out.b_report = taken.report.message();
    if (taken) {
      out.two_holders = held && held.lock.owns_lock();
      (void)taken.lock.release();
      break;
    }
    if (taken.report.error == errc::contended) break;
    std::this_thread::sleep_for(100ms);
  }
  if (held) (void)held.lock.release();
  return out;
}

TEST_F(ClusterEndpoint, a_grant_its_shards_replicas_lack_never_counts_so_a_failover_cannot_lose_it) {
  const failover_outcome o = failover_with_stale_replicas(true);
  EXPECT_FALSE(o.a_granted) << "A counted grants its shards' replicas never had: " << o.a_report;
  EXPECT_NE(o.a_report.find("of its 1 replicas"), std::string::npos) << o.a_report;
  EXPECT_FALSE(o.two_holders) << "A: " << o.a_report << "\nB: " << o.b_report;
}

TEST_F(ClusterEndpoint, negative_control_without_confirmation_a_takeover_gives_r_a_second_holder) {
  const failover_outcome o = failover_with_stale_replicas(false);
  ASSERT_TRUE(o.a_granted) << o.a_report;
  EXPECT_TRUE(o.two_holders) << "the checker found no second holder; B: " << o.b_report;
}

// With the replicas running A's grant counts on every cluster; R's masters in
// clusters 1 and 2 killed, the clusters promote the replicas by themselves (they
// have A's key): a fresh B is refused while A holds, A's extension reaches the
// promoted masters, and once A releases B takes R.
TEST_F(ClusterEndpoint, a_lock_held_across_failovers_in_two_of_three_clusters_stays_exclusive) {
  const std::string r = "held";
  cluster_trio t = make_trio(r);
  client a(cluster_options(t.uris));
  auto held = a.acquire(r, once(40000ms));
  ASSERT_TRUE(held) << held.report.message();
  const std::string token = held.lock.info().token;
  for (std::size_t c = 0; c < 3; ++c) {  // a counted grant is on the replica already
    if (held.report.nodes.at(c).status != node_status::ok) continue;
    EXPECT_EQ(value_on_replica(t.clusters[c]->operator[](t.replicas[c]).port(), tagged(r)), token) << "cluster " << c;
  }
  ASSERT_TRUE(eventually([&] {
    for (std::size_t c = 0; c < 3; ++c) {
      redis_cluster_deployment& cl = *t.clusters[c];
      if (value_at(cl[t.masters[c]].port(), tagged(r)) != token ||
          value_on_replica(cl[t.replicas[c]].port(), tagged(r)) != token)
        return false;
    }
    return true;
  })) << "A's key did not reach every master and replica";
  for (int c = 0; c < 2; ++c) t.clusters[c]->operator[](t.masters[c]).kill();
  for (int c = 0; c < 2; ++c) {
    const int port = t.clusters[c]->operator[](t.replicas[c]).port();
    ASSERT_TRUE(eventually([&] { return is_master_at(port); }, 30000ms)) << "cluster " << c << " did not fail over";
    ASSERT_TRUE(settled(*t.clusters[c], key_slot(tagged(r)), t.replicas[c])) << "cluster " << c << " never agreed";
    EXPECT_EQ(value_at(port, tagged(r)), token) << "cluster " << c;
  }
  client b(cluster_options(t.uris));  // a fresh client
  std::string last;
  // The clusters may still be settling (CLUSTERDOWN, the map): B is never granted,
  // and within a while it is refused as contended.
  const bool contended = eventually(
      [&] {
        auto refused = b.acquire(r, once(10000ms));
        last = refused.report.message();
        EXPECT_FALSE(refused) << "B was granted R while A holds it";
        if (refused) (void)refused.lock.release();
        return refused.report.error == errc::contended;
      },
      10000ms);
  EXPECT_TRUE(contended) << last;
  std::string extension;
  EXPECT_TRUE(eventually(
      [&] {
        const report e = held.lock.extend(60000ms);
        extension = e.message();
        if (!e) return false;
        for (int c = 0; c < 2; ++c) {
          const int port = t.clusters[c]->operator[](t.replicas[c]).port();
          if (raw_command(port, {"PTTL", tagged(r)})->integer <= 45000) return false;
        }
        return true;
      },
      10000ms))
      << "A's extension never reached the promoted masters; last: " << extension;
  const report rel = held.lock.release();
  EXPECT_TRUE(rel) << rel.message();
  EXPECT_TRUE(eventually([&] {
    auto taken = b.acquire(r, once(10000ms));
    return taken && !taken.lock.release().error;
  }, 10000ms))
      << "R could not be taken again after A released it";
}

// Moves `slot` from master `from` to master `to` the way redis-cli --cluster reshard
// does: IMPORTING on the target, MIGRATING on the source, every key MIGRATEd (atomic
// per key), then the new owner announced to every master. Between the steps the
// source answers ASK for keys it no longer has.
void migrate_slot(redis_cluster_deployment& cl, int slot, std::size_t from, std::size_t to) {
  const std::string s = std::to_string(slot);
  const std::string from_id = raw_command(cl[from].port(), {"CLUSTER", "MYID"})->str;
  const std::string to_id = raw_command(cl[to].port(), {"CLUSTER", "MYID"})->str;
  if (cl[to].command({"CLUSTER", "SETSLOT", s, "IMPORTING", from_id}) != "OK") throw std::runtime_error("IMPORTING");
  if (cl[from].command({"CLUSTER", "SETSLOT", s, "MIGRATING", to_id}) != "OK") throw std::runtime_error("MIGRATING");
  // Under load, the source answers ASK for a key it lacks (an unheld one) meanwhile:
  // a moment for that to happen (bounded; the test counts the ASKs).
  const long long asks = errors_on(cl[from].port(), "ASK");
  eventually([&] { return errors_on(cl[from].port(), "ASK") > asks; }, 2000ms);
  for (int round = 0; round < 100; ++round) {
    const owned_reply keys = raw_command(cl[from].port(), {"CLUSTER", "GETKEYSINSLOT", s, "100"});
    if (keys->type != REDIS_REPLY_ARRAY || keys->elements == 0) break;
    for (std::size_t k = 0; k < keys->elements; ++k) {
      raw_command(cl[from].port(), {"MIGRATE", "127.0.0.1", std::to_string(cl[to].port()),
                                    std::string(keys->element[k]->str, keys->element[k]->len), "0", "5000"});
    }
    std::this_thread::sleep_for(5ms);  // requests run between the keys' moves
  }
  // The new owner first, then the source, then the other masters.
  for (std::size_t i : {to, from}) {
    if (cl[i].command({"CLUSTER", "SETSLOT", s, "NODE", to_id}) != "OK") throw std::runtime_error("SETSLOT NODE");
  }
  for (std::size_t i = 0; i < cl.size(); ++i) {
    if (i != to && i != from) cl[i].command({"CLUSTER", "SETSLOT", s, "NODE", to_id});
  }
  // Until gossip settles a master may still name an earlier owner; the next move
  // starts once they all agree (as redis-cli --cluster reshard waits).
  const bool agreed = eventually(
      [&] {
        for (std::size_t i = 0; i < cl.size(); ++i) {
          if (cl.master_of(slot, i) != static_cast<int>(to)) return false;
        }
        return true;
      },
      10000ms);
  if (!agreed) throw std::runtime_error("the masters never agreed on slot " + s + "'s new owner");
}

// Resharding under load: the slot of R and of R2 moves between masters six times
// while a long-held lock on R stays held and four threads contend for R2 (short
// locks). R is never granted to anyone else; R2 never has two holders at once; the
// holder of R extends and releases it on its slot's last owner; and the contenders
// kept getting R2 while the slot moved.
TEST_F(ClusterEndpoint, a_slot_migrating_under_load_keeps_its_locks_held_and_exclusive) {
  redis_cluster_deployment cl(3, 0);
  client holder(cluster_options({cl.uri()}));
  const std::string r = "reshard";
  const int slot = key_slot(tagged(r));
  const std::string r2 = resource_in_slot(slot, "reshard-b");
  ASSERT_FALSE(r2.empty());
  auto held = holder.acquire(r, once(60000ms));
  ASSERT_TRUE(held) << held.report.message();

  std::atomic<bool> stop{false};
  std::atomic<int> inside{0}, overlaps{0}, r_granted{0}, r2_granted{0};
  std::vector<std::thread> workers;
  std::vector<std::unique_ptr<client>> clients;
  for (int w = 0; w < 4; ++w) clients.push_back(std::make_unique<client>(cluster_options({cl.uri()})));
  // On every way out (a failed ASSERT, an exception from the harness) the workers stop
  // and are joined before the clients they use and the counters die (declared after
  // them: destroyed first). An exception once destroyed the clients under the workers
  // (ASan: heap-use-after-free, a fresh-clone CI run).
  struct stop_and_join {
    std::atomic<bool>& stop;
    std::vector<std::thread>& workers;
    ~stop_and_join() {
      stop.store(true);
      for (std::thread& t : workers) {
        if (t.joinable()) t.join();
      }
    }
  } joiner{stop, workers};
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      client& c = *clients[static_cast<std::size_t>(w)];
      for (int i = 0; i < 5000 && !stop.load(); ++i) {
        if (auto stolen = c.acquire(r, once(2000ms))) {
          r_granted.fetch_add(1);
          (void)stolen.lock.release();
        }
        auto a = c.acquire(r2, once(2000ms));
        if (!a) continue;
        if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
        r2_granted.fetch_add(1);
        std::this_thread::sleep_for(2ms);
        inside.fetch_sub(1);
        (void)a.lock.release();
      }
    });
  }
  const int first = cl.master_of(slot);
  ASSERT_GE(first, 0);
  std::size_t at = static_cast<std::size_t>(first);
  int grants_before = 0;
  const auto redirects = [&](const std::string& kind) {
    long long n = 0;
    for (std::size_t i = 0; i < cl.size(); ++i) n += errors_on(cl[i].port(), kind);
    return n;
  };
  const long long moved_before = redirects("MOVED"), ask_before = redirects("ASK");
  for (int move = 0; move < 6; ++move) {
    const std::size_t to = (at + 1) % cl.size();
    grants_before = r2_granted.load();
    try {
      migrate_slot(cl, slot, at, to);
    } catch (const std::exception& e) {  // the harness's own failure, named (the workers are joined)
      FAIL() << "moving slot " << slot << " from master " << at << " to " << to << " (move " << move
             << "): " << e.what();
    }
    at = to;
    // Each owner serves R2 for a while (bounded) before the next move.
    EXPECT_TRUE(eventually([&] { return r2_granted.load() >= grants_before + 5; }, 10000ms))
        << "no progress on R2 after move " << move;
  }
  stop.store(true);
  for (std::thread& t : workers) t.join();
  EXPECT_EQ(r_granted.load(), 0) << "R was granted while its holder held it";
  EXPECT_EQ(overlaps.load(), 0) << "R2 had two holders at once";
  EXPECT_GE(r2_granted.load(), 30);  // 5 after each of the 6 moves
  // The load went through the moves: redirects of both kinds were followed.
  EXPECT_GT(redirects("MOVED"), moved_before);
  EXPECT_GT(redirects("ASK"), ask_before);
  // The holder's lock followed its key: it extends and releases on the last owner.
  EXPECT_EQ(value_at(cl[at].port(), tagged(r)), held.lock.info().token);
  const report e = held.lock.extend(60000ms);
  EXPECT_TRUE(e) << e.message();
  const report rel = held.lock.release();
  EXPECT_TRUE(rel) << rel.message();
  EXPECT_EQ(value_at(cl[at].port(), tagged(r)), "<nil>");
}

}  // namespace
}  // namespace redlock::test
