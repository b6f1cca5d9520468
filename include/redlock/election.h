// Leader election over the Redlock nodes: campaign for a named role, lead while
// the lock lasts, resign, and observe who leads from anywhere.
//
// A campaign is a waiting, fenced, auto-extended acquire of the resource
// "election:<role>" (election::resource_for): its fence is the term, strictly
// greater than the term of every earlier leader of the role whose election
// completed (docs/fencing.md). Once elected, the leader publishes its identity in
// one more round: the key "<key>:leader" on every node gets "<term> <sha1 of the
// lock token> <identity>", written only where the node still holds the leader's
// lock. observe() reads the lock key and that key on every node in one round and
// reports a leader only when a quorum of nodes holds the lock key with the very
// token the published record names: a record whose lock expired, was released or
// was taken by someone else never names a leader (docs/coordination.md, "Leader
// election").
//
// Observers and beliefs. A candidate stops believing it leads (or never starts)
// at resign(), at the leadership's destruction, at a demotion (on_demoted: the
// watchdog's loss or the client's shutdown), or when its campaign's publication
// falls short of a quorum. From then on its ownership-checked delete of the lock
// key goes to every node, and a node that does not confirm it (down, partitioned,
// a reply lost) gets it again at least every command_timeout (a retry while its
// connection backs off is refused at once, without a round trip), until it
// confirms or the lock's TTL (plus drift) has passed — the guarantee of an
// acquire's rollback, retried sooner. So observe() can go on naming a candidate that does not
// believe it leads only while a quorum still holds its key:
//   - every node reachable: for one command round (<= command_timeout);
//   - nodes unreachable from the candidate: until enough of them are reachable
//     again for the redelivery to land (<= reconnect_max_backoff + a reconnect +
//     2 x command_timeout after that) — an observer that reaches them meanwhile names
//     the candidate;
//   - never later than about ttl (plus drift) after the candidate stopped: its
//     keys expire;
//   - its client shut down: the deletes get the shutdown's drain bound (two
//     command timeouts); a node not reached by then keeps the key until its TTL.
// During a campaign's publication round (<= command_timeout) observers may name
// the candidate before it has heard that it was elected, or that it was not.
//
// Thread-safety: an election's member functions may be called from any thread at
// once. A leadership handle is like a lock handle: one thread at a time, except
// is_leader(), term(), identity(), remaining_validity() and loss_token, which any
// thread may read. The client must outlive its elections and their leaderships.
//
// Callbacks (campaign_async's done, campaign_options::on_demoted) follow the
// client's contract (redlock/client.h): exactly once, on the client's loop thread,
// never inside the call that started them; they must not block.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "redlock/client.h"

namespace redlock {

namespace detail {
struct campaigns;
struct leadership_access;
}  // namespace detail

struct campaign_options {
  // TTL of the leadership lock: a leader that stops (crash, pause) is replaced
  // within ttl plus one retry_delay. Bounds as acquire_options::ttl.
  std::chrono::milliseconds ttl{10000};
  // Watchdog interval; 0 = ttl / 3 (acquire_options::extend_interval).
  std::chrono::milliseconds extend_interval{0};
  // How long campaign() may wait to be elected; 0 = without bound (until elected,
  // cancelled, a permanent error, or the client shuts down).
  std::chrono::milliseconds deadline{0};
  // The wake-up bound while waiting: attempts are spaced by a random delay in
  // [retry_delay/2, retry_delay]. > 0.
  std::chrono::milliseconds retry_delay{200};
  // Called once, on the loop thread, when the leadership is lost: the watchdog
  // could not extend it in time, its keys were gone, or the client shut down
  // (the report says which; acquire_options::on_lost). Not called after resign().
  // Must not block. The lost leadership's keys are deleted on every node as
  // after a resign (see "Observers and beliefs" above), also when this is unset.
  std::function<void(const report&)> on_demoted;
};

// A won election. Move-only. Destruction resigns best-effort without blocking
// (like a lock handle's destructor), and a resign that falls short of a quorum
// is delivered again in the background like resign()'s.
class REDLOCK_EXPORT leadership {
 public:
  leadership() noexcept = default;
  leadership(leadership&&) noexcept = default;
  leadership& operator=(leadership&&) noexcept = default;

