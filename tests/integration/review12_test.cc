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
  EXPECT_EQ(rec->about(res), (lines{"started acquire " + res, "acquired " + res, "finished acquire " + res + " ok",
                                    "started release " + res, "released " + res,
                                    "finished release " + res + " ok"}));
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

}  // namespace
}  // namespace redlock::test
