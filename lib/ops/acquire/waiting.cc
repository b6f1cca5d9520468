// release_wait: the pause between an acquire's attempts, waiting without polling
// for the lock's release (waiting.h; the notifier: ops/notify.h).
//
// Lifecycle: attempt_failed -> wait_for_release (join the channel) -> wake | missed
// release | fallback timer -> [peek_then_attempt -> after_peek] -> attempt_now.
#include "ops/acquire/waiting.h"

#include <algorithm>
#include <utility>

#include "engine/core.h"
#include "ops/held.h"
#include "ops/notify.h"
#include "ops/round.h"
#include "protocol/reply.h"
#include "pure/retry.h"

namespace redlock::detail {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

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

}  // namespace

release_wait::release_wait(core& c, owner& o, const retry_policy& retry, const clock_tp& call_start,
                           const std::vector<std::string>& keys)
    : c_(c), owner_(o), retry_(retry), call_start_(call_start), keys_(keys) {}

release_wait::~release_wait() {
  if (joined_) c_.notify().leave(key_, *this);
}

void release_wait::attempt_starting() {
  timer_ = 0;
  idle_wait_ = false;
  attempt_woken_ = woken_;
  woken_ = false;
  attempt_started_ = c_.now();
}

void release_wait::attempt_failed(clock_tp round_started) {
  last_rtt_ = std::chrono::ceil<microseconds>(c_.now() - round_started);
  // A woken attempt ended: releases seen meanwhile may wake another waiter.
  if (joined_) c_.notify().attempt_done(key_, *this);
}

void release_wait::attempt_in(milliseconds delay) {
  auto keep = owner_.keep_alive();
  timer_ = c_.schedule(delay, [keep, this] { owner_.attempt_now(); });
}

bool release_wait::cancel_pending() {
  if (timer_ == 0) return false;
  c_.cancel_timer(timer_);
  timer_ = 0;
  return true;
}

void release_wait::leave() {
  if (joined_) {
    joined_ = false;
    c_.notify().leave(key_, *this);
  }
}

// ---- the wake-up budget

// Capped at 1 s: an attempt that timed out must not hold a genuine release back
// for long after a flood.
milliseconds release_wait::wake_interval() const {
  return std::clamp(duration_cast<milliseconds>(4 * last_rtt_), kWakeFloor, milliseconds(1000));
}
release_wait::clock_tp release_wait::wake_allowed_at() const {
  return wake_tat_ == clock_tp{} ? clock_tp{} : wake_tat_ - (kWakeBurst - 1) * wake_interval();
}
void release_wait::spend_wake() { wake_tat_ = std::max(wake_tat_, c_.now()) + wake_interval(); }

bool release_wait::blocked_by(const std::string& token) const {
  return blockers_.empty() || std::find(blockers_.begin(), blockers_.end(), token) != blockers_.end();
}

// ---- woken: the next attempt, maybe after a peek

void release_wait::wake(milliseconds stagger, std::optional<peek_at> peek) {
  woken_ = true;  // by a release of key_ (the notifier)
  spend_wake();
  start_in(stagger, std::move(peek));
}

void release_wait::start_in(milliseconds stagger, std::optional<peek_at> peek) {
  auto keep = owner_.keep_alive();  // the cancelled timer held the last reference
  c_.cancel_timer(timer_);
  idle_wait_ = false;
  if (!peek) {
    timer_ = c_.schedule(stagger, [keep, this] { owner_.attempt_now(); });
    return;
  }
  timer_ = c_.schedule(stagger, [keep, this, p = std::move(*peek)] { peek_then_attempt(p); });
}

// A GET of the key on every node (one command per node, against two for an
// attempt: SET and TIME): the same holder, other than the released one, on a
// quorum of nodes means another client's woken attempt won the release; this
// waiter then waits on (for that holder's release) without an attempt. A holder
// on fewer nodes may be a losing attempt about to roll back quietly, which would
// leave every waiter to its fallback timer: then, and on any other answer (free,
// the released token, errors, no answers), the attempt is made. A peek only
// ever skips an attempt: a wrong skip costs latency, never safety.
void release_wait::peek_then_attempt(const peek_at& p) {
  timer_ = 0;
  if (owner_.cancelled() || c_.closing()) return owner_.give_up(make_error_code(errc::cancelled));
  std::string enc;
  append_resp(enc, {"GET", key_});
  auto w = std::make_shared<const wire>(wire::plain_tag{}, std::move(enc));
  struct peek_tally {
    std::vector<std::string> values;  // other holders seen, one entry per node
    std::size_t answered = 0;
    bool decided = false;
  };
  auto t = std::make_shared<peek_tally>();
  auto keep = owner_.keep_alive();
  const std::size_t n = c_.size(), q = n / 2 + 1;
  for (std::size_t i = 0; i < n; ++i) {
    auto done = [keep, this, t, n, q, released = p.released](const std::optional<std::string>& value) {
      if (t->decided) return;
      ++t->answered;
      if (value && !value->empty() && *value != released) {
        t->values.push_back(*value);
        if (static_cast<std::size_t>(std::count(t->values.begin(), t->values.end(), *value)) >= q) {
          t->decided = true;
          return after_peek(true);
        }
      }
      // No holder can reach a quorum any more: attempt.
      std::size_t best = 0;
      for (const std::string& v : t->values) {
        best = std::max(best, static_cast<std::size_t>(std::count(t->values.begin(), t->values.end(), v)));
      }
      if (best + (n - t->answered) < q) {
        t->decided = true;
        after_peek(false);
      }
    };
    c_.node(i).submit(w, false, std::make_shared<peek_sink>(std::move(done)), 0);
  }
}

