// Found by the SPIN model (docs/verification.md, finding (f)): the restart guard
// without a TIME sample behind the acquire. An acquire queued on a connection that
// is still reconnecting to a node that restarted empty passes the guard's check at
// the attempt's start (the handshake's INFO, which shows the new run_id, has not
// come back yet); the grant then arrived without a TIME sample, and round::on_reply
// judged grants again only when one had been taken, so the empty node's grant
// counted inside the quarantine: two holders. Now every acquire grant is judged
// by the guards (acquire_exclusion) at its reply (reply_event::excluded_by), sampled or not.
//
// The real-server reproduction is fault.RestartWithoutTimeSample.* (tests/fault/
// restart_sample_test.cc); this is the same schedule in virtual time.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "redlock/client.h"
#include "redlock/testing.h"

using namespace std::chrono_literals;

namespace {

// A holds the lock on nodes 0 and 1 (node 2 refused A's SET: A's key is not
// there). Node 0 restarts empty; B's connection to it is reset and reconnects
// through 400 ms of one-way latency; B acquires while that handshake is in flight.
// The three ways B takes no TIME sample behind its acquire (docs/verification.md (f)).
enum class no_sample { clock_guard_off, between_samples, time_not_permitted };

void restart_while_reconnecting(no_sample why) {
  redlock::testing::world w;
  if (why == no_sample::time_not_permitted) {
    // What a node answers a user whose ACL lacks +time (on every node, restarts included).
    for (std::size_t i = 0; i < w.node_count(); ++i) {
      w.inject_error(i, "TIME", "NOPERM User b has no permissions to run the 'time' command");
    }
  }
  auto a = w.make_client();
  redlock::client_options bo;
  bo.reconnect_min_backoff = 5ms;
  bo.reconnect_max_backoff = 20ms;
  bo.connect_timeout = 5s;
  bo.command_timeout = 5s;
  if (why == no_sample::clock_guard_off) bo.clock_jump_threshold = 0ms;
  // The handshake's TIME has just taken a sample: the acquire's is not due.
  if (why == no_sample::between_samples) bo.clock_sample_interval = 60s;
  auto b = w.make_client(bo);
  ASSERT_FALSE(a->ping().error);
  ASSERT_FALSE(b->ping().error);  // B knows node 0's run_id from before the restart

  redlock::acquire_options o;
  o.ttl = 20s;
  o.retry = redlock::retry_policy::once();
  w.inject_error(2, "SET", "READONLY You can't write against a read only replica.");
  auto held = a->acquire("f", o);
  ASSERT_TRUE(held) << held.report.message();
  w.inject_error(2, "SET", "");
  ASSERT_FALSE(w.key_at(2, "f").has_value());

  w.restart_node(0);  // empty: no persistence
  w.set_node_latency(0, 400'000, 400'000);
  w.advance(150ms);  // B saw the reset and reconnects; its INFO is not back yet
  auto rival = b->acquire("f", o);
  const bool a_holds = held.lock.owns_lock();
  ASSERT_TRUE(a_holds) << "A's validity ran out: the schedule is wrong";
  EXPECT_FALSE(rival) << "two holders: A has " << held.lock.remaining_validity().count()
                      << " ms of validity left, B acquired: " << rival.report.message();
  // The path under test was reached: node 0 got B's request and answered it (a
  // node the guard excludes at the attempt's start is never asked: latency 0).
  ASSERT_EQ(rival.report.nodes.size(), 3u);
  EXPECT_STREQ(redlock::to_string(rival.report.nodes[0].status), "excluded") << rival.report.message();
  EXPECT_NE(rival.report.nodes[0].detail.find("restarted"), std::string::npos) << rival.report.message();
  EXPECT_GE(rival.report.nodes[0].latency, 800ms) << rival.report.message();
  // The excluded grant wrote B's key on node 0: it is rolled back (round::granted_excluded).
  EXPECT_TRUE(w.run_until([&] { return !w.key_at(0, "f").has_value(); }, 5s));
}

TEST(RestartRegression, a_grant_queued_behind_the_reconnect_never_counts_with_the_clock_guard_off) {
  restart_while_reconnecting(no_sample::clock_guard_off);
}

TEST(RestartRegression, a_grant_queued_behind_the_reconnect_never_counts_between_time_samples) {
  restart_while_reconnecting(no_sample::between_samples);
}

TEST(RestartRegression, a_grant_queued_behind_the_reconnect_never_counts_for_a_user_without_time) {
  restart_while_reconnecting(no_sample::time_not_permitted);
}

// A persistent node restarts and loads its AOF for 3 s (world_options::
// restart_loading_us), answering LOADING to all but AUTH/SELECT/INFO/TIME/ECHO, as a
// real redis-server does. The client's reconnect handshake (PING) is refused with
// it: the node is down with the server's word, retried with backoff, not a
// permanent failure. A release during loading gets its quorum from the two other
// nodes, and its delete reaches the loaded key once loading ends (release_round's
// cleanup), long before the TTL.
TEST(RestartRegression, a_node_loading_its_aof_after_a_restart_answers_loading_and_rejoins) {
  redlock::testing::world_options wo;
  wo.persistent = true;
  wo.restart_loading_us = 3'000'000;
  redlock::testing::world w(wo);
  redlock::client_options co;
  co.reconnect_min_backoff = 50ms;
  co.reconnect_max_backoff = 200ms;
  auto c = w.make_client(co);
  ASSERT_FALSE(c->ping().error);
  redlock::acquire_options o;
  o.ttl = 30s;
  o.retry = redlock::retry_policy::once();
  auto held = c->acquire("aof", o);
  ASSERT_TRUE(held) << held.report.message();
  ASSERT_TRUE(w.key_at(0, "aof").has_value());

  const auto restarted = w.elapsed();
  w.restart_node(0);
  w.advance(500ms);  // the client saw the reset and tried to reconnect
  const redlock::report during = c->ping();
  ASSERT_EQ(during.nodes.size(), 3u);
  EXPECT_NE(during.nodes[0].status, redlock::node_status::ok) << during.message();
  EXPECT_NE(during.nodes[0].detail.find("LOADING Redis is loading the dataset in memory"), std::string::npos)
      << during.message();
  EXPECT_EQ(during.count(redlock::node_status::ok), 2) << during.message();
  ASSERT_TRUE(w.key_at(0, "aof").has_value()) << "the AOF kept the key";

  const redlock::report rel = held.lock.release();
  ASSERT_TRUE(rel) << rel.message();
  ASSERT_LT(w.elapsed() - restarted, 3s) << "loading was over before the release: the schedule is wrong";
  EXPECT_TRUE(w.key_at(0, "aof").has_value()) << "deleted while loading";
  EXPECT_TRUE(w.run_until([&] { return !w.key_at(0, "aof").has_value(); }, 10s))
      << "the release's delete never reached the node after loading";
  EXPECT_GE(w.elapsed() - restarted, 3s);
  EXPECT_LT(w.elapsed() - restarted, 3s + 5s) << "the delete waited for the TTL, not for the end of loading";
  const redlock::report after = c->ping();
  EXPECT_EQ(after.count(redlock::node_status::ok), 3) << after.message();
}

}  // namespace
