// The Redlock client and the lock handle it hands out.
//
// Thread-safety: every client member function may be called from any thread at
// once. A lock handle is like std::unique_ptr: one thread uses it at a time, except
// owns_lock(), lost(), remaining_validity() and loss_token, which any thread may read.
//
// Callbacks: every *_async callback runs exactly once, on the client's loop thread,
// never inside the call that started it, including at shutdown (then with
// errc::cancelled): calls made while the client's destructor drains, from any
// thread, are still answered on the loop thread. One exception: once the loop has
// finished (the destructor is returning or has returned; only a lock handle that
// outlives its client can still call), the callback runs on the calling thread,
// with errc::cancelled, before the call returns. Its arguments are valid during
// the call (they are moved in and may be moved out). No internal mutex is held
// while a user callback runs. A callback must not block the loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "redlock/error.h"
#include "redlock/options.h"
#include "redlock/report.h"
#include "redlock/version.h"

struct uv_loop_s;

namespace redlock {

class election;

namespace detail {
class core;
class reactor;
struct client_access;
struct held;
}  // namespace detail

// Thrown by client's constructors for an invalid configuration. what() names the
// offending URI (password redacted) or option and the problem; code() is
// errc::invalid_argument.
class REDLOCK_EXPORT config_error : public std::system_error {
 public:
  explicit config_error(const std::string& what);
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// Tells long work whether its lock is lost. Cheap to copy; safe on any thread.
class REDLOCK_EXPORT loss_token {
 public:
  loss_token() = default;
  // True once the lock was lost (watchdog failure, extend too late, client shut
  // down under a watchdog), released, or its validity ran out on the client's clock.
  bool stop_requested() const noexcept;

 private:
  friend class lock;
  std::shared_ptr<const detail::held> state_;
};

// A held lock. Move-only. Destruction releases it best-effort without blocking:
// the release runs on the loop; a failure goes to client_options::on_release_failure
// and client::stats(). Never throws.
class REDLOCK_EXPORT lock {
 public:
  lock() noexcept;
  lock(lock&&) noexcept;
  lock& operator=(lock&&) noexcept;  // releases the lock held before, if any
  lock(const lock&) = delete;
  lock& operator=(const lock&) = delete;
  ~lock();

  // True while this handle holds the lock: not released, detached or lost, and its
  // validity has not run out on the client's clock (client_options::clock).
  bool owns_lock() const noexcept;
  explicit operator bool() const noexcept { return owns_lock(); }

  // A snapshot of the lease: resource, token, current validity end, acquisition
  // instant, fence. Still available after release() (whatever its result) and
  // after a loss; after a loss valid_until is the loss instant at the latest.
  lease info() const;
  // Validity left on the client's clock; zero once expired or lost.
  std::chrono::milliseconds remaining_validity() const noexcept;
  // True once the watchdog declared the lock lost, an extend found it expired, or
  // the client shut down while its watchdog ran. (A lock that merely ran out of
  // validity without a watchdog is not "lost": owns_lock() is false, lost() not.)
  bool lost() const noexcept;
  // A token for long work to poll before each critical step.
  loss_token token_for_work() const;
  // The fencing token, if acquired with fencing.
  std::optional<std::uint64_t> fence() const;

  // Ownership-checked extension to `ttl` on all nodes; needs a quorum and positive
  // new validity. errc::lock_lost if validity had already run out, or if the lock
  // was declared lost (watchdog, shutdown) while the extension was in flight: the
  // loss stands, and the validity stays ended even if the extension got a quorum;
  // errc::invalid_argument if ttl exceeds client_options::max_ttl. Blocks; returns
  // errc::would_deadlock on the loop thread.
  // Extending to a `ttl` shorter than the validity left shortens the keys on the
  // nodes it reaches, even when it fails (errc::unavailable with a minority
  // reached): from the moment it is sent, the validity is at most ttl - drift,
  // whatever the outcome (remaining_validity() and info() show it), and only a
  // success moves it later.
  [[nodiscard]] report extend(std::chrono::milliseconds ttl);
  // Stops the watchdog, then releases on all nodes. After it, owns_lock() is false
  // whatever the result, and info() still returns the lease. If the release was
  // not confirmed (unavailable, cancelled, ...: the keys may still be there), the
  // handle may release again: call release() (or release_async()) again, or pass
  // info() to client::release(). After a confirmed release, or not_owner, a
  // further release() returns errc::not_owner "lock not held". The destructor does
  // not retry a failed release (the keys expire by their TTL). A confirmed
  // release (also client::release) goes on delivering its delete in the background
  // to the nodes that did not confirm it (down, timed out, loading after a restart)
  // until they do or the key has expired, like an acquire's rollback. Blocks;
  // errc::would_deadlock on the loop thread.
  [[nodiscard]] report release();
  // As release(), without blocking; the callback runs on the loop thread (see
  // "Callbacks" above for a handle that outlived its client).
  void release_async(std::function<void(report)> done);
  // Stops the watchdog and gives up the handle without releasing; the keys expire
  // by their TTL unless released with the returned lease.
  lease detach() noexcept;

