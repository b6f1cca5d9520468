// Waiting without polling (lib/notify.h, docs/coordination.md): release
// notifications on real redis-server nodes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fault_proxy.h"
#include "redis_node.h"
#include "redlock/redlock.h"
#include "test_util.h"
#include "tls_certs.h"
#include "wait_util.h"

namespace redlock::test {
namespace {

using namespace wait_util;

long long total_calls(redis_cluster& cl, const std::string& cmd) {
  long long t = 0;
  for (std::size_t i = 0; i < cl.size(); ++i) t += cl[i].calls(cmd);
  return t;
}

// How long a waiter with a 5 s retry delay takes to get the lock after the holder
// releases it.
std::chrono::milliseconds handover(client& holder_client, client& waiter_client, redis_cluster& cl,
                                   const std::string& res) {
  auto held = holder_client.acquire(res, once());
  EXPECT_TRUE(held.lock) << held.report.error.message();
  auto fut = std::async(std::launch::async, [&] { return waiter_client.acquire(res, waiting(5000ms)); });
  EXPECT_TRUE(eventually([&] { return all_subscribed(cl, "" + res); }, 5000ms));
  std::this_thread::sleep_for(50ms);  // the second attempt (right after subscribing) has failed
  const auto t0 = clock_type::now();
  EXPECT_FALSE(held.lock.release().error);
  auto got = fut.get();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0);
  EXPECT_TRUE(got.lock) << got.report.error.message();
  if (took > 500ms) {
    for (const auto& n : got.report.nodes) ADD_FAILURE() << "attempts " << got.report.attempts << " " << n.node << " " << n.detail;
  }
  return took;
}

redis_cluster& nodes() {
  static redis_cluster* cl = new redis_cluster(3);
  return *cl;
}

TEST(Wait, waiter_wakes_at_the_release_not_at_its_retry_delay) {
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const auto took = handover(a, b, nodes(), unique("wake"));
  EXPECT_LT(took, 500ms) << "retry delay is 5 s";
}

TEST(Wait, polling_when_notifications_are_off) {
  client_options o = opts(nodes().uris());
  o.wait_notifications = false;
  client a(opts(nodes().uris()));
  client b(o);
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string res = unique("poll");
  auto held = a.acquire(res, once());
  ASSERT_TRUE(held.lock);
  auto fut = std::async(std::launch::async, [&] { return b.acquire(res, waiting(300ms, 5000ms)); });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(subscribers(nodes()[0], res), 0);
  EXPECT_FALSE(held.lock.release().error);
  auto got = fut.get();
  EXPECT_TRUE(got.lock);
}

// The release happens after the waiter's failed attempt ran on the nodes but
// before its subscription is in place (a 150 ms proxy latency each way on the
// waiter's links; the holder releases directly): the notification is missed, and
// the waiter must not sleep its 5 s retry delay — it tries again as soon as its
// subscription is confirmed.
TEST(Wait, release_between_failed_attempt_and_subscription_is_not_missed) {
  std::vector<std::unique_ptr<fault_proxy>> proxies;
  std::vector<std::string> via;
  for (std::size_t i = 0; i < nodes().size(); ++i) {
    proxies.push_back(std::make_unique<fault_proxy>(nodes()[i].port()));
    via.push_back(proxies.back()->uri());
  }
  client_options ob = options_for(via);
  ob.command_timeout = 2000ms;
  ob.connect_timeout = 3000ms;
  client a(opts(nodes().uris()));
  client b(ob);
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  for (auto& p : proxies) p->latency(150ms);
  const std::string res = unique("race");
  auto held = a.acquire(res, once());
  ASSERT_TRUE(held.lock);
  const long long sets_before = total_calls(nodes(), "set");
  const auto t0 = clock_type::now();
  auto fut = std::async(std::launch::async, [&] { return b.acquire(res, waiting(5000ms, 15000ms)); });
  // The waiter's SET ran on every node (and failed): release now, long before its
  // reply is back (150 ms) and its SUBSCRIBE arrives (another 150 ms).
  ASSERT_TRUE(eventually([&] { return total_calls(nodes(), "set") >= sets_before + 3; }, 3000ms));
  EXPECT_EQ(subscribers(nodes()[0], res), 0);
  EXPECT_FALSE(held.lock.release().error);
  auto got = fut.get();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0);
  EXPECT_TRUE(got.lock) << got.report.error.message();
  EXPECT_LT(took, 3000ms) << "retry delay is 5 s";
  EXPECT_EQ(got.report.attempts, 2);
}

