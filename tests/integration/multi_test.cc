// Several resources at once (client::acquire_many) on real redis-server nodes:
// all or none per node, contention between sets and single keys, rollback of
// partial grants, extension, release and the watchdog of a set, errors; sets under
// node pauses, what a set's rollback and release publish to waiters, sets mixed with
// single keys under pauses.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fault_proxy.h"
#include "history.h"
#include "redis_node.h"
#include "test_util.h"
#include "wait_util.h"

namespace redlock::test {
namespace {

using clk = std::chrono::steady_clock;
using strings = std::vector<std::string>;

// Every node holds `key` with the value `token`.
bool everywhere(redis_cluster& cl, const std::string& key, const std::string& token) {
  return cl.count_value(key, token) == static_cast<int>(cl.size());
}

TEST(AcquireMany, a_set_holds_every_key_with_one_token_on_every_node) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  auto r = a.acquire_many({"m-a", "m-b", "m-c"}, once(10000ms));
  ASSERT_TRUE(r) << r.report.message();
  const lease l = r.lock.info();
  EXPECT_EQ(l.resources, (strings{"m-a", "m-b", "m-c"}));
  EXPECT_EQ(l.resource, "m-a,m-b,m-c");
  EXPECT_GT(r.report.validity.count(), 9000);
  // (Decided at a quorum: the last grant may land just after.)
  for (const char* k : {"m-a", "m-b", "m-c"}) {
    EXPECT_TRUE(eventually([&] { return everywhere(cl, k, l.token); })) << k;
    for (std::size_t i = 0; i < cl.size(); ++i) EXPECT_GT(cl[i].pttl(k), 9000) << k;
  }
  EXPECT_TRUE(r.lock.release());
  // Decided at a quorum: the last node's delete may land just after.
  for (const char* k : {"m-a", "m-b", "m-c"})
    EXPECT_TRUE(eventually([&] { return cl.count_key(k) == 0; })) << k;
}

TEST(AcquireMany, a_single_key_of_a_held_set_is_contended_and_a_set_over_a_held_key_too) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  client b(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  auto set = a.acquire_many({"s-a", "s-b"}, once());
  ASSERT_TRUE(set) << set.report.message();
  auto single = b.acquire("s-b", once());
  EXPECT_EQ(single.report.error, errc::contended) << single.report.message();
  auto other = b.acquire("s-c", once());
  EXPECT_TRUE(other) << other.report.message();
  // {s-b, s-c} overlaps the held set on s-b: refused everywhere, nothing written,
  // and every node names the resource it found held.
  auto overlap = b.acquire_many({"s-c2", "s-b"}, once());
  EXPECT_EQ(overlap.report.error, errc::contended) << overlap.report.message();
  // (Decided at two refusals: the third answer may still be pending.)
  ASSERT_EQ(overlap.report.nodes.size(), 3u);
  EXPECT_GE(overlap.report.count(node_status::held), 2);
  for (const node_result& n : overlap.report.nodes) {
    if (n.status == node_status::held) {
      EXPECT_EQ(n.detail, "held: s-b");
    }
  }
  EXPECT_EQ(cl.count_key("s-c2"), 0);
  // A set over a key held alone is refused as well.
  auto over_single = a.acquire_many({"s-c", "s-d"}, once());
  EXPECT_EQ(over_single.report.error, errc::contended);
  EXPECT_EQ(cl.count_key("s-d"), 0);
  EXPECT_TRUE(set.lock.release());
  auto after = b.acquire_many({"s-a", "s-b"}, once());
  EXPECT_TRUE(after) << after.report.message();
}

// Node 1 and 2 hold s-b for another owner: only node 3 grants, the attempt fails
// contended, and the rollback deletes what node 3 granted: no key left behind.
TEST(AcquireMany, a_failed_attempt_rolls_back_every_key_on_every_node) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  cl[0].command({"SET", "r-b", "foreign", "PX", "20000"});
  cl[1].command({"SET", "r-b", "foreign", "PX", "20000"});
  auto r = a.acquire_many({"r-a", "r-b", "r-c"}, once());
  EXPECT_EQ(r.report.error, errc::contended) << r.report.message();
  EXPECT_TRUE(eventually([&] { return cl.count_key("r-a") == 0 && cl.count_key("r-c") == 0; }));
  EXPECT_EQ(cl.count_value("r-b", "foreign"), 2);
  EXPECT_FALSE(cl[2].exists("r-b"));
}

