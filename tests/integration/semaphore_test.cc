// The quorum semaphore (redlock/semaphore.h) against real redis-server nodes:
// acquire and release, a full semaphore is contended (and down nodes are not),
// extra permits won in one round are released, the watchdog and loss of a permit,
// fences per permit, cancel; and the safety run: 3 nodes, 2 permits, 6 contenders
// under node pauses and lost replies, checked for never more than 2 holders; a paused
// permit holder never lets a third holder in.
#include "redlock/semaphore.h"

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

semaphore_options permits(std::size_t k, std::size_t batch = 0, bool probe_first = true) {
  semaphore_options o;
  o.permits = k;
  o.batch = batch;
  o.probe_first = probe_first;
  return o;
}

std::int64_t ns_of(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// --- the checker: at most k holders at any instant ---

// One holding of a permit, on the client's clock (steady_clock, ns): from the
// acquire's completion to the earlier of its validity's end and its release.
struct holding {
  std::size_t permit = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::optional<std::uint64_t> fence;
};

// The largest number of holdings in force at one instant (half-open windows).
std::size_t max_holders(const std::vector<holding>& h) {
  std::vector<std::pair<std::int64_t, int>> ev;
  for (const auto& x : h) {
    if (x.end_ns <= x.start_ns) continue;
    ev.emplace_back(x.start_ns, +1);
    ev.emplace_back(x.end_ns, -1);
  }
  std::sort(ev.begin(), ev.end());  // at one instant, an end (-1) sorts before a start
  long now = 0, most = 0;
  for (const auto& e : ev) most = std::max(most, now += e.second);
  return static_cast<std::size_t>(most);
}

// Per permit, ordered by start: the fences must strictly increase. Returns the
// number of regressions.
int fence_regressions(std::vector<holding> h) {
  std::sort(h.begin(), h.end(), [](const holding& a, const holding& b) { return a.start_ns < b.start_ns; });
  std::map<std::size_t, std::uint64_t> last;
  int bad = 0;
  for (const auto& x : h) {
    if (!x.fence) continue;
    auto it = last.find(x.permit);
    if (it != last.end() && *x.fence <= it->second) ++bad;
    last[x.permit] = *x.fence;
  }
  return bad;
}

// The negative control: the naive design, a holder counter per node with a limit
// of k, entered when a quorum of nodes had room. Three clients, each reaching two
// of the three nodes, all enter: the checker must see three holders.
TEST(SemaphoreChecker, catches_the_naive_per_node_counter) {
  const int k = 2;
  int counter[3] = {0, 0, 0};
  const int reach[3][2] = {{0, 1}, {1, 2}, {2, 0}};  // client c reaches these nodes only
  std::vector<holding> h;
  for (int c = 0; c < 3; ++c) {
    int yes = 0;
    for (int n : reach[c]) {
      if (counter[n] < k) {
        ++counter[n];
        ++yes;
      }
    }
    if (yes >= 2) h.push_back(holding{0, 100 + c, 1000, std::nullopt});  // a quorum of 3: entered
  }
  EXPECT_EQ(counter[0], 2);
  EXPECT_EQ(counter[1], 2);
  EXPECT_EQ(counter[2], 2);  // no node ever exceeded its limit of 2 ...
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(max_holders(h), 3u);  // ... yet three clients hold a 2-permit semaphore
}

TEST(SemaphoreChecker, counts_holders_and_fences) {
  std::vector<holding> h = {{0, 0, 10, 1}, {1, 5, 15, 1}, {0, 10, 20, 2}, {1, 15, 25, 2}};
  EXPECT_EQ(max_holders(h), 2u);  // windows that touch do not overlap
  h.push_back({0, 12, 13, 3});
  EXPECT_EQ(max_holders(h), 3u);
  EXPECT_EQ(fence_regressions({{0, 0, 1, 2}, {0, 2, 3, 2}, {1, 4, 5, 1}}), 1);
}

// --- behaviour on real nodes ---

TEST(Semaphore, acquire_takes_a_permit_and_release_leaves_no_key) {
  redis_cluster nodes(3);
  client c(options_for(nodes.uris()));
  ASSERT_TRUE(wait_connected(c));
  semaphore s(c, "sem-basic", permits(2));
  auto r = s.try_acquire(once());
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_LT(r.permit, 2u);
  EXPECT_EQ(r.lock.info().resource, "sem-basic:permit:" + std::to_string(r.permit));
  // The acquire and the release decide on a quorum (2 of 3): the third node's
  // answer may still be on its way when they return.
  const std::string key = r.lock.info().resource;
  EXPECT_TRUE(eventually([&] { return nodes.count_key(key) == 3; })) << nodes.count_key(key);
  EXPECT_TRUE(r.lock.owns_lock());
  ASSERT_TRUE(r.lock.release());
  for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(eventually([&] { return nodes[i].dbsize() == 0; })) << i;
}

TEST(Semaphore, a_full_semaphore_is_contended_and_a_free_permit_is_found) {
  redis_cluster nodes(3);
  client c(options_for(nodes.uris()));
  ASSERT_TRUE(wait_connected(c));
  for (std::size_t batch : {1u, 2u}) {
    semaphore s(c, "sem-full-" + std::to_string(batch), permits(2, batch, batch == 1));
    auto a = s.try_acquire(once());
    auto b = s.try_acquire(once());
    ASSERT_TRUE(a && b) << a.report.message() << " / " << b.report.message();
    EXPECT_NE(a.permit, b.permit);
    auto full = s.try_acquire(once());
    EXPECT_EQ(full.report.error, errc::contended) << full.report.message();
    EXPECT_EQ(full.report.attempts, 1);
    ASSERT_TRUE(a.lock.release());
    auto again = s.try_acquire(once());
    ASSERT_TRUE(again) << again.report.message();
    EXPECT_EQ(again.permit, a.permit);
  }
}

TEST(Semaphore, a_waiting_acquire_gets_the_permit_when_released) {
  redis_cluster nodes(3);
  std::promise<semaphore_result> p;
  client c(options_for(nodes.uris()));
  ASSERT_TRUE(wait_connected(c));
  semaphore s(c, "sem-wait", permits(1));
  auto a = s.try_acquire(once());
  ASSERT_TRUE(a);
  acquire_options w = once();
  w.retry.max_attempts = 1000;
  w.retry.base_delay = 10ms;
  w.retry.max_delay = 20ms;
  w.retry.deadline = 5000ms;
  s.acquire_async(w, [&p](semaphore_result r) { p.set_value(std::move(r)); });
  auto f = p.get_future();
  EXPECT_EQ(f.wait_for(100ms), std::future_status::timeout);  // still waiting while held
  ASSERT_TRUE(a.lock.release());
  ASSERT_EQ(f.wait_for(5000ms), std::future_status::ready);
  auto b = f.get();
  ASSERT_TRUE(b) << b.report.message();
  EXPECT_GT(b.report.attempts, 1);
}

TEST(Semaphore, down_nodes_are_unavailable_not_contended) {
  redis_cluster nodes(3);
  client c(options_for(nodes.uris()));
  ASSERT_TRUE(wait_connected(c));
  semaphore s(c, "sem-down", permits(3));
  nodes[0].pause();
  nodes[1].pause();
  auto r = s.try_acquire(once());
  nodes[0].resume();
  nodes[1].resume();
  EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
}

TEST(Semaphore, extra_permits_won_in_one_round_are_released) {
  redis_cluster nodes(3);
  client c(options_for(nodes.uris()));
  ASSERT_TRUE(wait_connected(c));
  semaphore s(c, "sem-extra", permits(4, 4, false));
  auto r = s.try_acquire(once());
  ASSERT_TRUE(r) << r.report.message();
  // Four permits were won in the one round; three are released in the background.
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(eventually([&] { return nodes[i].dbsize() == 1; }))
        << "node " << i << ": " << nodes[i].dbsize();
    EXPECT_TRUE(nodes[i].exists(r.lock.info().resource));
  }
  // The extras are free for others at once.
  for (int n = 0; n < 3; ++n) {
    auto o = s.try_acquire(once());
    EXPECT_TRUE(o) << o.report.message();
    o.lock.detach();
  }
}