 private:
  friend class detail::core;
  explicit lock(std::shared_ptr<detail::held> s) noexcept;
  std::shared_ptr<detail::held> state_;
};

struct acquire_result {
  redlock::report report;
  redlock::lock lock;  // owns the lock on success
  explicit operator bool() const noexcept { return static_cast<bool>(report); }
};

// What `inspect` saw on one node.
struct node_view {
  std::optional<std::string> token;  // value of the key, if it exists and is a string
  std::chrono::milliseconds pttl{-2};  // PTTL: -2 absent, -1 no expiry
  // Filled for every node, whether it answered the inspect or not: what the
  // handshake of the node's current (or last) connection read. The node's
  // maxmemory-policy ("noeviction", "allkeys-lru", ...); "" when unknown (never
  // connected, or INFO not permitted to the user).
  std::string maxmemory_policy;
  // The warnings that hold for the node now, as client_options::on_warning got
  // them (warning_code::eviction_policy when the policy may evict keys). Empty
  // when none.
  std::vector<warning> warnings;
};

struct inspect_result {
  redlock::report report;        // error: unavailable if fewer than a quorum answered
  std::vector<node_view> nodes;  // configuration order; meaningful where status is ok
  std::optional<std::string> holder;  // the token a quorum of nodes agrees on
};

// What `probe` saw on one node: is it reachable, how fast, which server is it,
// and do the safety guards keep it out of acquire votes.
// One server of a node that is a whole deployment (a Redis Cluster, a Sentinel
// group: issue 23), as the client knows it at the probe.
struct deployment_member {
  std::string role;        // "shard master" (a cluster), "master" or "sentinel" (a Sentinel group)
  std::string address;     // host:port
  bool connected = false;  // its connection is up (handshake done)
  // Masters: the replicas its writes wait for (INFO replication's connected_slaves at
  // its last count); -1 for a sentinel.
  int replicas = -1;
  int slots = 0;  // shard masters: the hash slots it serves in the client's slot map
};

struct node_health {
  std::string node;  // the URI, password redacted
  // ok when the node answered the probe's PING; else why not (timeout,
  // connection_error, auth_error, tls_error, cancelled, ...), with `detail`.
  node_status status = node_status::pending;
  std::string detail;
  std::chrono::microseconds rtt{0};  // the PING's round trip through the client's loop (status ok)
  // From INFO server / persistence / memory, read by this probe; empty or unset
  // when not read (node unreachable, or INFO not permitted to the user).
  std::string run_id;
  std::optional<std::int64_t> uptime_s;
  std::string redis_version;
  std::string maxmemory_policy;
  std::optional<bool> aof_enabled;
  // Whether the node votes on acquires now: quarantined by the restart guard or
  // the clock-jump guard (or named twice), with the client's reason (one line),
  // and when the quarantine ends on the client's clock (client_options::clock),
  // if it ends on its own. Independent of `status`: a quarantined node may answer.
  bool quarantined = false;
  std::string quarantine_detail;
  std::optional<std::chrono::steady_clock::time_point> quarantined_until;
  // The warnings that hold for the node now (warning_code::eviction_policy).
  std::vector<warning> warnings;
  // A node that is a whole deployment (redis+cluster://, redis+sentinel://): the
  // servers the client uses for it now — a cluster's shard masters in map order; a
  // Sentinel group's current master, then its sentinels. Empty for a plain node.
  // The probe's PING and INFO (above) reach the first master only.
  std::vector<deployment_member> members;
  // When this client last saw the deployment's master change (a failover), on the
  // client's clock; unset if never.
  std::optional<std::chrono::steady_clock::time_point> master_changed_at;
};

struct probe_result {
  std::vector<node_health> nodes;  // configuration order
  std::size_t reachable = 0;       // nodes with status ok
  std::size_t voting = 0;          // reachable and not quarantined
  bool quorum_ok = false;          // voting >= quorum: an acquire can succeed now
  std::chrono::microseconds elapsed{0};
};

// Counters since construction; read with client::stats().
struct client_stats {
  std::uint64_t acquires = 0;   // acquire calls completed
  std::uint64_t acquired = 0;   // of which succeeded
  std::uint64_t contended = 0;  // of which failed contended
  // Release rounds completed: explicit releases and those of lock destructors. The
  // rollbacks of failed acquires are not counted (they release no held lock).
  std::uint64_t releases = 0;
  std::uint64_t release_failures = 0;  // releases nobody waited for that failed
  std::uint64_t extends = 0;           // extend rounds completed (incl. watchdog)
  std::uint64_t locks_lost = 0;        // watchdog or extend declared a lock lost, or a
                                       // handle's release found it expired or gone
  std::uint64_t reconnects = 0;        // connections (re)established after the first
  // Exceptions thrown by observers (client_options::observers), caught and dropped.
  std::uint64_t observer_errors = 0;
  // Release notifications after which a waiting acquire made no attempt: its peek
  // (one GET) found that another client had already taken the lock
  // (docs/coordination.md, "Waiting without polling").
  std::uint64_t wake_ups_skipped = 0;
  // Release messages ignored because their payload is not a token (32 hex
  // characters): nothing of them is kept (docs/coordination.md, "Bounds on what
  // others can send").
  std::uint64_t notifications_dropped = 0;
  // Wake-ups held back because every waiting acquire of the key had spent its wake-up
  // budget (at most 4 at once, then one per max(10 ms, 4 x its last failed attempt's
  // round trip)); each is made when a budget allows.
  std::uint64_t wake_ups_deferred = 0;
  // Failed attempts of a waiting acquire that were a split among waiters (it got a
  // node, no other token held a quorum): retried after a short backoff, not the
  // fallback (docs/coordination.md, "Split wake-ups").
  std::uint64_t split_retries = 0;
};

class REDLOCK_EXPORT client {
 public:
  // Starts a loop thread and connects to every node in the background.
  // Throws config_error for a bad configuration.
  explicit client(client_options options);
  // Completes in-flight work (bounded by two command timeouts), fails what remains
  // with errc::cancelled, closes connections and joins the loop thread. Rollbacks of
  // failed acquires still being delivered get the same bound; past it they are
  // abandoned and their keys expire by their TTL. Locks whose watchdog is running
  // lose it: their on_lost runs (errc::cancelled, "client shut down") and they
  // report lost(). Never throws.
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // Acquire `resource` with the Redlock algorithm: fan out to all nodes in parallel,
  // succeed when a quorum granted and validity is positive, otherwise roll back on
  // every node and retry per options.retry. Errors: contended, unavailable,
  // validity_exhausted, invalid_argument (also: ttl above client_options::max_ttl,
  // an extend_interval that leaves no time for an extension round, or a resource
  // name whose key, key_prefix + resource, ends in ":fence", reserved for fence
  // counters: docs/fencing.md),
  // auth_failed, permission_denied, wrong_type, cancelled, would_deadlock (called
  // on the loop thread). The permanent ones (auth_failed, permission_denied,
  // wrong_type) only when the nodes that gave them alone rule out a quorum; fewer
  // such nodes make unavailable.
  // A rollback goes on in the background after the call returned: it is repeated
  // for each node until the node confirms it or the TTL has passed (a node down or
  // reset at the time gets it when it is back), and a grant that arrives after its
  // attempt failed is released the same way.
  [[nodiscard]] acquire_result acquire(std::string_view resource, const acquire_options& options = {});
  // Asynchronous acquire. Returns an id for cancel().
  std::uint64_t acquire_async(std::string resource, acquire_options options,
                              std::function<void(acquire_result)> done);
  // Several resources at once: one lock, with one token, over every resource of
  // the set, all or none. Each node grants the whole set or nothing in one atomic
  // step (a script over all the keys), so an attempt never holds part of a set
  // while waiting for the rest: overlapping sets ({a,b} and {b,c}) cannot
  // deadlock, and a failed attempt rolls back every key it got. Quorum, validity,
  // retries, rollback and errors are those of acquire(); a node that refuses names
  // the first resource of the set it found held ("held: b" in its detail). The
  // lock's extend, release, watchdog and on_lost act on the whole set; its info()
  // has the set in lease::resources (and lease::resource is them joined by ',').
  // A set and a single-key lock on one of its resources exclude each other.
  // Errors as acquire(), and invalid_argument also for: an empty set, more than 64
  // resources, a resource given twice, and options.fencing (not supported for a
  // set: docs/coordination.md). The nodes are independent masters: against Redis
  // Cluster endpoints, every key of the set must hash to one slot (a {hash tag}
  // in the names), or the script is refused (CROSSSLOT, server_error).
  [[nodiscard]] acquire_result acquire_many(const std::vector<std::string>& resources,
                                            const acquire_options& options = {});
  // Asynchronous acquire_many. Returns an id for cancel().
  std::uint64_t acquire_many_async(std::vector<std::string> resources, acquire_options options,
                                   std::function<void(acquire_result)> done);
  // Cancels a pending acquire (or acquire_many): its callback gets errc::cancelled and anything it
  // took is rolled back. Also when the cancel reaches the loop before the acquire
  // has started (e.g. cancel() from the loop thread right after acquire_async()
  // from another thread): the acquire then never starts. No effect on completed
  // operations or unknown ids.
  void cancel(std::uint64_t operation_id);

