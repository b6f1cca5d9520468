#include "decision.h"

#include <string>

namespace redlock::detail {

microseconds drift_of(milliseconds ttl, double factor) noexcept {
  auto scaled = static_cast<std::int64_t>(static_cast<double>(ttl.count()) * 1000.0 * factor);
  return microseconds(scaled) + milliseconds(2);
}

microseconds validity_of(milliseconds ttl, microseconds elapsed, double factor) noexcept {
  return microseconds(ttl) - elapsed - drift_of(ttl, factor);
}

const char* check_ttl(milliseconds ttl, double factor) noexcept {
  if (ttl.count() <= 0) return "ttl must be positive";
  if (ttl > milliseconds(std::int64_t{1} << 40)) return "ttl is too large";
  if (validity_of(ttl, microseconds(0), factor).count() <= 0) {
    return "ttl must be longer than the clock drift allowance (ttl * drift_factor + 2 ms)";
  }
  return "";
}

tally count_votes(const std::vector<vote>& votes) noexcept {
  tally t;
  t.n = votes.size();
  for (const vote& v : votes) {
    switch (v.status) {
      case node_status::ok: ++t.yes; break;
      case node_status::pending: ++t.pending; break;
      case node_status::held: ++t.held; break;
      case node_status::not_owner: ++t.not_owner; break;
      default: ++t.failed; break;
    }
  }
  return t;
}

verdict decide(const tally& t) noexcept {
  const std::size_t q = quorum_of(t.n);
  if (t.yes >= q) return verdict::quorum;
  if (t.yes + t.pending < q) return verdict::no_quorum;
  return verdict::undecided;
}

std::error_code failure_reason(op_kind kind, const std::vector<vote>& votes) noexcept {
  const tally t = count_votes(votes);
  const std::size_t q = quorum_of(t.n);
  const std::size_t refused = kind == op_kind::acquire ? t.held : t.not_owner;
  // Contended (not owner) only when the refusals alone rule out a quorum: then
  // retrying cannot help until the holder lets go, whatever the other nodes did.
  if (refused > t.n - q) {
    return kind == op_kind::acquire ? errc::contended : errc::not_owner;
  }
  for (const vote& v : votes) {
    if (v.permanent == errc::auth_failed) return errc::auth_failed;
  }
  for (const vote& v : votes) {
    if (v.permanent == errc::wrong_type) return errc::wrong_type;
  }
  bool all_cancelled = !votes.empty();
  for (const vote& v : votes) all_cancelled = all_cancelled && v.status == node_status::cancelled;
  if (all_cancelled) return errc::cancelled;
  return errc::unavailable;
}

bool retryable(std::error_code ec) noexcept {
  return ec == errc::contended || ec == errc::unavailable || ec == errc::validity_exhausted;
}

std::string describe(const report& r) {
  const std::size_t n = r.nodes.size();
  const std::size_t q = quorum_of(n);
  const auto ok = static_cast<std::size_t>(r.count(node_status::ok));
  std::string s;
  if (!r.error) {
    s = "ok on " + std::to_string(ok) + " of " + std::to_string(n) + " nodes";
    if (r.validity.count() > 0) s += ", validity " + std::to_string(r.validity.count()) + " ms";
  } else if (r.error == errc::contended) {
    s = "contended: held by another owner on " + std::to_string(r.count(node_status::held)) + " of " +
        std::to_string(n) + " nodes (quorum " + std::to_string(q) + ")";
  } else if (r.error == errc::not_owner) {
    s = "not owner: the token does not hold the lock on " + std::to_string(r.count(node_status::not_owner)) +
        " of " + std::to_string(n) + " nodes (quorum " + std::to_string(q) + ")";
  } else if (r.error == errc::unavailable) {
    // Nodes that failed (down, timed out, refused, errored); the rest answered or
    // were still pending when the quorum became impossible.
    std::size_t failed = 0;
    for (const node_result& nr : r.nodes) {
      failed += nr.status == node_status::ok || nr.status == node_status::held || nr.status == node_status::not_owner ||
                        nr.status == node_status::pending
                    ? 0
                    : 1;
    }
    s = "unavailable: only " + std::to_string(n - failed) + " of " + std::to_string(n) +
        " nodes could answer, quorum is " + std::to_string(q);
  } else if (r.error == errc::validity_exhausted) {
    s = "validity exhausted: a quorum answered only after ttl - drift had passed (took " +
        std::to_string(r.elapsed.count() / 1000) + " ms)";
  } else {
    s = r.error.message();
    // Refused before any node was asked (invalid argument, shut down): the reason
    // is the first node's detail, which the node list below leaves out.
    if (!r.nodes.empty() && r.nodes.front().status == node_status::pending && !r.nodes.front().detail.empty()) {
      s += ": " + r.nodes.front().detail;
    }
  }
  if (r.attempts > 1) s += " after " + std::to_string(r.attempts) + " attempts";
  std::string nodes;
  for (const node_result& nr : r.nodes) {
    if (nr.status == node_status::ok || nr.status == node_status::pending ||
        (nr.status == node_status::held && r.error == errc::contended) ||
        (nr.status == node_status::not_owner && r.error == errc::not_owner)) {
      continue;
    }
    nodes += nodes.empty() ? "" : "; ";
    nodes += nr.node + ": " + to_string(nr.status);
    if (!nr.detail.empty()) nodes += " (" + nr.detail + ")";
  }
  if (!nodes.empty()) s += " [" + nodes + "]";
  return s;
}

}  // namespace redlock::detail
