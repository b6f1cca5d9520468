// Scenario 1: the quorum table. For N = 3, 5, 7 independent nodes, each node is
// up, down (SIGKILLed) or held (the key holds a foreign token). An acquire must
// succeed iff the available nodes (up and not held) are at least N/2 + 1, fail
// with the error that says what to do next otherwise, and a failed acquire must
// leave no key of its own on any node (foreign keys untouched).
//
// Down-masks are walked in Gray-code order (one kill or start per step); at each
// down-mask the held-subsets of the remaining nodes are tried: all of them for
// N <= 5 (all 3^N combinations), and for N = 7 all 2^7 held-masks with no node
// down plus, for every other down-mask, the empty held set and two random ones.
// Each combination uses a fresh client: a node restarted without data must not
// be quarantined by a restart guard that saw it before (that is scenario 5).
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "fault_util.h"

namespace redlock::test {
namespace {

struct table_figures {
  std::uint64_t combinations = 0;
  std::uint64_t kills = 0;
  std::uint64_t starts = 0;
  std::uint64_t held_keys = 0;
  std::vector<std::string> mismatches;
  // Failed as expected, but with another error than the documented rule gives
  // (contended when the nodes that answered or could still answer hold a quorum).
  std::vector<std::string> reason_mismatches;
};

std::string mask_text(int n, unsigned down, unsigned held) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    const unsigned bit = 1u << i;
    s.push_back((down & bit) != 0 ? 'D' : (held & bit) != 0 ? 'H' : 'U');
  }
  return s;
}

int popcount(unsigned v) { return __builtin_popcount(v); }

// One combination: returns "" when everything matched, else what did not.
std::string check_combination(redis_cluster& nodes, int n, unsigned down, unsigned held, int round,
                              table_figures& f) {
  const std::string key =
      "quorum-n" + std::to_string(n) + "-" + mask_text(n, down, held) + "-r" + std::to_string(round);
  const std::string foreign = "foreign-" + mask_text(n, down, held);
  for (int i = 0; i < n; ++i) {
    if ((held & (1u << i)) == 0) continue;
    nodes[static_cast<std::size_t>(i)].command({"SET", key, foreign, "PX", "60000"});
    ++f.held_keys;
  }
  const int q = n / 2 + 1;
  const int available = n - popcount(down) - popcount(held);
  const bool should_succeed = available >= q;
  // Contended exactly when the held nodes alone rule out a quorum (decision.h).
  const errc expected_error = popcount(held) > n - q ? errc::contended : errc::unavailable;

  acquire_result r;
  {
    // Nothing here needs a short timeout (a down node refuses at once): a long one
    // keeps a loaded machine from turning a slow answer into a timeout vote.
    client_options co = scenario_options(nodes.uris());
    co.command_timeout = 2000ms;
    co.connect_timeout = 2000ms;
    client c(co);
    acquire_options o;
    o.ttl = 20000ms;
    o.retry = retry_policy::once();
    r = c.acquire(key, o);
    std::ostringstream why;
    const std::string where = mask_text(n, down, held) + ": ";
    if (static_cast<bool>(r) != should_succeed) {
      why << where << "expected " << (should_succeed ? "success" : "failure") << ", got "
          << r.report.message();
      return why.str();
    }
    if (!should_succeed && r.report.error != expected_error) {
      if (expected_error == errc::contended && r.report.error == errc::unavailable) {
        // Counted, not failed: a reply slower than the node timeout on a loaded
        // machine turns a held vote into a timeout.
        f.reason_mismatches.push_back(where + "expected contended, got " + r.report.message());
      } else {
        why << where << "expected " << error_name(expected_error) << ", got " << r.report.message();
        return why.str();
      }
    }
    // No vote may come from a node that is down or held.
    for (int i = 0; i < n; ++i) {
      const node_status s = r.report.nodes[static_cast<std::size_t>(i)].status;
      const unsigned bit = 1u << i;
      // A loaded machine may make any node miss the command timeout: a timeout is
      // never a wrong vote (the outcome check above still applies).
      if (s == node_status::timeout) continue;
      if ((down & bit) != 0 && s != node_status::connection_error && s != node_status::pending) {
        why << where << "down node " << i << " voted " << to_string(s);
      } else if ((held & bit) != 0 && s != node_status::held && s != node_status::pending) {
        why << where << "held node " << i << " voted " << to_string(s);
      } else if ((down & bit) == 0 && (held & bit) == 0 && s != node_status::ok &&
                 s != node_status::pending) {
        why << where << "available node " << i << " voted " << to_string(s);
      }
    }
    if (!why.str().empty()) return why.str();
    if (should_succeed) {
      const std::string token = r.lock.info().token;
      // Every available node gets the key (late ones too).
      const bool all_set = eventually([&] { return nodes.count_value(key, token) == available; });
      if (!all_set) {
        why << where << "token on " << nodes.count_value(key, token) << " nodes, expected " << available;
        return why.str();
      }
      const report rel = r.lock.release();
      if (!rel) return where + "release failed: " + rel.message();
    }
  }  // the client is gone: nothing it sent can still be on its way
  // No key of our own anywhere; foreign keys untouched.
  std::ostringstream why;
  for (int i = 0; i < n; ++i) {
    const unsigned bit = 1u << i;
    if ((down & bit) != 0) continue;
    std::optional<std::string> v = nodes[static_cast<std::size_t>(i)].get(key);
    if ((held & bit) != 0) {
      if (v != foreign) why << mask_text(n, down, held) << ": held node " << i << " lost its foreign key; ";
    } else if (v) {
      why << mask_text(n, down, held) << ": node " << i << " still has a key of its own; ";
    }
  }
  return why.str();
}

