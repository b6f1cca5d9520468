// docs/verification.md, finding (f), against real redis-servers: the restart guard
// without a TIME sample behind the acquire.
//
// A's lock rests on n0 and n1 (its key on n2 is gone, as if that SET had been
// lost). n0 restarts empty. B's connection to n0 (through a fault_proxy) is reset
// and reconnects through 500 ms of one-way latency; B acquires while that
// handshake is in flight, so the attempt's start finds n0 not yet seen restarted
// (its INFO, with the new run_id, is still on its way) and queues the SET on the
// reconnecting connection. The handshake then marks n0 restarted and the SET is
// written: the empty n0 grants, n1 refuses (A), n2 grants. B takes no TIME sample
// behind the acquire — clock-jump guard off, a sample taken by the handshake within
// clock_sample_interval, or a user without +time — and until the fix round::on_reply
// judged only sampled grants again: B held the lock while A had ~19 s of validity.
// Now every acquire grant is judged by the guards (acquire_exclusion) at its
// reply (reply_event::excluded_by). The same schedule in virtual time: sim.RestartRegression.*.
#include <gtest/gtest.h>

#include "fault_proxy.h"
#include "fault_util.h"

namespace redlock::test {
namespace {

constexpr auto kLatency = std::chrono::milliseconds(500);  // one way, through the proxy

enum class no_sample { clock_guard_off, between_samples, time_not_permitted };

void restart_while_reconnecting(no_sample why) {
  node_config cfg;
  if (why == no_sample::time_not_permitted) cfg.acl_users = {"user notime on >notime-pw ~* +@all -time"};
  redis_cluster nodes(3, cfg);
  fault_proxy px(nodes[0].port());

  client a(scenario_options(nodes.uris()));
  std::vector<std::string> via = {px.uri(), nodes[1].uri(), nodes[2].uri()};
  if (why == no_sample::time_not_permitted) {
    via = uris_as(nodes, "notime", "notime-pw");
    via[0] = "redis://notime:notime-pw@127.0.0.1:" + std::to_string(px.port());
  }
  client_options bo = scenario_options(via);
  // Generous: the queued SET waits for the handshake (2 x latency) and its own
  // round trip (2 x latency) within one command timeout.
  bo.command_timeout = std::chrono::milliseconds(5000);
  bo.connect_timeout = std::chrono::milliseconds(5000);
  bo.reconnect_min_backoff = std::chrono::milliseconds(5);
  bo.reconnect_max_backoff = std::chrono::milliseconds(50);
  if (why == no_sample::clock_guard_off) bo.clock_jump_threshold = std::chrono::milliseconds(0);
  if (why == no_sample::between_samples) bo.clock_sample_interval = std::chrono::milliseconds(60000);
  client b(bo);
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));  // B knows n0's run_id from before the restart

  const std::string res = "restart-no-sample";
  auto held = a.acquire(res, once(std::chrono::milliseconds(20000)));
  ASSERT_TRUE(held) << held.report.message();
  nodes[2].command({"DEL", res});  // A's SET on n2 "lost"

  const std::uint64_t accepted = px.stats().accepted;
  const std::uint64_t refused = px.stats().refused;
  px.black_hole();  // B does not see n0 go down by itself
  nodes[0].restart(/*keep_data=*/false);
  px.reset();  // B's connection breaks; it reconnects with backoff
  px.latency(kLatency);
  // B's reconnect reached the proxy and is held open there: its handshake's replies
  // take >= 2 x 500 ms. (Kept, not only accepted: a reconnect that came while the
  // proxy was still in reset mode was accepted and closed at once, and an acquire
  // queued behind it failed as a connection error; seen on a loaded run.)
  ASSERT_TRUE(eventually(
      [&] {
        const auto s = px.stats();
        return s.accepted - s.refused > accepted - refused;
      },
      std::chrono::milliseconds(5000)));
  auto rival = b.acquire(res, once(std::chrono::milliseconds(20000)));

  ASSERT_TRUE(held.lock.owns_lock()) << "A's validity ran out: the schedule is wrong";
  EXPECT_FALSE(rival) << "two holders: A has " << held.lock.remaining_validity().count()
                      << " ms of validity left, B acquired: " << rival.report.message();
  // The path under test was reached: n0 was asked and answered (a node the guard
  // excludes at the attempt's start is never asked, and its latency is 0).
  ASSERT_EQ(rival.report.nodes.size(), 3u);
  EXPECT_STREQ(to_string(rival.report.nodes[0].status), "excluded") << rival.report.message();
  EXPECT_NE(rival.report.nodes[0].detail.find("restarted"), std::string::npos) << rival.report.message();
  EXPECT_GE(rival.report.nodes[0].latency, 2 * kLatency) << rival.report.message();
  EXPECT_STREQ(to_string(rival.report.nodes[1].status), "held") << rival.report.message();
  // The excluded grant wrote B's key on n0: it is rolled back (round::granted_excluded).
  EXPECT_TRUE(eventually([&] { return !nodes[0].exists(res); }, std::chrono::milliseconds(10000)))
      << "B's key stays on n0: " << nodes[0].get(res).value_or("(none)");
}

TEST(RestartWithoutTimeSample, a_grant_queued_behind_the_reconnect_never_counts_with_the_clock_guard_off) {
  restart_while_reconnecting(no_sample::clock_guard_off);
}

TEST(RestartWithoutTimeSample, a_grant_queued_behind_the_reconnect_never_counts_between_time_samples) {
  restart_while_reconnecting(no_sample::between_samples);
}

TEST(RestartWithoutTimeSample, a_grant_queued_behind_the_reconnect_never_counts_for_a_user_without_time) {
  restart_while_reconnecting(no_sample::time_not_permitted);
}

}  // namespace
}  // namespace redlock::test
