// The watchdog: it keeps the locks of auto_extend handles alive by extending each
// one every interval within its validity, and declares a lock lost when its
// validity runs out or no quorum can come back. A service of the core
// (engine/service.h): the client's stop declares the locks it still watches lost
// (errc::cancelled). It also holds the registry of the client's live handles
// (ops/held.h). Loop thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/service.h"
#include "ops/held.h"
#include "pure/retry.h"
#include "redlock/report.h"

namespace redlock::detail {

class core;

// Called just before an extension of held lock `h` to `ttl` is sent: lowers the
// validity to what the extension may leave (watchdog.cc). Returns the
// extension's sequence number, for extension_succeeded().
std::uint64_t begin_extension(const core& c, held& h, std::chrono::milliseconds ttl);
// Extension `seq` got a quorum: validity runs to `valid_until` (if the latest).
void extension_succeeded(held& h, std::uint64_t seq, std::chrono::steady_clock::time_point valid_until);

class watchdog final : public service {
 public:
  // Installed before the core starts (ops/services.cc): its spread sequence is
  // seeded from a copy of the core's, which nothing has drawn from yet.
  explicit watchdog(core& c);

  handle_registry& handles() noexcept { return handles_; }

  // Watches `h` (auto_extend): its first tick comes within the interval.
  void start(const std::shared_ptr<held>& h);
  // Stops watching `h`: a queued tick is skipped.
  void stop(held& h);
  // The validity of watched `h` changed outside a tick (an explicit extension):
  // its next tick comes within what is left (watchdog_delay). Not while a tick's
  // extension is in flight (that one arms the next tick when it ends).
  void rearm(held& h);
  // The lock of `h` is lost: stops its watchdog, lowers its validity to now, sets
  // lost(), reports it (report_loss) and calls on_lost. Once.
  void declare_lost(const std::shared_ptr<held>& h, const report& why);
  // A lock of this client ended in a loss: counts it (locks_lost) and sends
  // on_lock_lost. Also for a handle whose own release found it expired or gone.
  void report_loss(const held& h, const report& why);

  // service: the stop declares the watched locks lost, in the order they were
  // taken; its end drops the queued ticks.
  void begin_stop() override;
  void finish_stop() override;

 private:
  using clock_tp = std::chrono::steady_clock::time_point;
  // A tick of `h`: declares it lost once its validity ran out, else extends it
  // (on_extended gets the outcome).
  void on_tick(const std::shared_ptr<held>& h);
  // The outcome of the extension tick `seq` of `w` sent: the next tick, a retry
  // within the validity, or the loss. `observed`: the resource, when observing.
  void on_extended(const std::weak_ptr<held>& w, std::uint64_t seq, const std::string& observed, report r,
                   clock_tp valid_until, bool jumped);
  // When the next tick of `h` is due, at most `regular` from now: `regular` if it
  // leaves command_timeout of the validity for the round, else at the
  // watchdog's own pace through the validity left (interval / ttl of it), so that
  // a validity shorter than the TTL (max_hold at the acquire, an explicit extension
  // to a shorter TTL) is extended before it ends; once the cap is reached, just
  // past the validity's end, to report the loss when it happens.
  std::chrono::milliseconds watchdog_delay(const held& h, std::chrono::milliseconds regular) const;
  // The watchdog's timers: one loop timer (core::schedule) for every watched lock,
  // over a binary min-heap of ticks (16 bytes each) instead of a map node and a
  // std::function per lock. arm_tick() queues `h`'s next tick `delay` from now
  // (replacing an armed one); run_ticks() runs the ticks due.
  // `batched`: a regular tick, which may come up to kTickGrid early to share a
  // loop turn with others.
  void arm_tick(held& h, std::chrono::milliseconds delay, bool batched = false);
  static constexpr std::chrono::milliseconds kTickGrid{16};
  void run_ticks();
  void rearm_ticks(std::uint64_t now);  // the loop timer at the earliest queued tick
  // Watchdogs running now.
  std::size_t watching() const noexcept { return watch_slots_.size() - free_watch_slots_.size(); }
  // When other watchdogs run (a lone one ticks exactly every interval):
  // the first tick of a new watchdog: a uniform point of (0, interval], so that
  // locks acquired together do not extend together (never later than interval).
  std::chrono::milliseconds first_tick(std::chrono::milliseconds interval) noexcept;
  // The next regular tick: `interval`, minus up to interval / 16 at random, so that
  // locks that came into step (a stalled loop runs their ticks together) drift
  // apart again (never later than interval).
  std::chrono::milliseconds next_tick(std::chrono::milliseconds interval) noexcept;

  core& c_;
  handle_registry handles_;
  // Locks with a running watchdog: a slot each (held::watch_slot), reused once free.
  std::vector<std::weak_ptr<held>> watch_slots_;
  std::vector<std::uint32_t> free_watch_slots_;
  struct tick {
    std::uint64_t due;  // the loop's ms clock
    std::uint32_t id;   // held::timer when it was armed
    std::uint32_t slot;
  };
  std::vector<tick> ticks_;  // a min-heap on due (std::push_heap with tick_later)
  std::uint32_t tick_ids_ = 0;
  std::uint64_t ticks_timer_ = 0;      // the schedule() id of the armed loop timer, 0 if none
  std::uint64_t ticks_timer_due_ = 0;  // ... and when it is due
  // The ticks' spread: its own sequence, so that retries draw what they drew
  // before, and seeded without another draw from the reactor (the simulated
  // world's draws stay as they were).
  jitter_rng spread_rng_;
};

}  // namespace redlock::detail
