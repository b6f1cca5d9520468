// Review 13: adversarial reproductions against the coordination primitives
// NOT BUILT on main (docs/review-13.md): three tests here fail until review 13's W1, W2, E1 are fixed.
// (waiting without polling, acquire_many, semaphore, election). Tests that FAIL
// here pin open defects (docs/review-13.md); they are not disabled on purpose.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "redis_node.h"
#include "redlock/election.h"
#include "redlock/redlock.h"
#include "redlock/semaphore.h"
#include "test_util.h"
#include "wait_util.h"

namespace redlock::test {
namespace {

using namespace wait_util;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

// Short command timeouts: the watchdog of a sub-second TTL needs
// extend_interval + command_timeout <= ttl - drift.
client_options fast(const std::vector<std::string>& uris) {
  client_options o = options_for(uris);
  o.command_timeout = 100ms;
  o.connect_timeout = 1000ms;
  return o;
}

redis_cluster& nodes() {
  static redis_cluster* cl = new redis_cluster(3);
  return *cl;
}

// Blocks `c`'s loop thread for `d` (a callback that sleeps: the in-process stand-in
// for a SIGSTOP / VM pause of the holder). Returns once the loop is blocked.
void block_loop(client& c, milliseconds d) {
  auto started = std::make_shared<std::promise<void>>();
  auto f = started->get_future();
  c.probe_async([started, d](probe_result) {
    started->set_value();
    std::this_thread::sleep_for(d);
  });
  f.wait();
}

// ---- Attack W1: a subscriber connection to a paused node stalls the waiting
// acquire past its retry.deadline, and past a release on a quorum.
//
// The holder holds the key; node 3 is SIGSTOPped (the waiter's voting connection
// to it was made before). The waiter's first attempt fails at once (2 of 3 held),
// then join() opens the subscriber connections; the one to the paused node hangs
// in its handshake (PING) until connect_timeout. settled() runs only then, and no
// timer runs meanwhile: no attempt is made, whatever the deadline. The holder
// releases 100 ms in: nodes 1 and 2 (a quorum) are free from then on; with polling
// the waiter takes the lock within a retry delay (50 ms). Expected: the lock by
// the 300 ms deadline. Seen: a failure (contended) after ~connect_timeout (2 s),
// without a single attempt after the release.
// (The waiter's command_timeout is 150 ms, its connect_timeout 2 s: an attempt that
// straddles the release — held on node 1, granted on node 2 — waits for the paused
// node 3 until command_timeout before it fails, and another attempt follows; with
// 1 s that race alone overran the deadline now and then, in polling too.)
TEST(Review13, wait_subscription_to_paused_node_does_not_outlive_deadline) {
  client_options ob = opts(nodes().uris());
  ob.command_timeout = 150ms;
  client a(opts(nodes().uris()));
  client b(ob);
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string res = unique("w1");
  auto held = a.acquire(res, once());
  ASSERT_TRUE(held.lock) << held.report.error.message();
  nodes()[2].pause();
  resume_on_exit guard{nodes()[2]};
  const auto t0 = clock_type::now();
  auto fut = std::async(std::launch::async, [&] { return b.acquire(res, waiting(50ms, 600ms)); });
  std::this_thread::sleep_for(100ms);
  (void)held.lock.release();  // deletes on nodes 1 and 2 (node 3 is paused)
  auto got = fut.get();
  const auto took = since(t0);
  EXPECT_TRUE(got.lock) << "lock free on a quorum from 100 ms, deadline 600 ms, retry delay 50 ms; got "
                        << got.report.error.message() << " after " << took.count() << " ms, attempts "
                        << got.report.attempts;
  EXPECT_LT(took, 1200ms) << "retry.deadline is 600 ms (before the fix: ~2 s, connect_timeout)";
  if (got.lock) (void)got.lock.release();
}

// Control for W1: the same history with wait_notifications = false (polling)
// takes the lock in time. Expected to pass.
TEST(Review13, control_polling_with_paused_node_meets_deadline) {
  client_options ob = opts(nodes().uris());
  ob.wait_notifications = false;
  ob.command_timeout = 150ms;  // as above
  client a(opts(nodes().uris()));
  client b(ob);
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string res = unique("w1c");
  auto held = a.acquire(res, once());
  ASSERT_TRUE(held.lock) << held.report.error.message();
  nodes()[2].pause();
  resume_on_exit guard{nodes()[2]};
  const auto t0 = clock_type::now();
  auto fut = std::async(std::launch::async, [&] { return b.acquire(res, waiting(50ms, 600ms)); });
  std::this_thread::sleep_for(100ms);
  (void)held.lock.release();
  auto got = fut.get();
  const auto took = since(t0);
  EXPECT_TRUE(got.lock) << got.report.error.message();
  EXPECT_LT(took, 1200ms);
  if (got.lock) (void)got.lock.release();
}

// ---- Attack W2: the release of a set (kReleaseMany) publishes nothing, so a
// single-key waiter blocked by a set sleeps its whole fallback delay although
// docs/coordination.md says a waiting acquire "waits for the holder's release to
// be published, and tries again at once". Expected: the hand-over well under the
// 5 s retry delay (as Wait.waiter_wakes_at_the_release_not_at_its_retry_delay).
// Seen: 2.5-5 s (the fallback timer).
TEST(Review13, set_release_wakes_single_key_waiter) {
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string x = unique("w2x"), y = unique("w2y");
  auto held = a.acquire_many({x, y}, once());
  ASSERT_TRUE(held.lock) << held.report.error.message();
  auto sets = [] {
    long long n = 0;
    for (std::size_t i = 0; i < nodes().size(); ++i) n += nodes()[i].calls("set");
    return n;
  };
  const long long sets0 = sets();
  auto fut = std::async(std::launch::async, [&] { return b.acquire(x, waiting(5000ms, 20000ms)); });
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), x); }, 5000ms));
  // The first attempt and the one right after subscribing have failed (polled, not
  // a sleep: on a loaded machine the second may still be running 50 ms later).
  ASSERT_TRUE(settles(sets, sets0 + 3, 200ms, 5000ms)) << sets() - sets0 << " SETs";
  const auto t0 = clock_type::now();
  EXPECT_FALSE(held.lock.release().error);
  auto got = fut.get();
  const auto took = since(t0);
  EXPECT_TRUE(got.lock) << got.report.error.message();
  EXPECT_LT(took, 500ms) << "retry delay is 5 s; the set's release published nothing; attempts "
                         << got.report.attempts;
  if (got.lock) (void)got.lock.release();
}

