// Review 13b: attacks on the change da7bcf5..5c71464 (W1: the waiting acquire's
// fallback timer armed at join, settle generations; W2: acquire_many as
// acquire_op with channel switching, kReleaseMany publishing, quiet rollbacks;
// E1: unbounded campaigns in 24 h slices). Each test is a reproduction against
// real redis-server nodes of one guarantee of docs/safety.md and
// docs/coordination.md; a failing test pins a defect.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fault_proxy.h"
#include "history.h"
#include "redis_node.h"
#include "redlock/election.h"
#include "redlock/observer.h"
#include "redlock/redlock.h"
#include "test_util.h"
#include "wait_util.h"

namespace redlock::test {
namespace {

using namespace wait_util;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

redis_cluster& nodes() {
  static redis_cluster* cl = new redis_cluster(3);
  return *cl;
}

// Commands an acquire attempt runs on a node: SET (one plain key) or a script.
long long attempt_calls(redis_node& n) { return n.calls("set") + n.calls("evalsha") + n.calls("eval"); }

long long pubsub_clients(redis_node& n) {
  const std::string list = n.command({"CLIENT", "LIST"});
  long long c = 0;
  for (std::size_t p = list.find("flags=P"); p != std::string::npos; p = list.find("flags=P", p + 1)) ++c;
  return c;
}

// An acquire's outcome, delivered from the loop thread.
struct pending {
  std::promise<acquire_result> p;
  std::future<acquire_result> f = p.get_future();
  std::atomic<int> calls{0};
  clock_type::time_point at{};
  std::function<void(acquire_result)> cb() {
    return [this](acquire_result r) {
      at = clock_type::now();
      if (calls.fetch_add(1) == 0) p.set_value(std::move(r));
    };
  }
};

// ---- A1: cancel of a waiter (set and single key) whose subscription to a paused
// node is pending. Expected: the callback at once with cancelled, exactly once, no
// attempt afterwards, no stale settle callback or timer acting on the finished op
// (ASan build: no use-after-free when the paused node's subscription times out).
void cancel_while_subscription_pending(bool set) {
  pending w;
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string x = unique("a1x"), y = unique("a1y");
  auto held = a.acquire(x, once());
  ASSERT_TRUE(held.lock);
  nodes()[2].pause();
  resume_on_exit guard{nodes()[2]};
  const std::uint64_t id = set ? b.acquire_many_async({x, y}, waiting(100ms, 20000ms), w.cb())
                               : b.acquire_async(x, waiting(100ms, 20000ms), w.cb());
  // Joined: subscribed on nodes 1 and 2, pending on the paused node 3.
  ASSERT_TRUE(eventually([&] { return subscribers(nodes()[0], x) == 1 && subscribers(nodes()[1], x) == 1; }, 3000ms));
  std::this_thread::sleep_for(250ms);  // a few fallback attempts
  const auto t0 = clock_type::now();
  b.cancel(id);
  ASSERT_EQ(w.f.wait_for(3000ms), std::future_status::ready);
  auto r = w.f.get();
  EXPECT_LT(duration_cast<milliseconds>(w.at - t0), 1500ms) << "cancel waits at most for an attempt in flight";
  EXPECT_EQ(r.report.error, errc::cancelled) << r.report.error.message();
  EXPECT_FALSE(r.lock);
  EXPECT_GE(r.report.attempts, 2);
  std::this_thread::sleep_for(50ms);
  const long long c0 = attempt_calls(nodes()[0]) + attempt_calls(nodes()[1]);
  // Past the paused node's connect_timeout (2 s): its subscription settles (off)
  // and the stale settle callback runs on the finished op.
  std::this_thread::sleep_for(2500ms);
  EXPECT_EQ(attempt_calls(nodes()[0]) + attempt_calls(nodes()[1]), c0) << "attempts after the cancel";
  EXPECT_EQ(w.calls.load(), 1);
  nodes()[2].resume();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(w.calls.load(), 1);
  (void)held.lock.release();
}

TEST(Review13b, cancel_set_waiter_with_pending_subscription) { cancel_while_subscription_pending(true); }
TEST(Review13b, cancel_single_waiter_with_pending_subscription) { cancel_while_subscription_pending(false); }

// ---- A1b: the client destroyed while waiters (a set and a single key) are joined
// with a pending subscription to a paused node, and a settle pending. Expected:
// the destructor returns within its bound (two command timeouts plus the loop's
// close), each callback once with cancelled, no use-after-free (ASan).
TEST(Review13b, destroy_client_with_waiters_and_pending_subscriptions) {
  client a(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  const std::string x = unique("a1dx"), y = unique("a1dy");
  auto held = a.acquire(x, once());
  ASSERT_TRUE(held.lock);
  pending w1, w2, w3;
  {
    auto b = std::make_unique<client>(opts(nodes().uris()));
    ASSERT_TRUE(wait_connected(*b));
    nodes()[2].pause();
    resume_on_exit guard{nodes()[2]};
    (void)b->acquire_many_async({x, y}, waiting(100ms, 20000ms), w1.cb());
    (void)b->acquire_async(x, waiting(100ms, 20000ms), w2.cb());
    (void)b->acquire_many_async({y, x}, waiting(70ms, 20000ms), w3.cb());
    ASSERT_TRUE(eventually([&] { return subscribers(nodes()[0], x) == 1; }, 3000ms));
    std::this_thread::sleep_for(300ms);
    const auto t0 = clock_type::now();
    b.reset();
    EXPECT_LT(since(t0), 3500ms) << "~client is bounded by two command timeouts";
  }
  for (pending* w : {&w1, &w2, &w3}) {
    ASSERT_EQ(w->f.wait_for(100ms), std::future_status::ready);
    auto r = w->f.get();
    EXPECT_EQ(r.report.error, errc::cancelled) << r.report.error.message();
    EXPECT_EQ(w->calls.load(), 1);
  }
  (void)held.lock.release();
}

// ---- A2: the retry deadline bounds a waiting acquire (single and set), with a
// subscription pending on a paused node and a holder that never releases.
// Expected: failure (contended) no later than deadline + one attempt (here
// immediate: 2 of 3 nodes answer held), at least 2 attempts, none after the report.
void deadline_with_paused_node(bool set) {
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string x = unique("a2x"), y = unique("a2y");
  auto held = a.acquire(x, once(20000ms));
  ASSERT_TRUE(held.lock);
  nodes()[2].pause();
  resume_on_exit guard{nodes()[2]};
  const auto t0 = clock_type::now();
  auto r = set ? b.acquire_many({y, x}, waiting(90ms, 700ms)) : b.acquire(x, waiting(90ms, 700ms));
  const auto took = since(t0);
  EXPECT_EQ(r.report.error, errc::contended) << r.report.error.message();
  EXPECT_GE(took, 650ms);
  EXPECT_LT(took, 1000ms) << "deadline 700 ms; an attempt here takes ~1 ms (held on 2 of 3)";
  EXPECT_GE(r.report.attempts, 3);
  // The delay is drawn from [45, 90] ms: at most 700 / 45 + 1, plus the first and a fresh one.
  EXPECT_LE(r.report.attempts, 18) << "fallback every 45-90 ms over 700 ms";
  std::this_thread::sleep_for(50ms);
  const long long c0 = attempt_calls(nodes()[0]) + attempt_calls(nodes()[1]);
  std::this_thread::sleep_for(2500ms);  // past the paused node's connect_timeout
  EXPECT_EQ(attempt_calls(nodes()[0]) + attempt_calls(nodes()[1]), c0) << "attempts after the failure";
  (void)held.lock.release();
}

TEST(Review13b, set_waiter_deadline_with_paused_node) { deadline_with_paused_node(true); }
TEST(Review13b, single_waiter_deadline_with_paused_node) { deadline_with_paused_node(false); }

// A2b: the deadline falls while a subscription settles late and fresh (node 3
// resumed just before): the settle callback must not start an attempt after the
// failure was reported, nor may the failure come without an attempt after waiting.
TEST(Review13b, late_fresh_settle_after_deadline_makes_no_attempt) {
  pending w;
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string x = unique("a2bx");
  auto held = a.acquire(x, once(20000ms));
  ASSERT_TRUE(held.lock);
  nodes()[2].pause();
  resume_on_exit guard{nodes()[2]};
  (void)b.acquire_async(x, waiting(5000ms, 400ms), w.cb());
  std::this_thread::sleep_for(300ms);
  nodes()[2].resume();  // the pending handshake and SUBSCRIBE are answered now: fresh
  ASSERT_EQ(w.f.wait_for(3000ms), std::future_status::ready);
  auto r = w.f.get();
  EXPECT_EQ(r.report.error, errc::contended);
  EXPECT_GE(r.report.attempts, 2) << "the fresh subscription (confirmed after the attempt) tries at once";
  std::this_thread::sleep_for(50ms);
  long long c0 = 0;
  for (std::size_t i = 0; i < 3; ++i) c0 += attempt_calls(nodes()[i]);
  std::this_thread::sleep_for(1000ms);
  long long c1 = 0;
  for (std::size_t i = 0; i < 3; ++i) c1 += attempt_calls(nodes()[i]);
  EXPECT_EQ(c1, c0);
  EXPECT_EQ(w.calls.load(), 1);
  (void)held.lock.release();
}

// ---- A3: a set waiter blocked alternately by holders of x and of y switches
// channels at each hand-over; each wake-up comes from the release (well under the
// 5 s retry delay), and afterwards nothing stays registered: every channel is
// unsubscribed and the subscriber connections close (notify_idle_close).
TEST(Review13b, set_waiter_switching_channels_leaves_nothing_behind) {
  client_options ob = opts(nodes().uris());
  ob.notify_idle_close = 300ms;
  pending w;
  client a(opts(nodes().uris()));
  client c(opts(nodes().uris()));
  client b(ob);
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  ASSERT_TRUE(wait_connected(c));
  ASSERT_TRUE(eventually([&] { return pubsub_clients(nodes()[0]) == 0; }, 15000ms)) << "earlier tests' subscribers";
  const std::string x = unique("a3x"), y = unique("a3y");
  auto hx = a.acquire(x, once());
  auto hy = c.acquire(y, once());
  ASSERT_TRUE(hx.lock && hy.lock);
  const long long issued = attempt_calls(nodes()[0]);
  (void)b.acquire_many_async({x, y}, waiting(5000ms, 30000ms), w.cb());
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), x); }, 3000ms));
  // Its attempts (the first, and one at once if subscribed afresh) are over: polled,
  // not a 50 ms sleep, after which a loaded machine may still be running one.
  ASSERT_TRUE(settles([&] { return attempt_calls(nodes()[0]); }, issued + 1, 200ms, 5000ms));
  constexpr int kSwitches = 6;
  std::vector<milliseconds> waits;
  for (int i = 0; i < kSwitches; ++i) {
    // Release the key the waiter waits on; the other stays held: it switches.
    const bool on_x = i % 2 == 0;
    const long long before = attempt_calls(nodes()[0]);
    const auto t0 = clock_type::now();
    if (on_x) {
      EXPECT_FALSE(hx.lock.release().error);
    } else {
      EXPECT_FALSE(hy.lock.release().error);
    }
    // The woken attempt (blocked by the other key) and, the other channel being
    // subscribed afresh or not, maybe one more at once.
    ASSERT_TRUE(eventually([&] { return attempt_calls(nodes()[0]) >= before + 2; }, 3000ms)) << "switch " << i;
    waits.push_back(since(t0));
    const std::string other = on_x ? y : x;
    ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), other); }, 3000ms)) << "switch " << i;
    std::this_thread::sleep_for(100ms);
    // Take the released key back, so the waiter is blocked on both again.
    if (on_x) {
      hx = a.acquire(x, once());
      ASSERT_TRUE(hx.lock) << "switch " << i << ": " << hx.report.error.message();
    } else {
      hy = c.acquire(y, once());
      ASSERT_TRUE(hy.lock) << "switch " << i << ": " << hy.report.error.message();
    }
    EXPECT_EQ(w.calls.load(), 0);
  }
  for (std::size_t i = 0; i < waits.size(); ++i) EXPECT_LT(waits[i], 1000ms) << "switch " << i;
  // Both free: the waiter (on x's channel after an even count) takes the set.
  const auto t1 = clock_type::now();
  (void)hy.lock.release();
  (void)hx.lock.release();
  ASSERT_EQ(w.f.wait_for(3000ms), std::future_status::ready);
  auto r = w.f.get();
  EXPECT_LT(duration_cast<milliseconds>(w.at - t1), 1000ms);
  ASSERT_TRUE(r.lock) << r.report.error.message();
  EXPECT_LE(r.report.attempts, 3 * (kSwitches + 1) + 2) << "no herd of attempts";
  EXPECT_FALSE(r.lock.release().error);
  // Nothing registered: both channels unsubscribed, b's subscriber connections closed.
  EXPECT_TRUE(eventually([&] { return all_subscribed(nodes(), x, 0) && all_subscribed(nodes(), y, 0); }, 3000ms));
  EXPECT_TRUE(eventually([&] { return pubsub_clients(nodes()[0]) == 0; }, 3000ms)) << "subscriber connection left";
}

