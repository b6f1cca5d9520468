#include "pure/decision.h"

#include <algorithm>
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

namespace {

// What failure_reason() looks at: counts only.
struct reason_counts {
  std::size_t n = 0, refused = 0, auth = 0, permission = 0, wrong_type = 0, tls = 0, cancelled = 0, pending = 0;
};

reason_counts count_reasons(refusal kind, const std::vector<vote>& votes) noexcept {
  reason_counts c;
  c.n = votes.size();
  for (const vote& v : votes) {
    if (v.status == node_status::pending) {
      ++c.pending;
      continue;
    }
    const node_status no = kind == refusal::held ? node_status::held : node_status::not_owner;
    if (v.status == no) ++c.refused;
    if (v.status == node_status::cancelled) ++c.cancelled;
    if (v.permanent == errc::auth_failed) ++c.auth;
    if (v.permanent == errc::permission_denied) ++c.permission;
    if (v.permanent == errc::wrong_type) ++c.wrong_type;
    if (v.permanent == errc::tls_failed) ++c.tls;
  }
  return c;
}

std::error_code reason_of(refusal kind, const reason_counts& c) noexcept {
  const std::size_t tolerated = c.n - quorum_of(c.n);  // more than this rule out a quorum
  // Contended (not owner) when the refusals alone rule out a quorum: retrying
  // cannot help until the holder lets go, whatever the other nodes did.
  if (c.n > 0 && c.refused > tolerated) return kind == refusal::held ? errc::contended : errc::not_owner;
  // Likewise for permanent errors: one node with a wrong password among healthy
  // ones is a configuration problem to alert on, not a reason to stop retrying or
  // to declare a held lock lost.
  if (c.n > 0 && c.auth + c.permission + c.wrong_type + c.tls > tolerated) {
    const std::size_t most = std::max({c.auth, c.permission, c.wrong_type, c.tls});
    if (c.auth == most) return errc::auth_failed;
    if (c.permission == most) return errc::permission_denied;
    if (c.wrong_type == most) return errc::wrong_type;
    return errc::tls_failed;
  }
  if (c.n > 0 && c.cancelled == c.n) return errc::cancelled;
  return errc::unavailable;
}

}  // namespace

std::error_code failure_reason(refusal kind, const std::vector<vote>& votes) noexcept {
  return reason_of(kind, count_reasons(kind, votes));
}

bool reason_may_change(refusal kind, const std::vector<vote>& votes) noexcept {
  const reason_counts now = count_reasons(kind, votes);
  if (now.pending == 0) return false;
  const std::error_code current = reason_of(kind, now);
  // Each count only grows as answers come in, and each rule tests one count (or
  // the sum of the permanent ones) against a threshold or against another count.
  // So if some outcome of the pending votes changes the reason, giving all of them
  // to the one count that makes the difference changes it too: trying each count
  // alone is exhaustive (the unit tests check this against every outcome).
  std::size_t reason_counts::*const fields[] = {&reason_counts::refused, &reason_counts::auth,
                                                 &reason_counts::permission, &reason_counts::wrong_type,
                                                 &reason_counts::tls, &reason_counts::cancelled};
  for (auto field : fields) {
    reason_counts c = now;
    c.*field += c.pending;
    c.pending = 0;
    if (reason_of(kind, c) != current) return true;
  }
  return false;
}

bool retryable(std::error_code ec) noexcept {
  return ec == errc::contended || ec == errc::unavailable || ec == errc::validity_exhausted;
}

