// Operations: the eviction-policy check (on_warning, node_view, fenced acquires),
// the credentials provider, the minimal ACL of docs/operations.md, and the lock
// node configuration fragment docs/redis-lock-node.conf; a policy changed between
// connects. Real redis-servers.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace redlock::test {
namespace {

// Collects what on_warning reports (any thread may read it).
struct warning_log {
  std::mutex mu;
  std::vector<warning> seen;
  void install(client_options& o) {
    o.on_warning = [this](const warning& w) {
      std::lock_guard<std::mutex> g(mu);
      seen.push_back(w);
    };
  }
  std::vector<warning> snapshot() {
    std::lock_guard<std::mutex> g(mu);
    return seen;
  }
  std::size_t count_for(const std::string& node) {
    std::lock_guard<std::mutex> g(mu);
    std::size_t n = 0;
    for (const warning& w : seen) n += w.node == node ? 1 : 0;
    return n;
  }
};

void set_policy(redis_node& n, const std::string& policy) {
  ASSERT_EQ(n.command({"CONFIG", "SET", "maxmemory-policy", policy}), "OK");
}

// Closes every client connection of the node but the helper's own (the client
// reconnects in the background).
void kill_clients(redis_node& n) { n.command({"CLIENT", "KILL", "TYPE", "normal"}); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

acquire_options fenced(std::chrono::milliseconds ttl = 10000ms) {
  acquire_options o = once(ttl);
  o.fencing = true;
  return o;
}

// ---------------------------------------------------------------- eviction policy

// A server whose scripts are renamed or disabled (rename-command, a managed service's
// policy): the release is refused with a named, permanent error (not a retried
// "unavailable"), and from then on the node votes on no acquire: a plain SET NX there
// would grant a lock that could be neither released nor extended. A reconnect asks
// again (the server may have been reconfigured).
TEST(ManagedProfile, a_server_without_scripts_is_named_and_then_gets_no_acquire_vote) {
  node_config cfg;
  cfg.extra_args = {"--rename-command", "EVAL", "", "--rename-command", "EVALSHA", ""};
  redis_node n(cfg);
  client c(options_for({n.uri()}));
  auto first = c.acquire("scripts-off", once(5000ms));
  ASSERT_TRUE(first) << "the first acquire (a plain SET NX PX) counts: nothing was refused yet";
  const report rel = first.lock.release();
  EXPECT_EQ(rel.error, errc::permission_denied) << rel.message();
  EXPECT_NE(rel.message().find("the server does not run scripts"), std::string::npos) << rel.message();
  auto second = c.acquire("scripts-off-2", once(5000ms));
  EXPECT_FALSE(second) << "a node that refused scripts voted on an acquire";
  EXPECT_NE(second.report.message().find("could be neither released nor extended"), std::string::npos)
      << second.report.message();
  EXPECT_FALSE(n.exists("scripts-off-2")) << "the excluded node was still written to and left a key";
}

// A user whose ACL refuses scripts (-@scripting: a managed service's restricted user)
// is refused them with NOPERM, not "unknown command": the same hazard, the same
// exclusion once the node refused one (adversarial pass, issue 23).
TEST(ManagedProfile, an_acl_that_refuses_scripts_gets_no_acquire_vote_after_the_refusal_either) {
  node_config cfg;
  cfg.acl_users = {"user noscripts on >pw ~* &* +@all -@scripting"};
  redis_cluster cl(1, cfg);
  client c(options_for(uris_as(cl, "noscripts", "pw")));
  auto first = c.acquire("acl-scripts-off", once(5000ms));
  ASSERT_TRUE(first) << "the first acquire (a plain SET NX PX) counts: nothing was refused yet";
  const report rel = first.lock.release();
  EXPECT_EQ(rel.error, errc::permission_denied) << rel.message();
  EXPECT_NE(rel.message().find("NOPERM"), std::string::npos) << rel.message();
  auto second = c.acquire("acl-scripts-off-2", once(5000ms));
  EXPECT_FALSE(second) << "a node whose ACL refused a script voted on an acquire";
  EXPECT_NE(second.report.message().find("could be neither released nor extended"), std::string::npos)
      << second.report.message();
  EXPECT_FALSE(cl[0].exists("acl-scripts-off-2")) << "the refusing node was still written to and left a key";
}

// rename-command cannot change without a restart: a reconnect to the same server
// (the same run_id) must not give it its acquire vote back (the first-acquire gap
// would reopen at every reconnect: an idle timeout, a stall, a blip). A restarted
// server gets it back until it refuses a script again (adversarial pass, issue 23).
TEST(ManagedProfile, a_reconnect_to_the_same_server_without_scripts_does_not_give_it_its_vote_back) {
  node_config cfg;
  cfg.extra_args = {"--rename-command", "EVAL", "", "--rename-command", "EVALSHA", ""};
  redis_node n(cfg);
  client_options o = options_for({n.uri()});
  o.max_ttl = 2000ms;  // the restart below is quarantined for 2 s (the guard reads the run_id)
  client c(o);
  auto first = c.acquire("reconnect-scripts-off", once(2000ms));
  ASSERT_TRUE(first) << "the first acquire (a plain SET NX PX) counts: nothing was refused yet";
  ASSERT_EQ(first.lock.release().error, errc::permission_denied);
  auto second = c.acquire("reconnect-scripts-off-2", once(2000ms));
  ASSERT_FALSE(second) << "pinned by a_server_without_scripts_is_named_and_then_gets_no_acquire_vote";
  const auto reconnects = c.stats().reconnects;
  kill_clients(n);  // the same server, a new connection
  ASSERT_TRUE(eventually([&] { return c.stats().reconnects > reconnects; }, 10000ms)) << "no reconnect";
  auto third = c.acquire("reconnect-scripts-off-3", once(2000ms));
  EXPECT_FALSE(third) << "after a reconnect to the same server the node voted again on a plain SET NX";
  EXPECT_FALSE(n.exists("reconnect-scripts-off-3")) << "a key nobody can release was written";
  // A restart (a new run_id: perhaps reconfigured) gives the vote back.
  n.restart(false);
  std::string last;
  EXPECT_TRUE(eventually(
      [&] {
        auto again = c.acquire("reconnect-scripts-off-4", once(2000ms));
        last = again.report.message();
        return static_cast<bool>(again);
      },
      10000ms))
      << "a restarted server never got its acquire vote back: " << last;
}

// A server (or a proxy) that refuses EVALSHA only: the scripts go as EVAL, bodies
// included, and everything works (adversarial pass, issue 23: it used to be
// "the server does not run scripts" and no acquire vote, though EVAL ran).
TEST(ManagedProfile, a_server_that_refuses_only_evalsha_runs_every_script_as_eval) {
  node_config cfg;
  cfg.extra_args = {"--rename-command", "EVALSHA", ""};
  redis_node n(cfg);
  client c(options_for({n.uri()}));
  auto a = c.acquire("sha-off", once(5000ms));
  ASSERT_TRUE(a) << a.report.message();
  const report first_rel = a.lock.release();  // EVAL: the script's first use on this connection
  ASSERT_TRUE(first_rel) << first_rel.message();
  auto b = c.acquire("sha-off", once(5000ms));
  ASSERT_TRUE(b) << b.report.message();
  const report rel = b.lock.release();  // EVALSHA, refused, then EVAL
  EXPECT_TRUE(rel) << rel.message();
  EXPECT_FALSE(n.exists("sha-off")) << "left behind, though EVAL removes it";
  auto again = c.acquire("sha-off-2", once(5000ms));
  ASSERT_TRUE(again) << "a node that runs EVAL lost its acquire vote: " << again.report.message();
  EXPECT_TRUE(again.lock.extend(5000ms));
  EXPECT_TRUE(again.lock.release());
  EXPECT_FALSE(n.exists("sha-off-2"));
}

TEST(EvictionPolicy, warning_names_the_node_the_policy_and_what_it_can_evict) {
  redis_cluster cl(3);
  set_policy(cl[1], "volatile-ttl");
  set_policy(cl[2], "allkeys-lru");
  warning_log log;
  auto o = options_for(cl.uris());
  log.install(o);
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  ASSERT_TRUE(eventually([&] { return log.snapshot().size() >= 2; }));
  const auto seen = log.snapshot();
  ASSERT_EQ(seen.size(), 2u);  // once per connection where seen; noeviction: none
  EXPECT_EQ(log.count_for(cl[0].uri()), 0u);
  for (const warning& w : seen) {
    EXPECT_EQ(w.code, warning_code::eviction_policy);
    EXPECT_TRUE(contains(w.message, w.node)) << w.message;
    EXPECT_TRUE(contains(w.message, "noeviction")) << w.message;
    if (w.node == cl[1].uri()) {
      EXPECT_TRUE(contains(w.message, "maxmemory-policy volatile-ttl")) << w.message;
      EXPECT_TRUE(contains(w.message, "keys that have a TTL")) << w.message;
      EXPECT_TRUE(contains(w.message, "fence counters (no TTL) are not evicted")) << w.message;
    } else {
      EXPECT_EQ(w.node, cl[2].uri());
      EXPECT_TRUE(contains(w.message, "maxmemory-policy allkeys-lru may evict any key")) << w.message;
      EXPECT_TRUE(contains(w.message, "fence counters")) << w.message;
    }
  }
  // The same, on demand: inspect's node_view (what `redlock status` prints).
  const inspect_result ir = c.inspect("ev-view");
  ASSERT_EQ(ir.nodes.size(), 3u);
  EXPECT_EQ(ir.nodes[0].maxmemory_policy, "noeviction");
  EXPECT_TRUE(ir.nodes[0].warnings.empty());
  EXPECT_EQ(ir.nodes[1].maxmemory_policy, "volatile-ttl");
  ASSERT_EQ(ir.nodes[1].warnings.size(), 1u);
  EXPECT_EQ(ir.nodes[1].warnings[0].node, cl[1].uri());
  EXPECT_EQ(ir.nodes[2].maxmemory_policy, "allkeys-lru");
  ASSERT_EQ(ir.nodes[2].warnings.size(), 1u);
  // A plain acquire counts every node (the warning is the only consequence).
  auto r = c.acquire("ev-plain", once());
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_EQ(r.report.count(node_status::excluded), 0);  // all counted (one may be pending)
}

TEST(EvictionPolicy, secrets_stay_out_of_the_warning) {
  node_config cfg;
  cfg.password = "s3cret-pw";
  redis_node n(cfg);
  set_policy(n, "allkeys-random");
  warning_log log;
  auto o = options_for({n.uri()});
  log.install(o);
  client c(o);
  // One node: a single_node warning at the start, then the eviction one.
  ASSERT_TRUE(eventually([&] { return log.snapshot().size() == 2; }));
  EXPECT_EQ(log.snapshot()[0].code, warning_code::single_node);
  EXPECT_FALSE(contains(log.snapshot()[0].message, "s3cret")) << log.snapshot()[0].message;
  const warning w = log.snapshot()[1];
  EXPECT_EQ(w.code, warning_code::eviction_policy);
  EXPECT_FALSE(contains(w.node, "s3cret")) << w.node;
  EXPECT_FALSE(contains(w.message, "s3cret")) << w.message;
  EXPECT_TRUE(contains(w.node, "***")) << w.node;
}

TEST(EvictionPolicy, fenced_acquire_excludes_nodes_that_may_evict_the_fence_counter) {
  redis_cluster cl(3);
  set_policy(cl[0], "allkeys-lru");
  auto o = options_for(cl.uris());
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  auto r = c.acquire("ev-fenced", fenced());
  ASSERT_TRUE(r) << r.report.message();  // 2 of 3: the quorum
  EXPECT_EQ(r.report.nodes[0].status, node_status::excluded);
  EXPECT_TRUE(contains(r.report.nodes[0].detail, "maxmemory-policy allkeys-lru")) << r.report.nodes[0].detail;
  EXPECT_FALSE(cl[0].exists("ev-fenced"));
  EXPECT_FALSE(cl[0].exists("ev-fenced:fence"));
  ASSERT_TRUE(r.lock.release());

  // Two such nodes: no quorum, and the report says why.
  set_policy(cl[1], "allkeys-lfu");
  kill_clients(cl[1]);  // the policy is read at connect
  ASSERT_TRUE(eventually([&] { return c.inspect("ev-probe").nodes[1].maxmemory_policy == "allkeys-lfu"; }));
  auto blocked = c.acquire("ev-fenced-2", fenced());
  EXPECT_EQ(blocked.report.error, errc::unavailable) << blocked.report.message();
  EXPECT_EQ(blocked.report.count(node_status::excluded), 2);
  EXPECT_TRUE(contains(blocked.report.message(), "excluded by a guard")) << blocked.report.message();

  // A plain acquire still counts them.
  auto plain = c.acquire("ev-plain", once());
  ASSERT_TRUE(plain) << plain.report.message();
  EXPECT_EQ(plain.report.count(node_status::excluded), 0);
}

TEST(EvictionPolicy, volatile_policies_are_counted_for_fencing_the_counter_has_no_ttl) {
  redis_cluster cl(3);
  set_policy(cl[0], "volatile-lru");
  set_policy(cl[1], "volatile-ttl");
  client c(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(c));
  auto r = c.acquire("ev-vol", fenced());
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_EQ(r.report.count(node_status::excluded), 0);  // all counted (one may be pending)
  // Why volatile-* never evicts it (node 0's fence round may still be in flight:
  // it may not have been one of the quorum's first replies).
  EXPECT_TRUE(eventually([&] { return cl[0].pttl("ev-vol:fence") == -1; })) << cl[0].pttl("ev-vol:fence");
}

TEST(EvictionPolicy, allow_fencing_on_evicting_nodes_counts_them) {
  redis_cluster cl(3);
  set_policy(cl[0], "allkeys-lru");
  set_policy(cl[1], "allkeys-random");
  auto o = options_for(cl.uris());
  o.allow_fencing_on_evicting_nodes = true;
  warning_log log;
  log.install(o);
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  auto r = c.acquire("ev-allowed", fenced());
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_EQ(r.report.count(node_status::excluded), 0);  // all counted (one may be pending)
  ASSERT_TRUE(r.lock.fence().has_value());
  EXPECT_EQ(*r.lock.fence(), 1u);
  EXPECT_EQ(log.snapshot().size(), 2u);  // still warned about
}

TEST(EvictionPolicy, a_reconnect_reads_the_policy_again) {
  redis_cluster cl(3);
  warning_log log;
  auto o = options_for(cl.uris());
  log.install(o);
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  EXPECT_TRUE(log.snapshot().empty());

  // Changed while connected: seen at the next connect, not before.
  set_policy(cl[0], "allkeys-lru");
  auto before = c.acquire("ev-re-1", fenced());
  ASSERT_TRUE(before) << before.report.message();
  EXPECT_NE(before.report.nodes[0].status, node_status::excluded);  // ok, or pending when decided first
  ASSERT_TRUE(before.lock.release());
  const auto reconnects = c.stats().reconnects;
  kill_clients(cl[0]);
  ASSERT_TRUE(eventually([&] { return log.count_for(cl[0].uri()) == 1; }));
  // The warning comes with the handshake's INFO; the reconnect counts when the
  // handshake completes, a moment later.
  EXPECT_TRUE(eventually([&] { return c.stats().reconnects > reconnects; }));
  auto after = c.acquire("ev-re-2", fenced());
  ASSERT_TRUE(after) << after.report.message();
  EXPECT_EQ(after.report.nodes[0].status, node_status::excluded);
  ASSERT_TRUE(after.lock.release());

  // Each connection where it holds reports it once more.
  kill_clients(cl[0]);
  ASSERT_TRUE(eventually([&] { return log.count_for(cl[0].uri()) == 2; }));

  // Back to noeviction: counted again after the next reconnect, no new warning.
  set_policy(cl[0], "noeviction");
  kill_clients(cl[0]);
  ASSERT_TRUE(eventually([&] { return c.inspect("ev-probe").nodes[0].maxmemory_policy == "noeviction"; }));
  auto healed = c.acquire("ev-re-3", fenced());
  ASSERT_TRUE(healed) << healed.report.message();
  EXPECT_NE(healed.report.nodes[0].status, node_status::excluded);
  EXPECT_EQ(log.count_for(cl[0].uri()), 2u);
}

// Persistent nodes run with the restart guard off: the policy is still read (the
// clock-jump guard's handshake). Both guards off: the handshake is PING alone.
TEST(EvictionPolicy, read_with_the_restart_guard_off_not_with_both_guards_off) {
  redis_cluster cl(3);
  set_policy(cl[0], "allkeys-lru");
  auto o = options_for(cl.uris());
  o.restart_quarantine = 0ms;
  warning_log log;
  log.install(o);
  {
    client c(o);
    ASSERT_TRUE(wait_connected(c));
    EXPECT_EQ(log.count_for(cl[0].uri()), 1u);
    EXPECT_EQ(c.inspect("ev-off").nodes[0].maxmemory_policy, "allkeys-lru");
  }
  o.clock_jump_threshold = 0ms;
  const long long info_calls = cl[0].calls("info");
  client bare(o);
  ASSERT_TRUE(wait_connected(bare));
  EXPECT_EQ(bare.inspect("ev-off").nodes[0].maxmemory_policy, "");
  EXPECT_EQ(log.count_for(cl[0].uri()), 1u);
  EXPECT_EQ(cl[0].calls("info"), info_calls + 1);  // + 1: the first calls() query itself
}

// INFO not permitted: the policy is unknown; no warning, no exclusion, the lock
// works as before.
TEST(EvictionPolicy, info_refused_leaves_the_policy_unknown_and_the_lock_working) {
  node_config cfg;
  cfg.acl_users = {"user noinfo on >pw ~* +@all -info"};
  redis_cluster cl(3, cfg);
  for (std::size_t i = 0; i < cl.size(); ++i) set_policy(cl[i], "allkeys-lru");
  warning_log log;
  auto o = options_for(uris_as(cl, "noinfo", "pw"));
  log.install(o);
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  auto r = c.acquire("ev-noinfo", fenced());
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_EQ(r.report.count(node_status::excluded), 0);  // all counted (one may be pending)
  EXPECT_TRUE(log.snapshot().empty());
  EXPECT_EQ(c.inspect("ev-noinfo").nodes[0].maxmemory_policy, "");
}

// Why the warning exists: with volatile-ttl and a small maxmemory, a held lock is
// evicted under memory pressure, and a second client acquires it while the first
// one's validity still runs. Deterministic: the lock key is the only key with a
// TTL, so it is the only key volatile-ttl can evict; the filler keys (no TTL) are
// written until the server refuses one with OOM, which it does only once nothing
// is left to evict.
TEST(EvictionPolicy, volatile_ttl_evicts_a_held_lock_under_memory_pressure) {
  node_config cfg;
  cfg.extra_args = {"--maxmemory-policy volatile-ttl", "--maxmemory 3mb"};
  redis_node n(cfg);
  auto o = options_for({n.uri()});
  client a(o);
  client b(o);
  auto held = a.acquire("ev-evicted", once(60000ms));
  ASSERT_TRUE(held) << held.report.message();
  ASSERT_TRUE(n.exists("ev-evicted"));

  const std::string filler(100 * 1024, 'x');
  bool oom = false;
  for (int i = 0; i < 200 && !oom; ++i) {  // 3 MB is reached after ~25 writes
    const std::string reply = n.command({"SET", "filler:" + std::to_string(i), filler});
    oom = contains(reply, "OOM");
  }
  ASSERT_TRUE(oom) << "the server never ran out of memory";
  EXPECT_FALSE(n.exists("ev-evicted"));
  EXPECT_TRUE(contains(n.command({"INFO", "stats"}), "evicted_keys:1\r\n"));

  // Make room for the second lock (its key has a TTL: it could be evicted too).
  n.command({"DEL", "filler:0", "filler:1", "filler:2"});
  ASSERT_TRUE(held.lock.owns_lock());  // a still believes it holds the lock
  auto second = b.acquire("ev-evicted", once(60000ms));
  EXPECT_TRUE(second) << second.report.message();  // two holders at once
  EXPECT_TRUE(held.lock.owns_lock());
}

// ---------------------------------------------------------------- credentials provider

// A secret the test rotates; the provider reads it on the loop thread.
struct rotating_secret {
  std::mutex mu;
  std::string password;
  std::map<std::string, int> calls;  // per node
  credentials get(const std::string& node) {
    std::lock_guard<std::mutex> g(mu);
    ++calls[node];
    return credentials{"app", password};
  }
  void set(std::string p) {
    std::lock_guard<std::mutex> g(mu);
    password = std::move(p);
  }
  int total() {
    std::lock_guard<std::mutex> g(mu);
    int t = 0;
    for (const auto& kv : calls) t += kv.second;
    return t;
  }
};

TEST(CredentialsProvider, a_rotated_password_keeps_the_client_working) {
  node_config cfg;
  cfg.acl_users = {"user app on >first-pw ~* +@all"};
  redis_cluster cl(3, cfg);
  rotating_secret secret;
  secret.set("first-pw");
  // The URI's credentials are stale: the provider's replace them.
  auto o = options_for(uris_as(cl, "app", "stale-pw"));
  o.credentials_provider = [&secret](const std::string& node) { return secret.get(node); };
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  ASSERT_TRUE(c.acquire("cp-1", once()));
  // Once per connect attempt, with the redacted URI.
  EXPECT_EQ(secret.total(), 3);
  for (const auto& name : c.node_names()) {
    std::lock_guard<std::mutex> g(secret.mu);
    EXPECT_EQ(secret.calls[name], 1) << name;
    EXPECT_FALSE(contains(name, "stale-pw")) << name;
  }

  // Rotation: the new password on the servers (existing connections stay
  // authenticated), the provider's cache refreshed, then every connection cut.
  for (std::size_t i = 0; i < cl.size(); ++i) {
    ASSERT_EQ(cl[i].command({"ACL", "SETUSER", "app", "resetpass", ">second-pw"}), "OK");
  }
  secret.set("second-pw");
  const auto reconnects = c.stats().reconnects;
  for (std::size_t i = 0; i < cl.size(); ++i) kill_clients(cl[i]);
  ASSERT_TRUE(eventually([&] { return c.stats().reconnects >= reconnects + 3; }));
  ASSERT_TRUE(wait_connected(c));
  auto r = c.acquire("cp-2", once());
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_EQ(r.report.count(node_status::excluded), 0);  // all counted (one may be pending)
  // Every attempt succeeded, so one call per connection established.
  EXPECT_EQ(secret.total(), static_cast<int>(3 + c.stats().reconnects));

  // A node restart (a new process) also takes the current password.
  cl[0].restart(false);  // comes back with the config's first-pw
  ASSERT_EQ(cl[0].command({"ACL", "SETUSER", "app", "resetpass", ">second-pw"}), "OK");
  ASSERT_TRUE(wait_connected(c));
}

TEST(CredentialsProvider, a_wrong_password_is_auth_failed_and_not_shown) {
  node_config cfg;
  cfg.acl_users = {"user app on >right-pw ~* +@all"};
  redis_cluster cl(3, cfg);
  auto o = options_for(uris_as(cl, "app", "right-pw"));
  o.credentials_provider = [](const std::string&) { return credentials{"app", "wrong-pw-1234"}; };
  client c(o);
  auto r = c.acquire("cp-wrong", once());
  EXPECT_EQ(r.report.error, errc::auth_failed) << r.report.message();
  // Decided as soon as the refusals rule out a quorum: two or three of them.
  EXPECT_GE(r.report.count(node_status::auth_error), 2) << r.report.message();
  EXPECT_EQ(r.report.count(node_status::ok), 0) << r.report.message();
  EXPECT_FALSE(contains(r.report.message(), "wrong-pw-1234")) << r.report.message();
  EXPECT_FALSE(contains(r.report.message(), "right-pw")) << r.report.message();
}

TEST(CredentialsProvider, a_throwing_provider_fails_the_attempt_without_a_crash) {
  redis_cluster cl(3);
  std::atomic<int> calls{0};
  auto o = options_for(cl.uris());
  o.credentials_provider = [&calls](const std::string&) -> credentials {
    ++calls;
    throw std::runtime_error("vault down, token hvs.SECRET-TOKEN");
  };
  client c(o);
  auto r = c.acquire("cp-throw", once());
  EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
  // Decided once two failures rule out a quorum: the third may still be pending.
  EXPECT_GE(r.report.count(node_status::connection_error), 2) << r.report.message();
  for (const node_result& n : r.report.nodes) {
    if (n.status != node_status::connection_error) continue;
    EXPECT_TRUE(contains(n.detail, "credentials_provider threw")) << n.detail;
  }
  EXPECT_FALSE(contains(r.report.message(), "SECRET-TOKEN")) << r.report.message();
  // Retried with backoff: called again for later attempts.
  EXPECT_TRUE(eventually([&] { return calls.load() > 3; }));
}

TEST(CredentialsProvider, an_empty_password_sends_no_auth) {
  redis_cluster cl(3);  // no password
  auto o = options_for(uris_as(cl, "nobody", "unused"));
  o.credentials_provider = [](const std::string&) { return credentials{}; };
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  EXPECT_TRUE(c.acquire("cp-noauth", once()));
}

// ---------------------------------------------------------------- the minimal ACL

// The ACL of docs/operations.md and docs/redis-lock-node.conf, exactly. Every key
// of a client with key_prefix "locks:" matches ~locks:*: the lock keys
// "locks:<resource>" and the fence counters "locks:<resource>:fence".
const std::vector<std::string> kMinimalCommands = {"set",     "get",  "del",  "pexpire", "pttl",
                                                   "type",    "time", "info", "ping",    "eval",
                                                   "evalsha", "select"};

std::string acl_line(const std::string& user, const std::string& without = "") {
  std::string line = "user " + user + " on >pw ~locks:* -@all";
  for (const auto& cmd : kMinimalCommands) {
    if (cmd != without) line += " +" + cmd;
  }
  return line;
}

// The nodes' URIs as `user`, on db 1 (so SELECT is part of the handshake).
std::vector<std::string> db1_uris(redis_cluster& cl, const std::string& user) {
  std::vector<std::string> uris = uris_as(cl, user, "pw");
  for (auto& u : uris) u += "/1";
  return uris;
}

client_options acl_options(redis_cluster& cl, const std::string& user) {
  auto o = options_for(db1_uris(cl, user));
  o.key_prefix = "locks:";
  o.max_ttl = 10000ms;  // the guards on (their defaults), quarantine 10 s
  return o;
}

TEST(MinimalAcl, every_operation_works_with_exactly_the_documented_acl) {
  node_config cfg;
  cfg.acl_users = {acl_line("redlock")};
  redis_cluster cl(3, cfg);
  auto o = acl_options(cl, "redlock");
  ASSERT_GT(o.restart_quarantine.count(), -2);
  ASSERT_GT(o.clock_jump_threshold.count(), 0);
  client c(o);
  ASSERT_TRUE(wait_connected(c));

  // Plain acquire, inspect, extend, release.
  auto r = c.acquire("res", once(5000ms));
  ASSERT_TRUE(r) << r.report.message();
  const inspect_result ir = c.inspect("res");
  ASSERT_TRUE(ir.report) << ir.report.message();
  EXPECT_EQ(ir.holder, r.lock.info().token);
  EXPECT_EQ(ir.nodes[0].maxmemory_policy, "noeviction");  // INFO permitted: the guards see
  auto ext = r.lock.extend(8000ms);
  ASSERT_TRUE(ext) << ext.message();
  auto rel = r.lock.release();
  ASSERT_TRUE(rel) << rel.message();
  // Again: the scripts now go as EVALSHA.
  auto again = c.acquire("res", once(5000ms));
  ASSERT_TRUE(again) << again.report.message();
  ASSERT_TRUE(again.lock.extend(5000ms));
  ASSERT_TRUE(again.lock.release());

  // Fenced, twice (the second reads the counter the first committed).
  auto f1 = c.acquire("fres", [] {
    acquire_options a = once(5000ms);
    a.fencing = true;
    return a;
  }());
  ASSERT_TRUE(f1) << f1.report.message();
  ASSERT_TRUE(f1.lock.release());
  auto f2 = c.acquire("fres", [] {
    acquire_options a = once(5000ms);
    a.fencing = true;
    return a;
  }());
  ASSERT_TRUE(f2) << f2.report.message();
  EXPECT_EQ(*f2.lock.fence(), 2u);
  ASSERT_TRUE(f2.lock.release());

  // The watchdog: a 600 ms lock kept for 1.5 s.
  acquire_options w = once(600ms);
  w.auto_extend = true;
  auto wd = c.acquire("wres", w);
  ASSERT_TRUE(wd) << wd.report.message();
  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE(wd.lock.owns_lock());
  EXPECT_FALSE(wd.lock.lost());
  ASSERT_TRUE(wd.lock.release());

  // Reconnect with the guards on: AUTH, SELECT, PING, INFO server, INFO memory, TIME.
  const auto reconnects = c.stats().reconnects;
  const long long time_calls = cl[0].calls("time");
  for (std::size_t i = 0; i < cl.size(); ++i) kill_clients(cl[i]);
  ASSERT_TRUE(eventually([&] { return c.stats().reconnects >= reconnects + 3; }));
  auto after = c.acquire("res", once(5000ms));
  ASSERT_TRUE(after) << after.report.message();
  EXPECT_EQ(after.report.count(node_status::excluded), 0);  // same run_ids: no quarantine
  ASSERT_TRUE(after.lock.release());
  EXPECT_GT(cl[0].calls("time"), time_calls);  // TIME permitted: the clock guard samples
  EXPECT_GT(cl[0].calls("info"), 0);
}

// Each command of the ACL, taken away: what stops working. INFO and TIME are not
// needed by any operation, but without them the guards are blind (the restart
// guard, the duplicate-server check and the eviction check need INFO; the
// clock-jump guard needs TIME). Without EVALSHA the scripts go as EVAL, bodies
// included: it costs bytes, nothing breaks.
TEST(MinimalAcl, removing_any_one_command_breaks_something) {
  node_config cfg;
  for (const auto& cmd : kMinimalCommands) cfg.acl_users.push_back(acl_line("no-" + cmd, cmd));
  redis_cluster cl(3, cfg);

  enum class breaks { acquire, fenced_acquire, extend, release, inspect, bodies_always, info_blind, time_blind };
  struct row {
    std::string cmd;
    breaks what;
  };
  const std::vector<row> table = {
      {"set", breaks::acquire},         {"get", breaks::release},
      {"del", breaks::release},         {"pexpire", breaks::extend},
      {"pttl", breaks::inspect},        {"type", breaks::inspect},
      {"ping", breaks::acquire},        {"select", breaks::acquire},
      {"eval", breaks::acquire},        {"evalsha", breaks::bodies_always},
      {"info", breaks::info_blind},     {"time", breaks::time_blind},
  };
  ASSERT_EQ(table.size(), kMinimalCommands.size());
  for (const row& t : table) {
    SCOPED_TRACE("without +" + t.cmd);
    auto o = acl_options(cl, "no-" + t.cmd);
    client c(o);
    const std::string res = "r-" + t.cmd;
    // "eval": the plain SET acquire needs no script; the fenced one does.
    acquire_options a = once(5000ms);
    a.fencing = t.cmd == "eval";
    auto r = c.acquire(res, a);
    if (t.what == breaks::acquire) {
      EXPECT_EQ(r.report.error, errc::permission_denied) << r.report.message();
      continue;
    }
    ASSERT_TRUE(r) << r.report.message();
    switch (t.what) {
      case breaks::extend: {
        auto e = r.lock.extend(5000ms);
        EXPECT_EQ(e.error, errc::permission_denied) << e.message();
        break;
      }
      case breaks::release: {
        auto e = r.lock.release();
        EXPECT_EQ(e.error, errc::permission_denied) << e.message();
        break;
      }
      case breaks::inspect: {
        auto e = c.inspect(res);
        EXPECT_EQ(e.report.error, errc::permission_denied) << e.report.message();
        break;
      }
      case breaks::bodies_always: {
        // Node 0's part of a call may land after the call returned (a quorum answered
        // first, CI on a busy machine): its EVALs are counted once both releases are
        // in. Nothing before the first release ran a script there (plain SET acquires).
        const long long evals = cl[0].calls("eval");
        ASSERT_TRUE(r.lock.release());  // EVAL: the script's first use on the connection
        auto r2 = c.acquire(res, once(5000ms));
        ASSERT_TRUE(r2) << r2.report.message();
        auto e = r2.lock.release();  // EVALSHA refused, sent again as EVAL
        EXPECT_TRUE(e) << e.message();
        EXPECT_TRUE(eventually([&] { return cl[0].calls("eval") >= evals + 2; }, 5000ms));
        EXPECT_EQ(cl[0].calls("eval"), evals + 2) << "the second release did not go as EVAL";
        auto r3 = c.acquire(res + "-3", once(5000ms));
        EXPECT_TRUE(r3) << "a node whose ACL runs EVAL kept its acquire vote: " << r3.report.message();
        if (r3) {
          EXPECT_TRUE(r3.lock.release());
        }
        break;
      }
      case breaks::info_blind: {
        EXPECT_EQ(c.inspect(res).nodes[0].maxmemory_policy, "");
        break;
      }
      case breaks::time_blind: {
        const long long before = cl[0].calls("time");
        auto r2 = c.acquire(res + "-2", once(5000ms));
        ASSERT_TRUE(r2) << r2.report.message();
        EXPECT_EQ(cl[0].calls("time"), before);  // refused: never ran, no sample
        break;
      }
      default:
        break;
    }
  }
}

// ---------------------------------------------------------------- the node configuration fragment

TEST(LockNodeConf, the_fragment_parses_and_its_acl_user_can_lock) {
  node_config cfg;
  cfg.extra_args = {"--include", std::string(REDLOCK_SOURCE_DIR) + "/docs/redis-lock-node.conf"};
  redis_node n(cfg);
  EXPECT_EQ(n.command({"CONFIG", "GET", "maxmemory-policy"}), "[maxmemory-policy, noeviction]");
  EXPECT_EQ(n.command({"CONFIG", "GET", "appendonly"}), "[appendonly, yes]");
  EXPECT_EQ(n.command({"CONFIG", "GET", "appendfsync"}), "[appendfsync, always]");
  EXPECT_EQ(n.command({"CONFIG", "GET", "protected-mode"}), "[protected-mode, yes]");
  // The user ships disabled, without a password: enabling it is the operator's step.
  ASSERT_EQ(n.command({"ACL", "SETUSER", "redlock", "on", ">pw"}), "OK");
  auto o = options_for({"redis://redlock:pw@127.0.0.1:" + std::to_string(n.port()) + "/1"});
  o.key_prefix = "locks:";
  client c(o);
  acquire_options a = once();
  a.fencing = true;
  auto r = c.acquire("conf", a);
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_TRUE(r.lock.release());
}

}  // namespace
}  // namespace redlock::test

// === An eviction policy changed between connects (review 11 of the eviction check, 6496edc..6cb9606)
namespace redlock::test {
namespace policy_change {  // the section's helpers stay apart from the file's
namespace {

std::string unique(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(++n) + "-" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

// Guarantee (safety.md, eviction check): fenced acquires give no vote to a node
// whose maxmemory-policy may evict fence counters, read in every handshake.
// Attack: the nodes are noeviction when the client connects; a majority is
// switched to allkeys-lru by CONFIG SET and their connections are cut; the fenced
// acquire is made at once, while the client may still be reconnecting (its check
// before send sees the policy cleared by on_link_up as "unknown"). The grants must
// still be judged at their replies with the new policy: no fenced lock.
TEST(EvictionPolicyChange, a_policy_changed_between_connects_excludes_the_node_from_fenced_acquires) {
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
}  // namespace policy_change
}  // namespace redlock::test
