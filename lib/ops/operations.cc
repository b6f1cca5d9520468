// The acquire (with retries, rollback, fencing and waiting): acquire_op,
// core::acquire, acquire_many and cancel. The other operations have files of
// their own in lib/ops/. All of it runs on the loop thread.
#include <algorithm>
#include <utility>

#include "engine/core.h"
#include "ops/held.h"
#include "ops/notify.h"
#include "ops/support.h"
#include "protocol/reply.h"
#include "ops/round.h"
#include "pure/token.h"

namespace redlock::detail {

using clock_tp = std::chrono::steady_clock::time_point;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// ---------------------------------------------------------------- acquire

// The answer to a waiter's peek: the key's value on one node, nullopt when it is
// absent or there was no usable answer (down, timed out, an error).
class peek_sink final : public sink {
 public:
  explicit peek_sink(std::function<void(const std::optional<std::string>&)> done) : done_(std::move(done)) {}
  void on_reply(std::size_t, std::uint32_t, const reply_event& ev) override {
    auto done = std::move(done_);
    done_ = nullptr;
    if (!done) return;
    std::optional<std::string> value;
    if (ev.status == node_status::pending && ev.reply != nullptr && ev.reply->type == REDIS_REPLY_STRING) {
      value.emplace(ev.reply->str, ev.reply->len);
    }
    done(value);
  }

 private:
  std::function<void(const std::optional<std::string>&)> done_;
};

// One attempt of an acquire; its rounds keep it for answers that arrive late.
struct attempt_state {
  std::string token;
  bool failed = false;  // decided as failed and rolled back
};

// One acquire of one resource, or of a set of resources (client::acquire_many:
// `set` not empty; each attempt is one round of kAcquireMany, all or nothing per
// node, rolled back with kReleaseManyQuiet). The quorum, validity, guards, retries,
// rollback and waiting are the same for both.
class acquire_op final : public std::enable_shared_from_this<acquire_op>, private waiter {
 public:
  acquire_op(core& c, std::uint64_t id, std::string resource, acquire_options o,
             std::function<void(acquire_result)> done, std::optional<clock_tp> called,
             std::vector<std::string> set = {})
      : c_(c), id_(id), resource_(std::move(resource)), o_(std::move(o)), done_(std::move(done)),
        set_(std::move(set)) {
    if (set_.empty()) {
      key_ = c_.key_for(resource_);
      fence_key_ = key_ + ":fence";
    } else {
      resource_ = joined_names(set_);
      keys_ = keys_of(c_, set_);
      key_ = keys_.front();  // the channel waited on until an attempt names its blocker
    }
    // From the public call: the retry deadline and report.elapsed count from there.
    call_start_ = called.value_or(c_.now());
  }

  ~acquire_op() {
    if (joined_) c_.notify().leave(key_, *this);
  }

  void start_attempt() {
    retry_timer_ = 0;
    idle_wait_ = false;
    attempt_woken_ = woken_;
    woken_ = false;
    attempt_started_ = c_.now();
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
    auto r = std::make_shared<round>(c_, op_kind::acquire, sid, false);
    auto self = shared_from_this();
    r->on_decided = [self](round& rd) { self->on_acquired(rd); };
    // The round (kept alive by its in-flight requests) keeps the op alive for late
    // answers; the op does not hold the round, so there is no cycle.
    r->on_late = [self, at = current_](round& rd, std::size_t node) { self->on_late(rd, node, *at); };
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
      skip[i] = c_.conn(i).acquire_exclusion(now, quarantine);
      if (skip[i].empty() && o_.fencing) skip[i] = c_.conn(i).fencing_exclusion();
      any = any || !skip[i].empty();
    }
    r->send(std::move(cmd), any ? skip : std::vector<std::string>{});
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
  // The ownership-checked delete that publishes nothing: rollbacks, late grants.
  command quiet_release(const std::string& token) const {
    return set_.empty() ? lock_command(script_id::release_quiet, key_, token)
                        : set_command(script_id::release_many_quiet, keys_, token);
  }