// Only node 1 holds s-b for another owner: nodes 2 and 3 grant the whole set (a
// quorum), node 1 none of it: all or none per node.
TEST(AcquireMany, a_quorum_of_whole_grants_wins_and_the_refusing_node_holds_none_of_the_set) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  cl[0].command({"SET", "q-b", "foreign", "PX", "20000"});
  auto r = a.acquire_many({"q-a", "q-b"}, once());
  ASSERT_TRUE(r) << r.report.message();
  // Decided at two grants: node 1's refusal may still be pending.
  if (r.report.nodes[0].status == node_status::held) {
    EXPECT_EQ(r.report.nodes[0].detail, "held: q-b");
  } else {
    EXPECT_EQ(r.report.nodes[0].status, node_status::pending);
  }
  EXPECT_FALSE(cl[0].exists("q-a"));
  EXPECT_EQ(cl[0].get("q-b"), std::optional<std::string>("foreign"));
  const std::string token = r.lock.info().token;
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(cl[i].get("q-a"), token);
    EXPECT_EQ(cl[i].get("q-b"), token);
  }
  EXPECT_TRUE(r.lock.release());
  EXPECT_TRUE(eventually([&] { return cl.count_key("q-a") == 0 && cl.count_key("q-b") == 1; }));
  EXPECT_EQ(cl.count_value("q-b", "foreign"), 1);
}

TEST(AcquireMany, extend_re_times_every_key_and_refuses_when_one_key_is_not_held) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  auto r = a.acquire_many({"e-a", "e-b"}, once(3000ms));
  ASSERT_TRUE(r) << r.report.message();
  const report ext = r.lock.extend(20000ms);
  ASSERT_TRUE(ext) << ext.message();
  EXPECT_GT(ext.validity.count(), 15000);
  EXPECT_TRUE(eventually([&] {
    for (std::size_t i = 0; i < cl.size(); ++i) {
      if (cl[i].pttl("e-a") <= 15000 || cl[i].pttl("e-b") <= 15000) return false;
    }
    return true;
  }));
  // client::extend of the lease goes through the handle, as for one key.
  const report again = a.extend(r.lock.info(), 15000ms);
  EXPECT_TRUE(again) << again.message();
  // e-b taken over on every node: the set is no longer held, nothing is re-timed.
  for (std::size_t i = 0; i < cl.size(); ++i) cl[i].command({"SET", "e-b", "foreign", "PX", "60000"});
  const long long before = cl[0].pttl("e-a");
  const report lost = r.lock.extend(40000ms);
  EXPECT_EQ(lost.error, errc::lock_lost) << lost.message();
  EXPECT_TRUE(r.lock.lost());
  for (std::size_t i = 0; i < cl.size(); ++i) {
    EXPECT_LE(cl[i].pttl("e-a"), before + 50);
    EXPECT_EQ(cl[i].get("e-b"), std::optional<std::string>("foreign"));
  }
}

TEST(AcquireMany, release_deletes_the_keys_holding_the_token_and_a_second_release_is_not_owner) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  auto r = a.acquire_many({"rel-a", "rel-b"}, once());
  ASSERT_TRUE(r) << r.report.message();
  const lease l = r.lock.info();
  // rel-b lost on every node to another owner: release deletes rel-a, leaves rel-b.
  for (std::size_t i = 0; i < cl.size(); ++i) cl[i].command({"SET", "rel-b", "foreign", "PX", "60000"});
  const report rel = a.release(l);
  EXPECT_TRUE(rel) << rel.message();
  EXPECT_TRUE(eventually([&] { return cl.count_key("rel-a") == 0; }));
  EXPECT_EQ(cl.count_value("rel-b", "foreign"), 3);
  const report twice = a.release(l);
  EXPECT_EQ(twice.error, errc::not_owner) << twice.message();
}

