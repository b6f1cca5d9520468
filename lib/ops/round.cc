// One fan-out round (ops/round.h): the same command to every node at once, each
// answer turned into a vote (the guards applied to a grant), and the decision
// taken as soon as it is known. Its lifecycle:
//   send (to every node not skipped; the deadline armed) -> on_reply per node ->
//   evaluate -> the listener's decided (once) -> its late for each answer after
//   it (a listener kept for them); or
//   expire_pending (the deadline: the pending nodes time out) -> evaluate.
#include "ops/round.h"

#include <string>
#include <utility>

#include "engine/core.h"
#include "protocol/reply.h"

namespace redlock::detail {

using std::chrono::milliseconds;

round::round(core& c, script_id script, bool wait_all)
    : core_(c), refusal_(acquires(script) ? refusal::held : refusal::not_owner), script_(script), wait_all_(wait_all) {
  const std::size_t n = c.size();
  votes.resize(n);
  results.resize(n);
  fences.resize(n);
  values.resize(n);
  pttls.assign(n, -2);
  blocked_by.resize(n);
  unsent.assign(n, false);
  granted_excluded.assign(n, false);
  clock_jumped.assign(n, false);
}

round::~round() {
  if (deadline_timer_ != 0) core_.cancel_timer(deadline_timer_);
}

void round::set_deadline(milliseconds after, const char* what) {
  deadline_after_ = after;
  deadline_what_ = what;
}

void round::expire_pending() {
  deadline_timer_ = 0;
  if (outcome != verdict::undecided) return;
  const std::string detail =
      std::string("no reply within ") + deadline_what_ + " (" + std::to_string(deadline_after_.count()) + " ms)";
  for (std::size_t i = 0; i < votes.size(); ++i) {
    if (votes[i].status != node_status::pending) continue;
    votes[i].status = results[i].status = node_status::timeout;
    results[i].detail = detail;
  }
  evaluate();
}

void round::send(command cmd, const std::vector<std::string>& skip, const std::vector<bool>& force_eval) {
  started = core_.now();
  sending_ = true;
  auto self = shared_from_this();
  if (deadline_after_.count() > 0) {
    // A plain pointer (no allocation for the callback): the timer is cancelled at
    // the decision, and by the destructor at the latest.
    deadline_timer_ = core_.schedule(deadline_after_, [this] { expire_pending(); });
  }
  auto w = std::make_shared<const wire>(std::move(cmd));
  for (std::size_t i = 0; i < core_.size(); ++i) {
    if (!skip.empty() && !skip[i].empty()) {
      votes[i].status = node_status::excluded;
      results[i].status = node_status::excluded;
      results[i].detail = skip[i];
      continue;
    }
    core_.node(i).submit(w, !force_eval.empty() && force_eval[i], self, 0);
  }
  sending_ = false;
  evaluate();
}

void round::on_reply(std::size_t node, std::uint32_t, const reply_event& ev) {
  vote& v = votes[node];
  node_result& r = results[node];
  unsent[node] = ev.unsent;
  if (ev.status != node_status::pending || ev.reply == nullptr) {
    v.status = ev.status == node_status::pending ? node_status::protocol_error : ev.status;
    if (v.status == node_status::auth_error) v.permanent = errc::auth_failed;
    // The node's certificate failed verification (or it wants a client certificate):
    // no retry fixes that; the detail names the cause.
    if (v.status == node_status::tls_error) v.permanent = errc::tls_failed;
    // The connection failed its handshake on an ACL refusal (NOPERM for SELECT or
    // PING): the detail is the server's text.
    if (v.status == node_status::server_error && is_permission_error(ev.detail)) {
      v.permanent = errc::permission_denied;
    }
    r.detail = std::string(ev.detail);
  } else {
    classified c = classify_reply(script_, ev.reply);
    v = c.v;
    r.detail = std::move(c.detail);
    fences[node] = c.fence;
    values[node] = std::move(c.value);
    pttls[node] = c.pttl;
    blocked_by[node] = c.blocked_by;
    // The guards also cover this very reply: a grant from a node whose clock just
    // jumped (the TIME pipelined behind the acquire was observed by the connection
    // already), or that restarted or is quarantined, does not count — sampled or
    // not: an acquire queued on a reconnecting connection passed the check at the
    // attempt's start before the handshake's INFO showed the new run_id (found by
    // the SPIN model, docs/verification.md (f)). The connection judged it as it
    // delivered the reply (reply_event::excluded_by: for an extension, the
    // clock-jump guard alone; for a fenced acquire, the eviction policy too).
    if (v.status == node_status::ok && !ev.excluded_by.empty()) {
      v.status = node_status::excluded;
      granted_excluded[node] = true;
      // An extension its replicas did not confirm leaves the old expiry standing
      // there; one run on a jumping clock may not.
      clock_jumped[node] = extends(script_) && !ev.unreplicated;
      r.detail = std::string(ev.excluded_by);
    }
  }
  r.status = v.status;
  r.latency = ev.latency;
  if (outcome != verdict::undecided) {
    if (listener_) listener_->late(*this, node);  // only a listener that hears late answers is left
    return;
  }
  if (!sending_) evaluate();
}

void round::evaluate() {
  if (outcome != verdict::undecided) return;
  const tally t = count_votes(votes);
  if (wait_all_) {
    if (t.pending > 0) return;
    outcome = t.yes >= quorum_of(t.n) ? verdict::quorum : verdict::no_quorum;
  } else {
    outcome = decide(t);
    if (outcome == verdict::undecided) return;
    // No quorum, but the answers still pending could change the reason (show that
    // the refusals, or the permanent errors, alone rule out a quorum): wait for
    // them (each bounded by its request's or the round's deadline), so the reason
    // ("contended", "auth_failed", ... or "unavailable") never depends on the
    // order of the replies.
    if (outcome == verdict::no_quorum && reason_may_change(refusal_, votes)) {
      outcome = verdict::undecided;
      return;
    }
  }
  if (deadline_timer_ != 0) core_.cancel_timer(deadline_timer_);
  deadline_timer_ = 0;
  // A listener that does not hear late answers is dropped once decided() returns.
  round_listener* const l = listener_.get();
  const std::shared_ptr<round_listener> dropped = hears_late_ ? nullptr : std::move(listener_);
  if (l) l->decided(*this);
}

}  // namespace redlock::detail
