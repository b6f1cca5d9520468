// The notifier's waiters (notify.h): joining a key's channel and the settling of
// its subscriptions, leaving, the one waiter a release wakes (wake-up budgets, the
// stagger after a lost race, a deferred wake-up), a release an attempt missed, and
// the queue positions. The subscriptions and the messages are
// notify_subscriptions.cc's.
// A waiter: join -> settled (subscribed or not) -> woken by a release (wake_one) ->
// attempt_done or missed_release -> ... -> leave.
#include "ops/notify.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "engine/core.h"

namespace redlock::detail {

void notifier::check_settled(channel& ch) {
  if (joining_) return;  // join() checks once every node was asked
  if (std::any_of(ch.nodes.begin(), ch.nodes.end(), [](sub s) { return s == sub::pending; })) return;
  const bool any_on = std::any_of(ch.nodes.begin(), ch.nodes.end(), [](sub s) { return s == sub::on; });
  auto fns = std::move(ch.on_settled);
  auto since = std::move(ch.settled_for);
  ch.on_settled.clear();
  ch.settled_for.clear();
  // Each callback may start an attempt (or finish its op); `ch` may not be touched
  // after the first call, only the saved values.
  const clock_tp confirmed = ch.confirmed_at;
  for (std::size_t i = 0; i < fns.size(); ++i) fns[i](any_on && confirmed >= since[i]);
}

void notifier::join(const std::string& key, waiter& w, clock_tp attempt_started,
                    std::function<void(bool fresh)> settled) {
  auto [it, inserted] = channels_.try_emplace(key);
  channel& ch = it->second;
  if (inserted) {
    ch.key = key;
    ch.nodes.assign(c_.size(), sub::none);
  }
  if (std::find(ch.waiters.begin(), ch.waiters.end(), &w) == ch.waiters.end()) ch.waiters.push_back(&w);
  ch.on_settled.push_back(std::move(settled));
  ch.settled_for.push_back(attempt_started);
  // A node may answer at once (down: refused synchronously): settle only after all.
  joining_ = true;
  for (std::size_t i = 0; i < ch.nodes.size(); ++i) {
    if (ch.nodes[i] == sub::none || (ch.nodes[i] == sub::off && subs_[i] && subs_[i]->ready() && !refused_[i])) {
      subscribe(key, ch, i);
    }
  }
  joining_ = false;
  check_settled(ch);
}

void notifier::leave(const std::string& key, waiter& w) {
  auto it = channels_.find(key);
  if (it == channels_.end()) return;
  channel& ch = it->second;
  auto pos = std::find(ch.waiters.begin(), ch.waiters.end(), &w);
  if (pos == ch.waiters.end()) return;
  ch.waiters.erase(pos);
  if (ch.last_woken == &w) ch.last_woken = nullptr;
  if (ch.waiters.empty()) ch.idle_since = c_.now();
  if (ch.woken == &w) {
    ch.woken = nullptr;
    ch.woken_token.clear();
    ch.lost_for.clear();  // taken (or given up): no attempt lost against it
    after_woken(ch);
  }
}

void notifier::wake_next(const std::string& key) {
  auto it = channels_.find(key);
  if (it == channels_.end() || it->second.woken != nullptr) return;
  wake_one(it->second);
}

std::optional<notifier::missed> notifier::missed_release(const std::string& key, waiter& w,
                                                         clock_tp attempt_started, bool woken) {
  auto it = channels_.find(key);
  if (it == channels_.end()) return std::nullopt;
  channel& ch = it->second;
  if (ch.woken != nullptr && ch.woken != &w) return std::nullopt;
  // Holders unknown (a set, fenced): only a release seen since the attempt started,
  // or, for a woken attempt, since the release that woke it (its first message
  // comes from the first node to delete; the attempt may reach the others before
  // they do, and then fails against the very holder that released). A release
  // counts from its latest node's message: a retry that again reached some nodes
  // before their deletes hears those nodes' messages during it (review 34: a set
  // waiter slept to its fallback after two lost races with one release).
  clock_tp since = attempt_started;
  if (woken && ch.last_woken == &w) since = std::min(since, ch.woken_for);
  for (auto r = ch.recent.rbegin(); r != ch.recent.rend(); ++r) {
    if (!w.blocked_by(r->token) || (!w.knows_blockers() && r->last_at < since)) continue;
    ch.woken = &w;
    ch.woken_token = r->token;
    return missed{r->token, r->last_at};
  }
  return std::nullopt;
}

std::optional<std::size_t> notifier::queue_position(const std::string& key, const waiter& w) const {
  auto it = channels_.find(key);
  if (it == channels_.end()) return std::nullopt;
  const channel& ch = it->second;
  // Subscribed, or asked to be, on some node: a waiter arms its fallback timer as
  // soon as it joins (before the confirmations), and the ones behind the earliest
  // stretch theirs from the start. Should every node refuse, the stretch costs one
  // longer wait (latency), and later waits poll at their own schedule.
  if (std::none_of(ch.nodes.begin(), ch.nodes.end(), [](sub s) { return s == sub::on || s == sub::pending; })) {
    return std::nullopt;
  }
  auto pos = std::find(ch.waiters.begin(), ch.waiters.end(), &w);
  if (pos == ch.waiters.end()) return std::nullopt;
  return static_cast<std::size_t>(pos - ch.waiters.begin());
}

void notifier::attempt_done(const std::string& key, waiter& w, bool attempted) {
  auto it = channels_.find(key);
  if (it == channels_.end() || it->second.woken != &w) return;
  it->second.woken = nullptr;
  it->second.lost_at = c_.now();
  if (attempted && w.blocked_by(it->second.woken_token)) {
    // The attempt still met the released token: the release was not done on every
    // node, or was forged (anyone may PUBLISH the holder's token). Each node's
    // message for it may wake again, also one heard before: a forged message must
    // not make the genuine release's messages pass for duplicates.
    for (channel::released& r : it->second.recent) {
      if (r.token == it->second.woken_token) r.nodes.assign(r.nodes.size(), false);
    }
  }
  if (attempted) it->second.lost_for = std::move(it->second.woken_token);
  it->second.woken_token.clear();
  after_woken(it->second);
}

void notifier::after_woken(channel& ch) {
  // Releases absorbed while the woken attempt was in flight: the next waiter they
  // blocked tries now.
  const bool any = ch.absorbed > 0;
  ch.absorbed = 0;
  if (any && ch.woken == nullptr) wake_one(ch);
}

void notifier::wake_one(channel& ch) {
  // Any new release of the key: the holders a waiter saw may be stale (the lock
  // changed hands since its last attempt); duplicates were dropped already.
  // A waiter whose wake-up budget is spent (a flood of forged messages, or many
  // lost races in a row) is passed over; if every waiting one is, the wake-up is
  // made when the first budget allows (one timer per channel).
  const clock_tp now = c_.now();
  std::optional<clock_tp> later;
  for (waiter* w : ch.waiters) {
    if (!w->idle_waiting()) continue;
    if (const clock_tp at = w->wake_allowed_at(); at > now) {
      if (!later || at < *later) later = at;
      continue;
    }
    ch.woken = w;
    ch.last_woken = w;
    ch.woken_for = ch.recent.empty() ? now : ch.recent.back().at;
    ch.woken_token = ch.recent.empty() ? std::string() : ch.recent.back().token;
    ++wakes_;
    // Across clients: each wakes its own earliest waiter, so C clients race C
    // attempts into split votes, and C - 1 of them lose a full round on every
    // node (or all C, each short of a quorum: acquire_op retries such a split
    // soon, by a tie-break on the tokens seen). While this client has lost such a race within the last
    // second, its wake-ups come after a random 0-3 ms, so that the first attempt usually lands alone, and
    // look first (one GET per node): another holder on a quorum means another client won, and this one waits
    // on without an attempt. A single waiter is never delayed.
    std::chrono::milliseconds stagger(0);
    std::optional<waiter::peek_at> peek;
    if (ch.lost_at != clock_tp{} && c_.now() - ch.lost_at < std::chrono::seconds(1)) {
      stagger = std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(c_.jitter() % 4));
      if (!ch.recent.empty()) peek = waiter::peek_at{ch.recent.back().token};
    }
    w->wake(stagger, std::move(peek));
    return;
  }
  if (later) defer_wake(ch, *later);
}

void notifier::defer_wake(channel& ch, clock_tp at) {
  if (ch.defer_timer != 0 || closed_) return;
  c_.stats().wake_ups_deferred.fetch_add(1, std::memory_order_relaxed);
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(at - c_.now());
  ch.defer_timer = c_.schedule(std::max(std::chrono::milliseconds(1), wait), [this, key = ch.key] {
    auto it = channels_.find(key);
    if (it == channels_.end()) return;
    it->second.defer_timer = 0;
    if (it->second.woken == nullptr) wake_one(it->second);
  });
}

}  // namespace redlock::detail
