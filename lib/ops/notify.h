// Waiting without polling: the release notifications (docs/coordination.md,
// "Waiting without polling").
//
// The release script publishes the released token on `<key>:released` on every
// node where it deletes the key. A waiting acquire registers here; the notifier
// keeps one subscriber connection per node (a second `connection` in subscriber
// mode: the same handshake, TLS, credentials, deadlines and reconnect backoff),
// made on first need and closed after notify_idle_close without waiters, and
// subscribes the key's channel on every node. A notification wakes ONE waiter of
// the key in this client (the earliest registered one waiting), and none while a
// woken waiter's attempt is in flight: W waiters cost
// one attempt per release, not W. What anyone allowed to PUBLISH can send is
// bounded: a payload that is not a token is dropped unkept, a channel keeps the
// last kRecent released tokens and only a count of those held back during a woken
// attempt, and each waiter's wake-ups are rate-limited (waiter::wake_allowed_at).
// A woken attempt may reach a node before the release's delete does (the first
// message comes from the first node to delete): then it fails against the very
// holder that released, and the release's message from another node wakes one
// waiter again (channel::lost_for), as does missed_release for an attempt that
// saw the release meanwhile. Expiry publishes nothing:
// every waiter keeps its fallback timer (the retry schedule), so a lost message, a node that refuses
// SUBSCRIBE, or a holder that publishes nothing (another library) costs latency,
// never correctness. Safety is untouched: a wake-up only moves an attempt earlier.
//
// Loop thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/service.h"
#include "node/connection.h"

namespace redlock::detail {

class core;

// A waiting acquire, as the notifier sees it.
class waiter {
 public:
  // Waiting for its next attempt (its fallback timer armed), not in one.
  virtual bool idle_waiting() const = 0;
  // `token` held the key on a node in its last failed attempt (true when the
  // holders are unknown: the fenced script does not name them).
  virtual bool blocked_by(const std::string& token) const = 0;
  virtual bool knows_blockers() const = 0;
  // The earliest time a wake-up may start its next attempt or peek: its wake-up
  // budget (acquire_op: at most 4 at once, then one per interval). The notifier
  // wakes another waiter meanwhile, or this one when the budget allows.
  virtual std::chrono::steady_clock::time_point wake_allowed_at() const = 0;
  // Starts the next attempt after `stagger` (the notifier marked it woken; it
  // spends one wake-up of its budget). With
  // `peek`: first reads the key on every node (one GET each), and goes back to
  // waiting without an attempt when another holder than `released` has a quorum —
  // the release was taken by another client meanwhile (notifier::wake_one).
  struct peek_at {
    std::string released;
  };
  virtual void wake(std::chrono::milliseconds stagger, std::optional<peek_at> peek) = 0;

 protected:
  ~waiter() = default;
};

// A service of the core (engine/service.h): its connections close at the end of the stop.
class notifier final : public service, private push_listener {
 public:
  using clock_tp = std::chrono::steady_clock::time_point;
  explicit notifier(core& c);
  ~notifier() override;
  notifier(const notifier&) = delete;
  notifier& operator=(const notifier&) = delete;

  // Registers `w` as a waiter of `key` (in registration order) and subscribes the
  // key's channel on every node that is not yet subscribed. `settled(fresh)` runs
  // once every node confirmed the subscription or is known not to notify (refused,
  // down, timed out) — maybe at once. fresh: a node's subscription was confirmed
  // after `attempt_started`, so a release between that attempt and the
  // subscription may have been missed: the caller should try again at once.
  void join(const std::string& key, waiter& w, clock_tp attempt_started, std::function<void(bool fresh)> settled);
  // Unregisters `w` (finished: success, failure, cancel). Idempotent.
  void leave(const std::string& key, waiter& w);
  // A waiter woken by a release of `key` left it without taking it (a set blocked
  // by another of its keys): the next waiter of `key` that is waiting tries, when
  // no other is woken.
  void wake_next(const std::string& key);
  // After a failed attempt of `w` (started at `attempt_started`): a token seen
  // released that blocked it — the release raced the attempt — when no other waiter
  // of this key is woken; then `w` is marked woken and should try again at once.
  // `woken`: the attempt was a wake-up of this key; when the holders are unknown
  // (a set, fenced), the release that woke it counts too, although its first
  // message came before the attempt started: the other nodes may not have deleted
  // the key yet when the attempt reached them (the attempt lost the race with the
  // release it was woken for, and nothing else would wake anyone).
  // The released token, and when its latest node's message (not heard before) came.
  struct missed {
    std::string token;
    clock_tp last_at;
  };
  std::optional<missed> missed_release(const std::string& key, waiter& w, clock_tp attempt_started, bool woken);
  // The attempt of a woken waiter ended (it may have been marked woken again by
  // missed_release); releases seen meanwhile wake the next waiter. `attempted`
  // false: the wake-up made no attempt (its peek saw another holder on a quorum),
  // so it lost no race, and the same release heard from another node later does
  // not wake anyone again (channel::lost_for is left as it was).
  void attempt_done(const std::string& key, waiter& w, bool attempted = true);
  // How many waiters of `key` registered before `w` in this client, when the key's
  // channel is subscribed (or being subscribed) on at least one node: notifications
  // can arrive; nullopt when nothing notifies (then every waiter polls at its own
  // schedule).
  std::optional<std::size_t> queue_position(const std::string& key, const waiter& w) const;

