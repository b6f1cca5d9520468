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

}  // namespace
}  // namespace redlock::sim
