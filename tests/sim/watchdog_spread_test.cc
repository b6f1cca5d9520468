// The watchdog at scale, in virtual time (issue 14): locks acquired together do
// not extend together, and spreading never makes an extension late.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "redlock/client.h"
#include "redlock/observer.h"
#include "redlock/testing.h"

namespace redlock::testing {
namespace {

using namespace std::chrono_literals;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
using clock_tp = std::chrono::steady_clock::time_point;

// Per resource: when it was acquired or last extended, and the validity it had then.
struct spread_recorder final : observer {
  struct mark {
    clock_tp at;
    clock_tp valid_until;
  };
  std::map<std::string, mark> last;
  std::vector<clock_tp> extensions;
  milliseconds longest_gap{0};    // the longest time between two marks of one lock
  milliseconds least_margin{1h};  // the least validity left when an extension landed
  std::size_t late = 0;           // extensions that landed after the validity they extended
  std::size_t lost = 0;

  void on_lock_acquired(const lock_event& e) override { last[e.resource] = mark{e.at, e.valid_until.value_or(e.at)}; }
  void on_lock_extended(const lock_event& e) override {
    extensions.push_back(e.at);
    auto it = last.find(e.resource);
    if (it == last.end()) return;
    if (e.at >= it->second.valid_until) ++late;
    least_margin = std::min(least_margin, duration_cast<milliseconds>(it->second.valid_until - e.at));
    longest_gap = std::max(longest_gap, duration_cast<milliseconds>(e.at - it->second.at));
    it->second = mark{e.at, e.valid_until.value_or(e.at)};
  }
  void on_lock_lost(const lock_lost_event&) override { ++lost; }
};

TEST(WatchdogSpread, a_thousand_locks_acquired_at_once_extend_spread_over_the_interval_and_never_late) {
  world w;
  auto rec = std::make_shared<spread_recorder>();
  client_options co;
  co.observers.push_back(rec);
  constexpr std::size_t kLocks = 1000;
  std::vector<lock> locks(kLocks);
  std::size_t done = 0, failed = 0;
  auto c = w.make_client(co);
  ASSERT_TRUE(c->ping());

  acquire_options o;
  o.ttl = 30s;  // extend every 10 s
  o.auto_extend = true;
  o.retry = retry_policy::once();
  for (std::size_t i = 0; i < kLocks; ++i) {
    c->acquire_async("spread-" + std::to_string(i), o, [&, i](acquire_result r) {
      ++done;
      if (r) {
        locks[i] = std::move(r.lock);
      } else {
        ++failed;
      }
    });
  }
  ASSERT_TRUE(w.run_until([&] { return done == kLocks; }, 5s));
  ASSERT_EQ(failed, 0u);
  const clock_tp start = w.now();
  // All acquired within a few virtual milliseconds: before spreading, all of them
  // extended within those milliseconds, every 10 s.
  w.advance(35s);

  EXPECT_EQ(rec->lost, 0u);
  EXPECT_EQ(rec->late, 0u);
  for (const lock& l : locks) EXPECT_TRUE(l.owns_lock());
  // Never later than the interval after the acquire or the previous extension
  // (plus the round trip), and every extension landed with most of the validity left.
  EXPECT_LE(rec->longest_gap, 10s + 50ms);
  EXPECT_GE(rec->least_margin, 30s - 10s - 1s);

  // Extensions per second over three intervals: flat, not 1000 in one second.
  std::vector<std::size_t> bins(30, 0);
  for (clock_tp t : rec->extensions) {
    const auto s = duration_cast<std::chrono::seconds>(t - start).count();
    if (s >= 0 && s < 30) ++bins[static_cast<std::size_t>(s)];
  }
  std::size_t total = 0, top = 0, bottom = kLocks;
  for (std::size_t b : bins) {
    total += b;
    top = std::max(top, b);
    bottom = std::min(bottom, b);
  }
  // About three extensions per lock in 30 s (the spread takes up to 1/16 of an
  // interval off each, so a few more).
  EXPECT_GE(total, 3 * kLocks - kLocks / 10);
  EXPECT_LE(total, 3 * kLocks + kLocks / 2);
  const double mean = static_cast<double>(total) / 30.0;
  EXPECT_LE(static_cast<double>(top), 1.5 * mean) << "max " << top << ", mean " << mean;
  EXPECT_GE(static_cast<double>(bottom), 0.5 * mean) << "min " << bottom << ", mean " << mean;

  for (lock& l : locks) ASSERT_TRUE(l.release());
}

TEST(WatchdogSpread, a_lone_lock_extends_exactly_every_interval) {
  world w;
  auto rec = std::make_shared<spread_recorder>();
  client_options co;
  co.observers.push_back(rec);
  auto c = w.make_client(co);
  acquire_options o;
  o.ttl = 3s;
  o.extend_interval = 1200ms;
  o.auto_extend = true;
  auto r = c->acquire("one", o);
  ASSERT_TRUE(r) << r.report.message();
  w.advance(1250ms);
  ASSERT_EQ(rec->extensions.size(), 1u) << "the first extension comes at the interval";
  EXPECT_GE(rec->extensions[0] - *r.lock.info().acquired_at, 1200ms);
  w.advance(10s);
  EXPECT_EQ(rec->late, 0u);
  EXPECT_EQ(rec->lost, 0u);
  EXPECT_LE(rec->longest_gap, 1200ms + 50ms);
  // Not spread (nothing to spread from): 1 + 10 s / 1.2 s extensions.
  EXPECT_EQ(rec->extensions.size(), 1u + 8u);
  EXPECT_TRUE(r.lock.owns_lock());
  ASSERT_TRUE(r.lock.release());
}

}  // namespace
}  // namespace redlock::testing

namespace redlock::testing {
namespace {

// A lock that reaches its extension cap re-arms its tick for the end of its
// validity, from inside the batch of ticks; the ticks of the other locks queued
// before that must still run on time (the loop timer follows the earliest tick).
TEST(WatchdogSpread, a_capped_lock_rearming_for_its_end_does_not_delay_the_others) {
  world w;
  auto rec = std::make_shared<spread_recorder>();
  client_options co;
  co.observers.push_back(rec);
  auto c = w.make_client(co);
  ASSERT_TRUE(c->ping());
  acquire_options o;
  o.ttl = 3s;  // extend every second
  o.auto_extend = true;
  o.retry = retry_policy::once();
  std::vector<lock> locks;
  acquire_options capped = o;
  capped.max_extensions = 1;
  for (int i = 0; i < 5; ++i) {
    auto r = c->acquire("capped-" + std::to_string(i), capped);
    ASSERT_TRUE(r) << r.report.message();
    locks.push_back(std::move(r.lock));
  }
  for (int i = 0; i < 2; ++i) {
    auto r = c->acquire("free-" + std::to_string(i), o);
    ASSERT_TRUE(r) << r.report.message();
    locks.push_back(std::move(r.lock));
  }
  w.advance(10s);
  EXPECT_EQ(rec->lost, 5u) << "only the capped locks run out";
  EXPECT_EQ(rec->late, 0u);
  EXPECT_LE(rec->longest_gap, 1s + 50ms);
  for (std::size_t i = 5; i < locks.size(); ++i) EXPECT_TRUE(locks[i].owns_lock()) << i;
}

}  // namespace
}  // namespace redlock::testing
