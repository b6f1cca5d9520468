// The notifier's subscriptions (notify.h): one subscriber connection per node,
// made on first need; SUBSCRIBE of a key's channel and its answer; the pushed
// messages (a payload that is not a token is dropped unread; a release is
// remembered and wakes a waiter); subscribing again after a reconnect; the sweep
// that unsubscribes idle channels and closes unused connections; shutdown. The
// waiters' side (who is woken, and when) is notify.cc.
// A channel on a node: subscribe -> on_subscribe_reply (on, or off) -> on_push per
// message -> on_sub_down -> on_sub_ready (subscribed again) -> swept when idle.
#include "ops/notify.h"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <utility>

#include "engine/core.h"
#include "protocol/resp.h"
#include "pure/keys.h"

namespace redlock::detail {
namespace {

constexpr std::size_t kRecent = 16;    // released tokens remembered per key
constexpr std::size_t kHeldBack = 16;  // releases counted during a woken attempt

// The release channel of `key` as node `a` names it: on a Redis Cluster node the
// release script publishes on "{L}:released" (its KEYS[1] is the tagged key).
std::string channel_of(const std::string& key, const node_address& a) {
  if (a.topology == node_address::deployment::cluster) return cluster_key(key, release_channel(key));
  return release_channel(key);
}

// The lock key a message's channel name (its suffix removed) is about, on node `a`.
std::string_view key_of(std::string_view name, const node_address& a) {
  if (a.topology == node_address::deployment::cluster && name.size() >= 2 && name.front() == '{' &&
      name.back() == '}') {
    return name.substr(1, name.size() - 2);
  }
  return name;
}

// What the release scripts publish: a token (token.h, reactor::token), 32
// lowercase hex characters. Anything else on the channel was not published by a
// release of this library (anyone allowed to PUBLISH can send it): it is dropped
// unread, so no payload of any size is kept.
bool is_token(std::string_view p) {
  if (p.size() != 32) return false;
  return std::all_of(p.begin(), p.end(),
                     [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); });
}

// Where a subscriber connection goes: "host:port", or a Unix socket's path.
std::string where(const node_address& a) {
  return a.type == node_address::kind::unix_socket ? a.path : host_port_text(a.host, a.port);
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

notifier::notifier(core& c)
    : c_(c),
      subs_(c.size()),
      sub_addr_(c.size()),
      refused_(c.size(), false),
      ping_wire_(plain_wire({"PING"})) {}

notifier::~notifier() = default;

std::size_t notifier::open_subscribers() const noexcept {
  std::size_t n = 0;
  for (const auto& s : subs_) n += s ? 1 : 0;
  return n;
}

connection& notifier::sub_conn(std::size_t node) {
  if (!subs_[node]) {
    // Where the node's releases can be heard (endpoint::subscriber_address): the
    // node itself, a cluster's first seed (classic pub/sub reaches every node of a
    // cluster), a Sentinel group's current master.
    // subscribe() made sure there is one.
    const std::optional<node_address> at = c_.node(node).subscriber_address(c_.nodes()[node]);
    open_sub(node, at ? *at : c_.nodes()[node]);
  }
  return *subs_[node];
}

void notifier::open_sub(std::size_t node, const node_address& a) {
  sub_addr_[node] = a;
  subs_[node] = std::make_unique<connection>(c_, node, a);
  subs_[node]->set_push_listener(this);
  refused_[node] = false;
  subs_[node]->start();
  arm_sweep();
}

void notifier::subscribe(const std::string& key, channel& ch, std::size_t node, bool after_reconnect) {
  // Nowhere to listen yet (a Sentinel group whose master is not known): the channel
  // is off there, and waiters fall back to their timers for that node.
  if (refused_[node] || closed_ || (!subs_[node] && !c_.node(node).subscriber_address(c_.nodes()[node]))) {
    ch.nodes[node] = sub::off;
    return;
  }
  ch.nodes[node] = sub::pending;
  std::string enc;
  append_resp(enc, {"SUBSCRIBE", channel_of(key, c_.nodes()[node])});
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

void notifier::on_push(std::size_t node, const redisReply& m) {
  const redisReply* ch_name = m.element[1];
  const redisReply* payload = m.element[2];
  if (ch_name->type != REDIS_REPLY_STRING || payload->type != REDIS_REPLY_STRING) return;
  std::string_view name(ch_name->str, ch_name->len);
  if (name.size() <= kReleasedSuffix.size() || name.substr(name.size() - kReleasedSuffix.size()) != kReleasedSuffix) return;
  ++messages_;
  std::string_view token(payload->str, payload->len);
  if (!is_token(token)) {
    c_.stats().notifications_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto it = channels_.find(std::string(key_of(name.substr(0, name.size() - kReleasedSuffix.size()), c_.nodes()[node])));
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
      seen.last_at = c_.now();
      if (ch.woken == nullptr && seen.token == ch.lost_for) wake_one(ch);
    }
    return;
  }
  ch.recent.push_back(
      channel::released{std::string(token), c_.now(), std::vector<bool>(c_.size(), false), c_.now()});
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
      append_resp(enc, {"UNSUBSCRIBE", channel_of(k, c_.nodes()[i])});
      subs_[i]->submit(std::make_shared<const wire>(wire::plain_tag{}, std::move(enc)), false,
                       std::make_shared<reply_sink>(*this, k, false, false), 0);
    }
    channels_.erase(k);
  }
  // A subscriber that is down, or at a server that no longer hears its node's
  // releases (a Sentinel group's old master, paused or cut off; a cluster seed that
  // left the cluster), while its node is heard elsewhere now, moves there: a new
  // connection, its channels with waiters subscribed again (their confirmations
  // wake the waiters, as after a reconnect). A subscriber that is up gets a PING:
  // a paused or black-holed server never closes its connection, and a PING
  // unanswered trips the connection's stall detector (max(4 x command_timeout, 1 s)),
  // so the next sweep finds it down.
  for (std::size_t i = 0; i < subs_.size(); ++i) {
    if (!subs_[i]) continue;
    endpoint& ep = c_.node(i);
    ep.refresh_for_subscribers();
    const node_address& was = sub_addr_[i];
    const bool deaf = was.type != node_address::kind::unix_socket && !ep.hears_releases_at(was.host, was.port);
    if (subs_[i]->ready() && !deaf) {
      subs_[i]->submit(ping_wire_, false, std::make_shared<discard_sink>(), 0);
      subs_[i]->flush();
      continue;
    }
    const std::string was_at = where(was);
    const std::optional<node_address> at = ep.subscriber_address(c_.nodes()[i], was_at);
    if (!at || at->type == node_address::kind::unix_socket || where(*at) == was_at) continue;
    subs_[i]->shutdown();
    c_.forget_conn(subs_[i].get());
    subs_[i].reset();
    refused_[i] = false;
    std::vector<std::string> keys;
    for (auto& [key, ch] : channels_) {
      ch.nodes[i] = sub::off;
      if (!ch.waiters.empty()) keys.push_back(key);
    }
    std::sort(keys.begin(), keys.end());
    // There, not where subscriber_address() without `avoid` may point.
    if (!keys.empty()) open_sub(i, *at);
    for (const std::string& k : keys) subscribe(k, channels_[k], i, /*after_reconnect=*/true);
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