// W2, the other half: acquire_many waits for release notifications as a single
// key does (it polled by its retry schedule). A set waiter blocked by a single-key
// holder is woken by that key's release; then, blocked by another holder on the
// set's other key, it moves to that key's channel and is woken by its release.
TEST(Review13, set_waiter_wakes_at_each_blocking_keys_release) {
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string x = unique("w2sx"), y = unique("w2sy");
  auto hx = a.acquire(x, once());
  auto hy = a.acquire(y, once());
  ASSERT_TRUE(hx.lock && hy.lock);
  auto fut = std::async(std::launch::async, [&] { return b.acquire_many({x, y}, waiting(5000ms, 20000ms)); });
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), x); }, 5000ms)) << "blocked by x: waits on x";
  std::this_thread::sleep_for(50ms);
  const auto t0 = clock_type::now();
  EXPECT_FALSE(hx.lock.release().error);
  // The woken attempt finds y held: the waiter subscribes y's channel.
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), y); }, 2000ms)) << "blocked by y: waits on y";
  EXPECT_LT(since(t0), 500ms);
  std::this_thread::sleep_for(50ms);
  const auto t1 = clock_type::now();
  EXPECT_FALSE(hy.lock.release().error);
  auto got = fut.get();
  EXPECT_TRUE(got.lock) << got.report.error.message();
  EXPECT_LT(since(t1), 500ms) << "retry delay is 5 s: the set waiter was not woken";
  EXPECT_GE(got.report.attempts, 3);
  if (got.lock) (void)got.lock.release();
}