// ---- A3b: a set waiter switches back to a channel it waited on before (still
// subscribed: notify_idle_close has not passed), and the blocking key's release
// happened while the attempt that made it switch was in flight (the notifier saw
// it, on the channel without waiters then). A single key's waiter catches such a
// release (notifier::missed_release); the switch must too. Expected: the lock
// within ~0.5 s of the releases. The holds and releases are written directly
// (SET / DEL + PUBLISH, as kRelease does), node 3 is behind a proxy that delays
// the attempt's decision.
TEST(Review13b, set_waiter_switching_back_catches_release_during_attempt) {
  fault_proxy px(nodes()[2].port());
  std::vector<std::string> uris = nodes().uris();
  uris[2] = px.uri();
  pending w;
  client b(opts(uris));
  ASSERT_TRUE(wait_connected(b));
  const std::string x = unique("a3bx"), y = unique("a3by");
  auto hold = [](const std::string& k, const std::string& token, std::vector<std::size_t> on) {
    for (std::size_t i : on) nodes()[i].command({"SET", k, token, "PX", "30000"});
  };
  auto release = [](const std::string& k, const std::string& token, std::vector<std::size_t> on) {
    // Deleted everywhere first: a wake-up on the first PUBLISH finds the key gone.
    for (std::size_t i : on) nodes()[i].command({"DEL", k});
    for (std::size_t i : on) nodes()[i].command({"PUBLISH", k + ":released", token});
  };
  // Holders' tokens in a token's format (32 hex): other payloads are dropped unread
  // (issue 20, item 3).
  const std::string H1(32, 'a'), G(32, 'b'), H2(32, 'c');
  hold(y, H1, {0, 1, 2});
  (void)b.acquire_many_async({x, y}, waiting(5000ms, 20000ms), w.cb());
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), y); }, 3000ms)) << "blocked by y: waits on y";
  std::this_thread::sleep_for(50ms);
  // y released, x held: the woken attempt moves the waiter to x's channel.
  hold(x, G, {0, 1, 2});
  release(y, H1, {0, 1, 2});
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), x); }, 3000ms)) << "blocked by x: waits on x";
  std::this_thread::sleep_for(100ms);
  ASSERT_EQ(w.calls.load(), 0);
  // y held again (nodes 1 and 3), node 3 slow: the next attempt waits ~300 ms for it.
  hold(y, H2, {0, 2});
  px.latency(150ms);
  const auto t0 = clock_type::now();
  release(x, G, {0, 1, 2});  // wakes the waiter: its attempt finds y held on 1 (and 3)
  std::this_thread::sleep_for(220ms);  // node 3 ran the attempt at ~150 ms; it answers at ~300 ms
  release(y, H2, {0, 2});  // during the attempt, after every node ran it
  ASSERT_EQ(w.f.wait_for(8000ms), std::future_status::ready);
  auto r = w.f.get();
  const auto took = duration_cast<milliseconds>(w.at - t0);
  px.pass();
  ASSERT_TRUE(r.lock) << r.report.error.message();
  EXPECT_LT(took.count(), 1500) << "the release of y during the attempt was missed: waited the 5 s fallback; attempts "
                          << r.report.attempts;
  (void)r.lock.release();
}

