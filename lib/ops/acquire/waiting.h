// The pause between an acquire's attempts (release_wait): the timer of the next
// attempt, and waiting without polling for the lock's release (ops/notify.h): the
// channel joined, the wake-up budget, the peek that skips an attempt a release
// cannot win, and the backoff of a split among waiters. Loop thread only.
//
// Lifecycle: attempt_failed -> wait_for_release (join the channel) -> wake | missed
// release | fallback timer -> [peek_then_attempt -> after_peek] -> attempt_now.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "ops/notify.h"
#include "redlock/options.h"

namespace redlock::detail {

class core;
class round;

class release_wait final : private waiter {
 public:
  using clock_tp = std::chrono::steady_clock::time_point;
  using milliseconds = std::chrono::milliseconds;

  // What the wait asks of the acquire that owns it.
  class owner {
   public:
    // Starts the next attempt (the op's start_attempt).
    virtual void attempt_now() = 0;
    // Ends the acquire as failed, with `ec` (cancelled), or with the last attempt's
    // error when `ec` is empty (the deadline passed while waiting).
    virtual void give_up(std::error_code ec) = 0;
    // The op, kept alive by each timer, peek and settle callback of the wait.
    virtual std::shared_ptr<void> keep_alive() = 0;
    virtual bool finished() const = 0;   // its result was delivered
    virtual bool cancelled() const = 0;  // cancel() was called
    virtual int attempts() const = 0;    // attempts started so far

   protected:
    ~owner() = default;
  };

  // `retry`, `call_start` and `keys` (a set's keys, empty for one resource) are
  // the owner's and outlive the wait (a member of the op).
  release_wait(core& c, owner& o, const retry_policy& retry, const clock_tp& call_start,
               const std::vector<std::string>& keys);
  ~release_wait();
  release_wait(const release_wait&) = delete;
  release_wait& operator=(const release_wait&) = delete;

  // The key whose channel is waited on until an attempt names its blocker.
  void set_key(std::string key) { key_ = std::move(key); }

  // An attempt starts (its timer fired, or the first).
  void attempt_starting();
  // The current attempt (its round started at `round_started`) failed.
  void attempt_failed(clock_tp round_started);
  // An acquire that may wait (retry.deadline) and found the lock held (or, once
  // waiting, failed any retryable way) waits for its release.
  bool waits_for_release(std::error_code ec) const;
  // Waits for the release of what blocked round `r` (the attempt with `token`),
  // the fallback timer armed at `delay`.
  void wait_for_release(const round& r, milliseconds delay, const std::string& token);
  // A plain retry: the next attempt after `delay`.
  void attempt_in(milliseconds delay);
  // Cancels the next attempt's timer; false when none was armed.
  bool cancel_pending();
  // Unregisters from the notifier (the acquire ended). Idempotent.
  void leave();

 private:
  // waiter (ops/notify.h)
  bool idle_waiting() const override { return idle_wait_ && timer_ != 0; }
  bool knows_blockers() const override { return !blockers_.empty(); }
  bool blocked_by(const std::string& token) const override;
  clock_tp wake_allowed_at() const override;
  void wake(milliseconds stagger, std::optional<peek_at> peek) override;

  milliseconds wake_interval() const;
  void spend_wake();
  void try_now() { start_in(milliseconds(0), std::nullopt); }
  void start_in(milliseconds stagger, std::optional<peek_at> peek);
  void peek_then_attempt(const peek_at& p);
  void after_peek(bool another_holder);
  std::string wait_key(const round& r) const;
  std::optional<milliseconds> split_backoff(const round& r, milliseconds fallback, const std::string& token);
  void arm_wait(milliseconds delay, bool queued = true);

  // The wake-up budget (issue 20, 4b), kept as a theoretical arrival time (GCRA):
  // at most kWakeBurst wake-ups at once, then one per wake_interval(). A flood of
  // forged release messages (anyone who may PUBLISH can send them) then costs this
  // waiter at most that many peeks or attempts; a genuine release finds the budget
  // full, as releases of a held lock come no faster than it is taken and held.
  static constexpr int kWakeBurst = 4;
  static constexpr milliseconds kWakeFloor{10};
  static constexpr int kMaxSplits = 6;  // then the fallback (a holder this waiter cannot see)

  core& c_;
  owner& owner_;
  const retry_policy& retry_;
  const clock_tp& call_start_;
  const std::vector<std::string>& keys_;
  std::string key_;            // the channel waited on
  std::uint64_t timer_ = 0;    // the next attempt's (or peek's) timer
  bool idle_wait_ = false;     // the fallback timer is armed, no attempt in flight
  bool joined_ = false;        // registered with the notifier (on key_'s channel)
  std::uint64_t join_gen_ = 0; // which join a settle callback belongs to
  bool in_join_ = false;       // notifier::join is running (may settle at once)
  bool fresh_at_join_ = false; // ... and did, with a subscription newer than the attempt
  std::vector<std::string> blockers_;  // holders seen by the last failed attempt
  std::string retried_for_;    // the last released token that made it try at once
  clock_tp retried_at_{};      // ... and its latest node's message then
  bool woken_ = false;         // the next attempt was woken by a release of key_
  bool attempt_woken_ = false; // ... and it is (was) the current attempt
  clock_tp attempt_started_{};
  std::chrono::microseconds last_rtt_{0};  // the last failed attempt's round trip (start to decision)
  int splits_ = 0;            // consecutive failed attempts that were splits among waiters
  clock_tp wake_tat_{};
};

}  // namespace redlock::detail
