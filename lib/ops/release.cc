// Release: the ownership-checked delete of a lease's keys on every node
// (release_round), client::release of a lease, and the release of a lock handle
// (release_held: its watchdog stops, its loss is reported if it ran out). Lifecycle:
//   core::release (a tracked handle's lease: release_held) -> release_round: the
//   round -> release_listener::decided: the nodes that did not confirm get the
//   delete again (deliver_release), on_lock_released -> done; its late: a
//   straggler's delete delivered again.
#include <algorithm>
#include <optional>
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

// The release's delete on a node that did not confirm it (down, timed out, a
// reply lost, LOADING after a restart from its AOF) is delivered again with the
// rollback's guarantee (cleanup) for as long as the key may live: a node that
// comes back with the key would otherwise block every acquire needing it for the
// rest of the TTL, though the release got its quorum.
bool release_confirmed(const vote& v) {
  return v.status == node_status::ok || v.status == node_status::not_owner || v.permanent == errc::wrong_type;
}

namespace {

// A release round reports here: at its decision, the nodes that did not confirm
// get the delete again (deliver_release), on_lock_released, then done (once, and
// dropped right after); for each answer after it, a straggler's delete is
// delivered again. The round keeps it for those (not the done callback).
class release_listener final : public round_listener, public async_op<release_listener, report> {
 public:
  release_listener(core& c, clock_tp start, command rel, milliseconds left, bool always,
                   std::optional<lease> released, bool of_handle, std::function<void(report)> done)
      : async_op(std::move(done)),
        c_(c),
        start_(start),
        rel_(std::move(rel)),
        left_(left),
        always_(always),
        of_handle_(of_handle),
        released_(std::move(released)) {}

  void decided(round& rd) override {
    std::vector<bool> again(rd.votes.size());
    bool any = false;
    for (std::size_t i = 0; i < rd.votes.size(); ++i) {
      again[i] = rd.votes[i].status != node_status::pending && !release_confirmed(rd.votes[i]);
      any = any || again[i];
    }
    if (any && (rd.outcome == verdict::quorum || always_)) deliver_release(c_, rel_, again, left_, always_);
    std::error_code ec;
    if (rd.outcome != verdict::quorum) ec = failure_reason(refusal::not_owner, rd.votes);
    c_.stats().releases.fetch_add(1, std::memory_order_relaxed);
    if (!ec && released_) {
      lock_event e;
      e.at = c_.now();
      e.of_handle = of_handle_;
      e.resource = released_->resource;
      e.fence = released_->fence;
      if (released_->acquired_at) e.held_for = duration_cast<microseconds>(e.at - *released_->acquired_at);
      c_.emit(&observer::on_lock_released, e, "on_lock_released");
    }
    finish(round_report(c_, rd, ec, start_, c_.now(), 1));
  }

  void late(round& rd, std::size_t node) override {
    if (rd.votes[node].status == node_status::pending || release_confirmed(rd.votes[node])) return;
    std::vector<bool> only(c_.size());
    only[node] = true;
    deliver_release(c_, rel_, only, left_);
  }

 private:
  core& c_;
  clock_tp start_;
  command rel_;
  milliseconds left_;
  bool always_;
  bool of_handle_;
  std::optional<lease> released_;  // for on_lock_released (observers only: empty otherwise)
};

}  // namespace