  // Ownership-checked extension of a lease to `ttl`. Errors: not_owner, lock_lost
  // (lease.valid_until already passed, or a node's clock was seen to jump at the
  // reply that extended it: that key may expire at once, the lease is gone),
  // unavailable, invalid_argument (also ttl
  // above client_options::max_ttl), cancelled,
  // would_deadlock. On success report.validity is the new validity, counted from
  // just before the request was sent; the caller updates its lease with it.
  // On failure report.validity is zero, and the caller must assume that the
  // extension reached some nodes anyway: where `ttl` is shorter than the validity
  // left, those keys now expire sooner, so the lease is valid no longer than
  // min(l.valid_until, the moment of the call + ttl - drift) — in practice, after
  // a failed extension to a shorter TTL, stop using the lock within that TTL.
  // (A lock handle does this bookkeeping itself: lock::extend.) The lease of a
  // live lock handle of this client (not released, detached or lost) is extended
  // through that handle: the call is lock::extend on it (the handle's validity is
  // lowered before the request is sent, its extension caps apply, errc::lock_lost
  // declares it lost), so owns_lock() and remaining_validity() never outlive the
  // keys this call shortened.
  [[nodiscard]] report extend(const lease& l, std::chrono::milliseconds ttl);
  void extend_async(lease l, std::chrono::milliseconds ttl, std::function<void(report)> done);

