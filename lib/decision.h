// The pure decision logic: votes in, outcome out. No I/O, no clock reads: every
// time is passed in, so tests drive it with a manual clock.
#pragma once

#include <chrono>
#include <cstddef>
#include <system_error>
#include <vector>

#include "redlock/error.h"
#include "redlock/report.h"

namespace redlock::detail {

using std::chrono::microseconds;
using std::chrono::milliseconds;

enum class op_kind { acquire, extend, release, inspect, fence_commit };

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
  errc permanent{};  // auth_failed / wrong_type when retrying cannot help; else {}
};

enum class verdict { undecided, quorum, no_quorum };

struct tally {
  std::size_t n = 0, yes = 0, pending = 0, held = 0, not_owner = 0, failed = 0;
};

tally count_votes(const std::vector<vote>& votes) noexcept;

// quorum as soon as yes >= quorum; no_quorum as soon as yes + pending < quorum.
verdict decide(const tally& t) noexcept;

// Why an operation without quorum failed, by what the caller should do next:
//  acquire: contended when the nodes held by other owners alone rule out a quorum
//           (held > n - quorum); otherwise the permanent error of a node if any
//           (auth_failed, then wrong_type); otherwise unavailable.
//  extend/release: not_owner likewise (not_owner > n - quorum); then permanent
//           errors; otherwise unavailable.
std::error_code failure_reason(op_kind kind, const std::vector<vote>& votes) noexcept;

// Whether another attempt may succeed after this error.
bool retryable(std::error_code ec) noexcept;

// The human one-liner for a report (used by report::message()).
std::string describe(const report& r);

}  // namespace redlock::detail
