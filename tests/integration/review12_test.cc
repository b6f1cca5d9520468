// Review 12 (adversarial, observability): reproductions against the observer
// contract (redlock/observer.h) and the metrics adapter's gauges.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "observer_recorder.h"
#include "redis_node.h"
#include "redlock/metrics.h"
#include "redlock/redlock.h"
#include "test_util.h"

namespace redlock::test {
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
TEST(Review12, acquire_many_emits_its_events_and_the_held_gauge_stays_consistent) {
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
TEST(Review12, releasing_a_bare_lease_does_not_take_the_held_gauge_below_the_handles) {
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
TEST(Review12, semaphore_permit_keeps_the_held_gauge_consistent) {
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
TEST(Review12, client_destroyed_with_a_held_lock_leaves_the_gauge_at_zero) {
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
TEST(Review12, lost_by_extension_cap_then_released_decrements_the_gauge_once) {
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
TEST(Review12, throwing_observer_and_shutdown_under_a_set_watchdog_call_back_exactly_once) {
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
}  // namespace redlock::test