  // ---- waiting without polling (lib/notify.h)
  bool idle_wait_ = false;     // the fallback timer is armed, no attempt in flight
  bool joined_ = false;        // registered with the notifier (on key_'s channel)
  std::uint64_t join_gen_ = 0; // which join a settle callback belongs to
  bool in_join_ = false;       // notifier::join is running (may settle at once)
  bool fresh_at_join_ = false; // ... and did, with a subscription newer than the attempt
  std::vector<std::string> blockers_;  // holders seen by the last failed attempt
  std::string retried_for_;    // the last released token that made it try at once
  bool woken_ = false;         // the next attempt was woken by a release of key_
  bool attempt_woken_ = false; // ... and it is (was) the current attempt
  clock_tp attempt_started_{};
  microseconds last_rtt_{0};  // the last failed attempt's round trip (start to decision)
  int splits_ = 0;            // consecutive failed attempts that were splits among waiters
  // The wake-up budget (issue 20, 4b), kept as a theoretical arrival time (GCRA):
  // at most kWakeBurst wake-ups at once, then one per wake_interval(). A flood of
  // forged release messages (anyone who may PUBLISH can send them) then costs this
  // waiter at most that many peeks or attempts; a genuine release finds the budget
  // full, as releases of a held lock come no faster than it is taken and held.
  static constexpr int kWakeBurst = 4;
  static constexpr milliseconds kWakeFloor{10};
  static constexpr int kMaxSplits = 6;  // then the fallback (a holder this waiter cannot see)
  clock_tp wake_tat_{};

  // Capped at 1 s: an attempt that timed out must not hold a genuine release back
  // for long after a flood.
  milliseconds wake_interval() const {
    return std::clamp(duration_cast<milliseconds>(4 * last_rtt_), kWakeFloor, milliseconds(1000));
  }
  clock_tp wake_allowed_at() const override {
    return wake_tat_ == clock_tp{} ? clock_tp{} : wake_tat_ - (kWakeBurst - 1) * wake_interval();
  }
  void spend_wake() { wake_tat_ = std::max(wake_tat_, c_.now()) + wake_interval(); }

  bool idle_waiting() const override { return idle_wait_ && retry_timer_ != 0; }
  bool knows_blockers() const override { return !blockers_.empty(); }
  bool blocked_by(const std::string& token) const override {
    return blockers_.empty() || std::find(blockers_.begin(), blockers_.end(), token) != blockers_.end();
  }
  void wake(milliseconds stagger, std::optional<peek_at> peek) override {
    woken_ = true;  // by a release of key_ (the notifier)
    spend_wake();
    start_in(stagger, std::move(peek));
  }
  void try_now() { start_in(milliseconds(0), std::nullopt); }
  void start_in(milliseconds stagger, std::optional<peek_at> peek) {
    auto self = shared_from_this();  // the cancelled timer held the last reference
    c_.cancel_timer(retry_timer_);
    idle_wait_ = false;
    if (!peek) {
      retry_timer_ = c_.schedule(stagger, [self] { self->start_attempt(); });
      return;
    }
    retry_timer_ = c_.schedule(stagger, [self, p = std::move(*peek)] { self->peek_then_attempt(p); });
  }

  // A GET of the key on every node (one command per node, against two for an
  // attempt: SET and TIME): the same holder, other than the released one, on a
  // quorum of nodes means another client's woken attempt won the release; this
  // waiter then waits on (for that holder's release) without an attempt. A holder
  // on fewer nodes may be a losing attempt about to roll back quietly, which would
  // leave every waiter to its fallback timer: then, and on any other answer (free,
  // the released token, errors, no answers), the attempt is made. A peek only
  // ever skips an attempt: a wrong skip costs latency, never safety.
  void peek_then_attempt(const peek_at& p) {
    retry_timer_ = 0;
    if (cancelled_ || c_.closing()) return finish_failure(last_, make_error_code(errc::cancelled));
    std::string enc;
    append_resp(enc, {"GET", key_});
    auto w = std::make_shared<const wire>(wire::plain_tag{}, std::move(enc));
    struct peek_tally {
      std::vector<std::string> values;  // other holders seen, one entry per node
      std::size_t answered = 0;
      bool decided = false;
    };
    auto t = std::make_shared<peek_tally>();
    auto self = shared_from_this();
    const std::size_t n = c_.size(), q = n / 2 + 1;
    for (std::size_t i = 0; i < n; ++i) {
      auto done = [self, t, n, q, released = p.released](const std::optional<std::string>& value) {
        if (t->decided) return;
        ++t->answered;
        if (value && !value->empty() && *value != released) {
          t->values.push_back(*value);
          if (static_cast<std::size_t>(std::count(t->values.begin(), t->values.end(), *value)) >= q) {
            t->decided = true;
            return self->after_peek(true);
          }
        }
        // No holder can reach a quorum any more: attempt.
        std::size_t best = 0;
        for (const std::string& v : t->values) {
          best = std::max(best, static_cast<std::size_t>(std::count(t->values.begin(), t->values.end(), v)));
        }
        if (best + (n - t->answered) < q) {
          t->decided = true;
          self->after_peek(false);
        }
      };
      c_.conn(i).submit(w, false, std::make_shared<peek_sink>(std::move(done)), 0);
    }
  }