// A set waiter blocked by a set holder: the holder's set release publishes on
// every key's channel, and its rollbacks publish nothing.
TEST(Review13, set_release_wakes_set_waiter) {
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string x = unique("w2ssx"), y = unique("w2ssy"), z = unique("w2ssz");
  auto held = a.acquire_many({x, y}, once());
  ASSERT_TRUE(held.lock) << held.report.error.message();
  auto fut = std::async(std::launch::async, [&] { return b.acquire_many({z, y}, waiting(5000ms, 20000ms)); });
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), y); }, 5000ms));
  std::this_thread::sleep_for(50ms);
  const auto t0 = clock_type::now();
  EXPECT_FALSE(held.lock.release().error);
  auto got = fut.get();
  EXPECT_TRUE(got.lock) << got.report.error.message();
  EXPECT_LT(since(t0), 500ms);
  if (got.lock) (void)got.lock.release();
  for (const std::string& k : {x, y, z}) {
    EXPECT_TRUE(eventually([&] { return nodes().count_key(k) == 0; })) << k << ": " << nodes().count_key(k);
  }
}

// ---- Attack E1: campaign() with the default deadline (0 = without bound) does
// not wait for the release notification: the campaign's acquire has
// retry.deadline = 0, and acquire_op only waits for releases when
// retry.deadline > 0. docs/coordination.md: "Release notifications for waiting
// acquires, when they land, remove the retry_delay from the hand-over without any
// change here." Expected: a resign hands over well under retry_delay (5 s).
// Seen: 2.5-5 s.
TEST(Review13, resign_hands_over_without_retry_delay_default_deadline) {
  std::promise<campaign_result> pb;
  auto fb = pb.get_future();
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  election ea(a), eb(b);
  const std::string role = unique("e1");
  campaign_options o;
  o.ttl = 10000ms;
  o.retry_delay = 5000ms;  // deadline: 0 (the default)
  auto wa = ea.campaign(role, "A", o);
  ASSERT_TRUE(wa) << wa.report.error.message();
  (void)eb.campaign_async(role, "B", o, [&pb](campaign_result r) { pb.set_value(std::move(r)); });
  std::this_thread::sleep_for(300ms);  // B's first attempt has failed
  const auto t0 = clock_type::now();
  (void)wa.leadership.resign();
  ASSERT_EQ(fb.wait_for(8000ms), std::future_status::ready);
  auto wb = fb.get();
  const auto took = since(t0);
  EXPECT_TRUE(wb) << wb.report.error.message();
  EXPECT_LT(took, 1000ms) << "retry_delay is 5 s";
  if (wb) (void)wb.leadership.resign();
}

