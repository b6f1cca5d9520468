// libFuzzer target: the pure decision logic (lib/decision.h) under every order of
// replies. The fuzzer picks N, each node's final vote, the order in which the
// votes arrive, a TTL, an elapsed time and a drift factor.
//
// Invariants: the verdict after each vote is quorum iff yes >= N/2+1 and
// no_quorum iff yes + pending < N/2+1; once decided it never changes; an
// operation fails with contended / not_owner exactly when those refusals alone
// rule out a quorum, and otherwise with a permanent error (auth_failed,
// permission_denied, wrong_type) exactly when the nodes that gave permanent
// errors alone rule out a quorum; validity = ttl - elapsed - drift and never
// exceeds ttl - drift.
//
// And the failure reason the caller hears must not depend on the order of the
// replies: computed where the round decides (decide(), plus the round's rule in
// lib/operations.cc round::evaluate of waiting while reason_may_change() says the
// pending answers could still change it), it must equal the reason computed once
// every vote is in. (REDLOCK_FUZZ_PLAIN_DECIDE=1 checks decide() alone, without
// the waiting rule, and finds that it is order-dependent.)
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "pure/decision.h"

namespace {

using namespace redlock;
using namespace redlock::detail;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_decision: %s\n", what);
  std::abort();
}

bool plain_decide() {
  static const bool on = [] {
    const char* e = std::getenv("REDLOCK_FUZZ_PLAIN_DECIDE");
    return e != nullptr && e[0] == '1';
  }();
  return on;
}

// Mirrors round::evaluate (lib/operations.cc): no quorum, but pending answers could
// still change the reason: keep waiting.
bool round_waits(const std::vector<vote>& votes, refusal kind) { return reason_may_change(kind, votes); }

vote make_vote(int kind) {
  static const node_status statuses[] = {node_status::ok,
                                         node_status::held,
                                         node_status::not_owner,
                                         node_status::timeout,
                                         node_status::server_error,  // NOPERM (permission_denied)
                                         node_status::auth_error,
                                         node_status::server_error,
                                         node_status::protocol_error,
                                         node_status::cancelled,
                                         node_status::excluded,
                                         node_status::server_error};
  vote v;
  v.status = statuses[kind % 11];
  if (v.status == node_status::auth_error) v.permanent = errc::auth_failed;
  if (kind % 11 == 4) v.permanent = errc::permission_denied;  // NOPERM
  if (kind % 11 == 10) v.permanent = errc::wrong_type;        // WRONGTYPE
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
  const refusal kind = in.ConsumeBool() ? refusal::held : refusal::not_owner;

  std::vector<vote> votes(n);  // all pending
  verdict decided = verdict::undecided;
  bool round_decided = false;
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
    if (decided == verdict::undecided && v != verdict::undecided) decided = v;
    const bool waits = v == verdict::no_quorum && !plain_decide() && round_waits(votes, kind);
    if (!round_decided && v != verdict::undecided && !waits) {
      round_decided = true;
      if (v == verdict::no_quorum) reason_at_decision = failure_reason(kind, votes);
    }
  }
  if (decided == verdict::undecided) fail("undecided with every vote in");
  if (decided == verdict::no_quorum) {
    const std::error_code final_reason = failure_reason(kind, votes);
    if (!final_reason) fail("no quorum without a reason");
    const tally t = count_votes(votes);
    const std::size_t refused = kind == refusal::held ? t.held : t.not_owner;
    // Contended / not owner exactly when the refusals alone rule out a quorum.
    const bool refusing_quorum = refused > n - q;
    if (refusing_quorum != (final_reason == errc::contended || final_reason == errc::not_owner))
      fail("contended/not_owner iff the refusals alone rule out a quorum");
    const std::size_t permanent = static_cast<std::size_t>(
        std::count_if(votes.begin(), votes.end(), [](const vote& v) { return v.permanent != errc{}; }));
    const bool permanent_reason = final_reason == errc::auth_failed || final_reason == errc::permission_denied ||
                                  final_reason == errc::wrong_type;
    if ((!refusing_quorum && permanent > n - q) != permanent_reason)
      fail("a permanent reason iff the permanent errors alone rule out a quorum");
    if (permanent_reason &&
        std::none_of(votes.begin(), votes.end(), [&](const vote& v) { return final_reason == v.permanent; }))
      fail("a permanent reason that no node gave");
    if (reason_at_decision != final_reason) {
      std::fprintf(stderr,
                   "kind %s; votes in arrival order:", kind == refusal::held ? "acquire" : "release");
      for (std::size_t idx : order) std::fprintf(stderr, " %s", to_string(final_votes[idx].status));
      std::fprintf(stderr, "\nat the decision: %s; with every vote: %s\n",
                   reason_at_decision.message().c_str(), final_reason.message().c_str());
      fail("the failure reason depends on the reply order");
    }
    if (reason_may_change(kind, votes)) fail("reason_may_change with every vote in");
    if (!retryable(final_reason) && !permanent_reason && final_reason != errc::cancelled &&
        final_reason != errc::not_owner)
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