// ---- A3c: a set waiter and a single-key waiter of x in one client, the set's
// registered first. x's release wakes ONE waiter: the set's, whose attempt fails on
// y (held by another) and moves it to y's channel. x is free, yet the single-key
// waiter was not woken: it sleeps its fallback, stretched by its queue place.
// Expected: the single-key waiter gets x well under its 3 s retry delay.
TEST(Review13b, set_waiter_woken_and_blocked_elsewhere_passes_the_wake_on) {
  pending ws, w1;
  client a(opts(nodes().uris()));
  client c(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  ASSERT_TRUE(wait_connected(c));
  const std::string x = unique("a3cx"), y = unique("a3cy");
  auto hx = a.acquire(x, once());
  auto hy = c.acquire(y, once());
  ASSERT_TRUE(hx.lock && hy.lock);
  const auto set_id = b.acquire_many_async({x, y}, waiting(3000ms, 20000ms), ws.cb());
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), x); }, 3000ms)) << "the set waits on x";
  std::this_thread::sleep_for(100ms);
  (void)b.acquire_async(x, waiting(3000ms, 20000ms), w1.cb());
  std::this_thread::sleep_for(200ms);  // its first attempt failed; it waits behind the set
  const auto t0 = clock_type::now();
  EXPECT_FALSE(hx.lock.release().error);
  ASSERT_EQ(w1.f.wait_for(10000ms), std::future_status::ready);
  auto r1 = w1.f.get();
  const auto took = duration_cast<milliseconds>(w1.at - t0);
  ASSERT_TRUE(r1.lock) << r1.report.error.message();
  EXPECT_LT(took.count(), 1000) << "x was free from the release on; attempts " << r1.report.attempts;
  (void)r1.lock.release();
  b.cancel(set_id);
  ASSERT_EQ(ws.f.wait_for(3000ms), std::future_status::ready);
  (void)hy.lock.release();
}