// The holder is another client library: a plain SET NX PX by hand, and nothing is
// published when it goes. The waiter gets the lock by its fallback timer.
TEST(Wait, holder_that_publishes_nothing_is_waited_out_by_the_fallback_timer) {
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(b));
  const std::string res = unique("foreign");
  for (std::size_t i = 0; i < nodes().size(); ++i) {
    ASSERT_EQ(nodes()[i].command({"SET", res, "other-library-token", "NX", "PX", "800"}), "OK");
  }
  const auto t0 = clock_type::now();
  auto fut = std::async(std::launch::async, [&] { return b.acquire(res, waiting(200ms, 10000ms)); });
  std::this_thread::sleep_for(300ms);
  // Deleted by hand on one node, expiring on the others: no message at all.
  nodes()[0].command({"DEL", res});
  auto got = fut.get();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0);
  EXPECT_TRUE(got.lock) << got.report.message() << " attempts " << got.report.attempts;
  EXPECT_GE(took, 700ms);   // not before the foreign keys expired on a quorum
  EXPECT_LT(took, 2500ms);  // the holder's TTL + one fallback delay, with slack
}

// W waiters of one resource in one client, one release: a bounded number of
// acquire rounds (one woken waiter), not W rounds on every node.
TEST(Wait, one_release_wakes_one_waiter_not_the_herd) {
  constexpr int kWaiters = 20;
  // Before the clients: an early return (a failed ASSERT) destroys b with waiters
  // pending, and b's destructor runs their callbacks (cancelled), which count here.
  std::atomic<int> done{0}, got{0};
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string res = unique("herd");
  auto held = a.acquire(res, once());
  ASSERT_TRUE(held.lock);
  std::vector<std::uint64_t> ids;
  const long long sets_issued = total_calls(nodes(), "set");
  for (int i = 0; i < kWaiters; ++i) {
    ids.push_back(b.acquire_async(res, waiting(5000ms, 30000ms), [&](acquire_result r) {
      if (r.lock) {
        ++got;
        r.lock.detach();
      }
      ++done;
    }));
  }
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), res); }, 5000ms));
  // Every waiter made its first attempt (3 SETs) and, subscribed afresh, maybe one
  // more: nothing runs any more. (The channel shows subscribed at the first
  // waiter's SUBSCRIBE, while the others may still be in their attempts.)
  ASSERT_TRUE(settles([&] { return total_calls(nodes(), "set"); }, sets_issued + 3 * kWaiters, 300ms, 10000ms))
      << "the waiters' first attempts never ended";
  const long long sets_before = total_calls(nodes(), "set");
  EXPECT_FALSE(held.lock.release().error);
  // Bounded by the fallback (5 s) even if the woken attempt failed on a loaded machine.
  ASSERT_TRUE(eventually([&] { return got.load() == 1; }, 8000ms));
  std::this_thread::sleep_for(300ms);  // a window in which a herd of rounds would show
  const long long rounds = (total_calls(nodes(), "set") - sets_before) / static_cast<long long>(nodes().size());
  EXPECT_EQ(got.load(), 1);
  // The woken attempt; on a loaded machine also its retry at once after losing a
  // race with the release on a node, and the fallback that rescues both (the
  // earliest waiter's after 2.5-5 s, the next one's stretched to 5-10 s). A herd is
  // one round per waiter (20).
  EXPECT_LE(rounds, 4) << "one release woke " << rounds << " acquire rounds for " << kWaiters << " waiters";
  for (auto id : ids) b.cancel(id);
  ASSERT_TRUE(eventually([&] { return done.load() == kWaiters; }, 3000ms));
}

