// An acquire's answers that arrive after their round decided (acquire_op.h):
// each round keeps its attempt's attempt_state (token, failed) for them. What a
// failed attempt may still have written is deleted again, with the rollback's
// delivery guarantee; a grant after a fenced success gets its commit.
//
// Lifecycle: round decided -> on_late (per late answer) -> deliver_release |
// commit_late_grant | nothing.
#include "ops/acquire/acquire_op.h"
#include "ops/held.h"
#include "ops/notify.h"
#include "ops/round.h"

namespace redlock::detail {

void acquire_op::on_late(round& r, std::size_t node, const attempt_state& at) {
  const node_status st = r.votes[node].status;
  if (at.failed && !r.unsent[node] &&
      (st == node_status::timeout || st == node_status::connection_error || st == node_status::protocol_error)) {
    // A request of a failed attempt that was written but whose answer is lost
    // after the decision (a resend after NOSCRIPT queued behind the rollback
    // already written, then timed out or cut off): it may have set the key
    // after the rollback deleted nothing. Delete again, behind it on the same
    // ordered connection (or after a reconnect), with the rollback's guarantee.
    std::vector<bool> only(c_.size());
    only[node] = true;
    deliver_release(c_, quiet_release(at.token), only, o_.ttl);
    return;
  }
  // A grant a guard excluded after the fact wrote the key all the same.
  const bool excluded_grant = r.granted_excluded[node];
  if (st != node_status::ok && !excluded_grant) return;
  if (at.failed) {
    // A grant that arrives after its attempt failed (the rollback may have reached
    // the node before the grant did: a resend after NOSCRIPT, a connection reset
    // in between), also for an earlier attempt of an acquire that went on: it is
    // released, with the same delivery guarantee as the rollback.
    std::vector<bool> only(c_.size());
    only[node] = true;
    deliver_release(c_, quiet_release(at.token), only, o_.ttl);
    return;
  }
  // A grant that arrives after a fenced success still gets the commit, so every
  // node holding this owner's key carries its fence (fence_commit.cc).
  if (&at == current_.get() && fence_) commit_late_grant(node);
}

}  // namespace redlock::detail