// A3d: the pass-on of A3c is bounded: five set waiters {x, y} on x's channel, y
// held throughout; x's release costs at most a few attempts per waiter (each moves to
// y's channel), then nothing until y's release, which hands the set over.
TEST(Review13b, set_waiters_blocked_elsewhere_cost_bounded_attempts) {
  constexpr int kWaiters = 5;
  std::vector<std::unique_ptr<pending>> ws;
  client a(opts(nodes().uris()));
  client c(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  ASSERT_TRUE(wait_connected(c));
  const std::string x = unique("a3dx"), y = unique("a3dy");
  auto hx = a.acquire(x, once());
  auto hy = c.acquire(y, once());
  ASSERT_TRUE(hx.lock && hy.lock);
  const long long issued = attempt_calls(nodes()[0]);
  for (int i = 0; i < kWaiters; ++i) {
    ws.push_back(std::make_unique<pending>());
    (void)b.acquire_many_async({x, y}, waiting(5000ms, 20000ms), ws.back()->cb());
  }
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), x); }, 3000ms));
  // Every waiter's first attempt (and a fresh one) is over: the channel shows
  // subscribed at the first waiter's SUBSCRIBE, the others may still be attempting.
  ASSERT_TRUE(settles([&] { return attempt_calls(nodes()[0]); }, issued + kWaiters, 300ms, 10000ms));
  const long long before = attempt_calls(nodes()[0]);
  EXPECT_FALSE(hx.lock.release().error);
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), y); }, 3000ms));
  // Every woken attempt (each waiter moves to y's channel) is over.
  ASSERT_TRUE(settles([&] { return attempt_calls(nodes()[0]); }, before + kWaiters, 400ms, 10000ms));
  // Each waiter's woken attempt and, y's channel being new, a fresh attempt for
  // those that joined it while its subscriptions were pending; the release of x
  // itself (a script) counts one. Seen: 11 to 13; bounded per waiter, not a loop.
  const long long spent = attempt_calls(nodes()[0]) - before;
  // (A loop of attempts would not even have settled above.)
  EXPECT_LE(spent, 3 * kWaiters + 1) << "attempts on node 1 for one release of x; reconnects "
                                     << b.stats().reconnects;
  for (auto& w : ws) EXPECT_EQ(w->calls.load(), 0);
  // Each winner releases at once (kReleaseMany publishes on x and y), in whatever
  // order they win: the next waiter is woken, none waits for its fallback (2.5 s at
  // least). Each hand-over is timed from the release before it.
  std::vector<bool> taken(ws.size(), false);
  auto released_at = clock_type::now();
  EXPECT_FALSE(hy.lock.release().error);
  int got = 0;
  const auto end = clock_type::now() + 30000ms;
  while (got < kWaiters && clock_type::now() < end) {
    bool any = false;
    for (std::size_t i = 0; i < ws.size(); ++i) {
      if (taken[i] || ws[i]->f.wait_for(0ms) != std::future_status::ready) continue;
      taken[i] = true;
      any = true;
      auto r = ws[i]->f.get();
      ASSERT_TRUE(r.lock) << r.report.error.message();
      ++got;
      EXPECT_LT(duration_cast<milliseconds>(ws[i]->at - released_at).count(), 2000)
          << "waiter " << i << " (hand-over " << got << ") waited for its fallback";
      released_at = clock_type::now();
      (void)r.lock.release();
    }
    if (!any) std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(got, kWaiters);
}