// A lease rebuilt by hand (a CLI, another process) names the set in `resources`.
TEST(AcquireMany, a_rebuilt_lease_of_a_set_extends_and_releases_every_key) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  auto r = a.acquire_many({"rb-a", "rb-b"}, once(5000ms));
  ASSERT_TRUE(r) << r.report.message();
  lease rebuilt;
  rebuilt.token = r.lock.detach().token;
  rebuilt.resources = {"rb-a", "rb-b"};
  const report ext = a.extend(rebuilt, 30000ms);
  EXPECT_TRUE(ext) << ext.message();
  EXPECT_TRUE(eventually([&] { return cl[2].pttl("rb-b") > 25000; }));
  lease bad = rebuilt;
  bad.resources = {"rb-a", "rb-a"};
  EXPECT_EQ(a.release(bad).error, errc::invalid_argument);
  const report rel = a.release(rebuilt);
  EXPECT_TRUE(rel) << rel.message();
  EXPECT_TRUE(eventually([&] { return cl.count_key("rb-a") == 0 && cl.count_key("rb-b") == 0; }));
}

TEST(AcquireMany, the_watchdog_keeps_a_set_and_reports_its_loss) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  acquire_options o = once(900ms);
  o.auto_extend = true;
  o.extend_interval = 250ms;
  std::atomic<int> lost_calls{0};
  std::mutex mu;
  strings lost_resources;
  o.on_lost = [&](const lease& l, const report&) {
    std::lock_guard<std::mutex> g(mu);
    lost_resources = l.resources;
    ++lost_calls;
  };
  auto r = a.acquire_many({"w-a", "w-b"}, o);
  ASSERT_TRUE(r) << r.report.message();
  std::this_thread::sleep_for(2000ms);  // more than twice the TTL
  EXPECT_TRUE(r.lock.owns_lock());
  const std::string token = r.lock.info().token;
  EXPECT_TRUE(everywhere(cl, "w-a", token));
  EXPECT_TRUE(everywhere(cl, "w-b", token));
  // Another owner takes w-b everywhere: the next extension finds the set not held.
  for (std::size_t i = 0; i < cl.size(); ++i) cl[i].command({"SET", "w-b", "foreign", "PX", "60000"});
  EXPECT_TRUE(eventually([&] { return lost_calls.load() == 1; }, 3000ms));
  EXPECT_TRUE(r.lock.lost());
  std::lock_guard<std::mutex> g(mu);
  EXPECT_EQ(lost_resources, (strings{"w-a", "w-b"}));
}

// The set scripts go by EVALSHA once loaded; a flushed script cache (NOSCRIPT)
// gets the body again, for the acquire, the extension and the release.
TEST(AcquireMany, the_set_scripts_survive_a_flushed_script_cache) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  auto first = a.acquire_many({"f-a", "f-b"}, once());
  ASSERT_TRUE(first) << first.report.message();
  ASSERT_TRUE(first.lock.extend(10000ms));
  ASSERT_TRUE(first.lock.release());
  for (std::size_t i = 0; i < cl.size(); ++i) cl[i].command({"SCRIPT", "FLUSH"});
  auto second = a.acquire_many({"f-a", "f-b"}, once());
  ASSERT_TRUE(second) << second.report.message();
  for (std::size_t i = 0; i < cl.size(); ++i) cl[i].command({"SCRIPT", "FLUSH"});
  const report ext = second.lock.extend(10000ms);
  EXPECT_TRUE(ext) << ext.message();
  for (std::size_t i = 0; i < cl.size(); ++i) cl[i].command({"SCRIPT", "FLUSH"});
  const report rel = second.lock.release();
  EXPECT_TRUE(rel) << rel.message();
  EXPECT_TRUE(eventually([&] { return cl.count_key("f-a") == 0 && cl.count_key("f-b") == 0; }));
}

