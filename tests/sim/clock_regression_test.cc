// Found by the simulator (scenario clock, seeds 25466 and 31424): a node's clock
// steps back, the holder extends on it (the key's expiry is set on the stepped-back
// clock), the clock is corrected forward (the key expires at once), and a second
// client whose two TIME samples straddle both steps sees no net jump. Before the
// fix both clients owned the lock. Now the extension carries a TIME sample too: the
// holder sees the step back at the very reply that extends, does not count that
// node, and loses the lock (docs/safety.md).
#include <gtest/gtest.h>

#include <chrono>

#include "redlock/client.h"
#include "redlock/testing.h"

using namespace std::chrono_literals;

namespace {

TEST(ClockRegression, an_extension_on_a_stepped_back_clock_then_corrected_never_leaves_two_holders) {
  redlock::testing::world w;
  auto a = w.make_client();
  auto b = w.make_client();
  (void)a->ping();
  (void)b->ping();
  redlock::acquire_options o;
  o.ttl = 10s;
  o.retry = redlock::retry_policy::once();
  auto r = a->acquire("x", o);
  ASSERT_TRUE(r) << r.report.message();
  w.advance(1s);
  w.jump_node_clock(0, -20s);
  w.jump_node_clock(1, -20s);
  redlock::report e = r.lock.extend(10s);
  // The extension ran on nodes 0 and 1 while their clocks were 20 s behind: the
  // holder saw it and no longer counts on those keys.
  EXPECT_EQ(e.error, redlock::errc::lock_lost) << e.message();
  w.advance(100ms);
  w.jump_node_clock(0, 20s);
  w.jump_node_clock(1, 20s);
  auto s = b->acquire("x", o);
  EXPECT_FALSE(r.lock.owns_lock() && s.lock.owns_lock()) << "two holders: " << s.report.message();
  EXPECT_FALSE(r.lock.owns_lock());
}

TEST(ClockRegression, the_watchdog_loses_the_lock_when_it_extends_on_a_stepped_back_clock) {
  redlock::testing::world w;
  auto a = w.make_client();
  (void)a->ping();
  redlock::acquire_options o;
  o.ttl = 3s;
  o.auto_extend = true;
  int lost = 0;
  o.on_lost = [&](const redlock::lease&, const redlock::report&) { ++lost; };
  auto r = a->acquire("x", o);
  ASSERT_TRUE(r) << r.report.message();
  w.advance(500ms);
  w.jump_node_clock(0, -20s);
  w.jump_node_clock(2, -20s);
  w.advance(2s);  // the watchdog's next extension (every ttl/3) runs on them
  EXPECT_EQ(lost, 1);
  EXPECT_TRUE(r.lock.lost());
}

TEST(ClockRegression, an_extension_on_healthy_clocks_keeps_the_lock) {
  redlock::testing::world w;
  auto a = w.make_client();
  (void)a->ping();
  redlock::acquire_options o;
  o.ttl = 3s;
  o.auto_extend = true;
  auto r = a->acquire("x", o);
  ASSERT_TRUE(r) << r.report.message();
  w.jump_node_clock(1, -20s);  // one node of three: the other two still extend
  w.advance(10s);
  EXPECT_TRUE(r.lock.owns_lock());
  EXPECT_FALSE(r.lock.lost());
}

TEST(ClockRegression, an_acquire_waits_out_a_jump_quarantine_within_max_ttl) {
  redlock::testing::world w;
  redlock::client_options co;
  co.max_ttl = 2s;
  auto a = w.make_client(co);
  (void)a->ping();
  w.jump_node_clock(0, 5s);  // two of three nodes: no quorum until the quarantine ends
  w.jump_node_clock(1, 5s);
  redlock::acquire_options o;
  o.ttl = 1s;
  o.retry.max_attempts = 1000;
  o.retry.deadline = 10s;
  const auto t0 = w.now();
  auto r = a->acquire("x", o);
  ASSERT_TRUE(r) << r.report.message();
  const auto waited = w.now() - t0;
  EXPECT_GE(waited, 1500ms);  // the jump was first seen by this acquire: it waited
  EXPECT_LE(waited, co.max_ttl + 2s);
}

// Found by the adversarial pass over the fix: client::extend of a detached lease
// saw the jump but reported unavailable, which client.h reads as "valid until
// l.valid_until".
TEST(ClockRegression, a_detached_lease_extended_on_stepped_back_clocks_is_not_reported_lost) {
  redlock::testing::world w;
  auto a = w.make_client();
  auto b = w.make_client();
  (void)a->ping();
  (void)b->ping();
  redlock::acquire_options o;
  o.ttl = 10s;
  o.retry = redlock::retry_policy::once();
  auto other = b->acquire("y", o);
  ASSERT_TRUE(other) << other.report.message();
  auto r = a->acquire("x", o);
  ASSERT_TRUE(r) << r.report.message();
  redlock::lease l = r.lock.detach();
  w.advance(1s);
  w.jump_node_clock(0, -20s);
  w.jump_node_clock(1, -20s);
  redlock::report e = a->extend(l, 10s);
  EXPECT_EQ(e.error, redlock::errc::lock_lost) << e.message();
  w.advance(100ms);
  w.jump_node_clock(0, 20s);
  w.jump_node_clock(1, 20s);
  auto s = b->acquire("x", o);
  // What client.h tells the caller of a failed extension: still valid until
  // min(l.valid_until, call + ttl - drift) (here l.valid_until, about 9.9 s).
  const bool a_believes_valid = !e.error || (e.error != redlock::errc::lock_lost &&
                                             e.error != redlock::errc::not_owner && *l.valid_until > w.now());
  EXPECT_FALSE(a_believes_valid && s.lock.owns_lock()) << "two holders: " << s.report.message();
}

}  // namespace
