// Running an asynchronous core operation synchronously from a caller's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/core.h"

namespace redlock::detail {

inline void set_elapsed(report& r, std::chrono::microseconds e) { r.elapsed = e; }
inline void set_elapsed(acquire_result& r, std::chrono::microseconds e) { r.report.elapsed = e; }
inline void set_elapsed(inspect_result& r, std::chrono::microseconds e) { r.report.elapsed = e; }

// Wraps a completion so that its report's elapsed counts from `called` (the public
// call, on the client's clock) to completion, as report.h promises.
template <class R>
std::function<void(R)> timed(std::shared_ptr<core> c, std::chrono::steady_clock::time_point called,
                             std::function<void(R)> done) {
  return [c = std::move(c), called, done = std::move(done)](R r) {
    set_elapsed(r, std::chrono::duration_cast<std::chrono::microseconds>(c->now() - called));
    done(std::move(r));
  };
}

// One blocking caller's wait for one result, on the caller's stack (no shared
// state to allocate). The caller may spin for a while (core::begin_sync_wait)
// before it sleeps on a condition variable; the loop thread wakes it only if it
// went to sleep. Protocol: `state_` goes spinning -> done (the result was set
// while the caller spun: the exchange is the loop thread's last touch), or
// spinning -> sleeping -> done (the loop thread then signals under `mu_` and
// stores `released_` last; the caller leaves only after it saw `released_`, so
// the waiter outlives every use the loop thread makes of it).
template <class R>
class sync_waiter {
 public:
  // Loop thread, exactly once. The waiter may be gone when this returns. Returns
  // true when the caller was spinning (it will be back soon, if it calls again).
  bool set(R r) {
    value_.emplace(std::move(r));
    if (state_.exchange(kDone, std::memory_order_acq_rel) != kSleeping) return true;
    {
      std::lock_guard<std::mutex> g(mu_);
      signalled_ = true;
      cv_.notify_one();
    }
    // The last touch: the caller waits for it before it leaves (and destroys the
    // mutex this thread was still unlocking).
    released_.store(true, std::memory_order_release);
    return false;
  }

  // The caller: spins up to `spin` (zero: not at all), then sleeps until set().
  R wait(std::chrono::nanoseconds spin) {
    if (spin.count() <= 0 || !spin_for(spin)) {
      bool slept = false;
      {
        std::unique_lock<std::mutex> lk(mu_);
        int expected = kSpinning;
        if (state_.compare_exchange_strong(expected, kSleeping, std::memory_order_acq_rel)) {
          cv_.wait(lk, [this] { return signalled_; });
          slept = true;
        }
      }
      // Signalled: set() is past its last use of the mutex a moment later.
      while (slept && !released_.load(std::memory_order_acquire)) std::this_thread::yield();
    }
    return std::move(*value_);
  }

 private:
  static constexpr int kSpinning = 0, kSleeping = 1, kDone = 2;

  // True once done within `spin`. Yields the CPU between short bursts of polling,
  // so that a spinning caller gives way to any thread that can run (the loop
  // thread, a co-located server).
  bool spin_for(std::chrono::nanoseconds spin) {
    const auto until = std::chrono::steady_clock::now() + spin;
    for (;;) {
      for (int i = 0; i < 32; ++i) {
        if (state_.load(std::memory_order_acquire) == kDone) return true;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::yield();
    }
  }

  std::atomic<int> state_{kSpinning};
  std::optional<R> value_;  // written by set() before state_ becomes done
  std::mutex mu_;
  std::condition_variable cv_;
  bool signalled_ = false;  // guarded by mu_
  std::atomic<bool> released_{false};  // set() is done with the waiter (sleeping path)
};

// Posts start(done) to the loop and waits for done(result). Returns `refused(errc)`
// without waiting when called on the loop thread (would_deadlock) or after the
// client stopped (cancelled). In a simulated world driven from this thread
// (reactor::drive), waiting is running the world until the result is in.
template <class R, class Start, class Refused>
R run_sync(core& c, Start start, Refused refused) {
  if (c.must_not_block()) return refused(errc::would_deadlock);
  if (c.on_loop_thread()) {
    auto out = std::make_shared<std::optional<R>>();
    bool posted = c.post([start = std::move(start), out]() mutable {
      start([out](R r) { *out = std::move(r); });
    });
    if (!posted) return refused(errc::cancelled);
    if (!c.drive([&] { return out->has_value(); }) || !out->has_value()) return refused(errc::would_deadlock);
    return std::move(**out);
  }
  // Another thread: the operation's callbacks run exactly once (core.h), so the
  // waiter on this stack is set exactly once, and this call returns only after.
  sync_waiter<R> w;
  core* cp = &c;
  const auto t0 = std::chrono::steady_clock::now();
  bool posted = c.post([start = std::move(start), &w, cp]() mutable {
    start([&w, cp](R r) {
      // `w` may be gone once set() returned: only its answer is used after.
      if (w.set(std::move(r))) cp->answered_blocking_caller();
    });
  });
  if (!posted) return refused(errc::cancelled);
  const core::sync_wait_plan plan = c.begin_sync_wait();
  R r = w.wait(plan.spin);
  c.end_sync_wait(plan, std::chrono::steady_clock::now() - t0);
  return r;
}

}  // namespace redlock::detail