  // Ownership-checked release on all nodes. Succeeds when a quorum deleted the key.
  // Errors: not_owner (a quorum did not hold this token: expired or someone
  // else's), unavailable, invalid_argument, cancelled, would_deadlock. The lease
  // of a lock handle of this client that was not released, detached or destroyed
  // is released through that handle — also a lost one, and one whose release was
  // not confirmed: the call is lock::release on it (its watchdog stops, owns_lock()
  // and its loss_tokens end with the call, it is never reported lost afterwards, a
  // lost one gets no on_lock_released; a release not confirmed leaves it able to
  // release again). A handle whose release is in flight or confirmed: errc::not_owner
  // "lock not held", as its lock::release.
  [[nodiscard]] report release(const lease& l);
  void release_async(lease l, std::function<void(report)> done);

  // Reads the key on every node (value and PTTL) without changing anything.
  [[nodiscard]] inspect_result inspect(std::string_view resource);
  // Sends a plain PING to every node and waits for all of them: each
  // node_result's latency is that node's round trip through this client's loop.
  // Error: unavailable when fewer than a quorum answered.
  [[nodiscard]] report ping();

  // Health of every node: a PING (round trip) and INFO server, persistence and
  // memory, pipelined to each node at once, plus the safety guards' state. Waits
  // for every node (each bounded by command_timeout, or the connect timeout while
  // a node first connects). Changes nothing on the nodes.
  [[nodiscard]] probe_result probe();
  // As probe(), without blocking; the callback runs on the loop thread (see
  // "Callbacks" above).
  void probe_async(std::function<void(probe_result)> done);

  std::size_t node_count() const noexcept;
  std::size_t quorum() const noexcept;
  // The configured node URIs, passwords redacted.
  std::vector<std::string> node_names() const;
  client_stats stats() const noexcept;

 private:
  friend REDLOCK_EXPORT std::unique_ptr<client> make_client_on_loop(client_options, uv_loop_s*);
  friend struct detail::client_access;
  friend class mutex;
  friend class semaphore;
  friend class election;
  client(client_options options, uv_loop_s* loop);
  client(client_options options, std::unique_ptr<detail::reactor> io, bool own_thread);
  std::shared_ptr<detail::core> core_;
};

}  // namespace redlock