// ---- A4: the rollback of a failed set attempt publishes nothing, with a partial
// grant (node 3 free, nodes 1 and 2 held by a foreign token) and a late grant
// (node 3 behind a 400 ms proxy, command_timeout 150 ms). Expected: no key of the
// attempt left, no PUBLISH on any node, a waiter of y (another client) not woken.
TEST(Review13b, set_rollback_partial_and_late_grants_publish_nothing) {
  fault_proxy px(nodes()[2].port());
  std::vector<std::string> uris = nodes().uris();
  uris[2] = px.uri();
  client_options ob = options_for(uris);
  client b(ob);
  ASSERT_TRUE(wait_connected(b));
  const std::string x = unique("a4x"), y = unique("a4y");
  // Foreign holds of x on nodes 1 and 2: a set attempt gets node 3 only.
  for (std::size_t i = 0; i < 2; ++i) nodes()[i].command({"SET", x, "foreign", "PX", "20000"});
  auto publishes = [] {
    long long p = 0;
    for (std::size_t i = 0; i < 3; ++i) p += nodes()[i].calls("publish");
    return p;
  };
  const long long p0 = publishes();
  // Partial grant: node 3 granted {x, y}, rolled back.
  auto r1 = b.acquire_many({y, x}, once());
  EXPECT_EQ(r1.report.error, errc::contended);
  EXPECT_TRUE(eventually([&] { return nodes()[2].get(x) == std::nullopt && !nodes()[2].exists(y); }, 2000ms));
  // Late grant: node 3 answers after the round decided (held on 1 and 2 at once).
  px.latency(400ms);
  auto r2 = b.acquire_many({x, y}, once());
  EXPECT_EQ(r2.report.error, errc::contended);
  // The late grant and its delete (behind it on the connection), 2 x 400 ms each;
  // the proxy never drains meanwhile (the client's own traffic keeps it busy).
  std::this_thread::sleep_for(1500ms);
  px.pass();
  EXPECT_TRUE(eventually([&] { return !nodes()[2].exists(x) && !nodes()[2].exists(y); }, 3000ms))
      << "a late grant of the set left on node 3";
  EXPECT_FALSE(nodes()[0].exists(y));
  EXPECT_FALSE(nodes()[1].exists(y));
  EXPECT_EQ(publishes(), p0) << "a rollback (or late-grant delete) published a release";
  for (std::size_t i = 0; i < 2; ++i) nodes()[i].command({"DEL", x});
}

