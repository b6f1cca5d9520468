// Observer events (redlock/observer.h) against real redis-server nodes: the exact
// sequences of operations and lock events, node events, guard quarantines, slow
// replies, warnings, throwing and re-entrant observers, and no secrets anywhere; the
// metrics adapter's held gauge, and a throwing observer at shutdown.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "observer_recorder.h"
#include "redis_node.h"
#include "redlock/metrics.h"
#include "redlock/redlock.h"
#include "test_util.h"

namespace redlock::test {
namespace {

using lines = std::vector<std::string>;

client_options observed(const std::vector<std::string>& uris, const std::shared_ptr<recorder>& rec) {
  client_options o = options_for(uris);
  o.observers.push_back(rec);
  return o;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Observer, acquire_then_release_gives_the_exact_sequence) {
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  client c(observed(cl.uris(), rec));
  ASSERT_TRUE(wait_connected(c));
  auto r = c.acquire("ev-basic", once(5000ms));
  ASSERT_TRUE(r) << r.report.message();
  const lease l = r.lock.info();
  ASSERT_TRUE(r.lock.release());
  EXPECT_EQ(rec->about("ev-basic"), (lines{"started acquire ev-basic", "acquired ev-basic", "finished acquire ev-basic ok",
                                           "started release ev-basic", "released ev-basic",
                                           "finished release ev-basic ok"}));
  const auto locks = rec->get(&recorder::locks_);
  ASSERT_EQ(locks.size(), 2u);
  ASSERT_TRUE(locks[0].valid_until.has_value());
  EXPECT_EQ(*locks[0].valid_until, *l.valid_until);
  EXPECT_FALSE(locks[0].fence.has_value());
  EXPECT_GE(locks[0].held_for.count(), 0);
  EXPECT_FALSE(locks[1].valid_until.has_value());  // released
  EXPECT_GE(locks[1].held_for, locks[0].held_for);
  EXPECT_GE(locks[1].at, locks[0].at);
  // Every node came up once, in any order; no warnings for 3 noeviction nodes.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rec->count("up " + std::to_string(i)), 1u);
  EXPECT_TRUE(rec->get(&recorder::warnings_).empty());
  EXPECT_TRUE(rec->one_thread());
  EXPECT_EQ(c.stats().observer_errors, 0u);
}

TEST(Observer, a_set_of_resources_is_one_operation_on_the_joined_name) {
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  client c(observed(cl.uris(), rec));
  ASSERT_TRUE(wait_connected(c));
  auto r = c.acquire_many({"ev-set-a", "ev-set-b"}, once(5000ms));
  ASSERT_TRUE(r) << r.report.message();
  ASSERT_TRUE(r.lock.release());
  EXPECT_EQ(rec->about("ev-set-a,ev-set-b"),
            (lines{"started acquire ev-set-a,ev-set-b", "acquired ev-set-a,ev-set-b",
                   "finished acquire ev-set-a,ev-set-b ok", "started release ev-set-a,ev-set-b",
                   "released ev-set-a,ev-set-b", "finished release ev-set-a,ev-set-b ok"}));
  // A contended set retries like one key: retry_scheduled on the joined name.
  client other(observed(cl.uris(), rec));
  ASSERT_TRUE(wait_connected(other));
  auto held = other.acquire("ev-set2-b", once(5000ms));
  ASSERT_TRUE(held) << held.report.message();
  acquire_options a = once(5000ms);
  a.retry.max_attempts = 2;
  a.retry.base_delay = 10ms;
  EXPECT_EQ(c.acquire_many({"ev-set2-a", "ev-set2-b"}, a).report.error, errc::contended);
  EXPECT_EQ(rec->count("retry ev-set2-a,ev-set2-b 2"), 1u);
}

TEST(Observer, fenced_acquire_carries_the_fence) {
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  client c(observed(cl.uris(), rec));
  ASSERT_TRUE(wait_connected(c));
  acquire_options o = once(5000ms);
  o.fencing = true;
  auto r = c.acquire("ev-fence", o);
  ASSERT_TRUE(r) << r.report.message();
  ASSERT_TRUE(r.lock.release());
  const auto locks = rec->get(&recorder::locks_);
  ASSERT_EQ(locks.size(), 2u);
  EXPECT_EQ(locks[0].fence, r.lock.fence());
  EXPECT_EQ(locks[1].fence, r.lock.fence());
}

TEST(Observer, contended_acquire_reports_each_retry_within_the_policy) {
  redis_cluster cl(3);
  client holder(options_for(cl.uris()));
  auto rec = std::make_shared<recorder>();
  client c(observed(cl.uris(), rec));
  ASSERT_TRUE(wait_connected(c));
  auto held = holder.acquire("ev-contended", once(10000ms));
  ASSERT_TRUE(held) << held.report.message();
  acquire_options o = once(5000ms);
  o.retry.max_attempts = 3;
  o.retry.base_delay = 20ms;
  o.retry.max_delay = 30ms;
  auto r = c.acquire("ev-contended", o);
  EXPECT_EQ(r.report.error, errc::contended);
  EXPECT_EQ(rec->about("ev-contended"),
            (lines{"started acquire ev-contended", "retry ev-contended 2", "retry ev-contended 3",
                   "finished acquire ev-contended " + make_error_code(errc::contended).message()}));
  const auto retries = rec->get(&recorder::retries_);
  ASSERT_EQ(retries.size(), 2u);
  // Attempt k waits in [d/2, d], d = min(max_delay, base * 2^(k-2)).
  EXPECT_GE(retries[0].delay, 10ms);
  EXPECT_LE(retries[0].delay, 20ms);
  EXPECT_GE(retries[1].delay, 15ms);
  EXPECT_LE(retries[1].delay, 30ms);
  EXPECT_EQ(retries[0].last_error, errc::contended);
  EXPECT_EQ(retries[1].next_attempt, 3);
  std::vector<recorder::op_rec> ops;
  for (const auto& op : rec->get(&recorder::ops_)) {
    if (op.resource == "ev-contended") ops.push_back(op);
  }
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[1].attempts, 3);
  // The wait, retries included. Each retry timer runs on libuv's loop clock, which
  // counts whole milliseconds (read when the loop last woke): a timer of d ms fires
  // once d ms have passed on that clock, which can be up to 1 ms less on the
  // microsecond steady clock `elapsed` is read on (seen: 36,982 us for delays of
  // 37 ms, about 1 run in 20). So: at most 1 ms short for each of the 2 retries.
  EXPECT_GE(ops[1].elapsed + 2ms, retries[0].delay + retries[1].delay);
  EXPECT_LE(ops[1].elapsed, r.report.elapsed);
}

TEST(Observer, watchdog_extensions_are_background_and_a_lost_lock_is_reported) {
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  client c(observed(cl.uris(), rec));
  ASSERT_TRUE(wait_connected(c));
  acquire_options o = once(900ms);
  o.auto_extend = true;
  o.extend_interval = 150ms;
  auto r = c.acquire("ev-watch", o);
  ASSERT_TRUE(r) << r.report.message();
  ASSERT_TRUE(eventually([&] { return rec->count("extended ev-watch") >= 2; }, 3000ms));
  for (std::size_t i = 0; i < cl.size(); ++i) cl[i].command({"DEL", "ev-watch"});
  ASSERT_TRUE(eventually([&] { return rec->saw("lost ev-watch " + make_error_code(errc::lock_lost).message()); },
                         3000ms));
  ASSERT_TRUE(eventually([&] { return r.lock.lost(); }));
  const lines seq = rec->about("ev-watch");
  ASSERT_GE(seq.size(), 9u);
  EXPECT_EQ(seq[0], "started acquire ev-watch");
  EXPECT_EQ(seq[1], "acquired ev-watch");
  EXPECT_EQ(seq[2], "finished acquire ev-watch ok");
  EXPECT_EQ(seq[3], "started extend ev-watch bg");
  EXPECT_EQ(seq[4], "extended ev-watch");
  EXPECT_EQ(seq[5], "finished extend ev-watch bg ok");
  // The end: the extension that found the keys gone, the loss, its finish.
  ASSERT_TRUE(eventually([&] { return rec->about("ev-watch").back().rfind("finished extend ev-watch bg", 0) == 0; }));
  const lines end = rec->about("ev-watch");
  const std::size_t n = end.size();
  EXPECT_EQ(end[n - 3], "started extend ev-watch bg");
  EXPECT_EQ(end[n - 2], "lost ev-watch " + make_error_code(errc::lock_lost).message());
  EXPECT_EQ(end[n - 1], "finished extend ev-watch bg " + make_error_code(errc::lock_lost).message());
  const auto lost = rec->get(&recorder::lost_);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].reason, errc::lock_lost);
  EXPECT_FALSE(lost[0].detail.empty());
  EXPECT_GT(lost[0].held_for.count(), 0);
}

