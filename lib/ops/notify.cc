#include "ops/notify.h"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <utility>

#include "engine/core.h"

namespace redlock::detail {
namespace {

constexpr std::string_view kSuffix = ":released";
constexpr std::size_t kRecent = 16;    // released tokens remembered per key
constexpr std::size_t kHeldBack = 16;  // releases counted during a woken attempt

std::string channel_of(const std::string& key) { return key + std::string(kSuffix); }

// What the release scripts publish: a token (token.h, reactor::token), 32
// lowercase hex characters. Anything else on the channel was not published by a
// release of this library (anyone allowed to PUBLISH can send it): it is dropped
// unread, so no payload of any size is kept.
bool is_token(std::string_view p) {
  if (p.size() != 32) return false;
  return std::all_of(p.begin(), p.end(),
                     [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); });
}

}  // namespace

// The answer to one SUBSCRIBE or UNSUBSCRIBE.
class notifier::reply_sink final : public sink {
 public:
  reply_sink(notifier& n, std::string key, bool subscribe, bool after_reconnect)
      : n_(n), key_(std::move(key)), subscribe_(subscribe), after_reconnect_(after_reconnect) {}
  void on_reply(std::size_t node, std::uint32_t, const reply_event& ev) override {
    if (!subscribe_) return;
    bool ok = false;
    bool refused = false;
    if (ev.status == node_status::pending && ev.reply != nullptr) {
      const redisReply* r = ev.reply;
      ok = r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[0]->type == REDIS_REPLY_STRING &&
           std::string_view(r->element[0]->str, r->element[0]->len) == "subscribe";
      // An error reply: unknown command (a proxy, the simulator), NOPERM for the channel.
      refused = !ok;
    }
    n_.on_subscribe_reply(key_, node, ok, refused);
    if (ok && after_reconnect_) {
      // Releases published while the subscription was down were lost: one waiter
      // tries now.
      auto it = n_.channels_.find(key_);
      if (it != n_.channels_.end() && it->second.woken == nullptr) n_.wake_one(it->second);
    }
  }

 private:
  notifier& n_;
  std::string key_;
  bool subscribe_;
  bool after_reconnect_;
};

notifier::notifier(core& c) : c_(c), subs_(c.size()), refused_(c.size(), false) {}

notifier::~notifier() = default;

std::size_t notifier::open_subscribers() const noexcept {
  std::size_t n = 0;
  for (const auto& s : subs_) n += s ? 1 : 0;
  return n;
}

connection& notifier::sub_conn(std::size_t node) {
  if (!subs_[node]) {
    subs_[node] = std::make_unique<connection>(c_, node, c_.nodes()[node]);
    subs_[node]->set_push_listener(this);
    refused_[node] = false;
    subs_[node]->start();
    arm_sweep();
  }
  return *subs_[node];
}

void notifier::subscribe(const std::string& key, channel& ch, std::size_t node, bool after_reconnect) {
  if (refused_[node] || closed_) {
    ch.nodes[node] = sub::off;
    return;
  }
  ch.nodes[node] = sub::pending;
  std::string enc;
  append_resp(enc, {"SUBSCRIBE", channel_of(key)});
  auto w = std::make_shared<const wire>(wire::plain_tag{}, std::move(enc));
  sub_conn(node).submit(w, false, std::make_shared<reply_sink>(*this, key, true, after_reconnect), 0);
}

void notifier::on_subscribe_reply(const std::string& key, std::size_t node, bool ok, bool refused) {
  if (refused) refused_[node] = true;
  auto it = channels_.find(key);
  if (it == channels_.end()) return;
  channel& ch = it->second;
  if (ch.nodes[node] != sub::pending) return;
  ch.nodes[node] = ok ? sub::on : sub::off;
  if (ok) ch.confirmed_at = c_.now();
  check_settled(ch);
}

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

