// libFuzzer target: the pure decision logic (lib/decision.h) under every order of
// replies. The fuzzer picks N, each node's final vote, the order in which the
// votes arrive, a TTL, an elapsed time and a drift factor.
//
// Invariants: the verdict after each vote is quorum iff yes >= N/2+1 and
// no_quorum iff yes + pending < N/2+1; once decided it never changes; a
// permanent vote makes acquire fail with that error when no quorum of answers
// holds the lock; validity = ttl - elapsed - drift and never exceeds ttl - drift.
//
// With REDLOCK_FUZZ_STRICT_REASON=1 in the environment, it also requires the
// failure reason computed at the decision to equal the one computed once every
// vote is in: that finds the reply-order dependence of `unavailable` vs
// `contended` (see tests/fault/quorum_test.cc) at once, so it is off by default.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "decision.h"

namespace {

using namespace redlock;
using namespace redlock::detail;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_decision: %s\n", what);
  std::abort();
}

bool strict_reason() {
  static const bool on = [] {
    const char* e = std::getenv("REDLOCK_FUZZ_STRICT_REASON");
    return e != nullptr && e[0] == '1';
  }();
  return on;
}

vote make_vote(int kind) {
  static const node_status statuses[] = {node_status::ok,
                                         node_status::held,
                                         node_status::not_owner,
                                         node_status::timeout,
                                         node_status::connection_error,
                                         node_status::auth_error,
                                         node_status::server_error,
                                         node_status::protocol_error,
                                         node_status::cancelled,
                                         node_status::excluded,
                                         node_status::server_error};
  vote v;
  v.status = statuses[kind % 11];
  if (v.status == node_status::auth_error) v.permanent = errc::auth_failed;
  if (kind % 11 == 10) v.permanent = errc::wrong_type;  // WRONGTYPE
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(1, 9);
  const std::size_t q = quorum_of(n);
  if (q != n / 2 + 1 || 2 * q <= n) fail("quorum_of");
  std::vector<vote> final_votes(n);
  for (auto& v : final_votes) v = make_vote(in.ConsumeIntegralInRange<int>(0, 10));
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  for (std::size_t i = n; i > 1; --i)
    std::swap(order[i - 1], order[in.ConsumeIntegralInRange<std::size_t>(0, i - 1)]);
  const op_kind kind = in.ConsumeBool() ? op_kind::acquire : op_kind::release;

  std::vector<vote> votes(n);  // all pending
  verdict decided = verdict::undecided;
  std::error_code reason_at_decision;
  for (std::size_t idx : order) {
    votes[idx] = final_votes[idx];
    const tally t = count_votes(votes);
    if (t.n != n || t.yes + t.pending + t.held + t.not_owner + t.failed != n) fail("tally does not add up");
    const verdict v = decide(t);
    if ((v == verdict::quorum) != (t.yes >= q)) fail("quorum iff yes >= q");
    if ((v == verdict::no_quorum) != (t.yes < q && t.yes + t.pending < q))
      fail("no_quorum iff yes + pending < q");
    if (decided != verdict::undecided && v != decided) fail("a decision changed");
    if (decided == verdict::undecided && v != verdict::undecided) {
      decided = v;
      if (v == verdict::no_quorum) reason_at_decision = failure_reason(kind, votes);
    }
  }
  if (decided == verdict::undecided) fail("undecided with every vote in");
  if (decided == verdict::no_quorum) {
    const std::error_code final_reason = failure_reason(kind, votes);
    if (!final_reason) fail("no quorum without a reason");
    const tally t = count_votes(votes);
    const std::size_t refused = kind == op_kind::acquire ? t.held : t.not_owner;
    const bool answered_quorum = t.yes + refused >= q && refused > 0;
    const bool permanent =
        std::any_of(votes.begin(), votes.end(), [](const vote& v) { return v.permanent != errc{}; });
    if (!answered_quorum && permanent && final_reason != errc::auth_failed &&
        final_reason != errc::wrong_type)
      fail("a permanent vote did not decide the reason");
    if (strict_reason() && reason_at_decision != final_reason)
      fail("the failure reason depends on the reply order");
    if (!retryable(final_reason) && final_reason != errc::auth_failed && final_reason != errc::wrong_type &&
        final_reason != errc::cancelled && final_reason != errc::not_owner)
      fail("unexpected non-retryable reason");
  }
  // Validity arithmetic.
  const auto ttl =
      std::chrono::milliseconds(in.ConsumeIntegralInRange<std::int64_t>(1, std::int64_t{1} << 40));
  const auto elapsed =
      std::chrono::microseconds(in.ConsumeIntegralInRange<std::int64_t>(0, std::int64_t{1} << 45));
  const double factor = in.ConsumeFloatingPointInRange<double>(0.0, 0.49);
  const auto drift = drift_of(ttl, factor);
  if (drift < std::chrono::milliseconds(2)) fail("drift below 2 ms");
  const auto validity = validity_of(ttl, elapsed, factor);
  if (validity > std::chrono::microseconds(ttl) - drift) fail("validity above ttl - drift");
  if (validity != std::chrono::microseconds(ttl) - elapsed - drift) fail("validity arithmetic");
  if (check_ttl(ttl, factor)[0] == '\0' &&
      validity_of(ttl, std::chrono::microseconds(0), factor).count() <= 0)
    fail("check_ttl accepted a TTL with no validity");
  return 0;
}
