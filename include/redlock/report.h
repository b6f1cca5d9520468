// What an operation did: the overall error, and what each node said.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "redlock/error.h"
#include "redlock/version.h"

namespace redlock {

// One node's part in one operation.
enum class node_status : std::uint8_t {
  pending,           // no answer when the operation was decided (decided early)
  ok,                // acquire: granted; extend: extended; release: deleted; inspect: answered
  held,              // acquire: the key holds another owner's token
  not_owner,         // extend/release: the key is absent or holds another token
  timeout,           // no reply within command_timeout
  connection_error,  // not connected, connect failed, or connection lost
  auth_error,        // refused authentication (WRONGPASS, NOAUTH)
  server_error,      // an error reply (WRONGTYPE, NOPERM, OOM, READONLY, MOVED, ...): see detail
  protocol_error,    // a reply that is not what a Redis server sends
  cancelled,         // the client shut down first
  excluded,          // not asked: the node is quarantined by a safety guard
  tls_error,         // TLS verification failed (unknown CA, name mismatch, expired, client cert required): see detail
};

// "ok", "held", "timeout", ...
REDLOCK_EXPORT const char* to_string(node_status s) noexcept;

struct node_result {
  std::string node;  // the node's URI, password redacted
  node_status status = node_status::pending;
  std::string detail;  // error text for failures; never holds secrets
  std::chrono::microseconds latency{0};  // send to reply; 0 when there was no reply
};

// The outcome of one acquire, extend, release or inspect call.
struct REDLOCK_EXPORT report {
  std::error_code error;          // empty on success; a redlock::errc otherwise
  std::vector<node_result> nodes;  // one per configured node, in configuration order
  int attempts = 0;                // acquire: attempts made; others: 1
  // From the public call (before it was queued for the loop) to completion, on
  // the client's clock. 0 for a call refused before it started (invalid argument).
  std::chrono::microseconds elapsed{0};
  // acquire/extend on success: the validity left when the call completed, floored
  // to whole milliseconds (never more than what is left). The exact end is the
  // lease's valid_until.
  std::chrono::milliseconds validity{0};

  explicit operator bool() const noexcept { return !error; }
  // Number of nodes with this status.
  int count(node_status s) const noexcept;
  // One line that says what happened and why, e.g.
  // "unavailable: ok on 2 of 5 nodes, quorum is 3; 1 refused, 2 did not answer [redis://127.0.0.1:7001: timeout (...); ...]".
  // Counts (of the last attempt: "unavailable after 3 attempts; in the last, ..."),
  // each node in one: ok, "refused" = held by another owner / token not held,
  // "answered with an error" = an error reply, "did not answer" = timeout,
  // connection error or cancelled, "excluded by a guard", "reply not waited for"
  // (pending: the outcome was decided without it). Contains no password and no token.
  std::string message() const;
};

// The identity and validity of a held lock: plain data, copyable.
struct lease {
  std::string resource;  // as given to acquire (without the key prefix); a set's: its resources joined by ','
  std::string token;     // 32 hex chars; the ownership credential: keep it private
  // End of validity on the client's monotonic clock; empty when unknown (a lease
  // rebuilt from a resource and token, as the CLI does). Read from a lock that was
  // lost, it is the instant of the loss at the latest (never in the future).
  std::optional<std::chrono::steady_clock::time_point> valid_until;
  // The fencing token, when acquired with fencing.
  std::optional<std::uint64_t> fence;
  // When the winning acquire round was sent, on the client's monotonic clock: the
  // instant validity and max_hold count from. Empty when unknown (a rebuilt lease).
  std::optional<std::chrono::steady_clock::time_point> acquired_at;
  // A set's resources in the order given to client::acquire_many (one token for
  // all; extend and release act on every key of the set). Empty for one resource.
  // Last, with a default, so that lease{resource, token, ...} still compiles.
  std::vector<std::string> resources{};
};

}  // namespace redlock