TEST(AcquireMany, a_key_of_another_type_in_the_set_is_wrong_type_and_nothing_is_written) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  for (std::size_t i = 0; i < cl.size(); ++i) cl[i].command({"RPUSH", "t-b", "x"});
  auto r = a.acquire_many({"t-a", "t-b"}, once());
  EXPECT_EQ(r.report.error, errc::wrong_type) << r.report.message();
  EXPECT_EQ(cl.count_key("t-a"), 0);
}

TEST(AcquireMany, a_majority_down_is_unavailable_with_every_node_reported) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  cl[1].kill();
  cl[2].kill();
  auto r = a.acquire_many({"d-a", "d-b"}, once());
  EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
  ASSERT_EQ(r.report.nodes.size(), 3u);
  // Node 1's grant may still be pending: the two refusals decided.
  EXPECT_TRUE(r.report.nodes[0].status == node_status::ok ||
              r.report.nodes[0].status == node_status::pending);
  EXPECT_NE(r.report.nodes[1].status, node_status::ok);
  EXPECT_NE(r.report.nodes[2].status, node_status::ok);
  // The grant of node 1 is rolled back.
  EXPECT_TRUE(eventually([&] { return !cl[0].exists("d-a") && !cl[0].exists("d-b"); }));
}

TEST(AcquireMany, invalid_sets_are_refused_with_a_clear_error) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  auto refused = [&](const strings& set, const acquire_options& o, const std::string& words) {
    auto r = a.acquire_many(set, o);
    EXPECT_EQ(r.report.error, errc::invalid_argument);
    EXPECT_NE(r.report.message().find(words), std::string::npos) << r.report.message();
  };
  refused({}, once(), "must not be empty");
  refused({"x", "y", "x"}, once(), "'x' is given twice");
  refused({"x", ""}, once(), "resource name must not be empty");
  strings many;
  for (int i = 0; i < 65; ++i) many.push_back("k" + std::to_string(i));
  refused(many, once(), "at most 64");
  acquire_options fenced = once();
  fenced.fencing = true;
  refused({"x", "y"}, fenced, "fencing is not supported for a set");
  refused({"x", "y:fence"}, once(), ":fence");
  // 64 resources are fine.
  many.pop_back();
  auto ok = a.acquire_many(many, once());
  EXPECT_TRUE(ok) << ok.report.message();
  // Async: the same refusal through the callback.
  std::promise<acquire_result> p;
  a.acquire_many_async({}, once(), [&](acquire_result r) { p.set_value(std::move(r)); });
  EXPECT_EQ(p.get_future().get().report.error, errc::invalid_argument);
}