// ---- A5: a set release that deleted on one node only (nodes 2 and 3 paused)
// publishes there and wakes a set waiter; its attempt is a normal quorum round and
// must not grant while two nodes still hold the keys.
TEST(Review13b, set_release_on_one_node_does_not_grant_a_waiter) {
  pending w;
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string x = unique("a5x"), y = unique("a5y");
  auto held = a.acquire_many({x, y}, once(20000ms));
  ASSERT_TRUE(held.lock);
  (void)b.acquire_many_async({y, x}, waiting(5000ms, 15000ms), w.cb());
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), y) || all_subscribed(nodes(), x); }, 3000ms));
  std::this_thread::sleep_for(50ms);
  const long long msgs0 = nodes()[0].calls("publish");
  nodes()[1].pause();
  nodes()[2].pause();
  resume_on_exit g1{nodes()[1]}, g2{nodes()[2]};
  auto rel = std::async(std::launch::async, [&] { return held.lock.release(); });
  ASSERT_TRUE(eventually([&] { return nodes()[0].calls("publish") >= msgs0 + 2; }, 2000ms)) << "node 1 published";
  std::this_thread::sleep_for(1200ms);  // the woken attempt times out on 2 and 3
  EXPECT_EQ(w.calls.load(), 0) << "granted on a release seen on one node of three";
  const auto resumed = clock_type::now();
  nodes()[1].resume();
  nodes()[2].resume();
  (void)rel.get();
  ASSERT_EQ(w.f.wait_for(8000ms), std::future_status::ready);
  auto r = w.f.get();
  ASSERT_TRUE(r.lock) << r.report.error.message();
  EXPECT_GE(w.at, resumed);
  (void)r.lock.release();
}

