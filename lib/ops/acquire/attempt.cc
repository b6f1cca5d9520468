// The attempts of an acquire (acquire_op.h): each one round of SET NX PX (or the
// fenced script, or kAcquireMany for a set), its decision, the success (a lease,
// the watchdog) or the failure (rollback, then a retry, a wait for the release, or
// the end); and the core's entry points core::acquire, acquire_many and cancel.
//
// Lifecycle: start_attempt -> round -> on_acquired -> succeed | fail_attempt ->
// (retry timer | release_wait) -> start_attempt ... -> finish_failure -> finish.
#include <algorithm>
#include <utility>

#include "ops/acquire/acquire_op.h"
#include "ops/held.h"
#include "ops/notify.h"
#include "ops/round.h"
#include "pure/keys.h"
#include "pure/retry.h"

namespace redlock::detail {

using clock_tp = std::chrono::steady_clock::time_point;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// An attempt's round reports here: its decision (on_acquired), then each answer
// after it with the attempt it belongs to (on_late). The round (kept alive by its
// in-flight requests) keeps this listener, and so the op, for late answers; the op
// does not hold the round, so there is no cycle.
class acquire_op::attempt_listener final : public round_listener {
 public:
  attempt_listener(std::shared_ptr<acquire_op> op, std::shared_ptr<attempt_state> at)
      : op_(std::move(op)), at_(std::move(at)) {}
  void decided(round& r) override { op_->on_acquired(r); }
  void late(round& r, std::size_t node) override { op_->on_late(r, node, *at_); }