TEST(Observer, a_destroyed_handle_releases_in_the_background) {
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  client c(observed(cl.uris(), rec));
  ASSERT_TRUE(wait_connected(c));
  {
    auto r = c.acquire("ev-dtor", once(5000ms));
    ASSERT_TRUE(r) << r.report.message();
  }
  ASSERT_TRUE(eventually([&] { return rec->saw("finished release ev-dtor bg ok"); }));
  EXPECT_EQ(rec->about("ev-dtor"),
            (lines{"started acquire ev-dtor", "acquired ev-dtor", "finished acquire ev-dtor ok",
                   "started release ev-dtor bg", "released ev-dtor", "finished release ev-dtor bg ok"}));
}

TEST(Observer, a_stopped_node_goes_down_is_reconnected_and_comes_up) {
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  client c(observed(cl.uris(), rec));
  ASSERT_TRUE(wait_connected(c));
  cl[1].kill();
  ASSERT_TRUE(eventually([&] { return rec->saw("down 1") && rec->count("reconnect 1") >= 2; }));
  cl[1].start();
  ASSERT_TRUE(eventually([&] { return rec->count("up 1") == 2; }));
  EXPECT_EQ(rec->count("down 1"), 1u);  // once per outage, however many attempts failed
  const auto nodes = rec->get(&recorder::nodes_);
  bool saw_down = false;
  for (const auto& e : nodes) {
    if (e.index != 1 || e.status == node_status::ok) continue;
    saw_down = true;
    EXPECT_EQ(e.node, cl[1].uri());
    EXPECT_EQ(e.status, node_status::connection_error);
    EXPECT_FALSE(e.detail.empty());
  }
  EXPECT_TRUE(saw_down);
  for (const auto& e : rec->get(&recorder::reconnects_)) {
    EXPECT_EQ(e.index, 1u);
    EXPECT_GE(e.backoff, 2ms);  // min backoff 5 ms, jittered down to half
    EXPECT_LE(e.backoff, 100ms);
    EXPECT_FALSE(e.reason.empty());
  }
  // The order: down, reconnects, up.
  const lines all = rec->lines();
  const auto down = std::find(all.begin(), all.end(), "down 1");
  const auto up = std::find(down, all.end(), "up 1");
  ASSERT_NE(up, all.end());
  EXPECT_EQ(*(down + 1), "reconnect 1");
}

