// Unit tests of lib/decision.h: quorum, drift/validity math, vote counting, the
// verdict, failure reasons and the report's one-line message.
#include "pure/decision.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "pure/token.h"
#include "redlock/error.h"
#include "redlock/report.h"

namespace redlock::detail {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// Every status that is neither an answer (ok/held/not_owner) nor pending.
constexpr node_status kFailedStatuses[] = {
    node_status::timeout,      node_status::connection_error, node_status::auth_error,
    node_status::server_error, node_status::protocol_error,   node_status::cancelled,
    node_status::excluded,
};

::testing::AssertionResult contains(const std::string& haystack, std::string_view needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << haystack << "' does not contain '" << needle << "'";
}

::testing::AssertionResult lacks(const std::string& haystack, std::string_view needle) {
  if (haystack.find(needle) == std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << haystack << "' contains '" << needle << "'";
}

vote make_vote(node_status s, errc permanent = errc{}) {
  vote v;
  v.status = s;
  v.permanent = permanent;
  return v;
}

// Votes with the given counts, interleaved so that no test depends on order.
std::vector<vote> make_votes(std::size_t yes, std::size_t held, std::size_t not_owner, std::size_t pending,
                             std::size_t failed) {
  std::vector<vote> v;
  std::size_t f = 0;
  while (yes + held + not_owner + pending + failed > 0) {
    if (failed > 0) {
      v.push_back(make_vote(kFailedStatuses[f++ % std::size(kFailedStatuses)]));
      --failed;
    }
    if (yes > 0) {
      v.push_back(make_vote(node_status::ok));
      --yes;
    }
    if (pending > 0) {
      v.push_back(make_vote(node_status::pending));
      --pending;
    }
    if (held > 0) {
      v.push_back(make_vote(node_status::held));
      --held;
    }
    if (not_owner > 0) {
      v.push_back(make_vote(node_status::not_owner));
      --not_owner;
    }
  }
  return v;
}

// --- quorum, drift, validity, ttl ---

TEST(QuorumOf, IsStrictMajority) {
  EXPECT_EQ(quorum_of(1), 1u);
  EXPECT_EQ(quorum_of(2), 2u);
  EXPECT_EQ(quorum_of(3), 2u);
  EXPECT_EQ(quorum_of(4), 3u);
  EXPECT_EQ(quorum_of(5), 3u);
  EXPECT_EQ(quorum_of(6), 4u);
  EXPECT_EQ(quorum_of(7), 4u);
}

TEST(QuorumOf, TwoQuorumsAlwaysOverlap) {
  for (std::size_t n = 1; n <= 64; ++n) {
    EXPECT_GT(2 * quorum_of(n), n) << "n=" << n;
    EXPECT_LE(quorum_of(n), n) << "n=" << n;
  }
}

TEST(DriftOf, IsTtlTimesFactorPlusTwoMilliseconds) {
  EXPECT_EQ(drift_of(milliseconds(30000), 0.01), microseconds(302000));
  EXPECT_EQ(drift_of(milliseconds(1000), 0.01), microseconds(12000));
  EXPECT_EQ(drift_of(milliseconds(10000), 0.0), microseconds(2000));
  EXPECT_EQ(drift_of(milliseconds(100), 0.01), microseconds(3000));
  EXPECT_EQ(drift_of(milliseconds(2), 0.01), microseconds(2020));
}

TEST(ValidityOf, IsTtlMinusElapsedMinusDrift) {
  EXPECT_EQ(validity_of(milliseconds(30000), microseconds(0), 0.01), microseconds(30000000 - 302000));
  EXPECT_EQ(validity_of(milliseconds(30000), microseconds(5000), 0.01),
            microseconds(30000000 - 5000 - 302000));
  EXPECT_EQ(validity_of(milliseconds(1000), microseconds(1), 0.0), microseconds(1000000 - 1 - 2000));
}

TEST(ValidityOf, IsZeroWhenElapsedUsesUpTtlMinusDrift) {
  EXPECT_EQ(validity_of(milliseconds(30000), microseconds(30000000 - 302000), 0.01), microseconds(0));
}

TEST(ValidityOf, GoesNegativeWhenTheQuorumCameTooLate) {
  EXPECT_EQ(validity_of(milliseconds(30000), microseconds(40000000), 0.01), microseconds(-10302000));
  EXPECT_LT(validity_of(milliseconds(2), microseconds(0), 0.01).count(), 0);
}

TEST(CheckTtl, AcceptsOrdinaryTtls) {
  EXPECT_STREQ(check_ttl(milliseconds(30000), 0.01), "");
  EXPECT_STREQ(check_ttl(milliseconds(1000), 0.01), "");
  EXPECT_STREQ(check_ttl(milliseconds(10), 0.01), "");
  EXPECT_STREQ(check_ttl(milliseconds(3), 0.01), "");
  EXPECT_STREQ(check_ttl(milliseconds(3), 0.0), "");
}

TEST(CheckTtl, RejectsZeroAndNegativeTtl) {
  EXPECT_STREQ(check_ttl(milliseconds(0), 0.01), "ttl must be positive");
  EXPECT_STREQ(check_ttl(milliseconds(-1), 0.01), "ttl must be positive");
  EXPECT_STREQ(check_ttl(milliseconds(-30000), 0.01), "ttl must be positive");
}

TEST(CheckTtl, RejectsTtlNotLongerThanTheDrift) {
  EXPECT_TRUE(contains(check_ttl(milliseconds(1), 0.01), "longer than the clock drift"));
  EXPECT_TRUE(contains(check_ttl(milliseconds(2), 0.01), "longer than the clock drift"));
  // Exactly equal to the drift leaves zero validity: rejected.
  EXPECT_TRUE(contains(check_ttl(milliseconds(2), 0.0), "longer than the clock drift"));
  // A large factor eats the whole TTL.
  EXPECT_TRUE(contains(check_ttl(milliseconds(1000), 1.0), "longer than the clock drift"));
}

TEST(CheckTtl, RejectsAbsurdlyLargeTtl) {
  EXPECT_STREQ(check_ttl(milliseconds((std::int64_t{1} << 40) + 1), 0.01), "ttl is too large");
  EXPECT_STREQ(check_ttl(milliseconds::max(), 0.01), "ttl is too large");
  EXPECT_STREQ(check_ttl(milliseconds(std::int64_t{1} << 40), 0.01), "");
}

// --- counting and deciding ---

TEST(CountVotes, CountsEachStatusIntoItsBucket) {
  std::vector<vote> votes = {make_vote(node_status::ok), make_vote(node_status::ok),
                             make_vote(node_status::held), make_vote(node_status::not_owner),
                             make_vote(node_status::pending)};
  for (node_status s : kFailedStatuses) votes.push_back(make_vote(s));
  const tally t = count_votes(votes);
  EXPECT_EQ(t.n, 12u);
  EXPECT_EQ(t.yes, 2u);
  EXPECT_EQ(t.held, 1u);
  EXPECT_EQ(t.not_owner, 1u);
  EXPECT_EQ(t.pending, 1u);
  EXPECT_EQ(t.failed, std::size(kFailedStatuses));
}

TEST(CountVotes, EmptyVotesGiveAnEmptyTally) {
  const tally t = count_votes({});
  EXPECT_EQ(t.n, 0u);
  EXPECT_EQ(t.yes + t.held + t.not_owner + t.pending + t.failed, 0u);
}

// For every n in 1..7 and every split of n votes into yes/held/not_owner/pending/
// failed: quorum iff yes >= n/2+1; no_quorum iff yes + pending < n/2+1; else undecided.
TEST(Decide, QuorumReachedExactlyWhenYesReachesMajority) {
  int cases = 0;
  for (std::size_t n = 1; n <= 7; ++n) {
    const std::size_t q = n / 2 + 1;
    for (std::size_t yes = 0; yes <= n; ++yes) {
      for (std::size_t held = 0; yes + held <= n; ++held) {
        for (std::size_t not_owner = 0; yes + held + not_owner <= n; ++not_owner) {
          for (std::size_t pending = 0; yes + held + not_owner + pending <= n; ++pending) {
            const std::size_t failed = n - yes - held - not_owner - pending;
            SCOPED_TRACE(::testing::Message()
                         << "n=" << n << " yes=" << yes << " held=" << held << " not_owner=" << not_owner
                         << " pending=" << pending << " failed=" << failed);
            const tally t = count_votes(make_votes(yes, held, not_owner, pending, failed));
            ASSERT_EQ(t.n, n);
            ASSERT_EQ(t.yes, yes);
            ASSERT_EQ(t.held, held);
            ASSERT_EQ(t.not_owner, not_owner);
            ASSERT_EQ(t.pending, pending);
            ASSERT_EQ(t.failed, failed);
            verdict expected = verdict::undecided;
            if (yes >= q) {
              expected = verdict::quorum;
            } else if (yes + pending < q) {
              expected = verdict::no_quorum;
            }
            EXPECT_EQ(decide(t), expected);
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 791);  // sum over n=1..7 of C(n+4, 4)
}

TEST(Decide, AllPendingIsUndecided) {
  for (std::size_t n = 1; n <= 7; ++n) {
    tally t;
    t.n = n;
    t.pending = n;
    EXPECT_EQ(decide(t), verdict::undecided) << "n=" << n;
  }
}

TEST(Decide, DecidesNoQuorumAsSoonAsAMajorityCanNoLongerSayYes) {
  tally t;  // 5 nodes: 1 yes, 2 held, 2 pending -> at most 3 yes: still possible.
  t.n = 5;
  t.yes = 1;
  t.held = 2;
  t.pending = 2;
  EXPECT_EQ(decide(t), verdict::undecided);
  t.pending = 1;  // one pending node timed out
  t.failed = 1;
  EXPECT_EQ(decide(t), verdict::no_quorum);
}

// --- failure reasons ---

TEST(FailureReason, AcquireIsContendedExactlyWhenHeldNodesAloneRuleOutAQuorum) {
  for (std::size_t n = 1; n <= 7; ++n) {
    const std::size_t q = n / 2 + 1;
    for (std::size_t yes = 0; yes <= n; ++yes) {
      for (std::size_t held = 0; yes + held <= n; ++held) {
        for (std::size_t pending = 0; yes + held + pending <= n; ++pending) {
          const std::size_t failed = n - yes - held - pending;
          SCOPED_TRACE(::testing::Message()
                       << "n=" << n << " yes=" << yes << " held=" << held << " pending=" << pending);
          const std::error_code expected =
              held > n - q ? errc::contended : errc::unavailable;
          // kFailedStatuses includes cancelled; make sure "all cancelled" is not hit.
          std::vector<vote> votes = make_votes(yes, held, 0, pending, 0);
          for (std::size_t i = 0; i < failed; ++i) votes.push_back(make_vote(node_status::timeout));
          EXPECT_EQ(failure_reason(refusal::held, votes), expected);
        }
      }
    }
  }
}

TEST(FailureReason, ReleaseAndExtendAreNotOwnerExactlyWhenRefusalsAloneRuleOutAQuorum) {
  {
    const refusal kind = refusal::not_owner;  // every script but an acquire
    for (std::size_t n = 1; n <= 7; ++n) {
      const std::size_t q = n / 2 + 1;
      for (std::size_t yes = 0; yes <= n; ++yes) {
        for (std::size_t not_owner = 0; yes + not_owner <= n; ++not_owner) {
          const std::size_t failed = n - yes - not_owner;
          SCOPED_TRACE(::testing::Message() << "kind=" << static_cast<int>(kind) << " n=" << n
                                            << " yes=" << yes << " not_owner=" << not_owner);
          const std::error_code expected =
              not_owner > n - q ? errc::not_owner : errc::unavailable;
          std::vector<vote> votes = make_votes(yes, 0, not_owner, 0, 0);
          for (std::size_t i = 0; i < failed; ++i) votes.push_back(make_vote(node_status::connection_error));
          EXPECT_EQ(failure_reason(kind, votes), expected);
        }
      }
    }
  }
}

TEST(FailureReason, AcquireIgnoresNotOwnerVotesAndReleaseIgnoresHeldVotes) {
  const std::vector<vote> held = {make_vote(node_status::held), make_vote(node_status::held),
                                  make_vote(node_status::timeout)};
  EXPECT_EQ(failure_reason(refusal::held, held), errc::contended);
  EXPECT_EQ(failure_reason(refusal::not_owner, held), errc::unavailable);
  EXPECT_EQ(failure_reason(refusal::not_owner, held), errc::unavailable);

  const std::vector<vote> not_owner = {make_vote(node_status::not_owner), make_vote(node_status::not_owner),
                                       make_vote(node_status::timeout)};
  EXPECT_EQ(failure_reason(refusal::not_owner, not_owner), errc::not_owner);
  EXPECT_EQ(failure_reason(refusal::held, not_owner), errc::unavailable);
}

TEST(FailureReason, AuthFailedWhenRefusedCredentialsAloneRuleOutAQuorum) {
  const vote auth = make_vote(node_status::auth_error, errc::auth_failed);
  const std::vector<vote> votes = {make_vote(node_status::ok), auth, auth};
  EXPECT_EQ(failure_reason(refusal::held, votes), errc::auth_failed);
  EXPECT_EQ(failure_reason(refusal::not_owner, votes), errc::auth_failed);
  EXPECT_EQ(failure_reason(refusal::not_owner, votes), errc::auth_failed);
}

// One node with a wrong password among healthy ones is a configuration problem to
// alert on, but another attempt (or the next watchdog tick) can still reach a
// quorum: unavailable (retried), never a permanent error.
TEST(FailureReason, OneNodeRefusingCredentialsBesideAHiccupIsUnavailable) {
  const std::vector<vote> votes = {make_vote(node_status::ok), make_vote(node_status::timeout),
                                   make_vote(node_status::auth_error, errc::auth_failed)};
  EXPECT_EQ(failure_reason(refusal::held, votes), errc::unavailable);
  EXPECT_EQ(failure_reason(refusal::not_owner, votes), errc::unavailable);
  EXPECT_EQ(failure_reason(refusal::not_owner, votes), errc::unavailable);
}

TEST(FailureReason, WrongTypeWhenNonStringKeysAloneRuleOutAQuorum) {
  const vote wrong_type = make_vote(node_status::server_error, errc::wrong_type);
  EXPECT_EQ(failure_reason(refusal::held, {wrong_type, wrong_type, make_vote(node_status::timeout)}),
            errc::wrong_type);
  EXPECT_EQ(failure_reason(refusal::not_owner, {wrong_type, make_vote(node_status::timeout),
                                              make_vote(node_status::timeout)}),
            errc::unavailable);
}

TEST(FailureReason, PermissionDeniedWhenAclRefusalsAloneRuleOutAQuorum) {
  const vote noperm = make_vote(node_status::server_error, errc::permission_denied);
  EXPECT_EQ(failure_reason(refusal::held, {noperm, noperm, make_vote(node_status::ok)}),
            errc::permission_denied);
  EXPECT_EQ(failure_reason(refusal::held, {noperm, make_vote(node_status::timeout), make_vote(node_status::ok)}),
            errc::unavailable);
}

TEST(FailureReason, MixedPermanentErrorsThatTogetherRuleOutAQuorumNameTheMostCommonInAnyOrder) {
  const vote wrong_type = make_vote(node_status::server_error, errc::wrong_type);
  const vote auth = make_vote(node_status::auth_error, errc::auth_failed);
  const vote noperm = make_vote(node_status::server_error, errc::permission_denied);
  const vote timeout = make_vote(node_status::timeout);
  // Ties: auth_failed, then permission_denied, then wrong_type.
  EXPECT_EQ(failure_reason(refusal::held, {wrong_type, auth, timeout}), errc::auth_failed);
  EXPECT_EQ(failure_reason(refusal::held, {auth, wrong_type, timeout}), errc::auth_failed);
  EXPECT_EQ(failure_reason(refusal::held, {wrong_type, noperm, timeout}), errc::permission_denied);
  EXPECT_EQ(failure_reason(refusal::held, {noperm, wrong_type, timeout}), errc::permission_denied);
  EXPECT_EQ(failure_reason(refusal::held, {wrong_type, wrong_type, auth, timeout, timeout}), errc::wrong_type);
  EXPECT_EQ(failure_reason(refusal::held, {auth, wrong_type, timeout, timeout, timeout}), errc::unavailable);
}

TEST(FailureReason, TlsFailedWhenTlsErrorsAloneRuleOutAQuorum) {
  const vote tls = make_vote(node_status::tls_error, errc::tls_failed);
  const vote auth = make_vote(node_status::auth_error, errc::auth_failed);
  const vote timeout = make_vote(node_status::timeout);
  EXPECT_EQ(failure_reason(refusal::held, {tls, tls, make_vote(node_status::ok)}), errc::tls_failed);
  EXPECT_EQ(failure_reason(refusal::not_owner, {tls, tls, tls}), errc::tls_failed);
  // One node of three: the others may still form a quorum next time.
  EXPECT_EQ(failure_reason(refusal::held, {tls, timeout, make_vote(node_status::ok)}), errc::unavailable);
  // Ties go to the other permanent errors first.
  EXPECT_EQ(failure_reason(refusal::held, {tls, auth, timeout}), errc::auth_failed);
  EXPECT_EQ(failure_reason(refusal::held, {tls, tls, auth, timeout, timeout}), errc::tls_failed);
  EXPECT_FALSE(retryable(errc::tls_failed));
}

TEST(FailureReason, ContendedTakesPrecedenceOverPermanentErrorsOfAMinority) {
  const std::vector<vote> votes = {make_vote(node_status::held), make_vote(node_status::held),
                                   make_vote(node_status::auth_error, errc::auth_failed)};
  EXPECT_EQ(failure_reason(refusal::held, votes), errc::contended);
  const std::vector<vote> release_votes = {make_vote(node_status::not_owner), make_vote(node_status::not_owner),
                                           make_vote(node_status::server_error, errc::wrong_type)};
  EXPECT_EQ(failure_reason(refusal::not_owner, release_votes), errc::not_owner);
  // One refusal and one permanent error of three rule out nothing by themselves.
  const std::vector<vote> mixed = {make_vote(node_status::not_owner), make_vote(node_status::ok),
                                   make_vote(node_status::server_error, errc::wrong_type)};
  EXPECT_EQ(failure_reason(refusal::not_owner, mixed), errc::unavailable);
}

// --- exhaustive: every count of every kind of vote, N = 1..7 ---

// The kinds of vote that matter to the reason (timeout stands for every plain
// failure: connection error, protocol error, non-permanent server error, excluded).
enum kind_index {
  k_ok, k_held, k_not_owner, k_timeout, k_auth, k_noperm, k_wrongtype, k_tls, k_cancelled, k_pending, k_count
};

vote vote_of(int k) {
  switch (k) {
    case k_ok: return make_vote(node_status::ok);
    case k_held: return make_vote(node_status::held);
    case k_not_owner: return make_vote(node_status::not_owner);
    case k_timeout: return make_vote(node_status::timeout);
    case k_auth: return make_vote(node_status::auth_error, errc::auth_failed);
    case k_noperm: return make_vote(node_status::server_error, errc::permission_denied);
    case k_wrongtype: return make_vote(node_status::server_error, errc::wrong_type);
    case k_tls: return make_vote(node_status::tls_error, errc::tls_failed);
    case k_cancelled: return make_vote(node_status::cancelled);
    default: return make_vote(node_status::pending);
  }
}

using counts = std::array<std::size_t, k_count>;

// The rule, written from the contract in decision.h.
std::error_code expected_reason(refusal kind, const counts& c) {
  std::size_t n = 0;
  for (std::size_t x : c) n += x;
  const std::size_t tolerated = n - quorum_of(n);
  const std::size_t refused = kind == refusal::held ? c[k_held] : c[k_not_owner];
  if (n > 0 && refused > tolerated) return kind == refusal::held ? errc::contended : errc::not_owner;
  if (n > 0 && c[k_auth] + c[k_noperm] + c[k_wrongtype] + c[k_tls] > tolerated) {
    if (c[k_auth] >= c[k_noperm] && c[k_auth] >= c[k_wrongtype] && c[k_auth] >= c[k_tls]) return errc::auth_failed;
    if (c[k_noperm] >= c[k_wrongtype] && c[k_noperm] >= c[k_tls]) return errc::permission_denied;
    if (c[k_wrongtype] >= c[k_tls]) return errc::wrong_type;
    return errc::tls_failed;
  }
  if (n > 0 && c[k_cancelled] == n) return errc::cancelled;
  return errc::unavailable;
}

// Calls f(counts) for every way of putting n votes into the kinds [first, k_count).
template <class F>
void for_each_counts(std::size_t n, int last_kind, F&& f) {
  counts c{};
  std::function<void(int, std::size_t)> rec = [&](int k, std::size_t left) {
    if (k == last_kind) {
      c[k] = left;
      f(c);
      c[k] = 0;
      return;
    }
    for (std::size_t x = 0; x <= left; ++x) {
      c[k] = x;
      rec(k + 1, left - x);
    }
    c[k] = 0;
  };
  rec(0, n);
}

std::vector<vote> votes_of(const counts& c, bool reversed) {
  std::vector<vote> v;
  for (int k = 0; k < k_count; ++k) {
    for (std::size_t i = 0; i < c[k]; ++i) v.push_back(vote_of(k));
  }
  if (reversed) std::reverse(v.begin(), v.end());
  return v;
}

constexpr refusal kKinds[] = {refusal::held, refusal::not_owner};

TEST(FailureReason, ExhaustivelyFollowsTheRuleAndIgnoresOrderUpToSevenNodes) {
  std::size_t checked = 0;
  for (std::size_t n = 1; n <= 7; ++n) {
    for_each_counts(n, k_pending, [&](const counts& c) {
      for (refusal kind : kKinds) {
        const std::error_code want = expected_reason(kind, c);
        ASSERT_EQ(failure_reason(kind, votes_of(c, false)), want) << "n=" << n;
        ASSERT_EQ(failure_reason(kind, votes_of(c, true)), want) << "n=" << n;
        ++checked;
      }
    });
  }
  EXPECT_GT(checked, 10000u);
}

// reason_may_change() against every way the pending votes can turn out.
TEST(ReasonMayChange, ExhaustivelyTrueExactlyWhenSomeOutcomeOfThePendingVotesChangesTheReason) {
  std::size_t checked = 0, changing = 0;
  for (std::size_t n = 1; n <= 7; ++n) {
    for_each_counts(n, k_pending, [&](const counts& c) {
      for (refusal kind : kKinds) {
        const std::error_code now = failure_reason(kind, votes_of(c, false));
        bool may_change = false;
        for_each_counts(c[k_pending], k_cancelled, [&](const counts& outcome) {
          counts all = c;
          all[k_pending] = 0;
          for (int k = 0; k < k_pending; ++k) all[k] += outcome[k];
          may_change = may_change || expected_reason(kind, all) != now;
        });
        ASSERT_EQ(reason_may_change(kind, votes_of(c, false)), may_change) << "n=" << n;
        ASSERT_EQ(reason_may_change(kind, votes_of(c, true)), may_change) << "n=" << n;
        changing += may_change ? 1 : 0;
        ++checked;
      }
    });
  }
  EXPECT_GT(changing, 100u);
  EXPECT_GT(checked, 10000u);
}

TEST(ReasonMayChange, FalseWithEveryVoteIn) {
  for (std::size_t n = 1; n <= 7; ++n) {
    for_each_counts(n, k_cancelled, [&](const counts& c) {
      for (refusal kind : kKinds) ASSERT_FALSE(reason_may_change(kind, votes_of(c, false)));
    });
  }
}

// The round's rule (round::evaluate): decide at quorum, or at no quorum once the
// reason may no longer change. Under every arrival order of every set of final
// votes, N = 1..6, the reason heard at that moment is the reason with every vote
// in. (Found by fuzz_decision: protocol error, WRONGTYPE, auth refused, in that
// order, was decided as WRONGTYPE; with every vote in it was an auth refusal.)
TEST(ReasonMayChange, TheRoundsReasonNeverDependsOnTheReplyOrder) {
  std::size_t orders = 0;
  for (std::size_t n = 1; n <= 6; ++n) {
    for_each_counts(n, k_cancelled, [&](const counts& c) {
      std::vector<int> seq;
      for (int k = 0; k < k_pending; ++k) seq.insert(seq.end(), c[k], k);
      for (refusal kind : kKinds) {
        std::vector<vote> all;
        for (int k : seq) all.push_back(vote_of(k));
        const std::error_code final_reason = failure_reason(kind, all);
        const bool final_quorum = decide(count_votes(all)) == verdict::quorum;
        std::vector<int> order = seq;  // sorted: next_permutation visits each distinct order once
        do {
          std::vector<vote> votes(n);
          std::optional<std::error_code> heard;
          for (int k : order) {
            // Fill the first pending slot whose final vote is k (slots are interchangeable).
            for (std::size_t i = 0; i < n; ++i) {
              if (votes[i].status == node_status::pending) {
                votes[i] = vote_of(k);
                break;
              }
            }
            const verdict v = decide(count_votes(votes));
            if (v == verdict::quorum) {
              heard = std::error_code{};
              break;
            }
            if (v == verdict::no_quorum && !reason_may_change(kind, votes)) {
              heard = failure_reason(kind, votes);
              break;
            }
          }
          ASSERT_TRUE(heard.has_value()) << "undecided with every vote in, n=" << n;
          ASSERT_EQ(*heard, final_quorum ? std::error_code{} : final_reason) << "n=" << n;
          ++orders;
        } while (std::next_permutation(order.begin(), order.end()));
      }
    });
  }
  EXPECT_GT(orders, 100000u);
}

TEST(FailureReason, NonPermanentServerErrorsAreUnavailable) {
  const std::vector<vote> votes = {make_vote(node_status::server_error),
                                   make_vote(node_status::protocol_error), make_vote(node_status::excluded)};
  EXPECT_EQ(failure_reason(refusal::held, votes), errc::unavailable);
}

TEST(FailureReason, CancelledWhenEveryNodeWasCancelled) {
  for (std::size_t n = 1; n <= 7; ++n) {
    const std::vector<vote> votes(n, make_vote(node_status::cancelled));
    EXPECT_EQ(failure_reason(refusal::held, votes), errc::cancelled) << "n=" << n;
    EXPECT_EQ(failure_reason(refusal::not_owner, votes), errc::cancelled) << "n=" << n;
  }
}

TEST(FailureReason, PartlyCancelledIsUnavailable) {
  const std::vector<vote> votes = {make_vote(node_status::cancelled), make_vote(node_status::cancelled),
                                   make_vote(node_status::timeout)};
  EXPECT_EQ(failure_reason(refusal::held, votes), errc::unavailable);
}

TEST(FailureReason, NoNodesIsUnavailable) {
  EXPECT_EQ(failure_reason(refusal::held, {}), errc::unavailable);
}

TEST(Retryable, OnlyContendedUnavailableAndValidityExhaustedAreRetried) {
  EXPECT_TRUE(retryable(errc::contended));
  EXPECT_TRUE(retryable(errc::unavailable));
  EXPECT_TRUE(retryable(errc::validity_exhausted));
  EXPECT_FALSE(retryable(errc::lock_lost));
  EXPECT_FALSE(retryable(errc::not_owner));
  EXPECT_FALSE(retryable(errc::invalid_argument));
  EXPECT_FALSE(retryable(errc::auth_failed));
  EXPECT_FALSE(retryable(errc::wrong_type));
  EXPECT_FALSE(retryable(errc::cancelled));
  EXPECT_FALSE(retryable(errc::would_deadlock));
  EXPECT_FALSE(retryable(errc::extension_limit));
  EXPECT_FALSE(retryable(errc::permission_denied));
  EXPECT_FALSE(retryable(std::error_code{}));
}

TEST(Retryable, NoCodeIsBothRetryableAndPermanent) {
  for (int v = 1; v <= static_cast<int>(errc::permission_denied); ++v) {
    const std::error_code ec = make_error_code(static_cast<errc>(v));
    EXPECT_FALSE(retryable(ec) && is_permanent(ec)) << ec.message();
  }
}

TEST(Retryable, CodesOfOtherCategoriesWithTheSameValueAreNotRetried) {
  const int contended = static_cast<int>(errc::contended);
  EXPECT_FALSE(retryable(std::error_code(contended, std::generic_category())));
  EXPECT_FALSE(retryable(std::make_error_code(std::errc::timed_out)));
}

// --- describe / report::message ---

node_result node(std::string uri, node_status s, std::string detail = "") {
  node_result r;
  r.node = std::move(uri);
  r.status = s;
  r.detail = std::move(detail);
  return r;
}

TEST(Describe, SuccessNamesOkCountAndValidity) {
  report r;
  r.attempts = 1;
  r.validity = milliseconds(29650);
  r.nodes = {node("redis://h1:7001", node_status::ok), node("redis://h2:7002", node_status::ok),
             node("redis://h3:7003", node_status::ok), node("redis://h4:7004", node_status::pending),
             node("redis://h5:7005", node_status::pending)};
  EXPECT_EQ(describe(r), "ok on 3 of 5 nodes, validity 29650 ms");
  r.attempts = 4;  // not "validity 29650 ms after 4 attempts"
  EXPECT_EQ(describe(r), "ok on 3 of 5 nodes after 4 attempts, validity 29650 ms");
}

TEST(Describe, SuccessWithoutValidityOmitsIt) {
  report r;
  r.attempts = 1;
  r.nodes = {node("redis://h1", node_status::ok)};
  EXPECT_EQ(describe(r), "ok on 1 of 1 node");
}

TEST(Describe, SuccessStillNamesFailingNodes) {
  report r;
  r.attempts = 1;
  r.nodes = {node("redis://h1", node_status::ok), node("redis://h2", node_status::ok),
             node("redis://h3", node_status::timeout, "no reply within 50 ms")};
  const std::string m = describe(r);
  EXPECT_TRUE(contains(m, "ok on 2 of 3 nodes"));
  EXPECT_TRUE(contains(m, "redis://h3: timeout (no reply within 50 ms)"));
}

TEST(Describe, ContendedNamesHeldCountAndQuorumButNotTheHeldNodes) {
  report r;
  r.error = errc::contended;
  r.attempts = 1;
  r.nodes = {node("redis://h1", node_status::held), node("redis://h2", node_status::held),
             node("redis://h3", node_status::held), node("redis://h4", node_status::ok),
             node("redis://h5", node_status::connection_error, "connection refused")};
  const std::string m = describe(r);
  EXPECT_TRUE(contains(m, "contended"));
  EXPECT_TRUE(contains(m, "3 of 5"));
  EXPECT_TRUE(contains(m, "quorum 3"));
  EXPECT_TRUE(contains(m, "redis://h5: connection error (connection refused)"));
  EXPECT_TRUE(lacks(m, "redis://h1"));
  EXPECT_TRUE(lacks(m, "redis://h4"));
}

TEST(Describe, NotOwnerNamesNotOwnerCountAndQuorum) {
  report r;
  r.error = errc::not_owner;
  r.attempts = 1;
  r.nodes = {node("redis://h1", node_status::not_owner), node("redis://h2", node_status::not_owner),
             node("redis://h3", node_status::ok)};
  const std::string m = describe(r);
  EXPECT_TRUE(contains(m, "not owner"));
  EXPECT_TRUE(contains(m, "2 of 3"));
  EXPECT_TRUE(contains(m, "quorum 2"));
  EXPECT_TRUE(lacks(m, "redis://h1"));
}

TEST(Describe, UnavailableCountsAnswersAndNamesEachFailingNodeWithStatusAndDetail) {
  report r;
  r.error = errc::unavailable;
  r.attempts = 1;
  r.nodes = {node("redis://:***@h1:7001", node_status::ok), node("redis://:***@h2:7002", node_status::held),
             node("redis://:***@h3:7003", node_status::timeout, "no reply within 50 ms"),
             node("redis://:***@h4:7004", node_status::connection_error, "Connection refused"),
             node("redis://:***@h5:7005", node_status::server_error, "OOM command not allowed")};
  const std::string m = describe(r);
  EXPECT_TRUE(contains(m, "unavailable: ok on 1 of 5 nodes, quorum is 3; 1 refused, 1 answered with an error, "
                          "2 did not answer"));
  EXPECT_TRUE(contains(m, "redis://:***@h2:7002: held"));
  EXPECT_TRUE(contains(m, "redis://:***@h3:7003: timeout (no reply within 50 ms)"));
  EXPECT_TRUE(contains(m, "redis://:***@h4:7004: connection error (Connection refused)"));
  EXPECT_TRUE(contains(m, "redis://:***@h5:7005: server error (OOM command not allowed)"));
  EXPECT_TRUE(lacks(m, "h1:7001"));
}

// A refusal or an error reply is an answer: "only 2 of 3 nodes could answer" for
// three nodes that all answered was wrong.
TEST(Describe, UnavailableDoesNotCountRefusalsOrErrorRepliesAsMissingAnswers) {
  report r;
  r.error = errc::unavailable;
  r.attempts = 1;
  r.nodes = {node("redis://h1", node_status::ok), node("redis://h2", node_status::held),
             node("redis://h3", node_status::server_error, "OOM command not allowed")};
  EXPECT_EQ(describe(r),
            "unavailable: ok on 1 of 3 nodes, quorum is 2; 1 refused, 1 answered with an error "
            "[redis://h2: held; redis://h3: server error (OOM command not allowed)]");
}

TEST(Describe, UnavailableCountsSilentExcludedAndPendingNodesApart) {
  report r;
  r.error = errc::unavailable;
  r.attempts = 1;
  r.nodes = {node("redis://h1", node_status::ok), node("redis://h2", node_status::timeout, "no reply within 50 ms"),
             node("redis://h3", node_status::connection_error, "Connection refused"),
             node("redis://h4", node_status::excluded, "restarted"), node("redis://h5", node_status::pending)};
  const std::string m = describe(r);
  EXPECT_TRUE(
      contains(m,
               "unavailable: ok on 1 of 5 nodes, quorum is 3; 2 did not answer, 1 excluded by a guard, "
               "1 reply not waited for (it could not change the outcome) ["));
  EXPECT_TRUE(lacks(m, "1 refused"));
}

// A failed report: `e` after `attempts` attempts, with these nodes.
report failed(errc e, int attempts, std::vector<node_result> nodes) {
  report r;
  r.error = e;
  r.attempts = attempts;
  r.nodes = std::move(nodes);
  return r;
}

// "does not hold the lock on 3 of 5 nodes" read as if it held it on the other two,
// which had not been waited for.
TEST(Describe, NotOwnerSaysWhatEachNodeAnsweredAndNotWhatTheOthersHold) {
  report r = failed(errc::not_owner, 1,
                    {node("redis://h1", node_status::not_owner), node("redis://h2", node_status::pending),
                     node("redis://h3", node_status::not_owner), node("redis://h4", node_status::not_owner),
                     node("redis://h5", node_status::pending)});
  EXPECT_EQ(
      describe(r),
      "not owner: 3 of 5 nodes answered that the token does not hold the lock (quorum 3); 2 replies not "
      "waited for (they could not change the outcome)");
  r.nodes[1] = node("redis://h2", node_status::ok);
  r.nodes[4] = node("redis://h5", node_status::timeout, "no reply within 50 ms");
  EXPECT_EQ(
      describe(r),
      "not owner: 3 of 5 nodes answered that the token does not hold the lock (quorum 3), 1 that it does; 1 "
      "did not answer [redis://h5: timeout (no reply within 50 ms)]");
}

TEST(Describe, NotOwnerRefusedBeforeAnyNodeWasAskedSaysSo) {
  report r = failed(
      errc::not_owner, 1,
      {node("redis://h1", node_status::pending, "lock not held"), node("redis://h2", node_status::pending)});
  EXPECT_EQ(describe(r), "not owner: lock not held (no node was asked)");
  r.nodes.clear();
  EXPECT_EQ(describe(r), "not owner: no node was asked");
}

// "1 still pending after 3 attempts" read as one node pending across the attempts.
TEST(Describe, AttemptsComeBeforeTheLastAttemptsCounts) {
  report r = failed(
      errc::unavailable, 3,
      {node("redis://h1", node_status::ok), node("redis://h2", node_status::timeout, "no reply within 50 ms"),
       node("redis://h3", node_status::pending)});
  EXPECT_EQ(
      describe(r),
      "unavailable after 3 attempts; in the last, ok on 1 of 3 nodes, quorum is 2; 1 did not answer, 1 reply "
      "not waited for (it could not change the outcome) [redis://h2: timeout (no reply within 50 ms)]");
  r.error = errc::contended;
  r.nodes = {node("redis://h1", node_status::held), node("redis://h2", node_status::held),
             node("redis://h3", node_status::pending)};
  EXPECT_EQ(describe(r),
            "contended after 3 attempts; in the last, held by another owner on 2 of 3 nodes (quorum 2); 1 "
            "reply not waited for (it could not change the outcome)");
}

// "a node refused authentication" followed by two nodes.
TEST(Describe, AuthAndTlsFailuresCountTheNodesTheyName) {
  report r =
      failed(errc::auth_failed, 1,
             {node("redis://:***@h1", node_status::auth_error, "WRONGPASS invalid username-password pair"),
              node("redis://:***@h2", node_status::auth_error, "WRONGPASS invalid username-password pair"),
              node("redis://:***@h3", node_status::ok)});
  EXPECT_EQ(
      describe(r),
      "authentication refused on 2 of 3 nodes [redis://:***@h1: authentication refused (WRONGPASS invalid "
      "username-password pair); redis://:***@h2: authentication refused (WRONGPASS invalid username-password "
      "pair)]");
  r.error = errc::tls_failed;
  r.nodes = {node("rediss://h1", node_status::tls_error, "the node's certificate has expired")};
  EXPECT_EQ(describe(r),
            "TLS verification failed on 1 of 1 node [rediss://h1: TLS error (the node's certificate "
            "has expired)]");
}

TEST(Describe, OneNodeIsNotNodes) {
  report r = failed(errc::unavailable, 1,
                    {node("redis://h1", node_status::connection_error, "connect: connection refused")});
  EXPECT_TRUE(contains(describe(r), "ok on 0 of 1 node, quorum is 1; 1 did not answer"));
  r.error = {};
  r.nodes = {node("redis://h1", node_status::ok)};
  EXPECT_EQ(describe(r), "ok on 1 of 1 node");
}

// The integers of `text` (each maximal run of digits).
std::vector<std::size_t> numbers_in(const std::string& text) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] < '0' || text[i] > '9') {
      ++i;
      continue;
    }
    std::size_t v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9')
      v = v * 10 + static_cast<std::size_t>(text[i++] - '0');
    out.push_back(v);
  }
  return out;
}

// For every mix of what 3 nodes did, the counts after "; " (with the ok count, and
// for contended and not owner the refusals, of the head) add up to the nodes.
TEST(Describe, TheCountsAddUpToTheNodesForEveryMixOfStatuses) {
  const node_status kinds[] = {node_status::ok,      node_status::held,         node_status::not_owner,
                               node_status::timeout, node_status::server_error, node_status::excluded,
                               node_status::pending, node_status::cancelled,    node_status::auth_error};
  for (errc e : {errc::unavailable, errc::contended, errc::not_owner}) {
    for (node_status a : kinds) {
      for (node_status b : kinds) {
        for (node_status c : kinds) {
          report r;
          r.error = make_error_code(e);
          r.attempts = 1;
          r.nodes = {node("redis://h1", a), node("redis://h2", b), node("redis://h3", c)};
          const node_status refusal = e == errc::contended ? node_status::held : node_status::not_owner;
          if (e != errc::unavailable &&
              (r.count(refusal) == 0 ||
               r.count(node_status::held) + r.count(node_status::not_owner) != r.count(refusal))) {
            continue;  // not a report such an error comes with
          }
          const std::string m = describe(r);
          const std::string head = m.substr(0, m.find("; "));
          const std::string tail = m.find("; ") == std::string::npos
                                       ? ""
                                       : m.substr(m.find("; ") + 2, m.find(" [") - m.find("; ") - 2);
          std::size_t sum = 0;
          for (std::size_t v : numbers_in(tail)) sum += v;
          sum += static_cast<std::size_t>(r.count(node_status::ok));
          if (e != errc::unavailable) sum += static_cast<std::size_t>(r.count(refusal));
          EXPECT_EQ(sum, 3u) << m;
          EXPECT_TRUE(contains(head, "of 3 nodes")) << m;
        }
      }
    }
  }
}

TEST(Describe, AReportRefusedBeforeAnyNodeWasAskedGivesItsReason) {
  report r;
  r.error = errc::invalid_argument;
  r.nodes = {node("redis://h1", node_status::pending, "ttl must be positive"), node("redis://h2", node_status::pending)};
  EXPECT_EQ(describe(r), make_error_code(errc::invalid_argument).message() + ": ttl must be positive");
}

TEST(Describe, ValidityExhaustedNamesTheElapsedMilliseconds) {
  report r;
  r.error = errc::validity_exhausted;
  r.attempts = 1;
  r.elapsed = microseconds(31234567);
  r.nodes = {node("redis://h1", node_status::ok)};
  EXPECT_TRUE(contains(describe(r), "validity exhausted"));
  EXPECT_TRUE(contains(describe(r), "took 31234 ms"));
}

TEST(Describe, OtherErrorsUseTheCategoryMessageAndNameTheNodes) {
  report r;
  r.error = errc::auth_failed;
  r.attempts = 1;
  r.nodes = {node("redis://u:***@h1", node_status::auth_error, "WRONGPASS invalid username-password pair"),
             node("redis://u:***@h2", node_status::ok), node("redis://u:***@h3", node_status::pending)};
  const std::string m = describe(r);
  EXPECT_TRUE(contains(m, make_error_code(errc::auth_failed).message()));
  EXPECT_TRUE(
      contains(m, "redis://u:***@h1: authentication refused (WRONGPASS invalid username-password pair)"));
  EXPECT_TRUE(lacks(m, "redis://u:***@h3"));  // pending is not a failure
}

TEST(Describe, MentionsAttemptsOnlyWhenRetried) {
  report r;
  r.error = errc::contended;
  r.nodes = {node("redis://h1", node_status::held)};
  r.attempts = 1;
  EXPECT_TRUE(lacks(describe(r), "attempts"));
  r.attempts = 4;
  EXPECT_TRUE(contains(describe(r), "after 4 attempts"));
}

TEST(Describe, NeverContainsTheToken) {
  const std::string token = make_token();
  report r;
  r.error = errc::unavailable;
  r.attempts = 3;
  r.nodes = {
      node("redis://u:***@h1:7001", node_status::ok),
      node("redis://u:***@h2:7002", node_status::server_error, "READONLY You can't write against a replica"),
      node("redis://u:***@h3:7003", node_status::timeout, "no reply within 50 ms")};
  for (errc e : {errc{}, errc::contended, errc::unavailable, errc::validity_exhausted, errc::not_owner,
                 errc::auth_failed, errc::lock_lost}) {
    r.error = e == errc{} ? std::error_code{} : make_error_code(e);
    const std::string m = describe(r);
    EXPECT_TRUE(lacks(m, token));
    EXPECT_TRUE(lacks(m, token.substr(0, 8)));
    EXPECT_TRUE(lacks(m, "hunter2"));
  }
}

TEST(ReportMessage, IsDescribe) {
  report r;
  r.error = errc::unavailable;
  r.attempts = 2;
  r.nodes = {node("redis://h1", node_status::timeout, "no reply"), node("redis://h2", node_status::ok),
             node("redis://h3", node_status::excluded, "quarantined")};
  EXPECT_EQ(r.message(), describe(r));
  EXPECT_TRUE(contains(r.message(), "1 of 3"));
  EXPECT_TRUE(contains(r.message(), "after 2 attempts"));
  EXPECT_TRUE(contains(r.message(), "redis://h3: excluded (quarantined)"));
}

TEST(ReportCount, CountsNodesWithTheStatus) {
  report r;
  r.nodes = {node("a", node_status::ok), node("b", node_status::ok), node("c", node_status::held)};
  EXPECT_EQ(r.count(node_status::ok), 2);
  EXPECT_EQ(r.count(node_status::held), 1);
  EXPECT_EQ(r.count(node_status::timeout), 0);
}

TEST(ReportBool, IsTrueExactlyWithoutError) {
  report r;
  EXPECT_TRUE(static_cast<bool>(r));
  r.error = errc::contended;
  EXPECT_FALSE(static_cast<bool>(r));
}

}  // namespace
}  // namespace redlock::detail
