// The guards of one node (lib/node/guards.h) without a connection: the restart
// guard, the clock-jump guard, the same-server check and the fencing exclusion,
// each decision driven by hand-made samples on a manual clock.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "node/guards.h"

namespace redlock::detail {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using time_point = std::chrono::steady_clock::time_point;

// The manual clock: a point `ms` after an arbitrary origin (well past the epoch,
// so that "now - uptime" stays after it).
time_point at_ms(std::int64_t ms) { return time_point{} + std::chrono::hours(1000) + milliseconds(ms); }

// Server time in microseconds for a server whose clock reads `ms` after its own origin.
std::int64_t server_us(std::int64_t ms) { return 5'000'000'000'000 + ms * 1000; }

guard_settings settings() {
  guard_settings s;
  s.restart_quarantine = milliseconds(10'000);
  s.max_ttl = milliseconds(60'000);
  s.clock_jump_threshold = milliseconds(1000);
  s.clock_drift_factor = 0.01;
  s.clock_sample_interval = milliseconds(0);
  return s;
}

TEST(NodeGuards, a_clock_step_beyond_the_allowance_quarantines_the_node_for_max_ttl) {
  node_guards g(settings());
  EXPECT_FALSE(g.observe_server_time(server_us(0), at_ms(0), 1));
  // 10 s later on our clock, the server's clock moved 12 s: a 2 s step forward
  // (the allowance is 1 s + 1 % of 10 s).
  const auto note = g.observe_server_time(server_us(12'000), at_ms(10'000), 1);
  ASSERT_TRUE(note);
  EXPECT_EQ(note->reason, quarantine_reason::clock_jump);
  // The jump quarantine is max(restart_quarantine, max_ttl), from the sample's date.
  EXPECT_EQ(note->until, at_ms(10'000) + milliseconds(60'000));
  EXPECT_NE(note->detail.find("forward 2000 ms"), std::string::npos) << note->detail;
  ASSERT_TRUE(g.jumped_at());
  EXPECT_EQ(*g.jumped_at(), at_ms(10'000));

  const milliseconds q = milliseconds(10'000);
  EXPECT_NE(g.clock_exclusion(at_ms(10'001), q), "");
  EXPECT_NE(g.acquire_exclusion(at_ms(69'999), q, nullptr), "");
  EXPECT_NE(g.acquire_exclusion(at_ms(69'999), q, nullptr).find("clock-jump guard"), std::string::npos);
  EXPECT_EQ(g.clock_exclusion(at_ms(70'000), q), "");
  EXPECT_EQ(g.acquire_exclusion(at_ms(70'000), q, nullptr), "");
  EXPECT_EQ(g.quarantine_end(), at_ms(70'000));
}

TEST(NodeGuards, a_step_back_counts_as_a_jump_too) {
  node_guards g(settings());
  (void)g.observe_server_time(server_us(0), at_ms(0), 1);
  const auto note = g.observe_server_time(server_us(8'000), at_ms(10'000), 1);  // 2 s behind
  ASSERT_TRUE(note);
  EXPECT_NE(note->detail.find("back 2000 ms"), std::string::npos) << note->detail;
  EXPECT_NE(g.clock_exclusion(at_ms(10'000), milliseconds(0)).find("jumped back 2000 ms"), std::string::npos);
}

TEST(NodeGuards, drift_and_round_trip_uncertainty_within_the_allowance_are_no_jump) {
  node_guards g(settings());
  (void)g.observe_server_time(server_us(0), at_ms(0), 1);
  // 1.09 s of difference over 10 s: under 1 s + 100 ms of drift.
  EXPECT_FALSE(g.observe_server_time(server_us(11'090), at_ms(10'000), 1));
  // 1.6 s over the next 10 s, but the sample's reply took 1.2 s (600 ms each way).
  EXPECT_FALSE(g.observe_server_time(server_us(11'090 + 11'600), at_ms(20'000), 600'000));
  EXPECT_FALSE(g.jumped_at());
  EXPECT_EQ(g.clock_exclusion(at_ms(20'000), milliseconds(10'000)), "");
}

TEST(NodeGuards, the_sample_survives_a_reconnect_to_the_same_server) {
  node_guards g(settings());
  EXPECT_FALSE(g.observe_server("run-a", "100", at_ms(0)));
  (void)g.observe_server_time(server_us(0), at_ms(0), 1);
  // The connection drops; the next handshake reads the same run_id: the series goes on,
  // so a jump while disconnected is seen.
  EXPECT_FALSE(g.observe_server("run-a", "130", at_ms(30'000)));
  EXPECT_TRUE(g.observe_server_time(server_us(35'000), at_ms(30'000), 1));
}

TEST(NodeGuards, a_new_run_id_starts_the_restart_quarantine_now_and_a_new_clock_series) {
  node_guards g(settings());
  EXPECT_FALSE(g.observe_server("run-a", "100000", at_ms(0)));  // first sight, not strict: no quarantine
  EXPECT_FALSE(g.restarted_at());
  EXPECT_EQ(g.acquire_exclusion(at_ms(0), milliseconds(10'000), nullptr), "");
  (void)g.observe_server_time(server_us(0), at_ms(0), 1);

  // A long-running server takes over the address: its uptime says nothing.
  const auto note = g.observe_server("run-b", "100000", at_ms(5'000));
  ASSERT_TRUE(note);
  EXPECT_EQ(note->reason, quarantine_reason::restart);
  EXPECT_EQ(note->until, at_ms(15'000));
  EXPECT_EQ(g.run_id(), "run-b");
  ASSERT_TRUE(g.restarted_at());
  EXPECT_EQ(*g.restarted_at(), at_ms(5'000));
  const std::string why = g.acquire_exclusion(at_ms(6'000), milliseconds(10'000), nullptr);
  EXPECT_NE(why.find("restarted: no acquire vote for 9000 ms more"), std::string::npos) << why;
  EXPECT_EQ(g.acquire_exclusion(at_ms(15'000), milliseconds(10'000), nullptr), "");
  // Extensions are not held back by a restart.
  EXPECT_EQ(g.clock_exclusion(at_ms(6'000), milliseconds(10'000)), "");
  // The new server's clock has nothing to do with the old one's: no jump.
  EXPECT_FALSE(g.observe_server_time(server_us(987'654'321), at_ms(5'000), 1));
  EXPECT_EQ(g.quarantine_end(), at_ms(15'000));
}

TEST(NodeGuards, strict_first_sight_counts_the_quarantine_from_the_server_start) {
  guard_settings s = settings();
  s.restart_guard_first_sight = true;
  node_guards young(s);
  const auto note = young.observe_server("run-a", "4", at_ms(0));  // up 4 s of a 10 s quarantine
  ASSERT_TRUE(note);
  EXPECT_EQ(note->reason, quarantine_reason::first_sight);
  EXPECT_EQ(note->until, at_ms(6'000));
  EXPECT_NE(young.acquire_exclusion(at_ms(5'999), milliseconds(10'000), nullptr), "");
  EXPECT_EQ(young.acquire_exclusion(at_ms(6'000), milliseconds(10'000), nullptr), "");

  node_guards old(s);
  EXPECT_FALSE(old.observe_server("run-a", "3600", at_ms(0)));  // up an hour: nothing to report
  ASSERT_TRUE(old.restarted_at());
  EXPECT_EQ(old.acquire_exclusion(at_ms(0), milliseconds(10'000), nullptr), "");
}

TEST(NodeGuards, the_same_server_under_two_names_votes_once) {
  node_guards g(settings());
  const std::string earlier = "redis://a:6379";
  // Before INFO gave a run_id the check cannot run.
  EXPECT_EQ(g.acquire_exclusion(at_ms(0), milliseconds(10'000), &earlier), "");
  (void)g.observe_server("run-a", "100", at_ms(0));
  const std::string why = g.acquire_exclusion(at_ms(0), milliseconds(10'000), &earlier);
  EXPECT_EQ(why, "same server as redis://a:6379 (run_id run-a): configure each server once");
  EXPECT_EQ(g.acquire_exclusion(at_ms(0), milliseconds(10'000), nullptr), "");
  // Extensions do not check it.
  EXPECT_EQ(g.clock_exclusion(at_ms(0), milliseconds(10'000)), "");
}

TEST(NodeGuards, with_the_restart_guard_off_a_jump_still_quarantines_for_max_ttl) {
  guard_settings s = settings();
  s.restart_quarantine = milliseconds(0);
  node_guards g(s);
  (void)g.observe_server_time(server_us(0), at_ms(0), 1);
  const auto note = g.observe_server_time(server_us(20'000), at_ms(10'000), 1);
  ASSERT_TRUE(note);
  EXPECT_EQ(note->until, at_ms(70'000));
  EXPECT_NE(g.acquire_exclusion(at_ms(69'999), milliseconds(0), nullptr), "");
  EXPECT_EQ(g.acquire_exclusion(at_ms(70'000), milliseconds(0), nullptr), "");
}

TEST(NodeGuards, the_clock_jump_guard_off_takes_no_sample_and_sees_no_jump) {
  guard_settings s = settings();
  s.clock_jump_threshold = milliseconds(0);
  node_guards g(s);
  int reads = 0;
  EXPECT_FALSE(g.time_sample_due([&] { return ++reads, at_ms(0); }));
  EXPECT_FALSE(g.observe_server_time(server_us(0), at_ms(0), 1));
  EXPECT_FALSE(g.observe_server_time(server_us(500'000), at_ms(1'000), 1));
  EXPECT_FALSE(g.jumped_at());
  EXPECT_EQ(reads, 0);
}

TEST(NodeGuards, a_sample_is_due_with_every_acquire_or_once_per_interval) {
  node_guards every(settings());
  int reads = 0;
  auto clock = [&] { return ++reads, at_ms(0); };
  EXPECT_TRUE(every.time_sample_due(clock));
  (void)every.observe_server_time(server_us(0), at_ms(0), 1);
  EXPECT_TRUE(every.time_sample_due(clock));
  EXPECT_EQ(reads, 0) << "interval 0 decides without reading the clock";

  guard_settings s = settings();
  s.clock_sample_interval = milliseconds(5'000);
  node_guards spaced(s);
  EXPECT_TRUE(spaced.time_sample_due(clock)) << "no sample yet";
  EXPECT_EQ(reads, 0);
  (void)spaced.observe_server_time(server_us(0), at_ms(1'000), 1);
  time_point now = at_ms(5'999);
  EXPECT_FALSE(spaced.time_sample_due([&] { return now; }));
  now = at_ms(6'000);
  EXPECT_TRUE(spaced.time_sample_due([&] { return now; }));
}

TEST(NodeGuards, an_evicting_policy_excludes_the_node_from_fenced_acquires_only_for_any_key) {
  node_guards g(settings());
  EXPECT_EQ(g.fencing_exclusion(), "") << "unknown policy";
  g.observe_memory("allkeys-lru", "1000000");
  EXPECT_EQ(g.maxmemory_policy(), "allkeys-lru");
  EXPECT_EQ(g.maxmemory(), "1000000");
  EXPECT_NE(g.fencing_exclusion().find("maxmemory-policy allkeys-lru may evict the fence counter"),
            std::string::npos);
  g.observe_memory("volatile-lru", "0");
  EXPECT_EQ(g.fencing_exclusion(), "") << "volatile-*: fence counters have no TTL";
  g.observe_memory("allkeys-lru", "0");
  g.forget_memory();
  EXPECT_EQ(g.maxmemory_policy(), "");
  EXPECT_EQ(g.fencing_exclusion(), "");

  guard_settings s = settings();
  s.allow_fencing_on_evicting_nodes = true;
  node_guards allowed(s);
  allowed.observe_memory("allkeys-random", "");
  EXPECT_EQ(allowed.fencing_exclusion(), "");
}

TEST(NodeGuards, a_grant_is_judged_by_the_guards_of_its_kind_the_restart_first_then_the_fence_policy) {
  using grant = node_guards::grant;
  const milliseconds q(10'000);
  node_guards g(settings());
  EXPECT_EQ(g.grant_exclusion(grant::acquire, at_ms(0), q, nullptr), "");
  EXPECT_EQ(g.grant_exclusion(grant::fenced_acquire, at_ms(0), q, nullptr), "");
  EXPECT_EQ(g.grant_exclusion(grant::extension, at_ms(0), q, nullptr), "");

  // An evicting policy: fenced acquires only.
  g.observe_memory("allkeys-lru", "0");
  EXPECT_EQ(g.grant_exclusion(grant::acquire, at_ms(0), q, nullptr), "");
  EXPECT_EQ(g.grant_exclusion(grant::fenced_acquire, at_ms(0), q, nullptr), g.fencing_exclusion());
  EXPECT_EQ(g.grant_exclusion(grant::extension, at_ms(0), q, nullptr), "");

  // A restart: acquires name it (before the fence policy); extensions may still run.
  (void)g.observe_server("run-a", "100", at_ms(0));
  (void)g.observe_server("run-b", "1", at_ms(1'000));
  const std::string restarted = g.acquire_exclusion(at_ms(2'000), q, nullptr);
  EXPECT_NE(restarted.find("restart guard"), std::string::npos) << restarted;
  EXPECT_EQ(g.grant_exclusion(grant::acquire, at_ms(2'000), q, nullptr), restarted);
  EXPECT_EQ(g.grant_exclusion(grant::fenced_acquire, at_ms(2'000), q, nullptr), restarted);
  EXPECT_EQ(g.grant_exclusion(grant::extension, at_ms(2'000), q, nullptr), "");
  // The same server under an earlier name: acquires only.
  const std::string earlier = "redis://a:6379";
  EXPECT_EQ(g.grant_exclusion(grant::acquire, at_ms(20'000), q, &earlier),
            g.acquire_exclusion(at_ms(20'000), q, &earlier));
  EXPECT_EQ(g.grant_exclusion(grant::extension, at_ms(20'000), q, &earlier), "");

  // A clock jump: every kind, an extension's being clock_exclusion's text.
  (void)g.observe_server_time(server_us(0), at_ms(20'000), 1);
  (void)g.observe_server_time(server_us(40'000), at_ms(30'000), 1);
  const std::string jumped = g.clock_exclusion(at_ms(31'000), q);
  EXPECT_NE(jumped.find("clock-jump guard"), std::string::npos) << jumped;
  EXPECT_EQ(g.grant_exclusion(grant::extension, at_ms(31'000), q, nullptr), jumped);
  EXPECT_EQ(g.grant_exclusion(grant::acquire, at_ms(31'000), q, nullptr), jumped);
  EXPECT_EQ(g.grant_exclusion(grant::fenced_acquire, at_ms(31'000), q, nullptr), jumped);
}

TEST(NodeGuards, the_quarantine_ends_at_the_later_of_restart_and_jump) {
  node_guards g(settings());
  EXPECT_EQ(g.quarantine_end(), time_point{});
  (void)g.observe_server("run-a", "100", at_ms(0));
  (void)g.observe_server_time(server_us(0), at_ms(0), 1);
  (void)g.observe_server_time(server_us(15'000), at_ms(10'000), 1);  // jump: ends at 70 s
  (void)g.observe_server("run-b", "100", at_ms(65'000));             // restart: ends at 75 s
  EXPECT_EQ(g.quarantine_end(), at_ms(75'000));
  g.note_reported(quarantine_reason::restart);
  EXPECT_EQ(g.last_reason(), quarantine_reason::restart);
}

// The failover guard (replica_mark): a replica of the mark missing is a drop until
// every one is back or a confirmation asked late enough; by address, not by count.

TEST(ReplicaMark, a_replica_that_left_is_a_drop_until_it_is_attached_again) {
  replica_mark m;
  m.observe("r1", {"127.0.0.1:7004", "127.0.0.1:7005"}, 1000);
  EXPECT_FALSE(m.dropped());
  m.observe("r1", {"127.0.0.1:7005"}, 2000);
  ASSERT_TRUE(m.dropped());
  EXPECT_EQ(m.drop_text(), "its replica 127.0.0.1:7004 left it: replicas dropped from 2 to 1");
  m.observe("r1", {"127.0.0.1:7004", "127.0.0.1:7005"}, 3000);
  EXPECT_FALSE(m.dropped()) << "the same replica back: nothing was lost";
}

TEST(ReplicaMark, a_new_replica_does_not_stand_in_for_the_one_that_left) {
  replica_mark m;
  m.observe("r1", {"127.0.0.1:7004", "127.0.0.1:7005"}, 1000);
  m.observe("r1", {"127.0.0.1:7005"}, 2000);
  // The count is back at 2, but 7004 (maybe the promoted master now) is not.
  m.observe("r1", {"127.0.0.1:7005", "127.0.0.1:7006"}, 3000);
  ASSERT_TRUE(m.dropped());
  EXPECT_EQ(m.drop_text(), "its replica 127.0.0.1:7004 left it: replicas dropped from 3 to 2");
  // And the newcomer's leaving is a drop too, once 7004 is back.
  m.observe("r1", {"127.0.0.1:7004", "127.0.0.1:7005", "127.0.0.1:7006"}, 4000);
  EXPECT_FALSE(m.dropped());
  m.observe("r1", {"127.0.0.1:7004", "127.0.0.1:7005"}, 5000);
  EXPECT_TRUE(m.dropped());
  m.observe("r1", {}, 5100);
  EXPECT_EQ(m.drop_text(), "its replica 127.0.0.1:7004 left it (and 2 more): replicas dropped from 3 to 0");
}

TEST(ReplicaMark, a_confirmation_asked_a_settling_time_after_the_drop_clears_it_and_starts_a_new_mark) {
  replica_mark m;
  m.observe("r1", {"a:1", "b:2"}, 1000);
  m.observe("r1", {"b:2"}, 2000);  // the drop is seen at 2000
  m.confirm(2000 + 9999, 10000);
  EXPECT_TRUE(m.dropped()) << "asked before a failover begun before the drop would have ended";
  m.confirm(2000 + 10000, 10000);
  EXPECT_FALSE(m.dropped());
  // The mark is what is attached now: b alone; its leaving is the next drop, and
  // a's return is just a new replica.
  m.observe("r1", {"a:1", "b:2"}, 13000);
  EXPECT_FALSE(m.dropped());
  m.observe("r1", {"a:1"}, 14000);
  EXPECT_TRUE(m.dropped());
  // A later drop dates from when it was seen: an earlier query does not clear it.
  m.confirm(13500, 0);
  EXPECT_TRUE(m.dropped());
  m.confirm(14000, 0);
  EXPECT_FALSE(m.dropped());
  // Confirming with no drop changes nothing.
  m.confirm(20000, 0);
  EXPECT_FALSE(m.dropped());
}

// The adversarial pass (stop 36): a replica dead for a while, then the one being
// promoted leaving: the settling time counts from the second leaving.
TEST(ReplicaMark, a_replica_leaving_while_a_drop_is_pending_restarts_the_settling_time) {
  replica_mark m;
  m.observe("r1", {"a:1", "b:2", "c:3"}, 1000);
  m.observe("r1", {"a:1", "b:2"}, 2000);  // c dies
  m.observe("r1", {"a:1", "b:2"}, 5000);  // nothing new: the drop dates from 2000
  m.confirm(2000 + 9999, 10000);
  EXPECT_TRUE(m.dropped());
  m.observe("r1", {"b:2"}, 19000);  // a leaves (promoted?) while the drop is pending
  m.confirm(2000 + 10000, 10000);
  EXPECT_TRUE(m.dropped()) << "settled from the first replica's leaving, not the second's";
  m.confirm(19000 + 9999, 10000);
  EXPECT_TRUE(m.dropped());
  m.confirm(19000 + 10000, 10000);
  EXPECT_FALSE(m.dropped());
  // A new replica joining while a drop is pending does not restart it.
  m.observe("r1", {"b:2", "d:4"}, 30000);
  m.observe("r1", {"d:4"}, 31000);  // b leaves
  m.observe("r1", {"d:4", "e:5"}, 32000);  // e joins: still dropped from 31000
  m.confirm(31000 + 100, 100);
  EXPECT_FALSE(m.dropped());
}

TEST(ReplicaMark, another_server_starts_its_own_mark_and_a_reconnect_to_the_same_one_keeps_it) {
  replica_mark m;
  m.observe("r1", {"a:1", "b:2"}, 1000);
  m.observe("r1", {"a:1"}, 2000);  // e.g. seen by the reconnect's handshake
  EXPECT_TRUE(m.dropped());
  m.observe("r2", {"c:3"}, 3000);  // a restarted server: the restart guard's business
  EXPECT_FALSE(m.dropped());
  m.observe("r2", {}, 4000);
  EXPECT_TRUE(m.dropped());
  EXPECT_EQ(m.drop_text(), "its replica c:3 left it: replicas dropped from 1 to 0");
  // Replicas known only by count ("#k", no slaveK line): a count below the mark.
  replica_mark n;
  n.observe("", {"#0", "#1"}, 1000);
  n.observe("", {"#0"}, 2000);
  EXPECT_TRUE(n.dropped());
  EXPECT_EQ(n.drop_text(), "a replica left it: replicas dropped from 2 to 1");
  n.observe("", {"#0", "#1"}, 3000);
  EXPECT_FALSE(n.dropped());
}

}  // namespace
}  // namespace redlock::detail