  void after_peek(bool another_holder) {
    if (done_called_) return;
    if (cancelled_ || c_.closing()) return finish_failure(last_, make_error_code(errc::cancelled));
    if (!another_holder) return start_attempt();
    c_.stats().wake_ups_skipped.fetch_add(1, std::memory_order_relaxed);
    woken_ = false;  // no attempt of this wake-up: the next one is the timer's or a new wake-up's
    if (joined_) c_.notify().attempt_done(key_, *this);
    arm_wait(retry_delay(o_.retry, attempt_ + 1, c_.jitter()));
  }

  // An acquire that may wait (retry.deadline) and found the lock held (or, once
  // waiting, failed any retryable way) waits for its release: the key's channel is
  // subscribed on every node before the next attempt; a notification (or the
  // fallback timer, `delay`) starts it.
  bool waits_for_release(std::error_code ec) const {
    return (ec == errc::contended || joined_) && o_.retry.deadline.count() > 0 && c_.options().wait_notifications;
  }

  // The key whose channel a set waits on: the one most nodes named as held
  // ({0, i} of kAcquireMany); one resource: its key.
  std::string wait_key(const round& r) const {
    if (set_.empty()) return key_;
    std::vector<std::size_t> count(keys_.size() + 1, 0);
    std::size_t best = 0;
    for (std::size_t i = 0; i < r.votes.size(); ++i) {
      if (r.votes[i].status != node_status::held || !r.blocked_by[i]) continue;
      const std::size_t k = *r.blocked_by[i];
      if (k < 1 || k > keys_.size()) continue;
      if (++count[k] > count[best]) best = k;
    }
    return best == 0 ? key_ : keys_[best - 1];
  }

  void wait_for_release(const round& r, milliseconds delay) {
    blockers_.clear();
    for (std::size_t i = 0; i < r.votes.size(); ++i) {
      if (r.votes[i].status != node_status::held || !r.values[i] || r.values[i]->empty()) continue;
      if (std::find(blockers_.begin(), blockers_.end(), *r.values[i]) == blockers_.end()) {
        blockers_.push_back(*r.values[i]);
      }
    }
    // A set blocked by another of its keys now waits on that key's channel.
    if (std::string k = wait_key(r); k != key_) {
      if (joined_) {
        c_.notify().leave(key_, *this);
        // Woken by a release of key_, blocked by another key: key_ may be free, and
        // the notifier woke this waiter only. The next waiter of key_ in this
        // client tries instead (review 13b, A3c).
        if (attempt_woken_) c_.notify().wake_next(key_);
      }
      joined_ = false;
      key_ = std::move(k);
    }
    if (!joined_) {
      joined_ = true;
      const std::uint64_t gen = ++join_gen_;
      auto self = shared_from_this();
      // The fallback timer runs from now, whatever the subscriptions do: a node
      // that takes connect_timeout (paused) or command_timeout to confirm never
      // holds the next attempt back beyond the schedule and the deadline (review
      // 13, W1). A subscription confirmed after the failed attempt started may
      // have missed a release in between: then the next attempt starts at once.
      in_join_ = true;
      fresh_at_join_ = false;
      c_.notify().join(key_, *this, attempt_started_, [self, gen](bool fresh) {
        if (self->join_gen_ != gen || self->done_called_) return;
        if (self->in_join_) {
          self->fresh_at_join_ = fresh;
        } else if (fresh && self->idle_waiting()) {
          self->try_now();
        }
      });
      in_join_ = false;
      if (fresh_at_join_) return arm_wait(milliseconds(0));
      // Not fresh: the channel was subscribed already (this op waited on it before
      // a switch, or another waiter of this client does), so its releases were
      // seen — also one during the attempt that brought this op here (review 13b).
    }
    // A release of a holder that blocked this attempt, seen during it: try again at
    // once — once per released token (a node that missed the delete still shows it).
    // Such a retry spends a wake-up of the budget, as a wake-up does (distinct
    // forged tokens must not make it spin when the holders are unknown: fenced).
    if (auto t = c_.notify().missed_release(key_, *this, attempt_started_, attempt_woken_);
        t && *t != retried_for_) {
      retried_for_ = *t;
      const clock_tp at = wake_allowed_at(), now = c_.now();
      spend_wake();
      return arm_wait(at > now ? std::chrono::ceil<milliseconds>(at - now) : milliseconds(0), false);
    } else if (t) {
      c_.notify().attempt_done(key_, *this);
    }
    if (auto d = split_backoff(r, delay)) return arm_wait(*d, false);
    arm_wait(delay);
  }

