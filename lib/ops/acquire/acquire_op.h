// The acquire operation (acquire_op): one acquire of one resource, or of a set of
// resources, with its retries, rollback, fencing and waiting. Loop thread only.
//
// Lifecycle: start_attempt -> round -> on_acquired -> [commit_fence ->] succeed |
// fail_attempt -> (retry timer | release_wait) -> start_attempt ... -> finish;
// late answers of every attempt: on_late (each round's attempt_listener).
//
//   attempt.cc       the attempts, success and failure, core::acquire / acquire_many / cancel
//   waiting.{h,cc}   release_wait: the pause between attempts, waiting for the release
//   fence_commit.cc  the fencing token's commit, also for a grant that arrives late
//   late.cc          answers that arrive after their round decided
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "engine/core.h"
#include "ops/async_op.h"
#include "ops/acquire/waiting.h"
#include "ops/support.h"

namespace redlock::detail {

// One attempt of an acquire; its rounds keep it for answers that arrive late.
struct attempt_state {
  std::string token;
  bool failed = false;  // decided as failed and rolled back
};

// One acquire of one resource, or of a set of resources (client::acquire_many:
// `set` not empty; each attempt is one round of kAcquireMany, all or nothing per
// node, rolled back with kReleaseManyQuiet). The quorum, validity, guards, retries,
// rollback and waiting are the same for both.
class acquire_op final : public async_op<acquire_op, acquire_result>, private release_wait::owner {
 public:
  using clock_tp = std::chrono::steady_clock::time_point;

  acquire_op(core& c, std::uint64_t id, std::string resource, acquire_options o,
             std::function<void(acquire_result)> done, std::optional<clock_tp> called,
             std::vector<std::string> set = {});

  void start_attempt();
  void cancel();

 private:
  // release_wait::owner
  void attempt_now() override { start_attempt(); }
  void give_up(std::error_code ec) override { finish_failure(last_, ec ? ec : last_.error); }
  std::shared_ptr<void> keep_alive() override { return keep(); }
  bool finished() const override { return async_op::finished(); }
  bool cancelled() const override { return cancelled_; }
  int attempts() const override { return attempt_; }

  // The ownership-checked delete that publishes nothing: rollbacks, late grants.
  command quiet_release(const std::string& token) const;

  // An attempt's round reports to its attempt_listener (attempt.cc), the fence
  // commit's to its commit_listener (fence_commit.cc).
  class attempt_listener;
  class commit_listener;

  void on_acquired(round& r);
  // late.cc: an answer of attempt `at` that arrived after round `r` decided.
  void on_late(round& r, std::size_t node, const attempt_state& at);
  // fence_commit.cc: the commit of the fence after a quorum granted, and of a
  // grant to node `node` that arrived after the fenced success.
  void commit_fence(round& r);
  void on_fence_committed(round& commit, round& r);
  void commit_late_grant(std::size_t node);

  double drift() const { return c_.options().clock_drift_factor; }
  // The TTL the validity of a success counts from: max_hold when it is shorter
  // than the TTL (no validity past acquisition + max_hold, options.h). The keys
  // keep the TTL: they outlive the validity, as after any capped extension.
  std::chrono::milliseconds granted_ttl() const {
    return o_.max_hold.count() > 0 && o_.max_hold < o_.ttl ? o_.max_hold : o_.ttl;
  }

  void succeed(round& r, std::optional<std::uint64_t> fence);
  void fail_attempt(round& r, std::error_code ec);
  void finish_failure(report rep, std::error_code ec);
  void finish(acquire_result res);

  core& c_;
  std::uint64_t id_;
  std::string resource_, key_, fence_key_;  // key_, fence_key_: one resource only
  acquire_options o_;
  clock_tp call_start_;
  int attempt_ = 0;
  bool cancelled_ = false;
  std::string token_;
  std::shared_ptr<attempt_state> current_;
  std::optional<std::uint64_t> fence_;
  report last_;
  std::vector<std::string> set_, keys_;  // a set's resources and keys; empty for one
  // Last: it reads o_.retry, call_start_ and keys_, and leaves the notifier first.
  release_wait wait_;
};

}  // namespace redlock::detail