TEST(Semaphore, probe_first_takes_one_permit_of_an_empty_semaphore_without_extras) {
  redis_cluster nodes(3);
  client c(options_for(nodes.uris()));
  ASSERT_TRUE(wait_connected(c));
  semaphore s(c, "sem-probe", permits(4, 4));
  const long long sets_before = nodes[0].calls("set");
  auto r = s.try_acquire(once());
  ASSERT_TRUE(r) << r.report.message();
  // One permit tried, none extra (node 0's answer may come after the quorum's).
  EXPECT_TRUE(eventually([&] { return nodes[0].dbsize() == 1; })) << nodes[0].dbsize();
  EXPECT_EQ(nodes[0].calls("set") - sets_before, 1);
}

TEST(Semaphore, the_watchdog_keeps_a_permit_and_reports_its_loss) {
  redis_cluster nodes(3);
  client c(options_for(nodes.uris()));
  ASSERT_TRUE(wait_connected(c));
  semaphore s(c, "sem-dog", permits(2));
  std::atomic<int> lost{0};
  acquire_options o = once(900ms);
  o.auto_extend = true;
  o.extend_interval = 200ms;
  o.on_lost = [&lost](const lease&, const report&) { ++lost; };
  auto r = s.try_acquire(o);
  ASSERT_TRUE(r) << r.report.message();
  std::this_thread::sleep_for(1500ms);  // past the TTL: only the watchdog keeps it
  EXPECT_TRUE(r.lock.owns_lock());
  EXPECT_EQ(lost.load(), 0);
  const std::string key = r.lock.info().resource;
  for (std::size_t i = 0; i < 3; ++i) nodes[i].command({"DEL", key});
  EXPECT_TRUE(eventually([&] { return lost.load() == 1; }, 3000ms));
  EXPECT_TRUE(r.lock.lost());
  EXPECT_FALSE(r.lock.owns_lock());
}