  // A split among waiters (issue 20, item 2): the attempt got some node, every node
  // that refused named its holder, and no holder held a quorum. The other holders
  // are then attempts like this one (woken by the same release in other clients),
  // each rolling back quietly: nothing is published, no wake-up follows, and the
  // lock is free on every node that answered once the rollbacks land. So the
  // attempt is retried soon, not at the fallback: the waiter whose token is the
  // lowest of those seen (each sees the same ones: the deterministic winner of a
  // random draw) after one round trip of this attempt — the others' rollbacks,
  // sent at the same time, have landed (they need about half of theirs, one way
  // to this waiter's nearest node) —, the others after three, by when the
  // winner holds a quorum they see (then they wait for its release, a normal
  // failure). A split again (views that differ, a rollback late) adds a random
  // spread that doubles with each (a quarter of it for the winner); each delay is
  // capped at a quarter of the fallback, and after kMaxSplits splits in a row the
  // fallback applies. A holder on a quorum seen,
  // an unnamed holder (the fenced script), or no node granted: not a split.
  std::optional<milliseconds> split_backoff(const round& r, milliseconds fallback) {
    const std::size_t n = r.votes.size(), q = n / 2 + 1;
    bool mine = false, unknown = false;
    std::vector<std::string> others;
    for (std::size_t i = 0; i < n; ++i) {
      if (r.votes[i].status == node_status::ok) mine = true;
      if (r.votes[i].status != node_status::held) continue;
      if (!r.values[i] || r.values[i]->empty()) {
        unknown = true;
      } else {
        others.push_back(*r.values[i]);
      }
    }
    const bool quorum_holder = std::any_of(others.begin(), others.end(), [&](const std::string& v) {
      return static_cast<std::size_t>(std::count(others.begin(), others.end(), v)) >= q;
    });
    if (!mine || unknown || quorum_holder) {
      splits_ = 0;
      return std::nullopt;
    }
    if (++splits_ > kMaxSplits) return std::nullopt;
    const milliseconds rtt = std::max(milliseconds(1), std::chrono::ceil<milliseconds>(last_rtt_));
    const bool first =
        std::none_of(others.begin(), others.end(), [&](const std::string& v) { return v < token_; });
    milliseconds d = first ? rtt : 3 * rtt;
    if (splits_ > 1) {
      const milliseconds::rep grow = milliseconds::rep{1} << std::min(splits_ - 1, 8);
      const milliseconds spread = first ? rtt * grow / 4 : rtt * grow;
      d += milliseconds(
          static_cast<milliseconds::rep>(c_.jitter() % static_cast<std::uint64_t>(spread.count() + 1)));
    }
    d = std::min(d, std::max(milliseconds(1), fallback / 4));
    c_.stats().split_retries.fetch_add(1, std::memory_order_relaxed);
    return d;
  }

  // `queued`: a fallback, stretched by the waiter's place in its client's queue.
  void arm_wait(milliseconds delay, bool queued = true) {
    const auto spent = duration_cast<milliseconds>(c_.now() - call_start_);
    if (spent >= o_.retry.deadline) return finish_failure(last_, last_.error);
    // Notifications arrive: a release wakes the earliest waiter of this client, so
    // the ones behind it need their fallback only for lost messages and expiry —
    // stretched by their place in the queue (the earliest keeps the schedule and
    // catches a holder that publishes nothing).
    if (queued && delay.count() > 0) {
      if (auto pos = c_.notify().queue_position(key_, *this); pos && *pos > 0) {
        delay *= static_cast<milliseconds::rep>(std::min<std::size_t>(*pos + 1, 64));
      }
    }
    delay = std::min(delay, o_.retry.deadline - spent);
    idle_wait_ = delay.count() > 0;
    auto self = shared_from_this();
    retry_timer_ = c_.schedule(delay, [self] { self->start_attempt(); });
  }

