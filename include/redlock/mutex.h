// A distributed mutex that satisfies the standard Lockable / TimedLockable
// requirements, so std::lock_guard, std::unique_lock and try_lock_for work.
//
// Thread-safety: like std::mutex, any thread may call lock()/try_lock*(); unlock()
// is called by the thread that holds it. One process-local thread holds it at a
// time (other local threads contend through Redis like remote clients do).
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "redlock/client.h"

namespace redlock {

class REDLOCK_EXPORT mutex {
 public:
  // `client` must outlive the mutex. options.retry is used per try; lock() and
  // try_lock_for() repeat tries with jittered delays until they succeed or time out.
  mutex(client& c, std::string resource, acquire_options options = {});
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;
  ~mutex();  // releases if still held; never throws

  // Blocks while the lock is contended. Throws std::system_error (redlock category)
  // for any other failure: unavailable, auth_failed, permission_denied, wrong_type,
  // invalid_argument.
  void lock();
  // One attempt (no retries). False on any failure; last_report() says why.
  bool try_lock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_for_ms(std::chrono::ceil<std::chrono::milliseconds>(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return try_lock_for(t - Clock::now());
  }
  // Releases. Never throws: a failed release is recorded in last_report() and
  // reported through client_options::on_release_failure.
  void unlock() noexcept;

  // The report of the last try/lock/unlock on this mutex.
  report last_report() const;
  // The current lock handle's state (lost(), fence(), remaining_validity()); only
  // meaningful while held, and for the holding thread.
  const redlock::lock& held() const noexcept { return held_; }

 private:
  bool try_lock_for_ms(std::chrono::milliseconds d);
  bool attempt(const acquire_options& o);

  client& client_;
  std::string resource_;
  acquire_options options_;
  redlock::lock held_;
  mutable std::mutex report_mu_;
  report last_;
};

}  // namespace redlock
