// Several resources at once (client::acquire_many) on real redis-server nodes:
// all or none per node, contention between sets and single keys, rollback of
// partial grants, extension, release and the watchdog of a set, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

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