TEST(Observer, a_restarted_node_is_quarantined_then_cleared) {
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  client_options o = observed(cl.uris(), rec);
  o.max_ttl = 1200ms;  // the quarantine (restart_quarantine defaults to max_ttl)
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  const auto before = std::chrono::steady_clock::now();
  cl[0].restart(false);
  ASSERT_TRUE(eventually([&] { return rec->saw("quarantined 0 restart"); }));
  const auto q = rec->get(&recorder::quarantines_);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].index, 0u);
  EXPECT_EQ(q[0].node, cl[0].uri());
  EXPECT_EQ(q[0].reason, quarantine_reason::restart);
  EXPECT_EQ(q[0].until - q[0].at, std::chrono::milliseconds(1200));  // until = now + quarantine
  EXPECT_GE(q[0].at, before);
  auto r = c.acquire("ev-quarantine", once(1000ms));
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_EQ(r.report.nodes[0].status, node_status::excluded);
  EXPECT_FALSE(rec->saw("cleared 0 restart"));
  ASSERT_TRUE(eventually([&] { return rec->saw("cleared 0 restart"); }, 3000ms));
  const auto cleared = rec->get(&recorder::cleared_);
  ASSERT_EQ(cleared.size(), 1u);
  EXPECT_GE(cleared[0].at, q[0].until);
  EXPECT_LE(cleared[0].at - q[0].until, 500ms);
  EXPECT_EQ(cleared[0].until, q[0].until);
  auto r2 = c.acquire("ev-quarantine-2", once(1000ms));
  ASSERT_TRUE(r2) << r2.report.message();
  // Node 0 votes again: asked, and granted (its reply may come after the quorum of
  // the other two decided: pending in the report, the key on the node).
  EXPECT_NE(r2.report.nodes[0].status, node_status::excluded) << r2.report.message();
  EXPECT_TRUE(eventually([&] { return cl[0].get("ev-quarantine-2") == r2.lock.info().token; }));
}

TEST(Observer, a_slow_reply_is_reported) {
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  client_options o = observed(cl.uris(), rec);
  o.slow_node_threshold = 30ms;
  o.command_timeout = 400ms;
  std::promise<acquire_result> done;
  auto fut = done.get_future();
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  EXPECT_TRUE(rec->get(&recorder::slow_).empty());
  cl[2].pause();
  c.acquire_async("ev-slow", once(5000ms), [&done](acquire_result r) { done.set_value(std::move(r)); });
  ASSERT_EQ(fut.wait_for(3s), std::future_status::ready);
  std::this_thread::sleep_for(80ms);
  cl[2].resume();
  ASSERT_TRUE(eventually([&] { return rec->saw("slow 2 acquire"); }));
  const auto slow = rec->get(&recorder::slow_);
  ASSERT_GE(slow.size(), 1u);
  EXPECT_EQ(slow[0].index, 2u);
  EXPECT_EQ(slow[0].node, cl[2].uri());
  EXPECT_GE(slow[0].latency, 80ms);
  EXPECT_EQ(slow[0].kind, operation_kind::acquire);
}

TEST(Observer, warns_about_four_nodes_once_at_start) {
  redis_cluster cl(4);
  auto rec = std::make_shared<recorder>();
  std::atomic<int> callback{0};
  client_options o = observed(cl.uris(), rec);
  o.on_warning = [&callback](const warning& w) {
    if (w.code == warning_code::even_node_count) ++callback;
  };
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  const auto w = rec->get(&recorder::warnings_);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].code, warning_code::even_node_count);
  EXPECT_EQ(
      w[0].message,
      "4 nodes: the quorum of 3 tolerates 1 failure, no more than 3 nodes would; use an odd number of nodes");
  EXPECT_EQ(callback.load(), 1);
  // The first event of all: before any node came up.
  EXPECT_EQ(rec->lines().front(), "warning " + std::to_string(static_cast<int>(warning_code::even_node_count)));
}