 private:
  std::shared_ptr<acquire_op> op_;
  std::shared_ptr<attempt_state> at_;
};

acquire_op::acquire_op(core& c, std::uint64_t id, std::string resource, acquire_options o,
                       std::function<void(acquire_result)> done, std::optional<clock_tp> called,
                       std::vector<std::string> set)
    : async_op(std::move(done)), c_(c), id_(id), resource_(std::move(resource)), o_(std::move(o)),
      set_(std::move(set)), wait_(c_, *this, o_.retry, call_start_, keys_) {
  if (set_.empty()) {
    key_ = c_.key_for(resource_);
    fence_key_ = fence_key(key_);
    wait_.set_key(key_);
  } else {
    resource_ = joined_names(set_);
    keys_ = keys_of(c_, set_);
    wait_.set_key(keys_.front());  // the channel waited on until an attempt names its blocker
  }
  // From the public call: the retry deadline and report.elapsed count from there.
  call_start_ = called.value_or(c_.now());
}

void acquire_op::start_attempt() {
  wait_.attempt_starting();
  ++attempt_;
  token_ = c_.io().token();
  current_ = std::make_shared<attempt_state>();
  current_->token = token_;
  // A set: kAcquireMany. Fenced: the fenced script. Otherwise the plain SET NX PX
  // GET (each connection pipelines a TIME behind it when the clock-jump guard
  // wants one).
  const script_id sid = !set_.empty() ? script_id::acquire_many
                        : o_.fencing  ? script_id::acquire_fenced
                                      : script_id::acquire_set;
  auto r = std::make_shared<round>(c_, sid, false);
  r->listen(std::make_shared<attempt_listener>(keep(), current_), /*late=*/true);
  command cmd = set_.empty() ? lock_command(sid, key_, token_, std::to_string(o_.ttl.count()))
                             : set_command(sid, keys_, token_, std::to_string(o_.ttl.count()));
  if (o_.fencing) cmd.key2 = fence_key_;
  // Nodes that the restart or clock-jump guard quarantines get no vote, nor, for
  // a fenced acquire, nodes that may evict the fence counter.
  const auto quarantine = c_.quarantine_for(o_.ttl);
  const auto now = c_.now();
  std::vector<std::string> skip(c_.size());
  bool any = false;
  for (std::size_t i = 0; i < skip.size(); ++i) {
    skip[i] = c_.node(i).acquire_exclusion(now, quarantine);
    if (skip[i].empty() && o_.fencing) skip[i] = c_.node(i).fencing_exclusion();
    any = any || !skip[i].empty();
  }
  r->send(std::move(cmd), any ? skip : std::vector<std::string>{});
}

void acquire_op::cancel() {
  cancelled_ = true;
  if (wait_.cancel_pending()) finish_failure(last_, make_error_code(errc::cancelled));
}

command acquire_op::quiet_release(const std::string& token) const {
  return set_.empty() ? lock_command(script_id::release_quiet, key_, token)
                      : set_command(script_id::release_many_quiet, keys_, token);
}

void acquire_op::on_acquired(round& r) {
  const clock_tp now = c_.now();
  // A set: a node that refused names the resource it holds for another owner.
  for (std::size_t i = 0; !set_.empty() && i < r.votes.size(); ++i) {
    if (r.votes[i].status != node_status::held || !r.blocked_by[i]) continue;
    const std::size_t k = *r.blocked_by[i];
    if (k >= 1 && k <= set_.size()) r.results[i].detail = "held: " + set_[k - 1];
  }
  if (r.outcome != verdict::quorum) {
    fail_attempt(r, failure_reason(refusal::held, r.votes));
    return;
  }
  const microseconds validity = validity_of(granted_ttl(), duration_cast<microseconds>(now - r.started), drift());
  if (cancelled_) {
    fail_attempt(r, make_error_code(errc::cancelled));
  } else if (validity.count() <= 0) {
    fail_attempt(r, make_error_code(errc::validity_exhausted));
  } else if (o_.fencing) {
    commit_fence(r);
  } else {
    succeed(r, std::nullopt);
  }
}

void acquire_op::succeed(round& r, std::optional<std::uint64_t> fence) {
  const clock_tp now = c_.now();
  wait_.leave();
  const milliseconds granted = granted_ttl();
  const clock_tp valid_until =
      r.started + duration_cast<clock_tp::duration>(microseconds(granted) - drift_of(granted, drift()));
  auto h = std::make_shared<held>();
  h->owner = c_.shared_from_this();
  h->resource = resource_;
  h->resources = set_;
  h->token = token_;
  h->fence = fence;
  h->valid_until_ns.store(to_ns(valid_until));
  h->ttl = o_.ttl;
  h->interval = o_.extend_interval.count() > 0 ? o_.extend_interval : o_.ttl / 3;
  h->on_lost = std::move(o_.on_lost);
  h->max_extensions = o_.max_extensions;
  h->max_hold = o_.max_hold;
  h->acquired_at = r.started;
  acquire_result res;
  res.report = round_report(c_, r, {}, call_start_, now, attempt_);
  res.report.validity = duration_cast<milliseconds>(valid_until - now);
  res.lock = c_.make_lock(h);
  if (o_.auto_extend) c_.start_watchdog(h);
  c_.stats().acquired.fetch_add(1, std::memory_order_relaxed);
  if (c_.observing()) c_.emit(&observer::on_lock_acquired, c_.lock_event_of(*h, false), "on_lock_acquired");
  finish(std::move(res));
}

void acquire_op::fail_attempt(round& r, std::error_code ec) {
  current_->failed = true;
  wait_.attempt_failed(r.started);
  rollback(c_, quiet_release(token_), r, o_.ttl);
  last_ = round_report(c_, r, ec, call_start_, c_.now(), attempt_);
  if (ec == errc::contended) c_.stats().contended.fetch_add(1, std::memory_order_relaxed);
  if (retryable(ec) && !cancelled_ && !c_.closing() && attempt_ < o_.retry.max_attempts) {
    const milliseconds delay = retry_delay(o_.retry, attempt_ + 1, c_.jitter());
    const auto spent = duration_cast<milliseconds>(c_.now() - call_start_);
    if (wait_.waits_for_release(ec) && spent < o_.retry.deadline) {
      fence_.reset();
      return wait_.wait_for_release(r, delay, token_);
    }
    if (o_.retry.deadline.count() == 0 || spent + delay <= o_.retry.deadline) {
      fence_.reset();
      wait_.attempt_in(delay);
      if (c_.observing()) {
        retry_scheduled e;
        e.at = c_.now();
        e.resource = resource_;
        e.next_attempt = attempt_ + 1;
        e.delay = delay;
        e.last_error = ec;
        c_.emit(&observer::on_retry_scheduled, e, "on_retry_scheduled");
      }
      return;
    }
  }
  finish_failure(last_, cancelled_ ? make_error_code(errc::cancelled) : ec);
}

void acquire_op::finish_failure(report rep, std::error_code ec) {
  rep.error = ec;
  rep.attempts = attempt_;
  rep.elapsed = duration_cast<microseconds>(c_.now() - call_start_);
  if (rep.nodes.empty()) rep = empty_report(c_, ec), rep.attempts = attempt_;
  acquire_result res;
  res.report = std::move(rep);
  finish(std::move(res));
}

void acquire_op::finish(acquire_result res) {
  finish_after(
      [this] {
        wait_.leave();
        c_.forget_op(id_);
        c_.stats().acquires.fetch_add(1, std::memory_order_relaxed);
      },
      std::move(res));
}

// ---------------------------------------------------------------- the core's entry points

void cancel_op(acquire_op& op) { op.cancel(); }

void core::acquire(std::uint64_t id, std::string resource, acquire_options o,
                   std::function<void(acquire_result)> done, std::optional<clock_tp> called) {
  if (observing_) done = observe_op(operation_kind::acquire, resource, false, std::move(done));
  auto reject = [&](errc e, const char* why) {
    acquire_result res;
    res.report = empty_report(*this, make_error_code(e), why);
    stats_.acquires.fetch_add(1, std::memory_order_relaxed);
    done(std::move(res));
  };
  if (closing_) return reject(errc::cancelled, "client shut down");
  auto op = std::make_shared<acquire_op>(*this, id, std::move(resource), std::move(o), std::move(done), called);
  ops_[id] = op;
  op->start_attempt();
}

void core::acquire_many(std::uint64_t id, std::vector<std::string> resources, acquire_options o,
                        std::function<void(acquire_result)> done, std::optional<clock_tp> called) {
  // Observers see a set as one operation on the joined name ("a,b"), as its lease does.
  if (observing_) done = observe_op(operation_kind::acquire, joined_names(resources), false, std::move(done));
  if (closing_) {
    acquire_result res;
    res.report = empty_report(*this, make_error_code(errc::cancelled), "client shut down");
    stats_.acquires.fetch_add(1, std::memory_order_relaxed);
    return done(std::move(res));
  }
  auto op = std::make_shared<acquire_op>(*this, id, std::string(), std::move(o), std::move(done), called,
                                         std::move(resources));
  ops_[id] = op;
  op->start_attempt();
}

void core::cancel(std::uint64_t id) {
  auto it = ops_.find(id);
  if (it == ops_.end()) return;
  if (auto op = it->second.lock()) op->cancel();
}

}  // namespace redlock::detail
