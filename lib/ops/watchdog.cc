// The watchdog (ops/watchdog.h): the heap of ticks and the policy that spaces
// them, the extension each tick sends, and the loss of a lock. Lifecycle of a
// watched lock:
//   start (first tick within the interval) -> on_tick -> extend_round ->
//   on_extended: arm_tick (the next, or a retry within the validity) -> on_tick ...
//   -> stop (released, detached), or declare_lost (validity gone, no quorum can
//   come back, the client's stop).
#include "ops/watchdog.h"

#include <algorithm>
#include <utility>

#include "engine/core.h"
#include "ops/support.h"
#include "pure/decision.h"

namespace redlock::detail {

using clock_tp = std::chrono::steady_clock::time_point;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

watchdog::watchdog(core& c) : c_(c), spread_rng_(c.rng_copy().next() ^ 0x5bd1e9955bd1e995ULL) {}

// Called just before an extension of a held lock to `ttl` is sent. Whatever its
// outcome, every node it reaches keeps the key for only `ttl` from then on — a
// shorter TTL than what is left shortens the key — and a failed extension may
// well have reached a node (a minority, or a majority whose replies were lost).
// So the validity believed from now on is at most now + ttl - drift: the belief
// never outlives a key this extension may have shortened. Returns the
// extension's sequence number, for extension_succeeded().
std::uint64_t begin_extension(const core& c, held& h, milliseconds ttl) {
  const clock_tp bound =
      c.now() + duration_cast<clock_tp::duration>(microseconds(ttl) - drift_of(ttl, c.options().clock_drift_factor));
  if (to_ns(bound) < h.valid_until_ns.load(std::memory_order_acquire)) {
    h.valid_until_ns.store(to_ns(bound), std::memory_order_release);
  }
  return ++h.extensions_sent;
}

// Extension `seq` got a quorum: validity runs to `valid_until`. Only the latest
// extension sent may move it later: one sent after `seq` (the watchdog and an
// explicit extend() overlapping) may have shortened the keys behind it on every
// node, and lowered the validity when it was sent.
void extension_succeeded(held& h, std::uint64_t seq, clock_tp valid_until) {
  ++h.extensions;
  // The cap: the extension's TTL was shortened to what was left of max_hold when
  // the clock was read, but its validity counts from the round's start, read
  // later (a thread preempted in between would move it past the cap).
  if (h.max_hold.count() > 0) valid_until = std::min(valid_until, h.acquired_at + h.max_hold);
  if (seq == h.extensions_sent || to_ns(valid_until) < h.valid_until_ns.load(std::memory_order_acquire)) {
    h.valid_until_ns.store(to_ns(valid_until), std::memory_order_release);
  }
}

void watchdog::start(const std::shared_ptr<held>& h) {
  h->watchdog = true;
  if (h->watch_slot == 0) {
    // begin_stop() reports the loss of what is still watched.
    if (free_watch_slots_.empty()) {
      watch_slots_.push_back(h);
      h->watch_slot = static_cast<std::uint32_t>(watch_slots_.size());
    } else {
      const std::uint32_t i = free_watch_slots_.back();
      free_watch_slots_.pop_back();
      watch_slots_[i] = h;
      h->watch_slot = i + 1;
    }
  }
  // A lone watchdog ticks every interval, as it always did; among others, spread.
  const bool spread = watching() > 1;
  const milliseconds regular = spread ? first_tick(h->interval) : h->interval;
  // A validity shorter than the TTL (max_hold below it): the first tick comes
  // within it (watchdog_delay).
  if (h->max_hold.count() > 0 && h->max_hold < h->ttl) {
    const milliseconds within = watchdog_delay(*h, regular);
    if (within < regular) return arm_tick(*h, within);
  }
  arm_tick(*h, regular, /*batched=*/spread);
}

void watchdog::on_tick(const std::shared_ptr<held>& h) {
  h->timer = 0;
  if (!h->watchdog || h->finished.load() || h->lost.load()) return;
  const lease l = h->snapshot();
  const clock_tp t = c_.now();
  if (t >= *l.valid_until) {
    // Report what the last failed extension saw (which nodes, and why), if any.
    report why = h->last_failure && !h->last_failure->nodes.empty() ? *h->last_failure : empty_report(c_, {}, "");
    // The cap's end: no more extensions (max_extensions), or the validity ran to
    // acquisition + max_hold (extensions shrunk to fit it), not short of it.
    // (The validity of an extension shortened to fit ends short of the cap by
    // its drift and by the time between reading the clock for what was left and
    // the round's start, which a busy machine can make tens of ms.)
    const bool at_hold_cap =
        h->max_hold.count() > 0 &&
        (h->hold_shortened ||
         *l.valid_until + duration_cast<clock_tp::duration>(drift_of(h->ttl, c_.options().clock_drift_factor)) +
                 milliseconds(1) >=
             h->acquired_at + h->max_hold);
    why.error = make_error_code(h->capped || at_hold_cap ? errc::extension_limit : errc::lock_lost);
    return declare_lost(h, why);
  }
  const auto ttl = h->capped_ttl(h->ttl, t, c_.options().clock_drift_factor);
  if (!ttl) {
    // Extension cap reached: no more extensions; report the loss when it runs out.
    h->capped = true;
    arm_tick(*h, duration_cast<milliseconds>(*l.valid_until - t) + milliseconds(1));
    return;
  }
  std::weak_ptr<held> w = h;
  // Under max_hold the TTL may be shorter than what is left: lower the validity first.
  h->hold_shortened = *ttl < h->ttl;
  const std::uint64_t seq = begin_extension(c_, *h, *ttl);
  // The watchdog's extension is a background operation for observers.
  std::string observed;  // the resource, when observing (else empty: no allocation)
  if (c_.observing()) {
    observed = h->resource;
    operation_started s;
    s.at = c_.now();
    s.kind = operation_kind::extend;
    s.resource = observed;
    s.background = true;
    c_.emit(&observer::on_operation_started, s, "on_operation_started");
  }
  extend_round(
      c_, h->snapshot(), *ttl,
      [this, w, seq, observed = std::move(observed)](report r, clock_tp valid_until, bool jumped) {
        on_extended(w, seq, observed, std::move(r), valid_until, jumped);
      },
      /*until_validity_ends=*/true);
}

void watchdog::on_extended(const std::weak_ptr<held>& w, std::uint64_t seq, const std::string& observed, report r,
                           clock_tp valid_until, bool jumped) {
  // operation_finished after the lock events this outcome causes (extended,
  // lost), as for a call: at the end of this scope, whichever way it is left.
  struct finished_at_exit {
    core& c;
    const std::string& resource;
    const report& rep;
    ~finished_at_exit() {
      if (!c.observing()) return;
      operation_finished f;
      f.at = c.now();
      f.kind = operation_kind::extend;
      f.resource = resource;
      f.background = true;
      f.report = &rep;
      c.emit(&observer::on_operation_finished, f, "on_operation_finished");
    }
  } at_exit{c_, observed, r};
  auto hp = w.lock();
  if (!hp) return;
  if (!hp->watchdog || hp->finished.load() || hp->lost.load()) return;
  if (!r.error) {
    extension_succeeded(*hp, seq, valid_until);
    if (c_.observing()) c_.emit(&observer::on_lock_extended, c_.lock_event_of(*hp, false), "on_lock_extended");
    // Next tick: after the interval, or just past the validity when it ends
    // sooner (an extension shrunk by max_hold), so a loss is reported when it
    // happens, not at the next regular tick.
    const clock_tp until = hp->snapshot().valid_until.value_or(c_.now());
    const milliseconds to_end = duration_cast<milliseconds>(until - c_.now()) + milliseconds(1);
    const bool spread = watching() > 1;
    const milliseconds next = spread ? next_tick(hp->interval) : hp->interval;
    arm_tick(*hp, std::max(milliseconds(0), std::min(next, to_end)), /*batched=*/spread && next <= to_end);
    return;
  }
  // Lost for good only when no quorum can come back: not_owner, or a permanent
  // error, which failure_reason() gives only when the nodes that gave it alone
  // rule out a quorum (one wrong-password node beside a hiccup is unavailable).
  // A failed extension that a node ran while its clock was seen to jump (`jumped`:
  // its extended vote was excluded): the key it re-timed on that node's clock may
  // expire at any moment once that clock is corrected, and the keys the validity
  // rested on are no longer a confirmed quorum. The lock is lost now.
  if (r.error == errc::not_owner || r.error == errc::lock_lost || is_permanent(r.error) || jumped) {
    if (r.error == errc::not_owner || jumped) r.error = errc::lock_lost;
    return declare_lost(hp, r);
  }
  // Transient (unavailable): retry within the remaining validity; the tick
  // declares the lock lost once validity has run out.
  if (hp->last_failure) {
    *hp->last_failure = r;
  } else {
    hp->last_failure = std::make_unique<report>(r);
  }
  const clock_tp until = hp->snapshot().valid_until.value_or(c_.now());
  const auto remaining = duration_cast<milliseconds>(until - c_.now());
  milliseconds gap = std::max(milliseconds(10), hp->interval / 4);
  if (remaining < gap) gap = std::max(milliseconds(0), remaining);
  arm_tick(*hp, gap);
}

milliseconds watchdog::watchdog_delay(const held& h, milliseconds regular) const {
  const clock_tp until = h.snapshot().valid_until.value_or(c_.now());
  const auto left = std::max(microseconds(0), duration_cast<microseconds>(until - c_.now()));
  if (h.capped) return duration_cast<milliseconds>(left) + milliseconds(1);
  // A regular tick that leaves time for an extension round (as check_acquire
  // demands of the interval) stays regular.
  if (left >= duration_cast<microseconds>(regular + c_.options().command_timeout) || h.ttl.count() <= 0) return regular;
  const auto paced = duration_cast<milliseconds>(left * h.interval.count() / h.ttl.count());
  return std::max(milliseconds(0), std::min(regular, paced));
}

void watchdog::rearm(held& h) {
  if (!h.watchdog || h.timer == 0 || h.finished.load() || h.lost.load()) return;
  arm_tick(h, watchdog_delay(h, h.interval));
}

void watchdog::stop(held& h) {
  h.watchdog = false;
  h.timer = 0;  // a queued tick is skipped
  if (h.watch_slot != 0) {
    watch_slots_[h.watch_slot - 1].reset();
    free_watch_slots_.push_back(h.watch_slot - 1);
    h.watch_slot = 0;
  }
}

namespace {
// Uniform in [0, n) (n > 0); the modulo bias is below 2^-40 for any interval in ms.
std::int64_t below(std::uint64_t random, std::int64_t n) noexcept {
  return static_cast<std::int64_t>(random % static_cast<std::uint64_t>(n));
}
}  // namespace

milliseconds watchdog::first_tick(milliseconds interval) noexcept {
  if (interval.count() <= 1) return interval;
  return interval - milliseconds(below(spread_rng_.next(), interval.count()));  // (0, interval]
}

milliseconds watchdog::next_tick(milliseconds interval) noexcept {
  const std::int64_t span = interval.count() / 16;
  if (span <= 0) return interval;
  return interval - milliseconds(below(spread_rng_.next(), span + 1));  // [interval - span, interval]
}

void watchdog::arm_tick(held& h, milliseconds delay, bool batched) {
  const std::uint64_t now = c_.now_ms();
  std::uint64_t due = now + static_cast<std::uint64_t>(std::max<std::int64_t>(0, delay.count()));
  // A regular tick is rounded down (earlier, never later) to the batch grid: the
  // locks due in one grid step are extended in one loop turn, their requests
  // pipelined per node, at one wake-up and one write per node.
  if (batched && delay >= 2 * kTickGrid) due -= due % static_cast<std::uint64_t>(kTickGrid.count());
  if (++tick_ids_ == 0) ++tick_ids_;  // 0 means no tick
  h.timer = tick_ids_;
  const auto later = [](const tick& a, const tick& b) { return a.due > b.due; };
  ticks_.push_back(tick{due, h.timer, h.watch_slot});
  std::push_heap(ticks_.begin(), ticks_.end(), later);
  rearm_ticks(now);
}

void watchdog::rearm_ticks(std::uint64_t now) {
  // The loop timer follows the heap's earliest tick (not the one just armed: a
  // tick armed inside run_ticks(), when no timer is armed, may be later than
  // ticks still queued).
  if (ticks_.empty()) return;
  const std::uint64_t due = ticks_.front().due;
  if (ticks_timer_ != 0 && ticks_timer_due_ <= due) return;
  if (ticks_timer_ != 0) c_.cancel_timer(ticks_timer_);
  ticks_timer_due_ = due;
  ticks_timer_ = c_.schedule(milliseconds(due > now ? due - now : 0), [this] { run_ticks(); });
}

void watchdog::run_ticks() {
  ticks_timer_ = 0;
  const auto later = [](const tick& a, const tick& b) { return a.due > b.due; };
  const std::uint64_t now = c_.now_ms();
  // Bounded: at most the ticks queued when the batch starts (a tick armed by one
  // of them waits for the next turn, as core::on_timer does). Each is checked just
  // before it runs: an earlier one of the batch may have stopped its watchdog.
  std::size_t budget = ticks_.size();
  while (budget-- > 0 && !ticks_.empty() && ticks_.front().due <= now) {
    std::pop_heap(ticks_.begin(), ticks_.end(), later);
    const tick t = ticks_.back();
    ticks_.pop_back();
    if (t.slot == 0 || t.slot > watch_slots_.size()) continue;
    std::shared_ptr<held> h = watch_slots_[t.slot - 1].lock();
    if (!h || h->timer != t.id) continue;  // stopped, re-armed, or another lock's slot now
    on_tick(h);
  }
  // Give the memory of a burst of stopped watchdogs back (their ticks are gone).
  if (ticks_.empty() && ticks_.capacity() > 1024) ticks_.shrink_to_fit();
  rearm_ticks(now);
}

void watchdog::declare_lost(const std::shared_ptr<held>& h, const report& why) {
  // A lease read after the loss must not look valid: validity ends now at the latest.
  const std::int64_t now_ns = to_ns(c_.now());
  if (h->valid_until_ns.load() > now_ns) h->valid_until_ns.store(now_ns, std::memory_order_release);
  if (h->lost.exchange(true)) return;
  // Still tracked (until its release, detach or destruction): client::release of
  // its lease goes through it (core::release); handle_for() skips it.
  stop(*h);
  report_loss(*h, why);
  if (h->on_lost) {
    auto fn = h->on_lost;
    fn(h->snapshot(), why);
  }
}

void watchdog::report_loss(const held& h, const report& why) {
  c_.stats().locks_lost.fetch_add(1, std::memory_order_relaxed);
  if (c_.observing()) {
    lock_lost_event e;
    e.at = c_.now();
    e.resource = h.resource;
    e.fence = h.fence;
    e.held_for = duration_cast<microseconds>(e.at - h.acquired_at);
    e.reason = why.error;
    e.detail = why.message();
    c_.emit(&observer::on_lock_lost, e, "on_lock_lost");
  }
}

void watchdog::begin_stop() {
  // Locks kept alive by a watchdog lose it now: their owners hear so through
  // on_lost (errc::cancelled), never silently.
  std::vector<std::shared_ptr<held>> watched;
  for (auto& w : watch_slots_) {
    if (auto h = w.lock()) watched.push_back(std::move(h));
  }
  // In the order the locks were taken (not the slots', which are reused):
  // the same run gives the same callbacks in the same order (the simulator).
  std::sort(watched.begin(), watched.end(), [](const std::shared_ptr<held>& a, const std::shared_ptr<held>& b) {
    return a->acquired_at != b->acquired_at ? a->acquired_at < b->acquired_at : a->token < b->token;
  });
  for (auto& h : watched) {
    if (!h->watchdog || h->finished.load() || h->lost.load()) continue;
    report why;
    why.error = make_error_code(errc::cancelled);
    why.attempts = 1;
    for (const auto& n : c_.nodes()) why.nodes.push_back(node_result{n.display, node_status::cancelled, {}, {}});
    if (!why.nodes.empty()) {
      why.nodes.front().detail = "client shut down: the watchdog no longer extends this lock";
    }
    declare_lost(h, why);
  }
}

void watchdog::finish_stop() {
  ticks_.clear();
  ticks_timer_ = 0;
}

void core::start_watchdog(const std::shared_ptr<held>& h) { watch().start(h); }

}  // namespace redlock::detail
