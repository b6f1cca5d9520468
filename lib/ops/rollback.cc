// Rollback delivery: the ownership-checked delete of one attempt's key(s) (a failed
// attempt's rollback, a late grant, a release's stragglers) delivered to a set of
// nodes until each confirms it or the key cannot exist any more. Its lifecycle:
//   start (the nodes to reach) -> send_waiting -> on_reply per node (confirmed, or
//   waiting again) -> schedule_retry (a backoff; none once the TTL has passed) ->
//   send_waiting ... -> finish (every node confirmed or past the TTL), or dropped
//   at the end of a client's stop.
#include <algorithm>
#include <utility>

#include "engine/core.h"
#include "ops/async_op.h"
#include "ops/round.h"
#include "ops/services.h"
#include "ops/support.h"
#include "protocol/reply.h"

namespace redlock::detail {

using clock_tp = std::chrono::steady_clock::time_point;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

// Delivers the ownership-checked delete of one attempt's key (key, token) to a
// set of nodes until each one confirms it — a reply: deleted, not owner, or the key
// is not a string — or until the key cannot exist any more: `ttl` plus the drift
// after the delivery started. A SET still in flight then reaches its node ahead of
// this delete on the same ordered connection; if that connection breaks, the SET
// can have landed no later than the break (bytes a partition holds back on a
// closed connection aside: docs/safety-harness.md), and a break more than the
// drift after the start leaves a key that may outlive this bound by that much —
// a liveness cost on a minority node, never a second holder, since the token is
// this attempt's alone. A node whose request fails (down, backing off, reset,
// timed out, a transient error) gets the delete again after a backoff that
// follows the reconnect backoff, so a node that comes back within the TTL is
// cleaned up. A delete that arrives late can never remove anyone else's key.
//
// Self-owned: kept alive by its in-flight requests and its retry timer. A stopping
// client waits for running cleanups, but only up to its drain bound
// (core::begin_stop): there the remaining ones are abandoned and their keys expire
// by their TTL.
class cleanup final : public sink, public async_op<cleanup> {
 public:
  // nodes[i]: deliver to node i; force_eval[i]: send the script body at first.
  // Delivers the ownership-checked delete `release` (the quiet ones for a rollback
  // or a late grant: a delete that published would wake this client's own waiter
  // into another failed attempt).
  // `prompt`: the retry delay is capped at command_timeout (deliver_release).
  static void start(core& c, command release, const std::vector<bool>& nodes,
                    const std::vector<bool>& force_eval, milliseconds ttl, bool prompt = false) {
    auto self = std::shared_ptr<cleanup>(new cleanup(c, std::move(release), ttl, prompt));
    bool any = false;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (!nodes[i]) continue;
      self->state_[i] = node_state::waiting;
      any = true;
    }
    if (!any) return self->finish();
    self->send_waiting(force_eval);
  }

  ~cleanup() override {
    if (!finished()) c_.rollbacks().dropped();  // abandoned at the end of a client's stop
  }

  void on_reply(std::size_t node, std::uint32_t, const reply_event& ev) override {
    if (finished() || state_[node] != node_state::in_flight) return;
    bool confirmed = ev.status == node_status::cancelled;  // client shut down: nothing more to do
    if (ev.status == node_status::pending && ev.reply != nullptr) {
      const classified cl = classify_reply(wire_->script(), ev.reply);
      confirmed = cl.v.status == node_status::ok || cl.v.status == node_status::not_owner ||
                  cl.v.permanent == errc::wrong_type;
    }
    state_[node] = confirmed ? node_state::done : node_state::waiting;
    if (sending_) return;
    if (!confirmed) schedule_retry();
    maybe_finish();
  }

 private:
  enum class node_state { none, waiting, in_flight, done };

