// Several resources at once: one lock over a set of keys, taken with the Redlock
// rounds of a single key. Per node, one script grants every key of the set or
// none (kAcquireMany), so an attempt never holds part of a set while it waits for
// the rest: no hold-and-wait, hence no deadlock between overlapping sets, and a
// failed attempt rolls back everything it got (kReleaseMany on every node asked).
// The quorum, the validity, the guards, the retries and the rollback's delivery
// are those of a single key (round, decision, operations.cc); extension, release
// and the watchdog go through extend_round / release_round with the set's
// commands (extend_command, release_command). Loop thread only.
#include <algorithm>
#include <utility>

#include "core.h"
#include "operation_support.h"
#include "reply.h"
#include "round.h"
#include "token.h"

namespace redlock::detail {

using clock_tp = std::chrono::steady_clock::time_point;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

std::vector<std::string> keys_of(const core& c, const std::vector<std::string>& resources) {
  std::vector<std::string> keys;
  keys.reserve(resources.size());
  for (const std::string& r : resources) keys.push_back(c.key_for(r));
  return keys;
}

command set_command(script_id s, std::vector<std::string> keys, const std::string& token,
                    std::string arg2 = {}) {
  command cmd;
  cmd.script = s;
  cmd.keys = std::move(keys);
  cmd.arg1 = token;
  cmd.arg2 = std::move(arg2);
  return cmd;
}

std::string joined(const std::vector<std::string>& resources) {
  std::string out;
  for (const std::string& r : resources) {
    if (!out.empty()) out += ',';
    out += r;
  }
  return out;
}

std::int64_t to_ns(clock_tp t) {
  return duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

std::string check_resource_set(const std::vector<std::string>& resources) {
  if (resources.empty()) return "the set of resources must not be empty";
  if (resources.size() > kMaxSetSize) {
    return "a set holds at most " + std::to_string(kMaxSetSize) + " resources (" +
           std::to_string(resources.size()) + " given)";
  }
  std::vector<std::string> sorted = resources;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i].empty()) return "resource name must not be empty";
    if (i > 0 && sorted[i] == sorted[i - 1]) return "resource '" + sorted[i] + "' is given twice in the set";
  }
  return "";
}

command extend_command(const core& c, const lease& l, milliseconds ttl) {
  if (l.resources.empty()) {
    command cmd;
    cmd.script = script_id::extend;
    cmd.key = c.key_for(l.resource);
    cmd.arg1 = l.token;
    cmd.arg2 = std::to_string(ttl.count());
    return cmd;
  }
  return set_command(script_id::extend_many, keys_of(c, l.resources), l.token, std::to_string(ttl.count()));
}

command release_command(const core& c, const lease& l) {
  if (l.resources.empty()) {
    command cmd;
    cmd.script = script_id::release;
    cmd.key = c.key_for(l.resource);
    cmd.arg1 = l.token;
    return cmd;
  }
  return set_command(script_id::release_many, keys_of(c, l.resources), l.token);
}

// One acquire of a set: attempts, each one round of kAcquireMany, rolled back
// with kReleaseMany when it fails; the retry policy of a single key.
class acquire_many_op : public std::enable_shared_from_this<acquire_many_op> {
 public:
  acquire_many_op(core& c, std::uint64_t id, std::vector<std::string> resources, acquire_options o,
                  std::function<void(acquire_result)> done, std::optional<clock_tp> called)
      : c_(c), id_(id), resources_(std::move(resources)), o_(std::move(o)), done_(std::move(done)) {
    keys_ = keys_of(c_, resources_);
    call_start_ = called.value_or(c_.now());
  }

  void start_attempt() {
    retry_timer_ = 0;
    ++attempt_;
    token_ = c_.io().token();
    auto r = std::make_shared<round>(c_, op_kind::acquire, script_id::acquire_many, false);
    auto self = shared_from_this();
    auto failed = std::make_shared<bool>(false);
    failed_ = failed;
    r->on_decided = [self](round& rd) { self->on_acquired(rd); };
    r->on_late = [self, token = token_, failed](round& rd, std::size_t node) {
      self->on_late(rd, node, token, *failed);
    };
    // As for one key: nodes the restart or clock-jump guard quarantines get no vote.
    const auto quarantine = c_.quarantine_for(o_.ttl);
    const auto now = c_.now();
    std::vector<std::string> skip(c_.size());
    bool any = false;
    for (std::size_t i = 0; i < skip.size(); ++i) {
      skip[i] = c_.conn(i).acquire_exclusion(now, quarantine);
      any = any || !skip[i].empty();
    }
    r->send(set_command(script_id::acquire_many, keys_, token_, std::to_string(o_.ttl.count())),
            any ? skip : std::vector<std::string>{});
  }

  void cancel() {
    cancelled_ = true;
    if (retry_timer_ != 0) {
      c_.cancel_timer(retry_timer_);
      retry_timer_ = 0;
      finish_failure(last_, make_error_code(errc::cancelled));
    }
  }

 private:
  command release_cmd(const std::string& token) const {
    return set_command(script_id::release_many, keys_, token);
  }