// `report_released`: send on_lock_released on success (not for a handle already
// declared lost: its lock ended with on_lock_lost; the release only deletes keys).
// `of_handle`: the lease is a lock handle's (lock_event::of_handle).
// `redeliver_failed` > 0: a release short of a quorum is delivered again too (to
// the nodes that did not confirm it), and every redelivery lasts at least that
// long (the lock's TTL: no key of the token can outlive the release by more, plus
// drift) — held::redeliver_release.
void release_round(core& c, const lease& l, std::function<void(report)> done, bool report_released,
                   bool of_handle, milliseconds redeliver_failed) {
  const clock_tp start = c.now();
  command rel = release_command(c, l);
  auto r = std::make_shared<round>(c, rel.script, false);
  // How long the key may live: the validity left plus its drift, or max_ttl for a
  // lease without a known validity.
  milliseconds left = c.options().max_ttl;
  if (l.valid_until) {
    left = std::max(milliseconds(0), duration_cast<milliseconds>(*l.valid_until - start)) +
           duration_cast<milliseconds>(drift_of(c.options().max_ttl, c.options().clock_drift_factor)) +
           milliseconds(1);
  }
  left = std::max(left, redeliver_failed);
  // For on_lock_released (observers only: no copy otherwise).
  std::optional<lease> released;
  if (c.observing() && report_released) {
    released.emplace();
    released->resource = l.resource;
    released->fence = l.fence;
    released->acquired_at = l.acquired_at;
  }
  const bool always = redeliver_failed.count() > 0;
  r->listen(std::make_shared<release_listener>(c, start, rel, left, always, std::move(released), of_handle,
                                               std::move(done)),
            /*late=*/true);
  r->send(std::move(rel));
}

void core::release(lease l, std::function<void(report)> done) {
  if (observing_) done = observe_op(operation_kind::release, l.resource, false, std::move(done));
  // The lease of a live handle: the release ends the handle (its watchdog, its
  // validity, its loss tokens), as lock::release does; a release that fails
  // leaves it able to release again, as lock::release's does.
  // Also a lost handle's (the release deletes what is left, as lock::release on
  // it: no on_lock_released after its on_lock_lost) and one whose release was not
  // confirmed (the retry lock::release documents). A handle released already, or
  // whose release is in flight, has nothing to release: as its lock::release.
  if (auto h = watch().handles().tracked_for(l)) {
    if (!h->claim_release())
      return done(empty_report(*this, make_error_code(errc::not_owner), "lock not held"));
    return release_held(*this, h, std::move(done));
  }
  release_round(*this, l, std::move(done), true, /*of_handle=*/false);
}

void release_held(core& c, const std::shared_ptr<held>& h, std::function<void(report)> done, bool retry) {
  // The watchdog stops first: nothing extends after this point.
  c.watch().stop(*h);
  c.watch().handles().untrack(*h);
  // Every lock ends in exactly one of on_lock_released and on_lock_lost (observer.h).
  // A handle whose validity ran out before this release (no watchdog, or one that
  // had not seen it yet) was lost then, whatever the nodes still hold: the release
  // only deletes what is left, and the loss is reported (stats, on_lock_lost).
  // The handle itself is released, not lost: lost() stays false and on_lost is
  // not called (the owner is releasing it; the release's report tells it).
  const bool lost_before = h->lost.load();
  const bool expired = !lost_before && h->expired();
  if (expired && !h->loss_reported) {
    h->loss_reported = true;
    c.watch().report_loss(
        *h, empty_report(c, make_error_code(errc::lock_lost), "validity ran out before the release"));
  }
  release_round(
      c, h->snapshot(),
      [cp = &c, h, retry, ended = lost_before || expired, done = std::move(done)](report r) {
        // Not confirmed: the handle may release again (lock::release), also through
        // client::release of its lease, which finds it tracked again.
        if (retry && r.error && r.error != errc::not_owner) {
          h->release_failed.store(true);
          cp->watch().handles().track(h);
        }
        // A quorum did not hold the token (the keys expired early, or were deleted):
        // the lock was lost before the release, which found it so.
        if (!ended && r.error == errc::not_owner) {
          report why = r;
          why.error = make_error_code(errc::lock_lost);
          if (!why.nodes.empty() && why.nodes.front().detail.empty()) {
            why.nodes.front().detail = "the release found the keys gone";
          }
          cp->watch().report_loss(*h, why);
        }
        done(std::move(r));
      },
      /*report_released=*/!lost_before && !expired,
      /*of_handle=*/true, h->redeliver_release ? h->ttl : milliseconds(0));
}

}  // namespace redlock::detail
