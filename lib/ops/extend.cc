// Extension: the ownership-checked round that moves a lease's keys to a new TTL
// (extend_round: also the watchdog's), client::extend of a lease, and the
// extension of a lock handle (extend_held). Lifecycle:
//   core::extend (a live handle's lease: extend_held: the cap, begin_extension)
//   -> extend_round: the round -> extend_listener::decided: the validity from the
//   round's start, or the failure -> (a handle: extension_succeeded or the loss)
//   -> done.
#include <algorithm>
#include <utility>

#include "engine/core.h"
#include "ops/async_op.h"
#include "ops/round.h"
#include "ops/support.h"
#include "ops/watchdog.h"

namespace redlock::detail {

using clock_tp = std::chrono::steady_clock::time_point;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

// An extension round reports here, once: the validity from the round's start, or
// the failure; and whether a node ran it on a clock seen to jump.
class extend_listener final : public round_listener, public async_op<extend_listener, report, clock_tp, bool> {
 public:
  extend_listener(core& c, milliseconds ttl, clock_tp start, std::function<void(report, clock_tp, bool)> done)
      : async_op(std::move(done)), c_(c), ttl_(ttl), start_(start) {}

  void decided(round& rd) override {
    const clock_tp now = c_.now();
    const double f = c_.options().clock_drift_factor;
    std::error_code ec;
    clock_tp valid_until{};
    if (rd.outcome == verdict::quorum) {
      const microseconds validity = validity_of(ttl_, duration_cast<microseconds>(now - rd.started), f);
      if (validity.count() <= 0) {
        ec = errc::lock_lost;
      } else {
        valid_until = rd.started + duration_cast<clock_tp::duration>(microseconds(ttl_) - drift_of(ttl_, f));
      }
    } else {
      ec = failure_reason(refusal::not_owner, rd.votes);
    }
    report rep = round_report(c_, rd, ec, start_, now, 1);
    if (!ec) rep.validity = duration_cast<milliseconds>(valid_until - now);
    c_.stats().extends.fetch_add(1, std::memory_order_relaxed);
    const bool jumped = std::any_of(rd.clock_jumped.begin(), rd.clock_jumped.end(), [](bool j) { return j; });
    finish(std::move(rep), valid_until, jumped);
  }

 private:
  core& c_;
  milliseconds ttl_;
  clock_tp start_;
};

}  // namespace

// One ownership-checked extension round; done(report, new valid_until).
// until_validity_ends: the requests wait for their replies (no command_timeout)
// until the lock's validity runs out — an extension is worth having until then,
// and on a starved machine replies can take longer than the command timeout.
// done(report, valid_until, jumped): valid_until is set on success; `jumped`
// tells that a node ran this extension on a clock the clock-jump guard saw jump
// (round::clock_jumped; its vote is excluded).
void extend_round(core& c, const lease& l, milliseconds ttl, std::function<void(report, clock_tp, bool)> done,
                  bool until_validity_ends) {
  const clock_tp start = c.now();
  if (l.valid_until && start >= *l.valid_until) {
    report rep = empty_report(c, make_error_code(errc::lock_lost), "");
    done(std::move(rep), clock_tp{}, false);
    return;
  }
  command cmd = extend_command(c, l, ttl);
  auto r = std::make_shared<round>(c, cmd.script, false);
  if (until_validity_ends && l.valid_until) {
    // Rounded up: the round must not give up before the validity is really gone.
    const auto left = duration_cast<milliseconds>(*l.valid_until - start) + milliseconds(1);
    cmd.untimed = true;
    r->set_deadline(left, "the lock's remaining validity");
  }
  r->listen(std::make_shared<extend_listener>(c, ttl, start, std::move(done)));
  r->send(cmd);
}

void core::extend(lease l, milliseconds ttl, std::function<void(report)> done) {
  if (observing_) done = observe_op(operation_kind::extend, l.resource, false, std::move(done));
  if (closing_) return done(empty_report(*this, make_error_code(errc::cancelled), "client shut down"));
  // The lease of a live handle: its validity is the handle's to keep (lowered
  // before an extension to a shorter TTL is sent, moved later only by a success),
  // so the extension goes through the handle's bookkeeping.
  if (auto h = watch().handles().handle_for(l)) return extend_held(*this, h, ttl, std::move(done));
  // A bare lease (no handle of this client): on_lock_extended from the lease.
  std::optional<lease> bare;
  if (observing_) {
    bare.emplace();
    bare->resource = l.resource;
    bare->fence = l.fence;
    bare->acquired_at = l.acquired_at;
  }
  extend_round(*this, l, ttl, [this, bare = std::move(bare), done = std::move(done)](report r, clock_tp valid_until, bool jumped) {
    // As for a handle: an extension run on a clock seen to jump leaves keys that
    // may expire at once; the lease is lost (not "valid until l.valid_until").
    if (r.error && jumped) r.error = make_error_code(errc::lock_lost);
    if (!r.error && bare) {
      lock_event e;
      e.at = now();
      e.resource = bare->resource;
      e.fence = bare->fence;
      e.valid_until = valid_until;
      e.of_handle = false;
      if (bare->acquired_at) e.held_for = duration_cast<microseconds>(e.at - *bare->acquired_at);
      emit(&observer::on_lock_extended, e, "on_lock_extended");
    }
    done(std::move(r));
  });
}

void extend_held(core& c, const std::shared_ptr<held>& h, milliseconds ttl, std::function<void(report)> done) {
  if (h->finished.load()) return done(empty_report(c, make_error_code(errc::not_owner), "lock not held"));
  if (h->lost.load()) return done(empty_report(c, make_error_code(errc::lock_lost), ""));
  if (c.closing()) return done(empty_report(c, make_error_code(errc::cancelled), "client shut down"));
  const auto capped = h->capped_ttl(ttl, c.now(), c.options().clock_drift_factor);
  if (!capped) return done(empty_report(c, make_error_code(errc::extension_limit), ""));
  std::weak_ptr<held> w = h;
  h->hold_shortened = *capped < ttl;
  const std::uint64_t seq = begin_extension(c, *h, *capped);
  // A shorter TTL lowered the validity: the watchdog's next tick comes within it.
  c.watch().rearm(*h);
  extend_round(c, h->snapshot(), *capped,
               [cp = &c, w, seq, done = std::move(done)](report r, clock_tp valid_until, bool jumped) {
    auto hp = w.lock();
    if (hp && hp->lost.load() && !r.error) {
      // Declared lost while this extension was in flight (the watchdog, or the
      // shutdown): the loss stands. A later validity is never stored — a lease read
      // after the loss must not look valid — and the caller hears lock_lost.
      r.error = make_error_code(errc::lock_lost);
      r.validity = milliseconds(0);
    } else if (hp && !hp->finished.load()) {
      if (!r.error) {
        extension_succeeded(*hp, seq, valid_until);
        if (hp->max_hold.count() > 0) {
          const auto to_cap = duration_cast<milliseconds>(hp->acquired_at + hp->max_hold - cp->now());
          r.validity = std::max(milliseconds(0), std::min(r.validity, to_cap));
        }
        if (cp->observing()) cp->emit(&observer::on_lock_extended, cp->lock_event_of(*hp, false), "on_lock_extended");
        // The watchdog goes on from the validity this extension set.
        cp->watch().rearm(*hp);
      } else if (r.error == errc::not_owner || r.error == errc::lock_lost || jumped) {
        r.error = errc::lock_lost;
        cp->watch().declare_lost(hp, r);
      }
    }
    done(std::move(r));
  });
}

}  // namespace redlock::detail