  // True while this candidate leads: not resigned or demoted, validity left on
  // the client's clock.
  bool is_leader() const noexcept { return lock_.owns_lock(); }
  explicit operator bool() const noexcept { return is_leader(); }
  // The term: the fence of the leadership lock, > 0 for a won election (0 for an
  // empty handle). Strictly greater than every earlier leader's term of the role.
  std::uint64_t term() const noexcept { return term_; }
  const std::string& role() const noexcept { return role_; }
  const std::string& identity() const noexcept { return identity_; }
  std::chrono::milliseconds remaining_validity() const noexcept { return lock_.remaining_validity(); }
  // Fires (stop_requested) once the leadership is lost, resigned or run out.
  redlock::loss_token loss_token() const { return lock_.token_for_work(); }
  // The leadership lock's lease (resource, token, validity, fence).
  lease info() const { return lock_.info(); }
  // Hands over at once: releases the lock on all nodes; waiting candidates take
  // it at their next attempt. After it is_leader() is false whatever the result.
  // Errors as lock::release. Unlike a plain lock's, a resign that falls short of a
  // quorum (unavailable) goes on in the background: each node that did not
  // confirm it gets the delete again until it does or the TTL has passed, so
  // observers stop naming this leader as soon as its nodes are reachable again
  // (see "Observers and beliefs" above); calling resign() again is still allowed.
  // Blocks; errc::would_deadlock on the loop thread.
  [[nodiscard]] report resign() { return lock_.release(); }
  void resign_async(std::function<void(report)> done) { lock_.release_async(std::move(done)); }

 private:
  friend struct detail::leadership_access;
  redlock::lock lock_;
  std::uint64_t term_ = 0;
  std::string role_;
  std::string identity_;
};

struct campaign_result {
  redlock::report report;  // error: cancelled, invalid_argument, contended / unavailable at the deadline, ...
  redlock::leadership leadership;  // leads on success
  explicit operator bool() const noexcept { return static_cast<bool>(report); }
};

// Who leads a role, as read by election::observe.
struct leader_info {
  // error: unavailable when fewer than a quorum of nodes answered; then the
  // fields below are empty. A role without a leader is a success with them empty.
  redlock::report report;
  std::optional<std::string> identity;  // the leader's identity, when one leads
  std::optional<std::uint64_t> term;    // its term
  // How long the leader's lock lasts without a further extension: the largest
  // PTTL that a quorum of the nodes holding it reach (0 when none leads).
  std::chrono::milliseconds ttl{0};
};

class REDLOCK_EXPORT election {
 public:
  // `c` must outlive the election and every leadership it hands out.
  explicit election(client& c);

  // Campaigns for `role` as `identity` (any text, e.g. "host:pid"; not empty,
  // at most 512 bytes) and blocks until elected, the deadline passes (the last
  // attempt's error: contended or unavailable), or a permanent error
  // (invalid_argument, auth_failed, ...). Elected = the fenced acquire succeeded
  // and the identity was published on a quorum; if the publication does not reach
  // a quorum the lock is released (delivered again to the nodes that do not
  // confirm it: one may have run the publication unheard, see "Observers and
  // beliefs" above) and the campaign goes on — three times in a row
  // at most, then it ends with unavailable (the report names each node's answer:
  // e.g. an ACL that lets the user take the lock but not write its record).
  [[nodiscard]] campaign_result campaign(std::string_view role, std::string_view identity,
                                         const campaign_options& options = {});
  // As campaign(), without blocking. Returns an id for cancel().
  std::uint64_t campaign_async(std::string role, std::string identity, campaign_options options,
                               std::function<void(campaign_result)> done);
  // Ends a pending campaign_async: its callback gets errc::cancelled and a lock
  // it took meanwhile is released. No effect on finished or unknown ids.
  void cancel(std::uint64_t campaign_id);

  // Who leads `role` now, in one round (one script per node), without
  // campaigning or changing anything. Blocks; would_deadlock on the loop thread.
  [[nodiscard]] leader_info observe(std::string_view role);

  // "election:<role>": the resource a campaign locks.
  static std::string resource_for(std::string_view role);

 private:
  client& client_;
  std::shared_ptr<detail::campaigns> campaigns_;
};

}  // namespace redlock