  cleanup(core& c, command release, milliseconds ttl, bool prompt)
      : c_(c),
        until_(c.now() + duration_cast<clock_tp::duration>(microseconds(ttl) +
                                                           drift_of(ttl, c.options().clock_drift_factor))),
        cap_(prompt ? std::max(milliseconds(1),
                               std::min(c.options().command_timeout, c.options().reconnect_max_backoff))
                    : milliseconds::max()),
        backoff_(std::min(cap_, std::max(milliseconds(1), c.options().reconnect_min_backoff))),
        state_(c.size(), node_state::none) {
    wire_ = std::make_shared<const wire>(std::move(release));
    c_.rollbacks().started();
  }

  void send_waiting(const std::vector<bool>& force_eval) {
    sending_ = true;
    auto self = keep();
    for (std::size_t i = 0; i < state_.size(); ++i) {
      if (state_[i] != node_state::waiting) continue;
      state_[i] = node_state::in_flight;
      // submit() may answer at once (node down): on_reply sees sending_.
      c_.node(i).submit(wire_, force_eval.empty() || force_eval[i], self, 0);
    }
    sending_ = false;
    schedule_retry();
    maybe_finish();
  }

  void schedule_retry() {
    if (timer_ != 0 || finished()) return;
    bool waiting = false;
    for (node_state s : state_) waiting = waiting || s == node_state::waiting;
    if (!waiting) return;
    const clock_tp now = c_.now();
    if (now >= until_) {
      // The TTL has passed: a key of this attempt cannot exist any more.
      for (node_state& s : state_) {
        if (s == node_state::waiting) s = node_state::done;
      }
      return;
    }
    const milliseconds left = duration_cast<milliseconds>(until_ - now) + milliseconds(1);
    const milliseconds delay = std::min(backoff_, left);
    // Doubling up to the reconnect backoff: a retry soon after the connection is
    // back. A prompt one (cap_) is not later than command_timeout after it: a
    // retry refused while the connection backs off costs no round trip.
    backoff_ = std::min(cap_, std::min(backoff_ * 2, std::max(backoff_, c_.options().reconnect_max_backoff)));
    auto self = keep();
    timer_ = c_.schedule(delay, [self] {
      self->timer_ = 0;
      if (self->finished()) return;
      // The node's connection was lost or refused: a new one has lost the script cache.
      self->send_waiting({});
    });
  }

  void maybe_finish() {
    for (node_state s : state_) {
      if (s == node_state::waiting || s == node_state::in_flight) return;
    }
    finish();
  }

  // No callback: finishing counts the delivery done.
  void finish() {
    finish_after([this] {
      if (timer_ != 0) c_.cancel_timer(timer_);
      timer_ = 0;
      c_.rollbacks().finished();
    });
  }

  core& c_;
  clock_tp until_;
  milliseconds cap_;
  milliseconds backoff_;
  std::vector<node_state> state_;
  std::shared_ptr<const wire> wire_;
  std::uint64_t timer_ = 0;
  bool sending_ = false;
};

}  // namespace

// Rolls back a failed attempt (its acquire round `r`) with its ownership-checked
// delete `release`: every node that may hold its keys gets it (see cleanup).
// Nodes that refused (held by another owner), were not asked (excluded by a guard before the send; a grant a guard
// excluded after the fact IS rolled back), refused authentication, or whose
// connection refused the request at once cannot hold it. Nodes that did not
// answer (their state is unknown, their script cache too) get EVAL at once.
void rollback(core& c, command release, const round& r, milliseconds ttl) {
  const std::vector<vote>& votes = r.votes;
  std::vector<bool> nodes(votes.size()), force(votes.size());
  for (std::size_t i = 0; i < votes.size(); ++i) {
    const node_status s = votes[i].status;
    nodes[i] = r.granted_excluded[i] ||
               (!r.unsent[i] && s != node_status::held && s != node_status::excluded && s != node_status::auth_error);
    force[i] = s != node_status::ok && !r.granted_excluded[i];
  }
  cleanup::start(c, std::move(release), nodes, force, ttl);
}

void deliver_release(core& c, command release, const std::vector<bool>& nodes, milliseconds ttl,
                     bool prompt) {
  cleanup::start(c, std::move(release), nodes, {}, ttl, prompt);
}

}  // namespace redlock::detail