TEST(AcquireMany, async_acquire_of_a_set_and_cancel_of_its_retries) {
  redis_cluster cl(3);
  std::promise<acquire_result> second;
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  std::promise<acquire_result> first;
  a.acquire_many_async({"as-a", "as-b"}, once(), [&](acquire_result r) { first.set_value(std::move(r)); });
  acquire_result held = first.get_future().get();
  ASSERT_TRUE(held) << held.report.message();
  // A second set waits in its retries (contended); cancel() ends it with cancelled.
  acquire_options o;
  o.ttl = 5000ms;
  o.retry.max_attempts = 1000;
  o.retry.base_delay = 50ms;
  o.retry.max_delay = 50ms;
  const auto id =
      a.acquire_many_async({"as-b", "as-c"}, o, [&](acquire_result r) { second.set_value(std::move(r)); });
  std::this_thread::sleep_for(200ms);
  a.cancel(id);
  auto f = second.get_future();
  ASSERT_EQ(f.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(f.get().report.error, errc::cancelled);
  EXPECT_EQ(cl.count_key("as-c"), 0);
}

// Two clients take overlapping sets {a,b} and {b,c}, a third the single key c,
// in a loop for a bounded time. Per resource, the holding intervals (from the
// acquire's return to just before the release, cut at the validity's end, on the
// one clock of this process) never overlap, and every client makes progress: no
// deadlock, no starvation within the run.
TEST(AcquireMany, overlapping_sets_exclude_each_other_per_resource_without_deadlock) {
  redis_cluster cl(3);
  struct interval {
    clk::time_point from, to;
    int who;
  };
  std::mutex mu;
  std::map<std::string, std::vector<interval>> held_by;
  std::vector<int> wins(3, 0);
  const strings sets[3] = {{"o-a", "o-b"}, {"o-b", "o-c"}, {"o-c"}};
  const auto stop_at = clk::now() + 2500ms;
  auto worker = [&](int who) {
    client c(options_for(cl.uris()));
    if (!wait_connected(c)) return;
    int rounds = 0;
    while (clk::now() < stop_at && rounds++ < 2000) {
      acquire_options o = once(2000ms);
      auto r = who == 2 ? c.acquire(sets[who][0], o) : c.acquire_many(sets[who], o);
      if (!r) {
        EXPECT_EQ(r.report.error, errc::contended) << r.report.message();
        std::this_thread::sleep_for(std::chrono::milliseconds(1 + rounds % 3));
        continue;
      }
      const clk::time_point from = clk::now();
      std::this_thread::sleep_for(3ms);  // the work under the lock
      const clk::time_point to = std::min(clk::now(), *r.lock.info().valid_until);
      {
        std::lock_guard<std::mutex> g(mu);
        for (const std::string& res : sets[who]) held_by[res].push_back({from, to, who});
        ++wins[who];
      }
      EXPECT_TRUE(r.lock.release());
      std::this_thread::sleep_for(1ms);
    }
  };
  std::thread t0(worker, 0), t1(worker, 1), t2(worker, 2);
  t0.join();
  t1.join();
  t2.join();
  for (int w : wins) EXPECT_GT(w, 0);
  int checked = 0;
  for (auto& [res, list] : held_by) {
    std::sort(list.begin(), list.end(), [](const interval& x, const interval& y) { return x.from < y.from; });
    for (std::size_t i = 1; i < list.size(); ++i) {
      ++checked;
      EXPECT_LE(list[i - 1].to, list[i].from)
          << res << ": holders " << list[i - 1].who << " and " << list[i].who << " overlap";
    }
  }
  EXPECT_GT(checked, 10);
  for (const char* k : {"o-a", "o-b", "o-c"})
    EXPECT_TRUE(eventually([&] { return cl.count_key(k) == 0; })) << k;
}

}  // namespace
}  // namespace redlock::test

// === Overlapping sets under node pauses never share a key (review 13, docs/review-13.md W2)
namespace redlock::test {
namespace sets_under_pauses {  // the section's helpers stay apart from the file's
namespace {

using namespace wait_util;

redis_cluster& nodes() {
  static redis_cluster* cl = new redis_cluster(3);
  return *cl;
}

// ---- Attack M1 (expected to hold): overlapping sets {p,q} and {q,r} acquired
// concurrently by two clients, with a random node paused in some rounds and a
// short command_timeout (lost replies). Never both succeed with validity left
// while the other still holds validity: the common key q has one holder.
TEST(AcquireManyUnderPauses, overlapping_sets_under_pauses_never_share_a_key) {
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
}  // namespace sets_under_pauses
}  // namespace redlock::test

// === What a set's rollback and release publish to waiters, and sets mixed with single keys
// (review 13b, docs/review-13.md: attacks on the W2 fix)
namespace redlock::test {
namespace set_publish {  // the section's helpers stay apart from the file's
namespace {

using namespace wait_util;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

redis_cluster& nodes() {
  static redis_cluster* cl = new redis_cluster(3);
  return *cl;
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

// ---- A4: the rollback of a failed set attempt publishes nothing, with a partial
// grant (node 3 free, nodes 1 and 2 held by a foreign token) and a late grant
// (node 3 behind a 400 ms proxy, command_timeout 150 ms). Expected: no key of the
// attempt left, no PUBLISH on any node, a waiter of y (another client) not woken.
TEST(AcquireManyPublish, set_rollback_partial_and_late_grants_publish_nothing) {
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
TEST(AcquireManyPublish, set_release_on_one_node_does_not_grant_a_waiter) {
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
TEST(AcquireManyMixedSafety, mixed_sets_and_singles_never_share_a_key) {
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

}  // namespace
}  // namespace set_publish
}  // namespace redlock::test