  void on_acquired(round& r) {
    // A node that refused names the resource it holds for another owner.
    for (std::size_t i = 0; i < r.votes.size(); ++i) {
      if (r.votes[i].status != node_status::held || !r.blocked_by[i]) continue;
      const std::size_t k = *r.blocked_by[i];
      if (k >= 1 && k <= resources_.size()) r.results[i].detail = "held: " + resources_[k - 1];
    }
    if (r.outcome != verdict::quorum) return fail_attempt(r, failure_reason(op_kind::acquire, r.votes));
    const microseconds validity = validity_of(o_.ttl, duration_cast<microseconds>(c_.now() - r.started),
                                              c_.options().clock_drift_factor);
    if (cancelled_) return fail_attempt(r, make_error_code(errc::cancelled));
    if (validity.count() <= 0) return fail_attempt(r, make_error_code(errc::validity_exhausted));
    succeed(r);
  }

  // As acquire_op::on_late: a grant (or a lost answer to a written request) after
  // its attempt failed is released with the rollback's guarantee.
  void on_late(round& r, std::size_t node, const std::string& token, bool failed) {
    if (!failed) return;
    const node_status st = r.votes[node].status;
    const bool lost_answer =
        !r.unsent[node] && (st == node_status::timeout || st == node_status::connection_error ||
                            st == node_status::protocol_error);
    if (!lost_answer && st != node_status::ok && !r.granted_excluded[node]) return;
    std::vector<bool> only(c_.size());
    only[node] = true;
    deliver_release(c_, release_cmd(token), only, o_.ttl);
  }

  void succeed(round& r) {
    const clock_tp now = c_.now();
    const double f = c_.options().clock_drift_factor;
    const clock_tp valid_until =
        r.started + duration_cast<clock_tp::duration>(microseconds(o_.ttl) - drift_of(o_.ttl, f));
    auto h = std::make_shared<held>();
    h->owner = c_.shared_from_this();
    h->resource = joined(resources_);
    h->resources = resources_;
    h->token = token_;
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

  void fail_attempt(round& r, std::error_code ec) {
    *failed_ = true;
    rollback(c_, release_cmd(token_), r, o_.ttl);
    last_ = round_report(c_, r, ec, call_start_, c_.now(), attempt_);
    if (ec == errc::contended) c_.stats().contended.fetch_add(1, std::memory_order_relaxed);
    if (retryable(ec) && !cancelled_ && !c_.closing() && attempt_ < o_.retry.max_attempts) {
      const milliseconds delay = retry_delay(o_.retry, attempt_ + 1, c_.jitter());
      const auto spent = duration_cast<milliseconds>(c_.now() - call_start_);
      if (o_.retry.deadline.count() == 0 || spent + delay <= o_.retry.deadline) {
        auto self = shared_from_this();
        retry_timer_ = c_.schedule(delay, [self] { self->start_attempt(); });
        if (c_.observing()) {
          retry_scheduled e;
          e.at = c_.now();
          e.resource = joined(resources_);
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

  void finish_failure(report rep, std::error_code ec) {
    rep.error = ec;
    rep.attempts = attempt_;
    rep.elapsed = duration_cast<microseconds>(c_.now() - call_start_);
    if (rep.nodes.empty()) rep = empty_report(c_, ec), rep.attempts = attempt_;
    acquire_result res;
    res.report = std::move(rep);
    finish(std::move(res));
  }

  void finish(acquire_result res) {
    if (done_called_) return;
    done_called_ = true;
    c_.forget_op(id_);
    c_.stats().acquires.fetch_add(1, std::memory_order_relaxed);
    auto done = std::move(done_);
    if (done) done(std::move(res));
  }

  core& c_;
  std::uint64_t id_;
  std::vector<std::string> resources_, keys_;
  acquire_options o_;
  std::function<void(acquire_result)> done_;
  clock_tp call_start_;
  int attempt_ = 0;
  bool cancelled_ = false;
  bool done_called_ = false;
  std::uint64_t retry_timer_ = 0;
  std::string token_;
  std::shared_ptr<bool> failed_;  // the current attempt failed and was rolled back
  report last_;
};

void cancel_op(acquire_many_op& op) { op.cancel(); }

void core::acquire_many(std::uint64_t id, std::vector<std::string> resources, acquire_options o,
                        std::function<void(acquire_result)> done, std::optional<clock_tp> called) {
  // One lock over the set: its resource is the joined list, as the handle's.
  if (observing_) done = observe_op(operation_kind::acquire, joined(resources), false, std::move(done));
  if (closing_) {
    acquire_result res;
    res.report = empty_report(*this, make_error_code(errc::cancelled), "client shut down");
    stats_.acquires.fetch_add(1, std::memory_order_relaxed);
    return done(std::move(res));
  }
  auto op = std::make_shared<acquire_many_op>(*this, id, std::move(resources), std::move(o), std::move(done),
                                              called);
  many_ops_[id] = op;
  op->start_attempt();
}

}  // namespace redlock::detail