std::optional<std::string> notifier::missed_release(const std::string& key, waiter& w, clock_tp attempt_started,
                                                    bool woken) {
  auto it = channels_.find(key);
  if (it == channels_.end()) return std::nullopt;
  channel& ch = it->second;
  if (ch.woken != nullptr && ch.woken != &w) return std::nullopt;
  // Holders unknown (a set, fenced): only a release seen since the attempt started,
  // or, for a woken attempt, since the release that woke it (its first message
  // comes from the first node to delete; the attempt may reach the others before
  // they do, and then fails against the very holder that released).
  clock_tp since = attempt_started;
  if (woken && ch.last_woken == &w) since = std::min(since, ch.woken_for);
  for (auto r = ch.recent.rbegin(); r != ch.recent.rend(); ++r) {
    if (!w.blocked_by(r->token) || (!w.knows_blockers() && r->at < since)) continue;
    ch.woken = &w;
    ch.woken_token = r->token;
    return r->token;
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

void notifier::on_push(std::size_t node, const redisReply& m) {
  const redisReply* ch_name = m.element[1];
  const redisReply* payload = m.element[2];
  if (ch_name->type != REDIS_REPLY_STRING || payload->type != REDIS_REPLY_STRING) return;
  std::string_view name(ch_name->str, ch_name->len);
  if (name.size() <= kSuffix.size() || name.substr(name.size() - kSuffix.size()) != kSuffix) return;
  ++messages_;
  std::string_view token(payload->str, payload->len);
  if (!is_token(token)) {
    c_.stats().notifications_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto it = channels_.find(std::string(name.substr(0, name.size() - kSuffix.size())));
  if (it == channels_.end()) return;
  channel& ch = it->second;
  // Every node publishes the same release: the first message wakes a waiter, the
  // others are dropped (but for a woken attempt that lost the race, below).
  // (Waiting for a quorum of them was tried: it let a thread of
  // the same client that had just released and acquired again win far more often —
  // 48 waiters in one client, Jain's index 0.999 -> 0.68 — and was no faster.)
  for (auto& seen : ch.recent) {
    if (seen.token != token) continue;
    // A woken attempt that lost the race with this release (it reached this node
    // before the delete did) is woken again by this node's message: the key is
    // free here now. One wake-up per node's message, and only after a lost attempt.
    if (node < seen.nodes.size() && !seen.nodes[node]) {
      seen.nodes[node] = true;
      if (ch.woken == nullptr && seen.token == ch.lost_for) wake_one(ch);
    }
    return;
  }
  ch.recent.push_back(channel::released{std::string(token), c_.now(), std::vector<bool>(c_.size(), false)});
  if (node < ch.recent.back().nodes.size()) ch.recent.back().nodes[node] = true;
  if (ch.recent.size() > kRecent) ch.recent.pop_front();
  if (ch.woken != nullptr) {
    ch.absorbed = std::min(ch.absorbed + 1, kHeldBack);
    return;
  }
  wake_one(ch);
}


void notifier::on_sub_ready(std::size_t node) {
  // A reconnect lost every subscription on this node: subscribe again the channels
  // that have waiters (a first connect finds them pending already). Only these
  // re-subscriptions wake a waiter when confirmed (a release may have been published
  // while they were down); a channel subscribed for the first time on a connection
  // that came up earlier does not: its waiter is idle then, and a wake-up would be
  // an attempt for nothing that also counted as a lost race (a 0-3 ms stagger on the
  // next real release: hand-over 0.6 -> 1.7 ms, caught by bench_e2e handover).
  if (closed_) return;
  std::vector<std::string> keys;
  for (auto& [key, ch] : channels_) {
    if (!ch.waiters.empty() && ch.nodes[node] == sub::off) keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end());  // a replayable order (the simulator)
  for (const std::string& k : keys) subscribe(k, channels_[k], node, /*after_reconnect=*/true);
}

void notifier::on_sub_down(std::size_t node) {
  // Requests still pending were failed just before (their sinks marked them off).
  for (auto& [key, ch] : channels_) {
    if (ch.nodes[node] != sub::none) ch.nodes[node] = sub::off;
  }
  refused_[node] = false;
}

void notifier::arm_sweep() {
  if (sweep_timer_ != 0 || closed_) return;
  sweep_timer_ = c_.schedule(std::max(std::chrono::milliseconds(1), c_.options().notify_idle_close / 2), [this] {
    sweep_timer_ = 0;
    sweep();
  });
}

void notifier::sweep() {
  if (closed_) return;
  const clock_tp now = c_.now();
  const auto idle = c_.options().notify_idle_close;
  std::vector<std::string> drop;
  for (auto& [key, ch] : channels_) {
    if (ch.waiters.empty() && ch.on_settled.empty() && now - ch.idle_since >= idle) drop.push_back(key);
  }
  std::sort(drop.begin(), drop.end());
  for (const std::string& k : drop) {
    channel& ch = channels_[k];
    if (ch.defer_timer != 0) c_.cancel_timer(ch.defer_timer);
    for (std::size_t i = 0; i < ch.nodes.size(); ++i) {
      if (ch.nodes[i] != sub::on || !subs_[i]) continue;
      std::string enc;
      append_resp(enc, {"UNSUBSCRIBE", channel_of(k)});
      subs_[i]->submit(std::make_shared<const wire>(wire::plain_tag{}, std::move(enc)), false,
                       std::make_shared<reply_sink>(*this, k, false, false), 0);
    }
    channels_.erase(k);
  }
  // A node with no channel left: its subscriber connection closes.
  for (std::size_t i = 0; i < subs_.size(); ++i) {
    if (!subs_[i]) continue;
    const bool used = std::any_of(channels_.begin(), channels_.end(), [i](const auto& kv) {
      return !kv.second.waiters.empty() || kv.second.nodes[i] == sub::on || kv.second.nodes[i] == sub::pending;
    });
    if (used) continue;
    subs_[i]->flush();
    subs_[i]->shutdown();
    c_.forget_conn(subs_[i].get());
    subs_[i].reset();
    refused_[i] = false;
    for (auto& [key, ch] : channels_) ch.nodes[i] = sub::none;
  }
  if (open_subscribers() > 0) arm_sweep();
}

void notifier::shutdown() {
  if (closed_) return;
  closed_ = true;
  if (sweep_timer_ != 0) c_.cancel_timer(sweep_timer_);
  sweep_timer_ = 0;
  for (auto& [key, ch] : channels_) {
    if (ch.defer_timer != 0) c_.cancel_timer(ch.defer_timer);
    ch.defer_timer = 0;
  }
  for (auto& s : subs_) {
    if (s) s->shutdown();
  }
}

}  // namespace redlock::detail