TEST(Semaphore, fences_increase_per_permit) {
  redis_cluster nodes(3);
  client c(options_for(nodes.uris()));
  ASSERT_TRUE(wait_connected(c));
  semaphore s(c, "sem-fence", permits(2, 1));
  acquire_options o = once();
  o.fencing = true;
  std::map<std::size_t, std::uint64_t> last;
  for (int i = 0; i < 12; ++i) {
    auto r = s.try_acquire(o);
    ASSERT_TRUE(r) << r.report.message();
    ASSERT_TRUE(r.lock.fence());
    auto it = last.find(r.permit);
    if (it != last.end()) {
      EXPECT_GT(*r.lock.fence(), it->second);
    }
    last[r.permit] = *r.lock.fence();
    ASSERT_TRUE(r.lock.release());
  }
}

TEST(Semaphore, cancel_ends_a_waiting_acquire) {
  redis_cluster nodes(3);
  std::promise<semaphore_result> p;
  client c(options_for(nodes.uris()));
  ASSERT_TRUE(wait_connected(c));
  semaphore s(c, "sem-cancel", permits(1));
  auto a = s.try_acquire(once());
  ASSERT_TRUE(a);
  acquire_options w = once();
  w.retry.max_attempts = 1000;
  w.retry.base_delay = 50ms;
  const auto id = s.acquire_async(w, [&p](semaphore_result r) { p.set_value(std::move(r)); });
  std::this_thread::sleep_for(120ms);
  s.cancel(id);
  auto f = p.get_future();
  ASSERT_EQ(f.wait_for(3000ms), std::future_status::ready);
  EXPECT_EQ(f.get().report.error, errc::cancelled);
  s.cancel(id);  // completed: no effect
}

TEST(Semaphore, a_bad_configuration_is_refused) {
  client c(options_for({"redis://127.0.0.1:1"}));
  EXPECT_THROW(semaphore(c, "", permits(1)), config_error);
  EXPECT_THROW(semaphore(c, "x", permits(0)), config_error);
  EXPECT_THROW(semaphore(c, "x", permits(2000)), config_error);
  EXPECT_THROW(semaphore(c, "x", permits(2, 3)), config_error);
  EXPECT_EQ(semaphore(c, "x", permits(8)).batch(), 4u);
}

// --- the safety run ---

TEST(SemaphoreSafety, never_more_holders_than_permits_under_pauses_and_lost_replies) {
  constexpr std::size_t kPermits = 2;
  constexpr int kContenders = 6;
  const auto run_for = 8000ms;
  redis_cluster nodes(3);
  std::vector<std::unique_ptr<fault_proxy>> proxies;
  std::vector<std::string> via;
  for (std::size_t i = 0; i < 3; ++i) {
    proxies.push_back(std::make_unique<fault_proxy>(nodes[i].port()));
    via.push_back(proxies.back()->uri());
  }
  std::mutex mu;
  std::vector<holding> history;
  std::atomic<int> failures{0};
  std::atomic<bool> stop{false};
  const auto end = std::chrono::steady_clock::now() + run_for;

  std::vector<std::thread> threads;
  for (int t = 0; t < kContenders; ++t) {
    threads.emplace_back([&, t] {
      client_options co = options_for(via);
      co.command_timeout = 60ms;
      client c(co);
      wait_connected(c);
      semaphore s(c, "sem-safety", permits(kPermits, 2));
      std::mt19937 rng(static_cast<unsigned>(t) * 7919u + 1);
      acquire_options o = once(400ms);
      o.fencing = true;
      while (!stop.load() && std::chrono::steady_clock::now() < end) {
        auto r = s.try_acquire(o);
        if (!r) {
          ++failures;
          std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 10));
          continue;
        }
        holding h;
        h.permit = r.permit;
        h.start_ns = mono_ns();
        h.fence = r.lock.fence();
        const lease l = r.lock.info();
        const std::int64_t valid_ns = ns_of(*l.valid_until);
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 40));
        h.end_ns = std::min(mono_ns(), valid_ns);  // the release is invoked now
        (void)r.lock.release();
        std::lock_guard<std::mutex> g(mu);
        history.push_back(h);
      }
    });
  }
  // The faults: pause a node, or drop a node's replies, one at a time.
  std::mt19937 rng(4242);
  int faults = 0;
  while (std::chrono::steady_clock::now() + 400ms < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 100));
    const std::size_t n = rng() % 3;
    if (rng() % 2 == 0) {
      nodes[n].pause();
      std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 200));
      nodes[n].resume();
    } else {
      proxies[n]->drop_replies();
      std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 200));
      proxies[n]->pass();
    }
    ++faults;
  }
  stop = true;
  for (auto& th : threads) th.join();

  std::lock_guard<std::mutex> g(mu);
  EXPECT_GT(faults, 10);
  EXPECT_GT(history.size(), 50u) << "failures: " << failures.load();
  EXPECT_LE(max_holders(history), kPermits);
  EXPECT_EQ(fence_regressions(history), 0);
  std::size_t fenced = 0;
  for (const auto& h : history) fenced += h.fence ? 1 : 0;
  EXPECT_EQ(fenced, history.size());
  std::printf("semaphore safety: %zu holdings, %d failed tries, %d faults, max holders %zu\n", history.size(),
              failures.load(), faults, max_holders(history));
}