namespace {

// "1 node", "2 nodes".
std::string nodes_count(std::size_t n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

// What the nodes of a failed report other than the ok ones did, by kind, as "1
// refused, 1 did not answer" ("" for none): every node not ok is in exactly one
// count (refusals only when `refused_as` is not null), so with the ok nodes (and
// the refusals, when the caller counts them) they add up to the nodes configured.
// Refusals (held by another owner, token not held) and error replies are answers:
// only timeouts, connection failures and cancellations are nodes that did not answer.
std::string node_counts(const report& r, const char* refused_as) {
  std::size_t refused = 0, errors = 0, silent = 0, excluded = 0, pending = 0;
  for (const node_result& nr : r.nodes) {
    switch (nr.status) {
      case node_status::ok: break;
      case node_status::held:
      case node_status::not_owner: ++refused; break;
      case node_status::auth_error:
      case node_status::tls_error:
      case node_status::server_error:
      case node_status::protocol_error: ++errors; break;
      case node_status::excluded: ++excluded; break;
      case node_status::pending: ++pending; break;
      default: ++silent; break;  // timeout, connection_error, cancelled
    }
  }
  std::string parts;
  auto part = [&parts](std::size_t count, const char* what) {
    if (count == 0) return;
    parts += parts.empty() ? "" : ", ";
    parts += std::to_string(count) + " " + what;
  };
  if (refused_as != nullptr) part(refused, refused_as);
  part(errors, "answered with an error");
  part(silent, "did not answer");
  part(excluded, "excluded by a guard");
  // Pending: the outcome was decided before these nodes replied, and a round does
  // not wait for replies that cannot change it.
  part(pending, pending == 1 ? "reply not waited for (it could not change the outcome)"
                             : "replies not waited for (they could not change the outcome)");
  return parts;
}

}  // namespace

std::string describe(const report& r) {
  const std::size_t n = r.nodes.size();
  const std::size_t q = quorum_of(n);
  const auto ok = static_cast<std::size_t>(r.count(node_status::ok));
  // The counts are the last attempt's: the attempts are said first, so that no
  // count reads as if it were one of attempts ("1 still pending after 3 attempts").
  const std::string head = r.attempts > 1
                               ? " after " + std::to_string(r.attempts) + " attempts; in the last, "
                               : std::string(": ");
  auto then = [](std::string parts) { return parts.empty() ? parts : "; " + parts; };
  std::string s;
  if (!r.error) {
    s = "ok on " + std::to_string(ok) + " of " + nodes_count(n);
    if (r.attempts > 1) s += " after " + std::to_string(r.attempts) + " attempts";
    if (r.validity.count() > 0) s += ", validity " + std::to_string(r.validity.count()) + " ms";
  } else if (r.error == errc::contended) {
    s = "contended" + head + "held by another owner on " + std::to_string(r.count(node_status::held)) +
        " of " + nodes_count(n) + " (quorum " + std::to_string(q) + ")" +
        (ok > 0 ? ", ok on " + std::to_string(ok) : std::string()) + then(node_counts(r, nullptr));
  } else if (r.error == errc::not_owner &&
             std::all_of(r.nodes.begin(), r.nodes.end(),
                         [](const node_result& nr) { return nr.status == node_status::pending; })) {
    // Refused before any node was asked (a handle released, lost or moved from).
    const std::string why = r.nodes.empty() ? std::string() : r.nodes.front().detail;
    s = "not owner: " + (why.empty() ? std::string("no node was asked") : why + " (no node was asked)");
  } else if (r.error == errc::not_owner) {
    // What the nodes answered, and nothing about those that did not: a node that
    // did not answer (or was not waited for) may or may not hold the token.
    s = "not owner" + head + std::to_string(r.count(node_status::not_owner)) + " of " + nodes_count(n) +
        " answered that the token does not hold the lock (quorum " + std::to_string(q) + ")" +
        (ok > 0 ? ", " + std::to_string(ok) + " that it does" : std::string()) +
        then(node_counts(r, nullptr));
  } else if (r.error == errc::unavailable) {
    s = "unavailable" + head + "ok on " + std::to_string(ok) + " of " + nodes_count(n) + ", quorum is " +
        std::to_string(q) + then(node_counts(r, "refused"));
  } else if (r.error == errc::validity_exhausted) {
    s = "validity exhausted" + head + "a quorum answered only after ttl - drift had passed (took " +
        std::to_string(r.elapsed.count() / 1000) + " ms)";
  } else {
    s = r.error.message();
    // The category's text names the kind ("authentication refused"); the count
    // says on how many nodes, and the list below names them.
    const node_status named = r.error == errc::auth_failed  ? node_status::auth_error
                              : r.error == errc::tls_failed ? node_status::tls_error
                                                            : node_status::pending;
    const auto count = named == node_status::pending ? 0 : static_cast<std::size_t>(r.count(named));
    if (count > 0) s += " on " + std::to_string(count) + " of " + nodes_count(n);
    // A call refused before any node was asked (invalid argument, shut down)
    // carries its reason on the first node.
    if (!r.nodes.empty() && r.nodes.front().status == node_status::pending && !r.nodes.front().detail.empty()) {
      s += ": " + r.nodes.front().detail;
    }
    if (r.attempts > 1) s += " after " + std::to_string(r.attempts) + " attempts";
  }
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
