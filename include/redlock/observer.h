// Events from a client: what its operations, locks and nodes are doing, for
// metrics, logs and tracing (docs/observability.md).
//
// Set client_options::observers. Every event is delivered on the client's loop
// thread, in the order it happened, never with one of the library's internal locks
// held, to every observer in the list, in list order. An observer must not block:
// it delays every operation and node of the client (debug builds report an
// observer call slower than 1 ms on stderr). It may call the client's *_async
// functions; it must not call the synchronous ones (they fail with
// errc::would_deadlock) nor destroy the client.
//
// An observer that throws does not break the client: the exception is caught and
// dropped (counted in client_stats::observer_errors), and the event still goes to
// the observers after it in the list.
//
// Order: the lock events an operation causes come before its operation_finished
// (started, acquired, finished; started, extended or lost, finished); a call's
// completion callback runs after its operation_finished.
//
// No event carries a token or a password: nodes are named by their redacted URIs,
// locks by their resource (and fence, when fenced). A client without observers
// pays one branch per event site.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>

#include "redlock/options.h"
#include "redlock/report.h"
#include "redlock/version.h"

namespace redlock {

// Timestamps are on the client's monotonic clock (client_options::clock).
using event_time = std::chrono::steady_clock::time_point;

enum class operation_kind : std::uint8_t { acquire, extend, release, inspect };

// "acquire", "extend", "release", "inspect".
REDLOCK_EXPORT const char* to_string(operation_kind k) noexcept;

// A public call (or the watchdog's extension, or a lock handle's destructor's
// release) began on the loop. Calls refused before they reach the loop (an invalid
// argument to a synchronous call, a call after the client stopped) have no events.
// client::ping has none (it is no lock operation).
struct operation_started {
  event_time at;
  operation_kind kind{};
  std::string resource;
  bool background = false;  // started by the library (watchdog, destructor), not a call
};

// It completed: the report has the outcome, each node's status and latency, the
// attempts, and the elapsed time (for an acquire: the wait, retries included).
struct operation_finished {
  event_time at;
  operation_kind kind{};
  std::string resource;
  bool background = false;
  const redlock::report* report = nullptr;  // valid during the call only
};

// An acquire attempt failed and another follows after `delay`.
struct retry_scheduled {
  event_time at;
  std::string resource;
  int next_attempt = 0;  // 2 for the first retry
  std::chrono::milliseconds delay{0};
  std::error_code last_error;  // why the failed attempt failed
};

// A lock was acquired, extended or released (by a call, the watchdog or a handle's
// destructor). Released: only when the release got its quorum (a failed release
// is an operation_finished with the error). A lock acquired by this client ends in
// exactly one of on_lock_released and on_lock_lost: the release of a handle already
// declared lost (lock::release, or client::release of its lease) deletes what is
// left of its keys but sends no on_lock_released; a
// handle released after its validity ran out (or whose release finds the keys
// gone, not_owner) ends in on_lock_lost (errc::lock_lost) at that release, not in
// on_lock_released (its on_lost is not called and lost() stays false: it was
// released, and the release's report says so). An extend or release of a bare lease
// (client::extend/release of a lease, not through a handle) reports the lease's
// fence, and held_for from its acquired_at (0 when the lease does not know it).
struct lock_event {
  event_time at;
  std::string resource;
  std::optional<std::uint64_t> fence;
  std::optional<event_time> valid_until;  // empty after a release
  std::chrono::microseconds held_for{0};  // since the acquire round was sent
  // false: the release or extension of a bare lease (client::release / extend),
  // not of a lock handle this client acquired; metrics' held gauge skips it.
  bool of_handle = true;
};

// The library stopped guaranteeing a lock: validity ran out before a quorum
// extension, the keys were gone, the extension cap was reached, or the client shut
// down under a watchdog. reason is errc::lock_lost, extension_limit or cancelled.
struct lock_lost_event {
  event_time at;
  std::string resource;
  std::optional<std::uint64_t> fence;
  std::chrono::microseconds held_for{0};
  std::error_code reason;
  std::string detail;  // one line: what was seen
};

// A node's connection came up (handshake done) or went down. Down is sent once per
// outage: when a node that was up fails, or at the first failed attempt of a node
// not up yet; the failed attempts after it are reconnect_scheduled events only.
struct node_event {
  event_time at;
  std::size_t index = 0;  // position in client_options::nodes
  std::string node;       // redacted URI
  node_status status = node_status::ok;  // down: connection_error, timeout, auth_error, tls_error, ...
  std::string detail;     // down: why (no secrets)
};

// The connection to a node will be attempted again after `backoff`.
struct reconnect_scheduled {
  event_time at;
  std::size_t index = 0;
  std::string node;
  std::chrono::milliseconds backoff{0};
  std::string reason;
};

enum class quarantine_reason : std::uint8_t {
  restart,      // a new run_id (restart guard)
  first_sight,  // restart_guard_first_sight: a young node seen for the first time
  clock_jump,   // the node's clock stepped (clock-jump guard)
};

// "restart", "first_sight", "clock_jump".
REDLOCK_EXPORT const char* to_string(quarantine_reason r) noexcept;

// A guard took a node out of acquire votes until `until`, or (cleared) the
// quarantine ended and the node votes again. A quarantined node gets a timer (one
// per node, only with observers) that sends on_node_cleared when the latest of its
// quarantines is over, on the client's clock (within a few ms; a quarantine
// extended meanwhile, by another restart or jump, moves it). `reason` of a
// cleared event is that of the last quarantine. A client that stops first sends
// no cleared event. first_sight is sent only while the node is still young.
struct node_quarantine_event {
  event_time at;
  std::size_t index = 0;
  std::string node;
  quarantine_reason reason{};
  event_time until;  // when the quarantine ends (cleared: when it ended)
  std::string detail;
};

// A reply took longer than client_options::slow_node_threshold (from the request's
// submission to its reply; also a reply that arrives after its request timed out).
// kind: the operation the request belongs to (a fenced acquire's commit: acquire).
// Handshake replies are not measured.
struct node_slow_event {
  event_time at;
  std::size_t index = 0;
  std::string node;
  std::chrono::microseconds latency{0};
  operation_kind kind{};
};

// Receives the events. Every member has an empty default: override what you use.
class REDLOCK_EXPORT observer {
 public:
  virtual ~observer();

  virtual void on_operation_started(const operation_started&) {}
  virtual void on_operation_finished(const operation_finished&) {}
  virtual void on_retry_scheduled(const retry_scheduled&) {}
  virtual void on_lock_acquired(const lock_event&) {}
  virtual void on_lock_extended(const lock_event&) {}
  virtual void on_lock_released(const lock_event&) {}
  virtual void on_lock_lost(const lock_lost_event&) {}
  virtual void on_node_up(const node_event&) {}
  virtual void on_node_down(const node_event&) {}
  virtual void on_reconnect_scheduled(const reconnect_scheduled&) {}
  virtual void on_node_quarantined(const node_quarantine_event&) {}
  virtual void on_node_cleared(const node_quarantine_event&) {}
  virtual void on_node_slow(const node_slow_event&) {}
  // Configuration warnings (the same ones client_options::on_warning gets):
  // even_node_count and single_node once at the client's start (before any node
  // event; `node` empty), eviction_policy per connection where seen.
  virtual void on_warning(const warning&) {}
};

}  // namespace redlock
