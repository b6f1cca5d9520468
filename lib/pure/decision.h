// The pure decision logic: votes in, outcome out. No I/O, no clock reads: every
// time is passed in, so tests drive it with a manual clock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <system_error>
#include <vector>

#include "redlock/error.h"
#include "redlock/report.h"

namespace redlock::detail {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// What a node's "no" to a round means, which is all a failure's reason needs to know
// of the operation: `held` for an acquire (another owner holds the key: contended),
// `not_owner` for every other script (the token is not there: not_owner). The
// operations themselves are named by the public redlock::operation_kind.
enum class refusal : std::uint8_t { held, not_owner };

inline std::size_t quorum_of(std::size_t n) noexcept { return n / 2 + 1; }

// drift = ttl * factor + 2 ms (the Redlock spec's allowance for clock drift).
microseconds drift_of(milliseconds ttl, double factor) noexcept;

// validity = ttl - elapsed - drift; may be zero or negative.
microseconds validity_of(milliseconds ttl, microseconds elapsed, double factor) noexcept;

// Checks a TTL against the drift; empty string if fine, else the problem.
const char* check_ttl(milliseconds ttl, double factor) noexcept;

// One node's answer, as the decision sees it.
struct vote {
  node_status status = node_status::pending;
  // What this node's failure means if it alone cannot be fixed by retrying
  // (auth_failed, permission_denied, wrong_type, tls_failed); else {}. Whether the operation
  // fails with it is failure_reason()'s call.
  errc permanent{};
};

enum class verdict { undecided, quorum, no_quorum };

struct tally {
  std::size_t n = 0, yes = 0, pending = 0, held = 0, not_owner = 0, failed = 0;
};

tally count_votes(const std::vector<vote>& votes) noexcept;

// quorum as soon as yes >= quorum; no_quorum as soon as yes + pending < quorum.
verdict decide(const tally& t) noexcept;

// Why an operation without quorum failed, by what the caller should do next.
// A reason that tells the caller "another attempt cannot help" is given only when
// the nodes that gave it alone rule out a quorum (more than n - quorum of them):
// otherwise the remaining nodes may still form a quorum on the next attempt (or
// at the next watchdog tick), and the reason is unavailable. In this order:
//  1. acquire: contended when the nodes held by other owners are > n - quorum;
//     extend/release/inspect: not_owner when the not-owner answers are;
//  2. when the nodes with a permanent error (auth_failed, permission_denied,
//     wrong_type, tls_failed) are together > n - quorum: the one most of them gave
//     (ties: auth_failed, then permission_denied, then wrong_type, then tls_failed);
//  3. cancelled when every node was cancelled;
//  4. otherwise unavailable.
// Pending votes count for nothing. Depends on the votes' counts only, never on
// their order.
std::error_code failure_reason(refusal kind, const std::vector<vote>& votes) noexcept;

// True when the votes still pending could change failure_reason(): some way they
// may turn out gives another reason than the votes in so far. A round without a
// quorum waits for those answers (each bounded by its own deadline), so the
// reason never depends on the order in which the replies arrive.
bool reason_may_change(refusal kind, const std::vector<vote>& votes) noexcept;

// Whether another attempt may succeed after this error.
bool retryable(std::error_code ec) noexcept;

// The human one-liner for a report (used by report::message()).
std::string describe(const report& r);

}  // namespace redlock::detail