// ---- A6: sets and single keys mixed, overlapping, concurrent, waiting with
// notifications, with nodes paused now and then. Per key, no two holders'
// windows (completion to min(validity end, release)) overlap.
TEST(Review13b, mixed_sets_and_singles_never_share_a_key) {
  client_options o = options_for(nodes().uris());
  o.command_timeout = 150ms;
  o.connect_timeout = 400ms;
  constexpr int kClients = 3, kThreads = 2, kOps = 15;
  std::vector<std::unique_ptr<client>> cls;
  for (int i = 0; i < kClients; ++i) {
    cls.push_back(std::make_unique<client>(o));
    ASSERT_TRUE(wait_connected(*cls.back()));
  }
  const std::vector<std::string> keys{unique("a6a"), unique("a6b"), unique("a6c")};
  const std::vector<std::vector<int>> shapes{{0}, {1}, {2}, {0, 1}, {1, 2}, {2, 0}, {0, 1, 2}};
  std::mutex mu;
  std::map<std::string, std::vector<grant>> per_key;
  std::atomic<int> wins{0}, fails{0};
  std::atomic<bool> stop{false};
  std::thread pauser([&] {
    std::mt19937 rng(77);
    for (int i = 0; i < 40 && !stop.load(); ++i) {
      redis_node& n = nodes()[rng() % 3];
      n.pause();
      std::this_thread::sleep_for(milliseconds(50 + rng() % 200));
      n.resume();
      std::this_thread::sleep_for(milliseconds(100 + rng() % 200));
    }
  });
  std::vector<std::thread> ts;
  for (int ci = 0; ci < kClients; ++ci) {
    for (int ti = 0; ti < kThreads; ++ti) {
      ts.emplace_back([&, ci, ti] {
        std::mt19937 rng(static_cast<unsigned>(ci * 31 + ti));
        const std::string owner = "c" + std::to_string(ci) + "t" + std::to_string(ti);
        for (int k = 0; k < kOps; ++k) {
          const auto& shape = shapes[rng() % shapes.size()];
          std::vector<std::string> rs;
          for (int s : shape) rs.push_back(keys[static_cast<std::size_t>(s)]);
          acquire_options ao = waiting(milliseconds(20 + rng() % 30), 1500ms, 1000ms);
          const std::int64_t inv = mono_ns();
          acquire_result r = rs.size() == 1 ? cls[ci]->acquire(rs[0], ao) : cls[ci]->acquire_many(rs, ao);
          const std::int64_t done = mono_ns();
          if (!r.lock) {
            ++fails;
            continue;
          }
          ++wins;
          grant g;
          g.owner = owner;
          g.token = r.lock.info().token;
          g.invoke_ns = inv;
          g.complete_ns = done;
          g.valid_until_ns = done + duration_cast<std::chrono::nanoseconds>(r.report.validity).count();
          std::this_thread::sleep_for(milliseconds(rng() % 15));
          g.release_ns = mono_ns();
          (void)r.lock.release();
          std::lock_guard<std::mutex> l(mu);
          for (const auto& k2 : rs) per_key[k2].push_back(g);
        }
      });
    }
  }
  for (auto& t : ts) t.join();
  stop = true;
  pauser.join();
  for (std::size_t i = 0; i < 3; ++i) nodes()[i].resume();
  for (const auto& [k, gs] : per_key) {
    const auto ov = check_mutual_exclusion(gs);
    EXPECT_TRUE(ov.empty()) << k << ": " << ov.size() << " overlaps, first: " << describe(gs, ov.front());
  }
  EXPECT_GT(wins.load(), kClients * kThreads * kOps / 3) << "fails " << fails.load();
  for (const auto& k : keys) {
    EXPECT_TRUE(eventually([&] { return nodes().count_key(k) == 0; }, 3000ms)) << k << " left behind";
  }
}

// ---- A7: election. An unbounded campaign (deadline 0) against a cluster that is
// down: the acquire retries at retry_delay inside its 24 h slice; no spin of
// acquires. Cancel ends it promptly.
class counting : public observer {
 public:
  void on_operation_started(const operation_started& e) override {
    if (e.kind == operation_kind::acquire && !e.background) ++acquires;
  }
  void on_retry_scheduled(const retry_scheduled&) override { ++retries; }
  std::atomic<int> acquires{0}, retries{0};
};

TEST(Review13b, unbounded_campaign_on_down_cluster_does_not_spin) {
  std::vector<std::unique_ptr<fault_proxy>> px;
  std::vector<std::string> uris;
  for (std::size_t i = 0; i < 3; ++i) {
    px.push_back(std::make_unique<fault_proxy>(nodes()[i].port()));
    px.back()->reset();
    uris.push_back(px.back()->uri());
  }
  auto obs = std::make_shared<counting>();
  client_options o = options_for(uris);
  o.observers.push_back(obs);
  std::promise<campaign_result> p;
  auto f = p.get_future();
  client c(o);
  election e(c);
  campaign_options co;
  co.ttl = 2000ms;
  co.retry_delay = 100ms;
  const auto id = e.campaign_async(unique("a7"), "X", co, [&p](campaign_result r) { p.set_value(std::move(r)); });
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(f.wait_for(0ms), std::future_status::timeout) << "an unbounded campaign ended on a down cluster";
  EXPECT_LE(obs->acquires.load(), 2) << "acquires restarted in a loop";
  // The delay is drawn from [retry_delay / 2, retry_delay]: at most 1500 / 50 + 1.
  EXPECT_LE(obs->retries.load(), 31) << "retries faster than retry_delay / 2";
  const auto t0 = clock_type::now();
  e.cancel(id);
  ASSERT_EQ(f.wait_for(2000ms), std::future_status::ready);
  EXPECT_LT(since(t0), 1000ms);
  EXPECT_EQ(f.get().report.error, errc::cancelled);
}

