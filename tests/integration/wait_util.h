// Helpers of the tests of waiting acquires and the coordination primitives
// (wait_test.cc, multi_test.cc, election_test.cc, semaphore_test.cc): names, options, and what
// the nodes say about the release channels.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "redis_node.h"
#include "redlock/redlock.h"
#include "test_util.h"

namespace redlock::test::wait_util {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// A resource name of its own per call (and per process).
inline std::string unique(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(n.fetch_add(1)) + "-" + std::to_string(::getpid());
}

// The holder released at `t0`: the waiter's acquire (`fut`, waiting with a fallback
// far above it) gets the lock within 2.5 s, so the release woke it, not its fallback;
// the lock is released again.
template <typename Result>
void expect_woken_by_the_release(std::future<Result>& fut, clock_type::time_point t0) {
  ASSERT_EQ(fut.wait_for(10000ms), std::future_status::ready) << "not woken by the release";
  auto got = fut.get();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0);
  ASSERT_TRUE(got) << got.report.message();
  EXPECT_LT(took.count(), 2500) << "woken by its fallback, not the release";
  (void)got.lock.release();
}

// A waiting acquire: a fixed retry delay (the fallback timer), a deadline.
inline acquire_options waiting(std::chrono::milliseconds delay, std::chrono::milliseconds deadline = 20000ms,
                               std::chrono::milliseconds ttl = 10000ms) {
  acquire_options o;
  o.ttl = ttl;
  o.retry.max_attempts = 100000;
  o.retry.base_delay = delay;
  o.retry.max_delay = delay;
  o.retry.deadline = deadline;
  return o;
}

// Generous timeouts: these tests time wake-ups, not timeouts, on a loaded machine.
inline client_options opts(const std::vector<std::string>& uris) {
  client_options o = options_for(uris);
  o.command_timeout = 1000ms;
  o.connect_timeout = 2000ms;
  return o;
}

// Subscribers of `key`'s release channel on node n.
inline long long subscribers(redis_node& n, const std::string& key) {
  const std::string r = n.command({"PUBSUB", "NUMSUB", key + ":released"});
  const auto comma = r.rfind(", ");
  return comma == std::string::npos ? -1 : std::atoll(r.c_str() + comma + 2);
}

inline bool all_subscribed(redis_cluster& cl, const std::string& key, long long want = 1) {
  for (std::size_t i = 0; i < cl.size(); ++i) {
    if (subscribers(cl[i], key) != want) return false;
  }
  return true;
}

inline std::chrono::milliseconds since(clock_type::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0);
}

// Polls `count` until it reaches at least `at_least` and then stays unchanged for
// `quiet`: the attempts in flight are over. False if that takes more than `limit`.
// (A count compared with its first sample never settles once it moved on.)
inline bool settles(const std::function<long long()>& count, long long at_least, std::chrono::milliseconds quiet,
                    std::chrono::milliseconds limit) {
  const auto end = clock_type::now() + limit;
  long long last = count();
  auto since_change = clock_type::now();
  while (clock_type::now() < end) {
    std::this_thread::sleep_for(10ms);
    const long long now = count();
    if (now != last || now < at_least) {
      last = now;
      since_change = clock_type::now();
    } else if (clock_type::now() - since_change >= quiet) {
      return true;
    }
  }
  return false;
}

// Resumes a paused node on scope exit (a failing ASSERT must not leave it stopped).
struct resume_on_exit {
  redis_node& n;
  ~resume_on_exit() { n.resume(); }
};

}  // namespace redlock::test::wait_util