TEST(Observer, warns_about_a_single_node) {
  redis_cluster cl(1);
  auto rec = std::make_shared<recorder>();
  client c(observed(cl.uris(), rec));
  ASSERT_TRUE(wait_connected(c));
  const auto w = rec->get(&recorder::warnings_);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].code, warning_code::single_node);
  EXPECT_TRUE(contains(w[0].message, cl[0].uri())) << w[0].message;
}

TEST(Observer, the_eviction_policy_warning_reaches_observers) {
  redis_cluster cl(3);
  cl[2].command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
  auto rec = std::make_shared<recorder>();
  client c(observed(cl.uris(), rec));
  ASSERT_TRUE(wait_connected(c));
  ASSERT_TRUE(eventually([&] { return !rec->get(&recorder::warnings_).empty(); }));
  const auto w = rec->get(&recorder::warnings_);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].code, warning_code::eviction_policy);
  EXPECT_EQ(w[0].node, cl[2].uri());
}

class thrower : public observer {
 public:
  void on_operation_started(const operation_started&) override { throw std::runtime_error("boom"); }
  void on_lock_acquired(const lock_event&) override { throw 42; }
  void on_node_up(const node_event&) override { throw std::runtime_error("boom"); }
};

TEST(Observer, a_throwing_observer_does_not_break_the_client_nor_the_next_observer) {
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  client_options o = options_for(cl.uris());
  o.observers.push_back(std::make_shared<thrower>());
  o.observers.push_back(rec);
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  auto r = c.acquire("ev-throw", once(5000ms));
  ASSERT_TRUE(r) << r.report.message();
  ASSERT_TRUE(r.lock.release());
  EXPECT_EQ(rec->about("ev-throw"),
            (lines{"started acquire ev-throw", "acquired ev-throw", "finished acquire ev-throw ok",
                   "started release ev-throw", "released ev-throw", "finished release ev-throw ok"}));
  // 3 node_up, and per inspect/acquire/release one started; one acquired.
  EXPECT_GE(c.stats().observer_errors, 3u + 1u + 1u + 1u);
}

// An observer that starts an acquire from inside an event (the async API only).
class reentrant : public observer {
 public:
  explicit reentrant(client** c) : c_(c) {}
  void on_lock_acquired(const lock_event& e) override {
    if (e.resource != "ev-outer") return;
    (*c_)->acquire_async("ev-inner", once(5000ms), [this](acquire_result r) {
      inner_ok = static_cast<bool>(r);
      if (r) inner = std::move(r.lock);
      done = true;
    });
  }
  client** c_;
  std::atomic<bool> done{false};
  std::atomic<bool> inner_ok{false};
  lock inner;
};

TEST(Observer, an_observer_may_start_an_acquire_from_an_event) {
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  client* cp = nullptr;
  auto re = std::make_shared<reentrant>(&cp);
  client_options o = observed(cl.uris(), rec);
  o.observers.push_back(re);
  client c(o);
  cp = &c;
  ASSERT_TRUE(wait_connected(c));
  auto r = c.acquire("ev-outer", once(5000ms));
  ASSERT_TRUE(r) << r.report.message();
  ASSERT_TRUE(eventually([&] { return re->done.load(); }));
  EXPECT_TRUE(re->inner_ok.load());
  ASSERT_TRUE(eventually([&] { return rec->saw("finished acquire ev-inner ok"); }));
  EXPECT_EQ(rec->about("ev-inner"),
            (lines{"started acquire ev-inner", "acquired ev-inner", "finished acquire ev-inner ok"}));
  EXPECT_EQ(c.stats().observer_errors, 0u);
  // The handle must not outlive the client inside its own observer: a handle keeps
  // its client alive (even released), and the client keeps its observers, so a
  // handle kept by an observer is a cycle. Release it, then drop it.
  EXPECT_TRUE(re->inner.release());
  re->inner = lock{};
}

#ifndef NDEBUG
class sleeper : public observer {
 public:
  void on_operation_started(const operation_started& e) override {
    if (e.resource == "ev-sleepy") std::this_thread::sleep_for(5ms);
  }
};

TEST(Observer, debug_builds_say_when_an_observer_is_slow) {
  redis_cluster cl(3);
  client_options o = options_for(cl.uris());
  o.observers.push_back(std::make_shared<sleeper>());
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  ::testing::internal::CaptureStderr();
  auto r = c.acquire("ev-sleepy", once(5000ms));
  auto r2 = c.acquire("ev-sleepy-2", once(5000ms));
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_TRUE(contains(err, "redlock: observer slow: on_operation_started took ")) << err;
  EXPECT_TRUE(contains(err, " ms; observers must not block")) << err;
  // Rate-limited: one line.
  EXPECT_EQ(err.find("observer slow"), err.rfind("observer slow")) << err;
}
#endif