TEST(Wait, a_waiter_that_lost_a_race_peeks_and_skips_an_attempt_when_another_holds_a_quorum) {
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string res = unique("peek");
  auto held = a.acquire(res, once());
  ASSERT_TRUE(held.lock);
  auto fut = std::async(std::launch::async, [&] { return b.acquire(res, waiting(5000ms, 8000ms)); });
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), res); }, 5000ms));
  std::this_thread::sleep_for(100ms);
  // A forged release on two of three nodes wakes the waiter: its attempt loses (A holds).
  long long sets = total_calls(nodes(), "set");
  for (std::size_t i : {0u, 1u}) nodes()[i].command({"PUBLISH", res + ":released", "forged-1"});
  ASSERT_TRUE(eventually([&] { return total_calls(nodes(), "set") >= sets + 3; }, 1000ms));
  std::this_thread::sleep_for(100ms);  // the attempt has failed
  EXPECT_EQ(b.stats().wake_ups_skipped, 0u);
  // Within the second: the next wake-up peeks, sees A's token on every node, skips.
  sets = total_calls(nodes(), "set");
  const long long gets = total_calls(nodes(), "get");
  for (std::size_t i : {0u, 1u}) nodes()[i].command({"PUBLISH", res + ":released", "forged-2"});
  ASSERT_TRUE(eventually([&] { return b.stats().wake_ups_skipped == 1; }, 1000ms)) << b.stats().wake_ups_skipped;
  EXPECT_GE(total_calls(nodes(), "get"), gets + 2);
  EXPECT_EQ(total_calls(nodes(), "set"), sets) << "an attempt was made although A holds every node";
  // The real release: the peek finds the keys gone and the attempt succeeds.
  EXPECT_FALSE(held.lock.release().error);
  auto got = fut.get();
  EXPECT_TRUE(got.lock) << got.report.message();
  EXPECT_EQ(b.stats().wake_ups_skipped, 1u);
  if (got.lock) (void)got.lock.release();
}

// Only a re-subscription after a reconnect wakes a waiter when it is confirmed (a
// release may have been lost meanwhile). A channel subscribed for the first time on
// a subscriber connection that is already up must not: the waiter's fallback timer
// is armed then, and such a wake-up was an attempt for nothing that also counted as
// a lost race (the next real release then came with a 0-3 ms stagger: the hand-over
// p50 went from 0.6 to 1.7 ms in bench_e2e handover).
TEST(Wait, a_new_channel_on_a_connected_subscriber_wakes_no_waiter_when_confirmed) {
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string r1 = unique("first-channel"), r2 = unique("second-channel");
  auto h1 = a.acquire(r1, once());
  auto h2 = a.acquire(r2, once());
  ASSERT_TRUE(h1.lock && h2.lock);
  // b's subscriber connections come up for r1's waiter.
  auto f1 = std::async(std::launch::async, [&] { return b.acquire(r1, waiting(5000ms, 8000ms)); });
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), r1); }, 5000ms));
  std::this_thread::sleep_for(200ms);
  // A second waiter, on r2: its first attempt, then one at once if its subscription
  // was confirmed after that attempt started ("fresh") — 2 attempts, 3 SETs each,
  // and nothing more until the fallback (2.5-5 s).
  const long long sets = total_calls(nodes(), "set");
  auto f2 = std::async(std::launch::async, [&] { return b.acquire(r2, waiting(5000ms, 8000ms)); });
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), r2); }, 5000ms));
  std::this_thread::sleep_for(500ms);
  EXPECT_LE(total_calls(nodes(), "set") - sets, 6) << "an attempt woken by the new channel's own confirmation";
  EXPECT_FALSE(h1.lock.release().error);
  EXPECT_FALSE(h2.lock.release().error);
  auto g1 = f1.get();
  auto g2 = f2.get();
  EXPECT_TRUE(g1.lock && g2.lock) << g1.report.message() << " / " << g2.report.message();
  if (g1.lock) (void)g1.lock.release();
  if (g2.lock) (void)g2.lock.release();
}

