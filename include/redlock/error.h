// Error codes of the redlock library, chosen by what the caller should do next.
//
// Every operation reports a std::error_code in redlock::category(). Compare with
// the enumerators directly: `if (r.error == redlock::errc::contended) ...`.
#pragma once

#include <string>
#include <system_error>

#include "redlock/version.h"

namespace redlock {

enum class errc {
  // 0 is success (a default std::error_code).

  // The lock is held by another owner on enough nodes that no quorum is possible.
  // Next: retry later, or give up and skip the work.
  contended = 1,
  // Too few nodes answered (down, timed out, refused, or errored) for a quorum.
  // Next: alert; retrying may help once nodes come back.
  unavailable,
  // A quorum said yes but so late that ttl - elapsed - drift <= 0. The attempt was
  // rolled back. Next: retry, or use a longer TTL / shorter node timeouts.
  validity_exhausted,
  // The lock's validity has run out (extend too late, or the watchdog could not keep
  // it). Next: stop the protected work now.
  lock_lost,
  // release/extend: the token does not own the lock on a quorum of nodes.
  not_owner,
  // Bad configuration or argument (URI, TTL, option). Never retried. Next: fix it.
  invalid_argument,
  // Nodes refused authentication (WRONGPASS, NOAUTH, a bad AUTH) — enough of them
  // that no quorum is possible without them (one such node among healthy ones is
  // reported as unavailable and retried, with the node's status auth_error).
  // Never retried. Next: fix the credentials.
  auth_failed,
  // The key exists and holds a non-string value (WRONGTYPE). Never retried.
  wrong_type,
  // The operation was cancelled, or the client shut down before it completed.
  cancelled,
  // A synchronous call was made on the client's own event loop thread, where it
  // could only deadlock. Next: use the *_async call there.
  would_deadlock,
  // extend: the lock reached acquire_options::max_extensions or max_hold; it will
  // expire. Next: finish or abandon the work before it does.
  extension_limit,
  // Nodes accepted the credentials but their ACL forbids what the lock needs (a
  // NOPERM reply: a command such as EVALSHA, or the lock key outside the user's key
  // patterns) — enough of them that no quorum is possible without them (else:
  // unavailable, retried). The node's detail names what the server refused. Never
  // retried. Next: grant the user what the detail names (the commands the lock
  // uses, and a key pattern covering the lock and fence keys). Also a server that
  // does not know EVAL or EVALSHA (scripts renamed or disabled: rename-command, a
  // managed service's policy): the detail says so.
  permission_denied,
  // TLS could not be established with verification: the node's certificate is
  // signed by an unknown CA, does not match the host (or tls_options::server_name),
  // has expired or is not yet valid, or the node requires a client certificate that
  // was not given — enough of such nodes that no quorum is possible without them
  // (else: unavailable, retried, with the node's status tls_error). Never retried.
  // Next: fix the CA, name or certificates (docs/operations.md, TLS).
  tls_failed,
};

// The category of all redlock error codes; name() is "redlock".
REDLOCK_EXPORT const std::error_category& category() noexcept;

REDLOCK_EXPORT std::error_code make_error_code(errc e) noexcept;

// The enumerator's name: "contended", "tls_failed", ... (stable: for logs, metrics
// labels, JSON); "unknown" for a value that is not an errc.
REDLOCK_EXPORT const char* to_string(errc e) noexcept;

// True for errors that another attempt cannot fix (bad configuration, wrong
// password, missing ACL permission, wrong key type, cancelled).
REDLOCK_EXPORT bool is_permanent(std::error_code ec) noexcept;

}  // namespace redlock

namespace std {
template <>
struct is_error_code_enum<redlock::errc> : true_type {};
}  // namespace std