TEST(Observer, no_event_carries_a_password_or_a_token) {
  const std::string password = "Pw0bserverS3cret";
  node_config cfg;
  cfg.password = password;
  redis_cluster cl(3, cfg);
  auto rec = std::make_shared<recorder>();
  client_options o = observed(cl.uris(), rec);
  o.max_ttl = 1200ms;
  o.slow_node_threshold = 1ms;  // replies slower than 1 ms: slow events, maybe
  for (const auto& u : o.nodes) ASSERT_TRUE(contains(u, password));
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  std::vector<std::string> tokens;
  {
    acquire_options a = once(1000ms);
    a.auto_extend = true;
    a.extend_interval = 200ms;
    auto r = c.acquire("ev-secret", a);
    ASSERT_TRUE(r) << r.report.message();
    tokens.push_back(r.lock.info().token);
    // A contender with retries, an explicit extend, an inspect.
    acquire_options b = once(1000ms);
    b.retry.max_attempts = 2;
    b.retry.base_delay = 10ms;
    EXPECT_FALSE(c.acquire("ev-secret", b));
    EXPECT_TRUE(c.extend(r.lock.info(), 1000ms));
    EXPECT_TRUE(c.inspect("ev-secret").holder.has_value());
    ASSERT_TRUE(eventually([&] { return rec->saw("extended ev-secret"); }));
    // A node goes down and comes back without its data (quarantine).
    cl[1].restart(false);
    ASSERT_TRUE(eventually([&] { return rec->saw("quarantined 1 restart"); }));
    auto r2 = c.acquire("ev-secret-2", once(1000ms));
    ASSERT_TRUE(r2) << r2.report.message();
    tokens.push_back(r2.lock.info().token);
    ASSERT_TRUE(r2.lock.release());
    for (std::size_t i = 0; i < cl.size(); ++i) cl[i].command({"DEL", "ev-secret"});
    ASSERT_TRUE(eventually([&] { return rec->saw("lost ev-secret " + make_error_code(errc::lock_lost).message()); }));
  }
  ASSERT_TRUE(eventually([&] { return rec->saw("cleared 1 restart"); }));
  const auto strings = rec->strings();
  EXPECT_GT(strings.size(), 50u);
  for (const auto& s : strings) {
    EXPECT_FALSE(contains(s, password)) << s;
    for (const auto& t : tokens) EXPECT_FALSE(contains(s, t)) << s;
  }
}

// ------------------------------------------------------------ issue 20: one ending event per lock

// The value of the unlabelled redlock_locks_held sample in `text` (-999 if absent).
long long held_gauge(const std::string& text) {
  const std::string name = "\nredlock_locks_held ";
  const auto at = ("\n" + text).find(name);
  if (at == std::string::npos) return -999;
  return std::stoll(text.substr(at + name.size() - 1));
}

// Handles without a watchdog whose validity ran out (and whose keys expired on
// the nodes) before their release, by a call or by the destructor: each ends in
// exactly one event, on_lock_lost (lock_lost), and the held gauge comes back to zero.
TEST(Observer, a_handle_released_after_its_validity_ran_out_ends_in_one_loss_event) {
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  auto m = std::make_shared<metrics>();
  client_options o = observed(cl.uris(), rec);
  o.observers.push_back(m);
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  constexpr int kLocks = 5;
  std::vector<lock> locks;
  std::vector<std::string> names;
  for (int i = 0; i < kLocks; ++i) {
    names.push_back("ev-expired-" + std::to_string(i));
    auto r = c.acquire(names.back(), once(300ms));
    ASSERT_TRUE(r) << r.report.message();
    locks.push_back(std::move(r.lock));
  }
  EXPECT_EQ(held_gauge(m->render()), kLocks);
  // Validity gone here, and the keys gone on every node.
  ASSERT_TRUE(eventually([&] {
    for (const auto& l : locks) {
      if (l.owns_lock()) return false;
    }
    for (const auto& n : names) {
      if (cl.count_key(n) != 0) return false;
    }
    return true;
  }));
  for (int i = 0; i < kLocks - 1; ++i) EXPECT_EQ(locks[i].release().error, errc::not_owner);
  locks.pop_back();  // the last one by its destructor
  ASSERT_TRUE(eventually([&] {
    const lines seq = rec->about(names.back());
    return std::any_of(seq.begin(), seq.end(),
                       [&](const std::string& e) { return e.rfind("finished release " + names.back() + " bg", 0) == 0; });
  }));
  for (const auto& n : names) {
    const lines seq = rec->about(n);
    const auto ends = std::count_if(seq.begin(), seq.end(), [&](const std::string& e) {
      return e.rfind("released " + n, 0) == 0 || e.rfind("lost " + n, 0) == 0;
    });
    EXPECT_EQ(ends, 1) << n;
    EXPECT_TRUE(std::find(seq.begin(), seq.end(), "lost " + n + " " + make_error_code(errc::lock_lost).message()) !=
                seq.end())
        << n;
  }
  EXPECT_EQ(held_gauge(m->render()), 0) << m->render();
  EXPECT_EQ(c.stats().locks_lost, static_cast<std::uint64_t>(kLocks));
}