void release_wait::after_peek(bool another_holder) {
  if (owner_.finished()) return;
  if (owner_.cancelled() || c_.closing()) return owner_.give_up(make_error_code(errc::cancelled));
  if (!another_holder) return owner_.attempt_now();
  c_.stats().wake_ups_skipped.fetch_add(1, std::memory_order_relaxed);
  woken_ = false;  // no attempt of this wake-up: the next one is the timer's or a new wake-up's
  if (joined_) c_.notify().attempt_done(key_, *this, /*attempted=*/false);
  arm_wait(retry_delay(retry_, owner_.attempts() + 1, c_.jitter()));
}

// ---- after a failed attempt: join the channel, then wait

// The key's channel is subscribed on every node before the next attempt; a
// notification (or the fallback timer, `delay`) starts it.
bool release_wait::waits_for_release(std::error_code ec) const {
  return (ec == errc::contended || joined_) && retry_.deadline.count() > 0 && c_.options().wait_notifications;
}

// The key whose channel a set waits on: the one most nodes named as held
// ({0, i} of kAcquireMany); one resource: its key.
std::string release_wait::wait_key(const round& r) const {
  if (keys_.empty()) return key_;
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

void release_wait::wait_for_release(const round& r, milliseconds delay, const std::string& token) {
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
    auto keep = owner_.keep_alive();
    // The fallback timer runs from now, whatever the subscriptions do: a node
    // that takes connect_timeout (paused) or command_timeout to confirm never
    // holds the next attempt back beyond the schedule and the deadline (review
    // 13, W1). A subscription confirmed after the failed attempt started may
    // have missed a release in between: then the next attempt starts at once.
    in_join_ = true;
    fresh_at_join_ = false;
    c_.notify().join(key_, *this, attempt_started_, [keep, this, gen](bool fresh) {
      if (join_gen_ != gen || owner_.finished()) return;
      if (in_join_) {
        fresh_at_join_ = fresh;
      } else if (fresh && idle_waiting()) {
        try_now();
      }
    });
    in_join_ = false;
    if (fresh_at_join_) return arm_wait(milliseconds(0));
    // Not fresh: the channel was subscribed already (this op waited on it before
    // a switch, or another waiter of this client does), so its releases were
    // seen — also one during the attempt that brought this op here (review 13b).
  }
  // A release of a holder that blocked this attempt, seen during it: try again at
  // once — once per released token, and again for it only when a node not heard
  // before published it since the last such retry (that retry too reached some
  // node before its delete; at most one retry per node and token). Such a retry
  // spends a wake-up of the budget, as a wake-up does (distinct forged tokens must
  // not make it spin when the holders are unknown: fenced).
  if (auto t = c_.notify().missed_release(key_, *this, attempt_started_, attempt_woken_);
      t && (t->token != retried_for_ || t->last_at > retried_at_)) {
    retried_for_ = t->token;
    retried_at_ = t->last_at;
    const clock_tp at = wake_allowed_at(), now = c_.now();
    spend_wake();
    return arm_wait(at > now ? std::chrono::ceil<milliseconds>(at - now) : milliseconds(0), false);
  } else if (t) {
    c_.notify().attempt_done(key_, *this);
  }
  if (auto d = split_backoff(r, delay, token)) return arm_wait(*d, false);
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
std::optional<milliseconds> release_wait::split_backoff(const round& r, milliseconds fallback,
                                                        const std::string& token) {
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
      std::none_of(others.begin(), others.end(), [&](const std::string& v) { return v < token; });
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
void release_wait::arm_wait(milliseconds delay, bool queued) {
  const auto spent = duration_cast<milliseconds>(c_.now() - call_start_);
  if (spent >= retry_.deadline) return owner_.give_up({});
  // Notifications arrive: a release wakes the earliest waiter of this client, so
  // the ones behind it need their fallback only for lost messages and expiry —
  // stretched by their place in the queue (the earliest keeps the schedule and
  // catches a holder that publishes nothing).
  if (queued && delay.count() > 0) {
    if (auto pos = c_.notify().queue_position(key_, *this); pos && *pos > 0) {
      delay *= static_cast<milliseconds::rep>(std::min<std::size_t>(*pos + 1, 64));
    }
  }
  delay = std::min(delay, retry_.deadline - spent);
  idle_wait_ = delay.count() > 0;
  attempt_in(delay);
}

}  // namespace redlock::detail