// A7d: an unbounded campaign whose acquire succeeds but whose publication is
// refused on every node (an ACL user without access to the record key
// "election:<role>:leader"). Expected: no loop of acquire + publish + release
// rounds at the speed of the network — the campaign either ends (a permanent
// error) or acquires again no faster than retry_delay — and cancel ends it.
TEST(Review13b, unbounded_campaign_refused_publication_does_not_spin) {
  const std::string role = unique("a7d");
  node_config cfg;
  cfg.acl_users = {"user camp on >camp-pw ~election:" + role + " ~election:" + role + ":fence +@all"};
  redis_cluster cl(3, cfg);
  auto obs = std::make_shared<counting>();
  client_options o = opts(uris_as(cl, "camp", "camp-pw"));
  o.observers.push_back(obs);
  std::promise<campaign_result> p;
  auto f = p.get_future();
  client c(o);
  std::this_thread::sleep_for(300ms);  // connected (the probe key is not this user's)
  election e(c);
  campaign_options co;
  co.ttl = 5000ms;
  co.retry_delay = 200ms;
  const auto id = e.campaign_async(role, "X", co, [&p](campaign_result r) { p.set_value(std::move(r)); });
  std::this_thread::sleep_for(1000ms);
  const int acquires = obs->acquires.load();
  const long long evals = cl[0].calls("eval") + cl[0].calls("evalsha");
  // Fixed: three publications short of a quorum in a row end the campaign.
  EXPECT_LE(acquires, 3) << "acquires in 1 s; EVALs on node 1: " << evals;
  if (f.wait_for(0ms) == std::future_status::ready) {
    auto r = f.get();
    EXPECT_FALSE(r);
    EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
    // The last lock it took was released: nothing left of the campaign.
    EXPECT_TRUE(eventually([&] { return cl.count_key("election:" + role) == 0; })) << cl.count_key("election:" + role);
  } else {
    ADD_FAILURE() << "the campaign did not end after its publications were refused; acquires: " << acquires;
    e.cancel(id);
    ASSERT_EQ(f.wait_for(2000ms), std::future_status::ready);
    EXPECT_EQ(f.get().report.error, errc::cancelled);
  }
}

// A7b: an unbounded campaign whose acquire fails with a non-retryable error (a TTL
// the client refuses) ends with it at once, without a loop of acquires.
TEST(Review13b, unbounded_campaign_non_retryable_error_ends) {
  auto obs = std::make_shared<counting>();
  client_options o = opts(nodes().uris());
  o.observers.push_back(obs);
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  election e(c);
  campaign_options co;
  co.ttl = 1ms;  // below the drift: invalid_argument
  co.retry_delay = 100ms;
  const auto t0 = clock_type::now();
  auto r = e.campaign(unique("a7b"), "X", co);
  EXPECT_LT(since(t0), 500ms);
  EXPECT_FALSE(r);
  EXPECT_EQ(r.report.error, errc::invalid_argument) << r.report.error.message();
  EXPECT_LE(obs->acquires.load(), 1);
}

// A7c: an unbounded campaign waiting on a held role, cancelled while its acquire
// waits (joined, with notifications): cancelled at once; the leader resigning
// afterwards does not make it leader.
TEST(Review13b, unbounded_campaign_cancel_during_wait) {
  std::promise<campaign_result> p;
  auto f = p.get_future();
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  election ea(a), eb(b);
  const std::string role = unique("a7c");
  campaign_options co;
  co.ttl = 5000ms;
  co.retry_delay = 5000ms;
  auto wa = ea.campaign(role, "A", co);
  ASSERT_TRUE(wa);
  const auto id = eb.campaign_async(role, "B", co, [&p](campaign_result r) { p.set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), "election:" + role); }, 3000ms));
  std::this_thread::sleep_for(100ms);
  const auto t0 = clock_type::now();
  eb.cancel(id);
  ASSERT_EQ(f.wait_for(2000ms), std::future_status::ready);
  EXPECT_LT(since(t0), 500ms);
  auto rb = f.get();
  EXPECT_EQ(rb.report.error, errc::cancelled);
  (void)wa.leadership.resign();
  std::this_thread::sleep_for(300ms);
  auto who = eb.observe(role);
  EXPECT_FALSE(who.identity.has_value()) << "a cancelled campaign took the role: " << who.identity.value_or("");
}

}  // namespace
}  // namespace redlock::test