// Issue 20, item 4: a client shut down between a batch winning an extra permit and
// that permit's background release calls on_lost for the held permit only, never
// for an extra (which was never reported as held). The client is destroyed from
// the observer's on_lock_acquired of the first extra, on the loop thread: its
// shutdown is queued before the extra's handle is even dropped.
TEST(Semaphore, a_shutdown_between_an_extra_win_and_its_release_reports_only_the_held_permit_lost) {
  redis_cluster nodes(3);
  struct killer : observer {
    std::atomic<int> acquired{0};
    std::atomic<bool> claimed{false};  // whoever destroys the client
    std::atomic<bool> by_observer{false};
    std::unique_ptr<client>* c = nullptr;
    void on_lock_acquired(const lock_event&) override {
      // The second acquired is an extra: the semaphore has finished already.
      if (++acquired == 2 && !claimed.exchange(true)) {
        by_observer = true;
        c->reset();
      }
    }
  };
  int exercised = 0;  // rounds in which the client went at an extra's win
  for (int round = 0; round < 3; ++round) {
    auto k = std::make_shared<killer>();
    client_options co = options_for(nodes.uris());
    co.observers.push_back(k);
    auto c = std::make_unique<client>(co);
    k->c = &c;
    ASSERT_TRUE(wait_connected(*c));
    std::mutex mu;
    std::vector<std::string> lost_tokens;
    acquire_options o = once(5000ms);
    o.auto_extend = true;
    o.on_lost = [&](const lease& l, const report&) {
      std::lock_guard<std::mutex> g(mu);
      lost_tokens.push_back(l.token);
    };
    std::promise<semaphore_result> got;
    {
      semaphore s(*c, "sem-extra-shutdown-" + std::to_string(round), permits(4, 4, false));
      (void)s.acquire_async(o, [&](semaphore_result r) { got.set_value(std::move(r)); });
    }
    auto f = got.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
    semaphore_result held = f.get();
    ASSERT_TRUE(held) << held.report.message();
    // Four free permits, one round of four: the three others are won too, and the
    // first of them shuts the client down (bounded wait; then this thread does).
    (void)eventually([&] { return k->claimed.load(); }, 5000ms);
    if (!k->claimed.exchange(true)) c.reset();
    if (k->by_observer) ++exercised;
    // The held permit is lost at the shutdown (cancelled); its on_lost comes from
    // the shutdown's loop turn, which reports every watched lock at once.
    ASSERT_TRUE(eventually([&] { return held.lock.lost(); }, 5000ms));
    // A call after that loop turn: the shutdown's reports are all in.
    (void)held.lock.release();
    std::lock_guard<std::mutex> g(mu);
    ASSERT_EQ(lost_tokens.size(), 1u) << "round " << round;
    EXPECT_EQ(lost_tokens[0], held.lock.info().token);
  }
  EXPECT_EQ(exercised, 3) << "rounds that shut the client down at an extra's win";
}

}  // namespace
}  // namespace redlock::test

// === A paused permit holder never lets a third holder in (review 13, docs/review-13.md)
namespace redlock::test {
namespace paused_holder {  // the section's helpers stay apart from the file's
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

// ---- Attack S1 (expected to hold): K = 2; a holder whose loop is blocked past
// its TTL while two other clients take both permits. At no sampled instant do
// more than 2 handles believe they hold a permit.
TEST(SemaphorePausedHolder, semaphore_paused_holder_never_a_third_holder) {
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

}  // namespace
}  // namespace paused_holder
}  // namespace redlock::test
