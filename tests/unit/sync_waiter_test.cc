// The blocking caller's waiter (lib/sync.h): every interleaving of set() with the
// caller's spin and sleep delivers the value exactly once, and the caller returns
// only after set() is done with the waiter (run under TSan in CI's thread stage).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "api/sync.h"

namespace redlock::detail {
namespace {

using namespace std::chrono_literals;

TEST(SyncWaiter, value_set_before_the_wait_is_returned_without_sleeping) {
  sync_waiter<std::string> w;
  w.set("early");
  EXPECT_EQ(w.wait(0ns), "early");
}

TEST(SyncWaiter, value_set_while_the_caller_spins) {
  sync_waiter<std::string> w;
  std::thread t([&] {
    std::this_thread::sleep_for(1ms);
    w.set("spun");
  });
  EXPECT_EQ(w.wait(std::chrono::nanoseconds(2s)), "spun");  // bounded: set comes after ~1 ms
  t.join();
}

TEST(SyncWaiter, value_set_after_the_spin_ran_out_wakes_the_sleeper) {
  sync_waiter<std::string> w;
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    w.set("slept");
  });
  EXPECT_EQ(w.wait(std::chrono::nanoseconds(100us)), "slept");
  t.join();
}

TEST(SyncWaiter, racing_set_and_wait_always_deliver_once) {
  // The waiter lives on the caller's stack and dies as soon as wait() returns;
  // set() on the other thread must be done with it by then (TSan and ASan see it).
  for (int i = 0; i < 2000; ++i) {
    std::atomic<bool> go{false};
    std::thread setter;
    int got = 0;
    {
      sync_waiter<int> w;
      setter = std::thread([&w, &go, i] {
        while (!go.load(std::memory_order_acquire)) {
        }
        w.set(i);
      });
      go.store(true, std::memory_order_release);
      got = w.wait(std::chrono::nanoseconds(i % 3 == 0 ? 0 : i % 3 == 1 ? 1000 : 50000));
    }
    setter.join();
    ASSERT_EQ(got, i);
  }
}

}  // namespace
}  // namespace redlock::detail