  void on_acquired(round& r) {
    const clock_tp now = c_.now();
    // A set: a node that refused names the resource it holds for another owner.
    for (std::size_t i = 0; !set_.empty() && i < r.votes.size(); ++i) {
      if (r.votes[i].status != node_status::held || !r.blocked_by[i]) continue;
      const std::size_t k = *r.blocked_by[i];
      if (k >= 1 && k <= set_.size()) r.results[i].detail = "held: " + set_[k - 1];
    }
    if (r.outcome != verdict::quorum) {
      fail_attempt(r, failure_reason(op_kind::acquire, r.votes));
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

  void on_late(round& r, std::size_t node, const attempt_state& at) {
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
    // node holding this owner's key carries its fence.
    if (&at == current_.get() && fence_) {
      auto cr = std::make_shared<round>(c_, op_kind::fence_commit, script_id::fence_commit, false);
      std::vector<std::string> skip(c_.size(), "not this node");
      skip[node].clear();
      command cmd = lock_command(script_id::fence_commit, key_, token_, std::to_string(*fence_));
      cmd.key2 = fence_key_;
      cr->send(cmd, skip);
    }
  }

  double drift() const { return c_.options().clock_drift_factor; }
  // The TTL the validity of a success counts from: max_hold when it is shorter
  // than the TTL (no validity past acquisition + max_hold, options.h). The keys
  // keep the TTL: they outlive the validity, as after any capped extension.
  milliseconds granted_ttl() const {
    return o_.max_hold.count() > 0 && o_.max_hold < o_.ttl ? o_.max_hold : o_.ttl;
  }

  void commit_fence(round& r) {
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
    auto self = shared_from_this();
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

  void succeed(round& r, std::optional<std::uint64_t> fence) {
    const clock_tp now = c_.now();
    if (joined_) {
      joined_ = false;
      c_.notify().leave(key_, *this);
    }
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

  void fail_attempt(round& r, std::error_code ec) {
    current_->failed = true;
    last_rtt_ = std::chrono::ceil<microseconds>(c_.now() - r.started);
    // A woken attempt ended: releases seen meanwhile may wake another waiter.
    if (joined_) c_.notify().attempt_done(key_, *this);
    rollback(c_, quiet_release(token_), r, o_.ttl);
    last_ = round_report(c_, r, ec, call_start_, c_.now(), attempt_);
    if (ec == errc::contended) c_.stats().contended.fetch_add(1, std::memory_order_relaxed);
    if (retryable(ec) && !cancelled_ && !c_.closing() && attempt_ < o_.retry.max_attempts) {
      const milliseconds delay = retry_delay(o_.retry, attempt_ + 1, c_.jitter());
      const auto spent = duration_cast<milliseconds>(c_.now() - call_start_);
      if (waits_for_release(ec) && spent < o_.retry.deadline) {
        fence_.reset();
        return wait_for_release(r, delay);
      }
      if (o_.retry.deadline.count() == 0 || spent + delay <= o_.retry.deadline) {
        fence_.reset();
        auto self = shared_from_this();
        retry_timer_ = c_.schedule(delay, [self] { self->start_attempt(); });
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
    if (joined_) {
      joined_ = false;
      c_.notify().leave(key_, *this);
    }
    c_.forget_op(id_);
    c_.stats().acquires.fetch_add(1, std::memory_order_relaxed);
    auto done = std::move(done_);
    if (done) done(std::move(res));
  }

  core& c_;
  std::uint64_t id_;
  std::string resource_, key_, fence_key_;
  acquire_options o_;
  std::function<void(acquire_result)> done_;
  clock_tp call_start_;
  int attempt_ = 0;
  bool cancelled_ = false;
  bool done_called_ = false;
  std::uint64_t retry_timer_ = 0;
  std::string token_;
  std::shared_ptr<attempt_state> current_;
  std::optional<std::uint64_t> fence_;
  report last_;
  std::vector<std::string> set_, keys_;  // a set's resources and keys; empty for one
};

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