// A handle whose validity ran out on this client's clock while its keys are still
// on the nodes (the drift allowance): the release deletes them, and the lock ends
// in a loss (its validity was no longer guaranteed), not a second, released event.
TEST(Observer, a_handle_released_past_its_validity_with_its_keys_still_there_ends_in_one_loss_event) {
  struct offset_clock : redlock::clock {
    std::chrono::steady_clock::time_point now() const noexcept override {
      return std::chrono::steady_clock::now() + std::chrono::milliseconds(offset_ms.load());
    }
    std::atomic<std::int64_t> offset_ms{0};
  };
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  auto m = std::make_shared<metrics>();
  auto clock = std::make_shared<offset_clock>();
  client_options o = observed(cl.uris(), rec);
  o.observers.push_back(m);
  o.clock = clock;
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  auto r = c.acquire("ev-expired-kept", once(10000ms));
  ASSERT_TRUE(r) << r.report.message();
  clock->offset_ms = 10500;
  ASSERT_FALSE(r.lock.owns_lock());
  (void)r.lock.release();
  // A release answers at its quorum: the last node's delete may still be on its way.
  EXPECT_TRUE(eventually([&] { return cl.count_key("ev-expired-kept") == 0; }));
  const lines seq = rec->about("ev-expired-kept");
  EXPECT_EQ(std::count(seq.begin(), seq.end(), "released ev-expired-kept"), 0);
  EXPECT_EQ(std::count(seq.begin(), seq.end(), "lost ev-expired-kept " + make_error_code(errc::lock_lost).message()), 1);
  EXPECT_EQ(held_gauge(m->render()), 0);
}

// Attack on issue 20's client::release through a handle: a watchdog lock declared
// lost (its validity ran out on the client's clock, moved on by an offset; the keys
// keep their TTL on the nodes) ended in on_lock_lost. Its lease passed to
// client::release then deletes the keys, as the handle's own release would, but
// sends no on_lock_released: a lock ends in exactly one of them (observer.h). (It
// went out as a bare lease's release: both events.)
TEST(Observer, a_lost_handles_lease_released_through_the_client_ends_in_one_event) {
  struct offset_clock : redlock::clock {
    std::chrono::steady_clock::time_point now() const noexcept override {
      return std::chrono::steady_clock::now() + std::chrono::milliseconds(offset_ms.load());
    }
    std::atomic<std::int64_t> offset_ms{0};
  };
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  auto clock = std::make_shared<offset_clock>();
  client_options o = observed(cl.uris(), rec);
  o.clock = clock;
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  const std::string res = "ev-lost-client-release";
  acquire_options a = once(20000ms);
  a.auto_extend = true;
  a.extend_interval = 100ms;
  auto r = c.acquire(res, a);
  ASSERT_TRUE(r) << r.report.message();
  clock->offset_ms = 30000;  // the validity has run out: the next tick reports the loss
  ASSERT_TRUE(eventually([&] { return r.lock.lost(); })) << "not reported lost";
  ASSERT_EQ(cl.count_key(res), 3) << "the keys keep their TTL" << ::testing::PrintToString(rec->about(res));
  auto rel = c.release(r.lock.info());
  EXPECT_TRUE(rel) << rel.message();
  // At its quorum: the last node's delete may still be on its way (seen on a loaded run).
  EXPECT_TRUE(eventually([&] { return cl.count_key(res) == 0; }));
  const lines seq = rec->about(res);
  const auto ends = std::count_if(seq.begin(), seq.end(), [&](const std::string& e) {
    return e.rfind("released " + res, 0) == 0 || e.rfind("lost " + res, 0) == 0;
  });
  EXPECT_EQ(ends, 1) << ::testing::PrintToString(seq);
  EXPECT_EQ(c.stats().locks_lost, 1u);
  // The handle was released by that call: nothing left to release.
  EXPECT_EQ(r.lock.release().error, errc::not_owner);
}

// A handle whose release was not confirmed, released again by passing info() to
// client::release (as lock::release documents): that release goes through the
// handle, so the handle's own release afterwards is "lock not held" — not another
// round that finds the keys gone and reports the lock lost after it was released.
TEST(Observer, a_failed_release_retried_through_the_client_ends_the_handle_once) {
  node_config cfg;
  cfg.aof = true;  // the killed nodes come back with the key
  redis_cluster cl(3, cfg);
  auto rec = std::make_shared<recorder>();
  client c(observed(cl.uris(), rec));
  ASSERT_TRUE(wait_connected(c));
  const std::string res = "ev-failed-client-release";
  auto r = c.acquire(res, once(20000ms));
  ASSERT_TRUE(r) << r.report.message();
  cl[1].kill();
  cl[2].kill();
  ASSERT_TRUE(
      eventually([&] { return c.inspect("probe").report.count(node_status::connection_error) == 2; }));
  auto failed = r.lock.release();
  ASSERT_EQ(failed.error, errc::unavailable) << failed.message();
  cl[1].start();
  cl[2].start();
  ASSERT_TRUE(eventually([&] { return cl.count_key(res) == 2; })) << "the restarted nodes lost the key";
  ASSERT_TRUE(wait_connected(c));
  auto via_client = c.release(r.lock.info());
  ASSERT_TRUE(via_client) << via_client.message();
  // At its quorum: the last node's delete may still be on its way (seen on a loaded run).
  EXPECT_TRUE(eventually([&] { return cl.count_key(res) == 0; }));
  auto again = r.lock.release();
  EXPECT_EQ(again.error, errc::not_owner) << again.message();
  EXPECT_EQ(c.stats().locks_lost, 0u);
  const lines seq = rec->about(res);
  const auto ends = std::count_if(seq.begin(), seq.end(), [&](const std::string& e) {
    return e.rfind("released " + res, 0) == 0 || e.rfind("lost " + res, 0) == 0;
  });
  EXPECT_EQ(ends, 1) << ::testing::PrintToString(seq);
}

}  // namespace
}  // namespace redlock::test