  void shutdown();
  void finish_stop() override { shutdown(); }
  // Counters for tests and the benchmark.
  std::uint64_t messages() const noexcept { return messages_; }
  std::uint64_t wakes() const noexcept { return wakes_; }
  std::size_t open_subscribers() const noexcept;

 private:
  enum class sub { none, pending, on, off };
  struct channel {
    std::vector<waiter*> waiters;  // registration order
    std::vector<sub> nodes;
    std::vector<std::function<void(bool)>> on_settled;
    std::vector<clock_tp> settled_for;  // per on_settled: its attempt's start
    clock_tp confirmed_at{};            // the last node subscription confirmed
    struct released {
      std::string token;
      clock_tp at;              // its first message
      std::vector<bool> nodes;  // the nodes whose message arrived
      // Its latest message from a node not heard before: a retry that lost the race
      // with the release (it reached a node before the delete) may try again once
      // per node heard after it started (missed_release).
      clock_tp last_at;
    };
    std::string key;
    std::deque<released> recent;  // released tokens seen, newest last (at most kRecent)
    // Releases seen while a woken attempt was in flight (at most kHeldBack: only
    // whether there were any matters when it ends).
    std::size_t absorbed = 0;
    waiter* woken = nullptr;
    waiter* last_woken = nullptr;  // the waiter wake_one woke last, and
    clock_tp woken_for{};          // the first message of the release it was woken for
    std::string woken_token;       // the release the woken attempt is for
    // A woken attempt failed against this release: it raced the release's deletes
    // on the other nodes. The release's message from another node (the key is free
    // there now) wakes one waiter again, when none is woken.
    std::string lost_for;
    std::uint64_t defer_timer = 0;  // a wake-up held back by the waiters' budgets
    clock_tp lost_at{};  // a woken attempt last failed (another client won the race)
    clock_tp idle_since{};
  };
  class reply_sink;

  void on_push(std::size_t node, const redisReply& message) override;
  void on_sub_ready(std::size_t node) override;
  void on_sub_down(std::size_t node) override;

  connection& sub_conn(std::size_t node);
  // Makes node's subscriber connection to `a` (and starts it).
  void open_sub(std::size_t node, const node_address& a);
  void subscribe(const std::string& key, channel& ch, std::size_t node, bool after_reconnect = false);
  void on_subscribe_reply(const std::string& key, std::size_t node, bool ok, bool refused);
  void check_settled(channel& ch);
  void wake_one(channel& ch);
  void defer_wake(channel& ch, clock_tp at);
  void after_woken(channel& ch);
  void arm_sweep();
  void sweep();

  core& c_;
  std::vector<std::unique_ptr<connection>> subs_;
  std::vector<node_address> sub_addr_;  // where each subscriber connection was made to
  std::vector<bool> refused_;   // the node refused SUBSCRIBE on this connection
  std::unordered_map<std::string, channel> channels_;
  std::uint64_t sweep_timer_ = 0;
  bool closed_ = false;
  std::shared_ptr<const wire> ping_wire_;  // the sweep's liveness check of a subscriber
  bool joining_ = false;
  std::uint64_t messages_ = 0, wakes_ = 0;
};

}  // namespace redlock::detail
