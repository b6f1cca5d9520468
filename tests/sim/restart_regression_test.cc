// Found by the SPIN model (docs/verification.md, finding (f)): the restart guard
// without a TIME sample behind the acquire. An acquire queued on a connection that
// is still reconnecting to a node that restarted empty passes the guard's check at
// the attempt's start (the handshake's INFO, which shows the new run_id, has not
// come back yet); the grant then arrived without a TIME sample, and round::on_reply
// judged grants again only when one had been taken, so the empty node's grant
// counted inside the quarantine: two holders. Now every acquire grant is judged
// against connection::acquire_exclusion at its reply, sampled or not.
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

}  // namespace
