// The fencing commit of an acquire (acquire_op.h, docs/fencing.md): after a quorum
// granted a fenced attempt, the fence is one more than the highest counter the
// granting nodes hold, committed on each of them; the attempt succeeds with it
// when a quorum committed in time. A grant that arrives after that success gets
// the same commit on its node.
//
// Lifecycle: on_acquired -> commit_fence -> commit round -> succeed | fail_attempt;
// on_late -> commit_late_grant.
#include <algorithm>

#include "ops/acquire/acquire_op.h"
#include "ops/held.h"
#include "ops/notify.h"
#include "ops/round.h"

namespace redlock::detail {

using std::chrono::duration_cast;
using std::chrono::microseconds;

void acquire_op::commit_fence(round& r) {
  std::uint64_t max = 0;
  for (std::size_t i = 0; i < r.votes.size(); ++i) {
    if (r.votes[i].status == node_status::ok && r.fences[i]) max = std::max(max, *r.fences[i]);
  }
  fence_ = max + 1;
  std::vector<std::string> skip(c_.size());
  for (std::size_t i = 0; i < skip.size(); ++i) {
    if (r.votes[i].status != node_status::ok) skip[i] = "did not grant the lock";
  }
  auto cr = std::make_shared<round>(c_, op_kind::fence_commit, script_id::fence_commit, false);
  auto self = keep();
  auto acquire_round = r.shared_from_this();
  cr->on_decided = [self, acquire_round](round& commit) {
    const clock_tp now = self->c_.now();
    const microseconds validity = validity_of(
        self->granted_ttl(), duration_cast<microseconds>(now - acquire_round->started), self->drift());
    if (commit.outcome != verdict::quorum) {
      self->fail_attempt(*acquire_round, make_error_code(errc::unavailable));
    } else if (self->cancelled_) {
      self->fail_attempt(*acquire_round, make_error_code(errc::cancelled));
    } else if (validity.count() <= 0) {
      self->fail_attempt(*acquire_round, make_error_code(errc::validity_exhausted));
    } else {
      self->succeed(*acquire_round, self->fence_);
    }
  };
  command cmd = lock_command(script_id::fence_commit, key_, token_, std::to_string(*fence_));
  cmd.key2 = fence_key_;
  cr->send(cmd, skip);
}

void acquire_op::commit_late_grant(std::size_t node) {
  auto cr = std::make_shared<round>(c_, op_kind::fence_commit, script_id::fence_commit, false);
  std::vector<std::string> skip(c_.size(), "not this node");
  skip[node].clear();
  command cmd = lock_command(script_id::fence_commit, key_, token_, std::to_string(*fence_));
  cmd.key2 = fence_key_;
  cr->send(cmd, skip);
}

}  // namespace redlock::detail
