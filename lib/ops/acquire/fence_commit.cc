// The fencing commit of an acquire (acquire_op.h, docs/fencing.md): after a quorum
// granted a fenced attempt, the fence is one more than the highest counter the
// granting nodes hold, committed on each of them; the attempt succeeds with it
// when a quorum committed in time. A grant that arrives after that success gets
// the same commit on its node.
//
// Lifecycle: on_acquired -> commit_fence -> commit round -> on_fence_committed ->
// succeed | fail_attempt; on_late -> commit_late_grant.
#include <algorithm>

#include "ops/acquire/acquire_op.h"
#include "ops/held.h"
#include "ops/notify.h"
#include "ops/round.h"

namespace redlock::detail {

using std::chrono::duration_cast;
using std::chrono::microseconds;

// The commit round reports its decision here (and is dropped after it): the
// attempt's acquire round is kept until then.
class acquire_op::commit_listener final : public round_listener {
 public:
  commit_listener(std::shared_ptr<acquire_op> op, std::shared_ptr<round> acquire_round)
      : op_(std::move(op)), acquire_round_(std::move(acquire_round)) {}
  void decided(round& commit) override { op_->on_fence_committed(commit, *acquire_round_); }

 private:
  std::shared_ptr<acquire_op> op_;
  std::shared_ptr<round> acquire_round_;
};

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
  auto cr = std::make_shared<round>(c_, script_id::fence_commit, false);
  cr->listen(std::make_shared<commit_listener>(keep(), r.shared_from_this()));
  command cmd = lock_command(script_id::fence_commit, key_, token_, std::to_string(*fence_));
  cmd.key2 = fence_key_;
  cr->send(cmd, skip);
}

void acquire_op::on_fence_committed(round& commit, round& r) {
  const clock_tp now = c_.now();
  const microseconds validity = validity_of(granted_ttl(), duration_cast<microseconds>(now - r.started), drift());
  if (commit.outcome != verdict::quorum) {
    fail_attempt(r, make_error_code(errc::unavailable));
  } else if (cancelled_) {
    fail_attempt(r, make_error_code(errc::cancelled));
  } else if (validity.count() <= 0) {
    fail_attempt(r, make_error_code(errc::validity_exhausted));
  } else {
    succeed(r, fence_);
  }
}

void acquire_op::commit_late_grant(std::size_t node) {
  auto cr = std::make_shared<round>(c_, script_id::fence_commit, false);
  std::vector<std::string> skip(c_.size(), "not this node");
  skip[node].clear();
  command cmd = lock_command(script_id::fence_commit, key_, token_, std::to_string(*fence_));
  cmd.key2 = fence_key_;
  cr->send(cmd, skip);
}

}  // namespace redlock::detail