TEST(Wait, subscriber_reconnects_after_a_node_restart) {
  client a(opts(nodes().uris()));
  client b(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string res = unique("restart");
  auto held = a.acquire(res, once());
  ASSERT_TRUE(held.lock);
  auto fut = std::async(std::launch::async, [&] { return b.acquire(res, waiting(5000ms)); });
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), res); }, 5000ms));
  // Node 2 restarts (keeping its data: the lock key stays): the subscription comes back.
  nodes()[2].restart(true);
  ASSERT_TRUE(eventually([&] { return subscribers(nodes()[2], res) == 1; }, 5000ms));
  // Only node 2 notifies now that the other nodes' messages are gone: drop theirs.
  std::this_thread::sleep_for(100ms);
  const auto t0 = clock_type::now();
  EXPECT_FALSE(held.lock.release().error);
  auto got = fut.get();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0);
  // The restarted node is quarantined (restart guard): the waiter gets a quorum
  // of the two others, woken by their notifications.
  EXPECT_TRUE(got.lock) << got.report.error.message();
  EXPECT_LT(took, 1000ms);
}

TEST(Wait, idle_subscriber_connection_closes) {
  client_options o = opts(nodes().uris());
  o.notify_idle_close = 200ms;
  client a(opts(nodes().uris()));
  client b(o);
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string res = unique("idle");
  const auto took = handover(a, b, nodes(), res);
  EXPECT_LT(took, 500ms);
  EXPECT_TRUE(eventually([&] { return all_subscribed(nodes(), res, 0); }, 3000ms));
  // No subscriber connection left: CLIENT LIST shows no client in pub/sub mode (flag P)
  // but this test's own clients may; count b's by name-less flag after the channel went.
  EXPECT_TRUE(eventually([&] {
    const std::string list = nodes()[0].command({"CLIENT", "LIST"});
    return list.find("flags=P") == std::string::npos;
  }, 3000ms));
}

// A user without pub/sub permissions (Redis 7's acl-pubsub-default resetchannels):
// the release still succeeds (redis.pcall around PUBLISH), SUBSCRIBE is refused with
// NOPERM, and the waiter gets the lock by its fallback timer.
TEST(Wait, a_user_without_channel_permissions_releases_and_waits_by_timer) {
  for (std::size_t i = 0; i < nodes().size(); ++i) {
    ASSERT_EQ(nodes()[i].command({"ACL", "SETUSER", "nochan", "on", ">pw", "~*", "+@all", "resetchannels"}), "OK");
  }
  client a(opts(uris_as(nodes(), "nochan", "pw")));
  client b(opts(uris_as(nodes(), "nochan", "pw")));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string res = unique("nochan");
  auto held = a.acquire(res, once());
  ASSERT_TRUE(held.lock) << held.report.message();
  auto fut = std::async(std::launch::async, [&] { return b.acquire(res, waiting(200ms, 10000ms)); });
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(subscribers(nodes()[0], res), 0);
  const report rel = held.lock.release();
  EXPECT_FALSE(rel.error) << rel.message();
  auto got = fut.get();
  EXPECT_TRUE(got.lock) << got.report.message();
}

TEST(Wait, tls_nodes_notify_too) {
  node_config c;
  c.tls = true;
  c.tls_cert_file = tls_certs::get().server_cert;
  c.tls_key_file = tls_certs::get().server_key;
  c.tls_ca_file = tls_certs::get().ca_file;
  redis_cluster cl(3, c);
  client_options o = opts(cl.uris());
  o.tls.ca_file = tls_certs::get().ca_file;
  client a(o);
  client b(o);
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const auto took = handover(a, b, cl, unique("tls"));
  EXPECT_LT(took, 500ms);
}

}  // namespace
}  // namespace redlock::test