// ---- Attack E2 (expected to hold): a leader whose loop is blocked past its TTL
// (a pause) while another candidate wins. Sampled from a third thread, the two
// beliefs (is_leader()) never overlap, and observe() names the new leader.
TEST(Review13, paused_leader_and_new_leader_never_both_believe) {
  std::mutex mu;
  std::optional<campaign_result> wb;
  client a(fast(nodes().uris()));
  client b(fast(nodes().uris()));
  client c(fast(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  ASSERT_TRUE(wait_connected(c));
  election ea(a), eb(b), ec(c);
  const std::string role = unique("e2");
  campaign_options o;
  o.ttl = 600ms;
  o.retry_delay = 50ms;
  auto wa = ea.campaign(role, "A", o);
  ASSERT_TRUE(wa) << wa.report.error.message();
  campaign_options ob = o;
  ob.deadline = 5000ms;
  (void)eb.campaign_async(role, "B", ob, [&](campaign_result r) {
    std::lock_guard<std::mutex> g(mu);
    wb.emplace(std::move(r));
  });
  block_loop(a, 1500ms);
  const auto t0 = clock_type::now();
  int overlaps = 0;
  bool b_led = false;
  while (since(t0) < 1400ms) {
    const bool la = wa.leadership.is_leader();
    bool lb = false;
    {
      std::lock_guard<std::mutex> g(mu);
      lb = wb && wb->leadership.is_leader();
    }
    b_led = b_led || lb;
    if (la && lb) ++overlaps;
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(overlaps, 0);
  EXPECT_TRUE(b_led);
  auto who = ec.observe(role);
  EXPECT_EQ(who.identity.value_or("none"), "B");
  std::this_thread::sleep_for(300ms);  // a's loop runs again
  EXPECT_FALSE(wa.leadership.is_leader());
  std::lock_guard<std::mutex> g(mu);
  if (wb && *wb) {
    EXPECT_GT(wb->leadership.term(), wa.leadership.term());
    (void)wb->leadership.resign();
  }
}

// ---- Attack S1 (expected to hold): K = 2; a holder whose loop is blocked past
// its TTL while two other clients take both permits. At no sampled instant do
// more than 2 handles believe they hold a permit.
TEST(Review13, semaphore_paused_holder_never_a_third_holder) {
  client a(fast(nodes().uris()));
  client b(fast(nodes().uris()));
  client c(fast(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  ASSERT_TRUE(wait_connected(c));
  const std::string name = unique("s1");
  semaphore_options so;
  so.permits = 2;
  semaphore sa(a, name, so), sb(b, name, so), sc(c, name, so);
  acquire_options ao;
  ao.ttl = 500ms;
  ao.auto_extend = true;
  auto ha = sa.acquire(ao);
  ASSERT_TRUE(ha) << ha.report.error.message();
  acquire_options wo = ao;
  wo.retry.max_attempts = 1000;
  wo.retry.base_delay = 20ms;
  wo.retry.max_delay = 20ms;
  wo.retry.deadline = 3000ms;
  block_loop(a, 1500ms);
  auto fb = std::async(std::launch::async, [&] { return sb.acquire(wo); });
  auto fc = std::async(std::launch::async, [&] { return sc.acquire(wo); });
  // b and c contend with a's permit until it expires: sample a alone first, then
  // all three once b and c are in.
  auto hb = fb.get();
  auto hc = fc.get();
  ASSERT_TRUE(hb) << hb.report.error.message();
  ASSERT_TRUE(hc) << hc.report.error.message();
  EXPECT_NE(hb.permit, hc.permit);
  int over = 0;
  for (int i = 0; i < 100; ++i) {
    const int n = int(ha.lock.owns_lock()) + int(hb.lock.owns_lock()) + int(hc.lock.owns_lock());
    if (n > 2) ++over;
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(over, 0);
  (void)hb.lock.release();
  (void)hc.lock.release();
}

// ---- Attack M1 (expected to hold): overlapping sets {p,q} and {q,r} acquired
// concurrently by two clients, with a random node paused in some rounds and a
// short command_timeout (lost replies). Never both succeed with validity left
// while the other still holds validity: the common key q has one holder.
TEST(Review13, overlapping_sets_under_pauses_never_share_a_key) {
  client_options o = options_for(nodes().uris());
  o.command_timeout = 100ms;
  o.connect_timeout = 300ms;
  client a(o), b(o);
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  std::mt19937 rng(1313);
  int both = 0, wins = 0;
  for (int it = 0; it < 20; ++it) {
    const std::string p = unique("m1p"), q = unique("m1q"), r = unique("m1r");
    const int pause = int(rng() % 4);  // 3 = none
    if (pause < 3) nodes()[static_cast<std::size_t>(pause)].pause();
    acquire_options ao = once(2000ms);
    auto fa = std::async(std::launch::async, [&] { return a.acquire_many({p, q}, ao); });
    auto fb = std::async(std::launch::async, [&] { return b.acquire_many({q, r}, ao); });
    auto ra = fa.get();
    auto rb = fb.get();
    if (ra.lock && rb.lock && ra.lock.owns_lock() && rb.lock.owns_lock()) ++both;
    wins += int(bool(ra.lock)) + int(bool(rb.lock));
    if (ra.lock) (void)ra.lock.release();
    if (rb.lock) (void)rb.lock.release();
    if (pause < 3) nodes()[static_cast<std::size_t>(pause)].resume();
  }
  EXPECT_EQ(both, 0);
  EXPECT_GT(wins, 0);
}

}  // namespace
}  // namespace redlock::test