void walk_table(redis_cluster& nodes, int n, int round, table_figures& f, std::mt19937& rng) {
  unsigned current_down = 0;
  const unsigned all = (1u << n) - 1;
  for (unsigned k = 0; k <= all; ++k) {
    const unsigned down = k ^ (k >> 1);  // Gray code: one node changes per step
    const unsigned changed = down ^ current_down;
    for (int i = 0; i < n; ++i) {
      if ((changed & (1u << i)) == 0) continue;
      if ((down & (1u << i)) != 0) {
        nodes[static_cast<std::size_t>(i)].kill();
        ++f.kills;
      } else {
        nodes[static_cast<std::size_t>(i)].start();
        ++f.starts;
      }
    }
    current_down = down;
    const unsigned up = all & ~down;
    std::vector<unsigned> held_sets;
    if (n <= 5 || down == 0) {
      // Every subset of the up nodes.
      for (unsigned h = up;; h = (h - 1) & up) {
        held_sets.push_back(h);
        if (h == 0) break;
      }
    } else {
      held_sets.push_back(0);
      for (int s = 0; s < 2; ++s) held_sets.push_back(static_cast<unsigned>(rng()) & up);
    }
    for (unsigned held : held_sets) {
      std::string m = check_combination(nodes, n, down, held, round, f);
      ++f.combinations;
      if (!m.empty()) f.mismatches.push_back(m);
    }
  }
  for (int i = 0; i < n; ++i) {
    if (!nodes[static_cast<std::size_t>(i)].running()) {
      nodes[static_cast<std::size_t>(i)].start();
      ++f.starts;
    }
  }
}

class QuorumTable : public ::testing::TestWithParam<int> {};

TEST_P(QuorumTable, acquire_succeeds_iff_a_quorum_is_available_and_failures_leave_no_key) {
  const int n = GetParam();
  redis_cluster nodes(n);
  table_figures f;
  std::mt19937 rng(static_cast<unsigned>(n) * 7919u);
  const int rounds = repeat_for_soak([&](int round) { walk_table(nodes, n, round, f, rng); });
  std::ostringstream first;
  for (std::size_t i = 0; i < f.mismatches.size() && i < 20; ++i) first << "\n  " << f.mismatches[i];
  EXPECT_TRUE(f.mismatches.empty()) << f.mismatches.size() << " of " << f.combinations
                                    << " combinations did not match:" << first.str();
  figures fig;
  fig.scenario = "quorum_table_n" + std::to_string(n);
  fig.runs = rounds;
  fig.operations = f.combinations;
  fig.faults = f.kills + f.held_keys;
  fig.violations = f.mismatches.size();
  fig.extra = "kills=" + std::to_string(f.kills) + " restarts=" + std::to_string(f.starts) +
              " foreign_keys=" + std::to_string(f.held_keys) +
              " reason_mismatches=" + std::to_string(f.reason_mismatches.size());
  fig.publish();
}

// Pins how a failure is explained when a node is down (found by the table: the
// reason used to depend on the order of the replies). `contended` means the nodes
// held by other owners alone rule out a quorum; with a node down and only one
// foreign holder of three, the outage is part of the reason: `unavailable`, and
// the message still counts the held node. Either way the answer no longer
// depends on which reply arrives first.
TEST(QuorumReason, failure_reason_names_contention_only_when_holders_alone_block_a_quorum) {
  redis_cluster nodes(3);
  nodes[0].kill();
  nodes[1].command({"SET", "reason-key", "foreign", "PX", "60000"});
  client c(scenario_options(nodes.uris()));
  for (int i = 0; i < 5; ++i) {
    auto r = c.acquire("reason-key", once(10000ms));
    EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
    EXPECT_EQ(r.report.count(node_status::held), 1) << r.report.message();
  }
  nodes[2].command({"SET", "reason-key-2", "foreign", "PX", "60000"});
  nodes[1].command({"SET", "reason-key-2", "foreign", "PX", "60000"});
  for (int i = 0; i < 5; ++i) {
    auto r = c.acquire("reason-key-2", once(10000ms));
    EXPECT_EQ(r.report.error, errc::contended) << r.report.message();
  }
}

// Pins a library bug found by fuzz_decision: with an even number of nodes, as many
// failures as refusals can each rule out a quorum (N = 4: two of either). The round
// waits for pending answers that could still make it "contended" only once a
// refusal has arrived, so when the two failures arrive first (down nodes refuse
// the connection at once) the acquire reports `unavailable`, and `contended` in
// the other order; decision.h says contended whenever the refusals alone rule out
// a quorum. Fixed: the round now also waits when no refusal has arrived yet but
// the pending answers could still block (refused + pending >= N - q + 1).
TEST(QuorumReason, failure_reason_does_not_depend_on_reply_order_with_an_even_node_count) {
  redis_cluster nodes(4);
  nodes[0].kill();
  nodes[1].kill();
  nodes[2].command({"SET", "even-key", "foreign", "PX", "60000"});
  nodes[3].command({"SET", "even-key", "foreign", "PX", "60000"});
  for (int i = 0; i < 5; ++i) {
    client c(scenario_options(nodes.uris()));  // fresh: the down nodes fail first
    auto r = c.acquire("even-key", once(10000ms));
    EXPECT_EQ(r.report.error, errc::contended) << r.report.message();
  }
}

INSTANTIATE_TEST_SUITE_P(N, QuorumTable, ::testing::Values(3, 5, 7),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "n" + std::to_string(i.param);
                         });

}  // namespace
}  // namespace redlock::test
