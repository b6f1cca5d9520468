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
struct report {
  std::error_code error;          // empty on success; a redlock::errc otherwise
  std::vector<node_result> nodes;  // one per configured node, in configuration order
  int attempts = 0;                // acquire: attempts made; others: 1
  std::chrono::microseconds elapsed{0};  // from the call to completion, monotonic
  // acquire/extend on success: the validity left when the call completed.
  std::chrono::milliseconds validity{0};

  explicit operator bool() const noexcept { return !error; }
  // Number of nodes with this status.
  int count(node_status s) const noexcept;
  // One line that says what happened and why, e.g.
  // "unavailable: only 2 of 5 nodes could answer, quorum is 3 [redis://127.0.0.1:7001: timeout (...); ...]".
  // Contains no password and no token.
  std::string message() const;
};

// The identity and validity of a held lock: plain data, copyable.
struct lease {
  std::string resource;  // as given to acquire (without the key prefix)
  std::string token;     // 32 hex chars; the ownership credential: keep it private
  // End of validity on the client's monotonic clock; empty when unknown (a lease
  // rebuilt from a resource and token, as the CLI does).
  std::optional<std::chrono::steady_clock::time_point> valid_until;
  // The fencing token, when acquired with fencing.
  std::optional<std::uint64_t> fence;
};

}  // namespace redlock