// === The metrics adapter's held gauge stays consistent; a throwing observer at shutdown is called
// back exactly once (review 12, observability)
namespace redlock::test {
namespace held_gauge {  // the section's helpers stay apart from the file's
namespace {

using lines = std::vector<std::string>;

// The value of the unlabelled redlock_locks_held sample in `text` (NaN-free: -999 if absent).
long long held_gauge(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("redlock_locks_held ", 0) == 0) return std::stoll(line.substr(19));
  }
  return -999;
}

// acquire_many is a public acquire: the contract says every public call has
// operation_started/finished, and a lock acquired has on_lock_acquired. Its release
// goes through the handle (lib/lock.cc), which emits on_lock_released: without the
// acquired event the metrics gauge goes to -1.
TEST(HeldGauge, acquire_many_emits_its_events_and_the_held_gauge_stays_consistent) {
  redis_cluster cl(3);
  auto rec = std::make_shared<recorder>();
  auto m = std::make_shared<metrics>();
  client_options o = options_for(cl.uris());
  o.observers.push_back(rec);
  o.observers.push_back(m);
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  auto r = c.acquire_many({"r12-a", "r12-b"}, once(10000ms));
  ASSERT_TRUE(r) << r.report.message();
  const std::string res = r.lock.info().resource;
  EXPECT_EQ(held_gauge(m->render()), 1) << "after acquire_many";
  ASSERT_TRUE(r.lock.release());
  EXPECT_EQ(held_gauge(m->render()), 0) << "after its release";
  EXPECT_EQ(rec->about(res),
            (lines{"started acquire " + res, "acquired " + res, "finished acquire " + res + " ok",
                   "started release " + res, "released " + res, "finished release " + res + " ok"}));
}

// A bare lease released through client::release (a detached handle, a lease kept
// across a restart of the caller) was never counted as held here: the gauge stays
// at the handles' count instead of going below it.
TEST(HeldGauge, releasing_a_bare_lease_does_not_take_the_held_gauge_below_the_handles) {
  redis_cluster cl(3);
  auto m = std::make_shared<metrics>();
  client_options o = options_for(cl.uris());
  o.observers.push_back(m);
  client holder(options_for(cl.uris()));  // not observed: its lock is not this client's
  client c(o);
  ASSERT_TRUE(wait_connected(holder));
  ASSERT_TRUE(wait_connected(c));
  auto mine = c.acquire("r12-gauge-mine", once(10000ms));
  ASSERT_TRUE(mine) << mine.report.message();
  auto other = holder.acquire("r12-gauge-other", once(10000ms));
  ASSERT_TRUE(other) << other.report.message();
  const lease bare = other.lock.detach();
  EXPECT_EQ(held_gauge(m->render()), 1);
  EXPECT_FALSE(c.release(bare).error);
  EXPECT_EQ(held_gauge(m->render()), 1) << "a bare lease's release counted as a handle's";
  ASSERT_TRUE(mine.lock.release());
  EXPECT_EQ(held_gauge(m->render()), 0);
}

// The semaphore holds one permit: the gauge says 1 while held, 0 after.
TEST(HeldGauge, semaphore_permit_keeps_the_held_gauge_consistent) {
  redis_cluster cl(3);
  auto m = std::make_shared<metrics>();
  client_options o = options_for(cl.uris());
  o.observers.push_back(m);
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  semaphore_options so;
  so.permits = 3;
  so.probe_first = false;  // rounds of `batch` permits: extras won are released at once
  so.batch = 3;
  semaphore s(c, "r12-sem", so);
  {
    auto p = s.acquire(once(10000ms));
    ASSERT_TRUE(p) << p.report.message();
    // Extras won in the same round are released at once (asynchronously).
    EXPECT_TRUE(eventually([&] { return held_gauge(m->render()) == 1; }, 2000ms)) << m->render();
    ASSERT_TRUE(p.lock.release());
  }
  EXPECT_EQ(held_gauge(m->render()), 0);
}

// A client destroyed while it holds a lock (no watchdog): the metrics object
// outlives it (a monitor, a process-wide registry). Either the lock is released
// on the way out (released event) or the gauge stays 1 forever.
TEST(HeldGauge, client_destroyed_with_a_held_lock_leaves_the_gauge_at_zero) {
  redis_cluster cl(3);
  auto m = std::make_shared<metrics>();
  auto rec = std::make_shared<recorder>();
  client_options o = options_for(cl.uris());
  o.observers.push_back(m);
  o.observers.push_back(rec);
  {
    client c(o);
    ASSERT_TRUE(wait_connected(c));
    auto r = c.acquire("r12-destroyed", once(10000ms));
    ASSERT_TRUE(r) << r.report.message();
    lock kept = std::move(r.lock);
    EXPECT_EQ(held_gauge(m->render()), 1);
    // Handle destroyed first (before the client): its background release.
  }
  EXPECT_EQ(held_gauge(m->render()), 0);
  for (const auto& l : rec->about("r12-destroyed")) std::printf("  %s\n", l.c_str());
}

// Lost, then released: one decrement only (lost already ended the hold).
TEST(HeldGauge, lost_by_extension_cap_then_released_decrements_the_gauge_once) {
  redis_cluster cl(3);
  auto m = std::make_shared<metrics>();
  auto rec = std::make_shared<recorder>();
  client_options o = options_for(cl.uris());
  o.observers.push_back(m);
  o.observers.push_back(rec);
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  acquire_options a = once(1500ms);
  a.auto_extend = true;
  a.extend_interval = 100ms;
  a.max_hold = 1700ms;
  auto r = c.acquire("r12-cap", a);
  ASSERT_TRUE(r) << r.report.message();
  ASSERT_TRUE(eventually([&] { return r.lock.lost(); }, 5000ms));
  auto rel = r.lock.release();
  for (const auto& l : rec->about("r12-cap")) std::printf("  %s\n", l.c_str());
  EXPECT_EQ(held_gauge(m->render()), 0) << rel.message();
  EXPECT_LE(rec->count("lost r12-cap " + make_error_code(errc::extension_limit).message()) +
                rec->count("released r12-cap"),
            1u);
}

// Throws from every callback.
struct thrower : observer {
  void on_operation_started(const operation_started&) override { throw 1; }
  void on_operation_finished(const operation_finished&) override { throw 2; }
  void on_retry_scheduled(const retry_scheduled&) override { throw 3; }
  void on_lock_acquired(const lock_event&) override { throw 4; }
  void on_lock_extended(const lock_event&) override { throw 5; }
  void on_lock_released(const lock_event&) override { throw 6; }
  void on_lock_lost(const lock_lost_event&) override { throw 7; }
  void on_node_up(const node_event&) override { throw 8; }
  void on_node_down(const node_event&) override { throw 9; }
  void on_reconnect_scheduled(const reconnect_scheduled&) override { throw 10; }
  void on_warning(const warning&) override { throw 11; }
};

// A throwing observer, a set lock under a watchdog and a client shut down under
// it: the set's on_lost runs exactly once (cancelled), the async acquire's callback
// exactly once, and a second in-flight acquire_many is cancelled exactly once.
TEST(ObserverShutdown, throwing_observer_and_shutdown_under_a_set_watchdog_call_back_exactly_once) {
  redis_cluster cl(3);
  std::atomic<int> lost{0}, done_ok{0}, done_other{0};
  auto rec = std::make_shared<recorder>();
  lock kept;
  {
    client_options o = options_for(cl.uris());
    o.observers.push_back(std::make_shared<thrower>());
    o.observers.push_back(rec);
    client c(o);
    ASSERT_TRUE(wait_connected(c));
    acquire_options a = once(2000ms);
    a.auto_extend = true;
    a.on_lost = [&](const lease&, const report&) { lost.fetch_add(1); };
    auto r = c.acquire_many({"r12-t-a", "r12-t-b"}, a);
    ASSERT_TRUE(r) << r.report.message();
    kept = std::move(r.lock);
    client holder(options_for(cl.uris()));
    auto h = holder.acquire("r12-t-c", once(10000ms));
    ASSERT_TRUE(h);
    acquire_options w = once(2000ms);
    w.retry.max_attempts = 1000;
    w.retry.base_delay = 10ms;
    w.retry.max_delay = 20ms;
    c.acquire_many_async({"r12-t-c", "r12-t-d"}, w, [&](acquire_result res) {
      (res ? done_ok : done_other).fetch_add(1);
    });
    ASSERT_TRUE(eventually([&] { return rec->count("retry r12-t-c,r12-t-d 3") > 0; }, 3000ms));
    EXPECT_GT(c.stats().observer_errors, 0u);
  }
  EXPECT_EQ(lost.load(), 1);
  EXPECT_EQ(done_ok.load(), 0);
  EXPECT_EQ(done_other.load(), 1);
  // The cancelled acquire's events: started ... finished, exactly once.
  EXPECT_EQ(rec->count("started acquire r12-t-c,r12-t-d"), 1u);
  EXPECT_EQ(rec->count("finished acquire r12-t-c,r12-t-d " + make_error_code(errc::cancelled).message()), 1u);
  EXPECT_EQ(rec->count("lost r12-t-a,r12-t-b " + make_error_code(errc::cancelled).message()), 1u);
  kept = lock();  // the handle outlives its client: destroyed after it
}

}  // namespace
}  // namespace held_gauge
}  // namespace redlock::test
