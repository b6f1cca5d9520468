// sim::node on its own: what a real server cannot show quickly (restarts, error
// injection, how requests split across feed() calls) and its speed. What it
// shares with Redis is pinned against a real server by sim_node_diff_test.cc.
#include "sim_node.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "redlock/fencing.h"
#include "protocol/scripts.h"
#include "pure/slot.h"

namespace redlock::sim {
namespace {

constexpr std::int64_t kT0 = 1'700'000'000'000'000;  // us since the epoch

std::string resp(std::initializer_list<std::string_view> argv) {
  std::string out = "*" + std::to_string(argv.size()) + "\r\n";
  for (std::string_view a : argv) {
    out += "$" + std::to_string(a.size()) + "\r\n";
    out += a;
    out += "\r\n";
  }
  return out;
}

std::string run(node& n, node::session& s, std::vector<std::string> argv, std::int64_t now = kT0) {
  return n.execute(s, argv, now);
}

TEST(SimNode, every_library_and_fencing_script_is_supported) {
  node n({}, 1, kT0);
  auto s = n.open_session();
  const char* bodies[] = {detail::kAcquire,    detail::kAcquireFenced, detail::kFenceCommit,
                          detail::kExtend,     detail::kRelease,       detail::kInspect,
                          fenced_write_script, fenced_read_script,     fenced_compare_and_set_script};
  for (const char* body : bodies) {
    const std::string r = run(n, *s, {"SCRIPT", "LOAD", body});
    ASSERT_EQ(r.rfind("$40\r\n", 0), 0u)
        << "the simulator refuses a script: its twin in sim_node.cc is stale\n"
        << body << "\n-> " << r;
  }
  EXPECT_EQ(run(n, *s, {"EVAL", "return 1", "0"}).rfind("-ERR redlock::sim does not support this script", 0),
            0u);
}

TEST(SimNode, the_library_acquire_cycle) {
  node n({}, 1, kT0);
  auto s = n.open_session();
  EXPECT_EQ(run(n, *s, {"SET", "lk", "tok", "NX", "PX", "1000", "GET"}), "$-1\r\n");
  EXPECT_EQ(run(n, *s, {"SET", "lk", "other", "NX", "PX", "1000", "GET"}), "$3\r\ntok\r\n");
  EXPECT_EQ(run(n, *s, {"EVAL", detail::kExtend, "1", "lk", "tok", "5000"}), ":1\r\n");
  EXPECT_EQ(n.pttl("lk", kT0), 5000);
  EXPECT_EQ(run(n, *s, {"EVAL", detail::kInspect, "1", "lk"}), "*2\r\n$3\r\ntok\r\n:5000\r\n");
  EXPECT_EQ(run(n, *s, {"EVAL", detail::kRelease, "1", "lk", "other"}), ":0\r\n");
  EXPECT_EQ(run(n, *s, {"EVAL", detail::kRelease, "1", "lk", "tok"}), ":1\r\n");
  EXPECT_FALSE(n.get("lk", kT0));
}

TEST(SimNode, a_key_lives_through_its_expiry_millisecond_and_is_gone_after) {
  node n({}, 1, kT0);
  auto s = n.open_session();
  ASSERT_EQ(run(n, *s, {"SET", "k", "v", "PX", "10"}), "+OK\r\n");
  EXPECT_EQ(run(n, *s, {"PTTL", "k"}, kT0 + 9'999), ":1\r\n");
  EXPECT_EQ(run(n, *s, {"PTTL", "k"}, kT0 + 10'999), ":0\r\n");  // now_ms == when: alive
  EXPECT_EQ(n.pttl("k", kT0 + 11'000), -2);
  EXPECT_EQ(run(n, *s, {"DBSIZE"}, kT0 + 11'000), ":1\r\n");  // lazy: not touched yet
  EXPECT_EQ(run(n, *s, {"GET", "k"}, kT0 + 11'000), "$-1\r\n");
  EXPECT_EQ(run(n, *s, {"DBSIZE"}, kT0 + 11'000), ":0\r\n");
  n.set("a", "1", 5, kT0);
  n.set("b", "2", std::nullopt, kT0);
  EXPECT_EQ(n.keys(kT0 + 6'000), std::vector<std::string>{"b"});
  n.expire_all(kT0 + 6'000);
  EXPECT_EQ(run(n, *s, {"DBSIZE"}, kT0 + 6'000), ":1\r\n");
}

TEST(SimNode, restart_without_persistence_loses_keys_scripts_and_sessions) {
  node n({}, 7, kT0);
  auto s = n.open_session();
  ASSERT_EQ(run(n, *s, {"SET", "k", "v"}), "+OK\r\n");
  ASSERT_EQ(run(n, *s, {"SCRIPT", "LOAD", detail::kRelease}).size(), 47u);
  const std::string old_id = n.run_id();
  EXPECT_EQ(old_id.size(), 40u);
  n.restart(kT0 + 5'000'000);
  EXPECT_NE(n.run_id(), old_id);
  EXPECT_FALSE(s->alive());
  std::string out;
  EXPECT_FALSE(n.feed(*s, resp({"PING"}), kT0 + 5'000'000, out));
  EXPECT_EQ(out, "");
  EXPECT_EQ(n.execute(*s, {"PING"}, kT0), "");
  auto s2 = n.open_session();
  EXPECT_EQ(run(n, *s2, {"GET", "k"}, kT0 + 5'000'000), "$-1\r\n");
  const std::string sha = n.execute(*s2, {"SCRIPT", "LOAD", detail::kRelease}, kT0).substr(5, 40);
  n.flush_scripts();
  EXPECT_EQ(run(n, *s2, {"EVALSHA", sha, "1", "k", "t"}),
            "-NOSCRIPT No matching script. Please use EVAL.\r\n");
  const std::string info = run(n, *s2, {"INFO", "server"}, kT0 + 8'500'000);
  EXPECT_NE(info.find("\r\nrun_id:" + n.run_id() + "\r\n"), std::string::npos);
  EXPECT_NE(info.find("\r\nuptime_in_seconds:3\r\n"), std::string::npos) << info;
  // The same seed gives the same run_ids.
  node twin({}, 7, kT0);
  EXPECT_EQ(twin.run_id(), old_id);
  twin.restart(kT0);
  EXPECT_EQ(twin.run_id(), n.run_id());
}

TEST(SimNode, restart_with_aof_always_keeps_keys_and_their_expiry) {
  node n({persistence::aof_always, "", "", 6379}, 1, kT0);
  auto s = n.open_session();
  ASSERT_EQ(run(n, *s, {"SET", "k", "v", "PX", "10000"}), "+OK\r\n");
  ASSERT_EQ(run(n, *s, {"SELECT", "3"}), "+OK\r\n");
  ASSERT_EQ(run(n, *s, {"SET", "k3", "v3"}), "+OK\r\n");
  ASSERT_EQ(run(n, *s, {"SCRIPT", "LOAD", detail::kRelease}).size(), 47u);
  n.restart(kT0 + 4'000'000);
  auto s2 = n.open_session();
  EXPECT_EQ(s2->db(), 0);
  EXPECT_EQ(run(n, *s2, {"PTTL", "k"}, kT0 + 4'000'000), ":6000\r\n");
  EXPECT_EQ(n.get("k3", kT0, 3), "v3");
  EXPECT_EQ(run(n, *s2, {"SCRIPT", "EXISTS", "4b54351cbac3734d94de56a92bcd5cef0b956183"}), "*1\r\n:0\r\n");
}

TEST(SimNode, a_persistent_node_answers_loading_for_its_loading_time_after_a_restart) {
  node_config cfg;
  cfg.persist = persistence::aof_always;
  cfg.password = "pw";
  cfg.loading_us = 2'000'000;
  node n(cfg, 1, kT0);
  auto s = n.open_session();
  ASSERT_EQ(run(n, *s, {"AUTH", "pw"}), "+OK\r\n");
  EXPECT_FALSE(n.loading(kT0));
  EXPECT_EQ(run(n, *s, {"PING"}), "+PONG\r\n") << "no loading before the first restart";
  ASSERT_EQ(run(n, *s, {"SET", "k", "v"}), "+OK\r\n");
  const std::int64_t t = kT0 + 1'000'000;
  n.restart(t);
  EXPECT_TRUE(n.loading(t));
  const std::string loading = "-LOADING Redis is loading the dataset in memory\r\n";
  auto s2 = n.open_session();
  // Authentication first, as processCommand checks it before loading.
  EXPECT_EQ(run(n, *s2, {"PING"}, t), "-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(run(n, *s2, {"AUTH", "pw"}, t), "+OK\r\n");
  // Unknown commands and arity errors come before it too.
  EXPECT_EQ(run(n, *s2, {"GET"}, t), "-ERR wrong number of arguments for 'get' command\r\n");
  for (const std::vector<std::string>& argv :
       std::vector<std::vector<std::string>>{{"PING"},
                                             {"GET", "k"},
                                             {"SET", "k", "w"},
                                             {"DEL", "k"},
                                             {"DBSIZE"},
                                             {"EVAL", "return 1", "0"},
                                             {"EVALSHA", "4b54351cbac3734d94de56a92bcd5cef0b956183", "0"},
                                             {"SCRIPT", "LOAD", detail::kRelease}}) {
    EXPECT_EQ(run(n, *s2, argv, t + 1'999'999), loading) << argv[0];
  }
  // The commands with Redis' "loading" flag run.
  EXPECT_EQ(run(n, *s2, {"SELECT", "0"}, t), "+OK\r\n");
  EXPECT_EQ(run(n, *s2, {"TIME"}, t).rfind("*2\r\n", 0), 0u);
  EXPECT_EQ(run(n, *s2, {"ECHO", "x"}, t), "$1\r\nx\r\n");
  EXPECT_EQ(run(n, *s2, {"INFO", "server"}, t).rfind("$", 0), 0u);
  // Loading ends at its time; the data is there and nothing was changed meanwhile.
  EXPECT_FALSE(n.loading(t + 2'000'000));
  EXPECT_EQ(run(n, *s2, {"GET", "k"}, t + 2'000'000), "$1\r\nv\r\n");
  EXPECT_EQ(run(n, *s2, {"PING"}, t + 2'000'000), "+PONG\r\n");
  // A node that loses its data on restart has nothing to load.
  cfg.persist = persistence::none;
  node empty(cfg, 1, kT0);
  empty.restart(t);
  EXPECT_FALSE(empty.loading(t));
}

TEST(SimNode, auth_gates_every_command_but_auth) {
  node n({persistence::none, "pw", "", 6379}, 1, kT0);
  auto s = n.open_session();
  EXPECT_FALSE(s->authenticated());
  EXPECT_EQ(run(n, *s, {"PING"}), "-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(run(n, *s, {"AUTH", "bad"}),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_EQ(run(n, *s, {"AUTH", "pw"}), "+OK\r\n");
  EXPECT_EQ(run(n, *s, {"PING"}), "+PONG\r\n");
  node acl({persistence::none, "secret", "alice", 6379}, 1, kT0);
  auto a = acl.open_session();
  EXPECT_EQ(run(acl, *a, {"AUTH", "secret"}),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_EQ(run(acl, *a, {"AUTH", "alice", "secret"}), "+OK\r\n");
  EXPECT_TRUE(a->authenticated());
}

TEST(SimNode, injected_errors_replace_the_reply_after_the_usual_checks) {
  node n({}, 1, kT0);
  auto s = n.open_session();
  n.inject_error("EVALSHA", "-NOPERM this user has no permissions to run the 'evalsha' command");
  EXPECT_EQ(run(n, *s, {"EVALSHA", "x", "0"}),
            "-NOPERM this user has no permissions to run the 'evalsha' command\r\n");
  EXPECT_EQ(run(n, *s, {"EVALSHA", "x"}), "-ERR wrong number of arguments for 'evalsha' command\r\n");
  EXPECT_EQ(run(n, *s, {"PING"}), "+PONG\r\n");
  n.inject_error("", "READONLY You can't write against a read only replica.");
  EXPECT_EQ(run(n, *s, {"SET", "k", "v"}), "-READONLY You can't write against a read only replica.\r\n");
  EXPECT_EQ(run(n, *s, {"EVALSHA", "x", "0"}).substr(0, 7), "-NOPERM");  // specific wins
  EXPECT_EQ(run(n, *s, {"script", "flush"}), "-READONLY You can't write against a read only replica.\r\n");
  EXPECT_EQ(run(n, *s, {"NOSUCH"}), "-ERR unknown command 'NOSUCH', with args beginning with: \r\n");
  EXPECT_EQ(n.calls("set"), 0u);
  n.inject_error("", "");
  n.inject_error("evalsha", "");
  EXPECT_EQ(run(n, *s, {"SET", "k", "v"}), "+OK\r\n");
  EXPECT_EQ(run(n, *s, {"EVALSHA", "x", "0"}), "-NOSCRIPT No matching script. Please use EVAL.\r\n");
  EXPECT_EQ(n.calls("SET"), 1u);
}

TEST(SimNode, calls_count_commands_scripts_make) {
  node n({}, 1, kT0);
  auto s = n.open_session();
  run(n, *s, {"EVAL", detail::kAcquire, "1", "k", "t", "100"});
  run(n, *s, {"EVAL", detail::kAcquire, "1", "k", "t", "100"});
  EXPECT_EQ(n.calls("eval"), 2u);
  EXPECT_EQ(n.calls("set"), 2u);
  EXPECT_EQ(n.calls("type"), 1u);
  run(n, *s, {"SCRIPT", "FLUSH"});
  EXPECT_EQ(n.calls("script|flush"), 1u);
}

// A pipeline of requests, cut at every byte position into two feed() calls (and
// fed a byte at a time): the same replies as in one piece.
TEST(SimNode, requests_split_anywhere_across_feeds_give_the_same_replies) {
  const std::string pipeline = resp({"SET", "k", "v", "PX", "100"}) + resp({"GET", "k"}) + "PING\r\n" +
                               resp({"EVAL", detail::kInspect, "1", "k"}) + "\r\n" +
                               resp({"ECHO", "x\r\ny"}) + "*0\r\n" + "ECHO \"a b\\x41\"\n" + "ECHO 'c'\r\n" +
                               resp({"DEL", "k"});
  std::string whole;
  {
    node n({}, 1, kT0);
    auto s = n.open_session();
    ASSERT_TRUE(n.feed(*s, pipeline, kT0, whole));
  }
  ASSERT_EQ(
      whole,
      "+OK\r\n$1\r\nv\r\n+PONG\r\n*2\r\n$1\r\nv\r\n:100\r\n$4\r\nx\r\ny\r\n$4\r\na bA\r\n$1\r\nc\r\n:1\r\n")
      << whole;
  for (std::size_t cut = 0; cut <= pipeline.size(); ++cut) {
    node n({}, 1, kT0);
    auto s = n.open_session();
    std::string out;
    ASSERT_TRUE(n.feed(*s, pipeline.substr(0, cut), kT0, out));
    ASSERT_TRUE(n.feed(*s, pipeline.substr(cut), kT0, out));
    ASSERT_EQ(out, whole) << "cut at " << cut;
  }
  node n({}, 1, kT0);
  auto s = n.open_session();
  std::string out;
  for (char c : pipeline) ASSERT_TRUE(n.feed(*s, &c, 1, kT0, out));
  EXPECT_EQ(out, whole);
}

TEST(SimNode, a_protocol_error_ends_the_session_after_the_replies_before_it) {
  node n({}, 1, kT0);
  auto s = n.open_session();
  std::string out;
  EXPECT_FALSE(n.feed(*s, resp({"PING"}) + "*1\r\n$x\r\n" + resp({"PING"}), kT0, out));
  EXPECT_EQ(out, "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n");
  EXPECT_FALSE(s->alive());
  out.clear();
  EXPECT_FALSE(n.feed(*s, resp({"PING"}), kT0, out));
  EXPECT_EQ(out, "");
  auto s2 = n.open_session();
  EXPECT_FALSE(n.feed(*s2, "*1\r\n$4\r\nPING\r\n*2\r\n:1\r\n", kT0, out));
  EXPECT_EQ(out, "+PONG\r\n-ERR Protocol error: expected '$', got ':'\r\n");
  // Before AUTH, Redis refuses long requests at once.
  node locked({persistence::none, "pw", "", 6379}, 1, kT0);
  auto s3 = locked.open_session();
  out.clear();
  EXPECT_FALSE(locked.feed(*s3, "*11\r\n", kT0, out));
  EXPECT_EQ(out, "-ERR Protocol error: unauthenticated multibulk length\r\n");
}

TEST(SimNode, a_session_of_another_node_is_refused) {
  node a({}, 1, kT0);
  node b({}, 2, kT0);
  auto s = a.open_session();
  std::string out;
  EXPECT_FALSE(b.feed(*s, resp({"PING"}), kT0, out));
  EXPECT_TRUE(a.feed(*s, resp({"PING"}), kT0, out));
  EXPECT_EQ(out, "+PONG\r\n");
}

// Not an assertion (machines differ): the rate, for the record.
TEST(SimNode, feed_rate) {
  node n({}, 1, kT0);
  auto s = n.open_session();
  std::string batch;
  const int kPerBatch = 100;
  for (int i = 0; i < kPerBatch / 4; ++i) {
    const std::string key = "lock:resource:" + std::to_string(i % 7);
    batch += resp({"SET", key, "0123456789abcdef0123456789abcdef", "NX", "PX", "30000", "GET"});
    batch += resp({"TIME"});
    batch += resp({"EVALSHA", "3a32323a05c08607e6bc7842cfeea9552d0b61f5", "1", key,
                   "0123456789abcdef0123456789abcdef", "30000"});
    batch += resp({"EVAL", detail::kRelease, "1", key, "0123456789abcdef0123456789abcdef"});
  }
  std::string out;
  ASSERT_EQ(n.execute(*s, {"SCRIPT", "LOAD", detail::kExtend}, kT0).size(), 47u);  // the EVALSHAs hit
  std::size_t commands = 0;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = std::chrono::steady_clock::duration::zero();
  for (int round = 0; round < 20000 && elapsed < std::chrono::seconds(1); ++round) {
    out.clear();
    ASSERT_TRUE(n.feed(*s, batch, kT0 + round, out));
    commands += kPerBatch;
    elapsed = std::chrono::steady_clock::now() - start;
  }
  const double seconds = std::chrono::duration<double>(elapsed).count();
  std::printf("sim::node::feed: %zu commands in %.3f s = %.0f commands/s\n", commands, seconds,
              static_cast<double>(commands) / seconds);
  EXPECT_GT(commands, 0u);
}

// --- cluster mode (issue 23) ---

// Two shards: 0-8191 on node "a" (replica "b"), 8192-16383 on "c" (replica "d").
std::vector<cluster_shard> two_shards() {
  cluster_shard low{{{0, 8191}}, {{"a", "node0", 6379, true, false}, {"b", "node1", 6379, false, false}}};
  cluster_shard high{{{8192, 16383}}, {{"c", "node2", 6379, true, false}, {"d", "node3", 6379, false, false}}};
  return {low, high};
}

// A key whose slot is in [lo, hi].
std::string key_in(int lo, int hi) {
  for (int i = 0;; ++i) {
    std::string k = "k" + std::to_string(i);
    const int slot = detail::key_slot(k);
    if (slot >= lo && slot <= hi) return k;
  }
}

TEST(SimNodeCluster, a_master_serves_its_slots_and_redirects_the_others) {
  node n({}, 1, kT0);
  n.set_cluster("a", two_shards());
  auto s = n.open_session();
  const std::string mine = key_in(0, 8191), theirs = key_in(8192, 16383);
  EXPECT_EQ(run(n, *s, {"SET", mine, "v"}), "+OK\r\n");
  const std::string moved = "-MOVED " + std::to_string(detail::key_slot(theirs)) + " node2:6379\r\n";
  EXPECT_EQ(run(n, *s, {"SET", theirs, "v"}), moved);
  EXPECT_EQ(run(n, *s, {"GET", theirs}), moved);
  // Scripts by their KEYS, not their arguments.
  EXPECT_EQ(run(n, *s, {"EVAL", detail::kRelease, "1", theirs, mine}), moved);
  EXPECT_EQ(run(n, *s, {"EVAL", detail::kRelease, "1", mine, "other"}), ":0\r\n");
  // Hash tags: {tag}x and {tag}y share a slot; a request across slots is refused.
  const std::string tag = "{" + mine + "}";
  EXPECT_EQ(run(n, *s, {"DEL", tag + "x", tag + "y"}), ":0\r\n");
  EXPECT_EQ(run(n, *s, {"DEL", mine, theirs}), "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
  // Key-less commands run anywhere; the redirect is not counted as a call.
  EXPECT_EQ(run(n, *s, {"PING"}), "+PONG\r\n");
  EXPECT_EQ(n.calls("set"), 1u);
  EXPECT_EQ(run(n, *s, {"CLUSTER", "MYID"}), "$1\r\na\r\n");
  EXPECT_EQ(run(n, *s, {"ASKING"}), "+OK\r\n");
  EXPECT_EQ(run(n, *s, {"CLUSTER", "NOPE"}), "-ERR unknown subcommand 'NOPE'. Try CLUSTER HELP.\r\n");
  // Redirects come after authentication.
  node_config with_password;
  with_password.password = "pw";
  node locked(with_password, 1, kT0);
  locked.set_cluster("a", two_shards());
  auto ls = locked.open_session();
  EXPECT_EQ(run(locked, *ls, {"GET", theirs}), "-NOAUTH Authentication required.\r\n");
}

TEST(SimNodeCluster, a_slot_without_a_master_is_clusterdown) {
  auto shards = two_shards();
  shards[1].members = {{"d", "node3", 6379, false, true}};
  node n({}, 1, kT0);
  n.set_cluster("a", shards);
  auto s = n.open_session();
  EXPECT_EQ(run(n, *s, {"GET", key_in(8192, 16383)}), "-CLUSTERDOWN Hash slot not served\r\n");
}

TEST(SimNodeCluster, cluster_shards_has_redis_7_shape) {
  node n({}, 1, kT0);
  n.set_cluster("b", two_shards());
  auto s = n.open_session();
  auto node_map = [](std::string_view id, std::string_view host, std::string_view role) {
    return "*14\r\n$2\r\nid\r\n$1\r\n" + std::string(id) + "\r\n$4\r\nport\r\n:6379\r\n$2\r\nip\r\n$5\r\n" +
           std::string(host) + "\r\n$8\r\nendpoint\r\n$5\r\n" + std::string(host) + "\r\n$4\r\nrole\r\n$" +
           std::to_string(role.size()) + "\r\n" + std::string(role) +
           "\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n";
  };
  const std::string expected = "*2\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:8191\r\n$5\r\nnodes\r\n*2\r\n" +
                               node_map("a", "node0", "master") + node_map("b", "node1", "replica") +
                               "*4\r\n$5\r\nslots\r\n*2\r\n:8192\r\n:16383\r\n$5\r\nnodes\r\n*2\r\n" +
                               node_map("c", "node2", "master") + node_map("d", "node3", "replica");
  EXPECT_EQ(run(n, *s, {"CLUSTER", "SHARDS"}), expected);
  node plain({}, 1, kT0);
  auto ps = plain.open_session();
  EXPECT_EQ(run(plain, *ps, {"CLUSTER", "SHARDS"}), "-ERR This instance has cluster support disabled\r\n");
  EXPECT_EQ(run(plain, *ps, {"ASKING"}), "-ERR This instance has cluster support disabled\r\n");
}

TEST(SimNodeCluster, a_replica_redirects_every_keyed_command_to_its_master) {
  node n({}, 1, kT0);
  n.set_cluster("b", two_shards());
  n.follow("node0", 6379);
  auto s = n.open_session();
  const std::string mine = key_in(0, 8191);
  EXPECT_EQ(run(n, *s, {"GET", mine}), "-MOVED " + std::to_string(detail::key_slot(mine)) + " node0:6379\r\n");
}

// --- replication ---

TEST(SimNodeReplication, a_replica_refuses_writes_and_script_writes) {
  node n({}, 1, kT0);
  n.follow("node0", 6379);
  auto s = n.open_session();
  EXPECT_EQ(run(n, *s, {"SET", "k", "v"}), "-READONLY You can't write against a read only replica.\r\n");
  EXPECT_EQ(run(n, *s, {"GET", "k"}), "$-1\r\n");
  const std::string r = run(n, *s, {"EVAL", detail::kAcquire, "1", "k", "tok", "1000"});
  EXPECT_EQ(r.rfind("-READONLY You can't write against a read only replica. script: ", 0), 0u) << r;
  EXPECT_EQ(run(n, *s, {"WAIT", "1", "10"}).rfind("-ERR WAIT cannot be used with replica instances.", 0), 0u);
  const std::string info = run(n, *s, {"INFO", "replication"});
  EXPECT_NE(info.find("\r\nrole:slave\r\nmaster_host:node0\r\nmaster_port:6379\r\n"), std::string::npos) << info;
  n.promote();
  EXPECT_EQ(run(n, *s, {"SET", "k", "v"}), "+OK\r\n");
}

TEST(SimNodeReplication, each_change_a_master_makes_reaches_its_replica) {
  node m({}, 1, kT0), r({}, 2, kT0);
  r.follow("node0", 6379);
  auto s = m.open_session();
  EXPECT_EQ(run(m, *s, {"SET", "before", "v"}), "+OK\r\n");
  EXPECT_TRUE(m.take_writes().empty()) << "no replica attached: nothing recorded";
  r.load(m);  // the full sync
  m.attach_replica("r", "node1", 6379);
  EXPECT_EQ(run(m, *s, {"SET", "lk", "tok", "NX", "PX", "1000", "GET"}), "$-1\r\n");
  EXPECT_EQ(run(m, *s, {"SET", "lk", "other", "NX", "PX", "1000", "GET"}), "$3\r\ntok\r\n");  // no change
  EXPECT_EQ(run(m, *s, {"EVAL", detail::kExtend, "1", "lk", "tok", "5000"}), ":1\r\n");
  EXPECT_EQ(run(m, *s, {"GET", "lk"}), "$3\r\ntok\r\n");
  auto w = m.take_writes();
  ASSERT_EQ(w.size(), 2u);  // the SET and the extension's PEXPIRE; neither the refused SET nor the GET
  EXPECT_EQ(w[1].offset, 2u);
  EXPECT_EQ(m.repl_offset(), 2u);
  for (const auto& x : w) r.apply(x);
  EXPECT_EQ(r.get("lk", kT0), "tok");
  EXPECT_EQ(r.get("before", kT0), "v");
  EXPECT_EQ(r.pttl("lk", kT0), 5000);
  EXPECT_EQ(run(m, *s, {"EVAL", detail::kRelease, "1", "lk", "tok"}), ":1\r\n");
  w = m.take_writes();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].op, node::replicated_write::what::remove);
  r.apply(w[0]);
  EXPECT_EQ(r.get("lk", kT0), std::nullopt);
  EXPECT_EQ(r.repl_offset(), 3u);
}

TEST(SimNodeReplication, wait_blocks_until_the_replicas_acknowledge_or_its_timeout) {
  node m({}, 1, kT0);
  m.attach_replica("r0", "node1", 6379);
  m.attach_replica("r1", "node2", 6380);
  auto s = m.open_session();
  std::string out;
  // Nothing written yet: every replica has offset 0.
  ASSERT_TRUE(m.feed(*s, resp({"WAIT", "2", "100"}), kT0, out));
  EXPECT_EQ(out, ":2\r\n");
  out.clear();
  ASSERT_TRUE(m.feed(*s, resp({"SET", "k", "v"}) + resp({"WAIT", "2", "100"}) + resp({"INFO", "replication"}), kT0,
                     out));
  EXPECT_EQ(out, "+OK\r\n") << "WAIT blocks, and the INFO after it waits too";
  EXPECT_TRUE(m.blocked(*s));
  EXPECT_EQ(m.wait_deadline(*s), kT0 + 100'000);
  ASSERT_TRUE(m.feed(*s, resp({"PING"}), kT0 + 1, out));  // queued behind the WAIT
  m.ack("r0", 1);
  ASSERT_TRUE(m.unblock(*s, kT0 + 2, out));
  EXPECT_EQ(out, "+OK\r\n") << "one of two: still blocked";
  m.ack("r1", 1);
  ASSERT_TRUE(m.unblock(*s, kT0 + 3, out));
  ASSERT_EQ(out.rfind("+OK\r\n:2\r\n$", 0), 0u) << out;
  EXPECT_NE(out.find("role:master\r\nconnected_slaves:2\r\nslave0:ip=node1,port=6379,state=online,offset=1,lag=0\r\n"
                     "slave1:ip=node2,port=6380,state=online,offset=1,lag=0\r\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.substr(out.size() - 7), "+PONG\r\n");
  EXPECT_FALSE(m.blocked(*s));
  // The timeout: the count acknowledged by then.
  out.clear();
  ASSERT_TRUE(m.feed(*s, resp({"SET", "k", "w"}) + resp({"WAIT", "1", "50"}), kT0 + 10, out));
  ASSERT_TRUE(m.unblock(*s, kT0 + 10 + 49'999, out));
  EXPECT_EQ(out, "+OK\r\n");
  ASSERT_TRUE(m.unblock(*s, kT0 + 10 + 50'000, out));
  EXPECT_EQ(out, "+OK\r\n:0\r\n");
  EXPECT_EQ(run(m, *s, {"WAIT", "1", "-1"}), "-ERR timeout is negative\r\n");
}

}  // namespace
}  // namespace redlock::sim
