// lib/leader_view: the leader record's format and who leads from node views.
#include "primitives/leader_view.h"

#include <gtest/gtest.h>

namespace redlock::detail {
namespace {

const std::string sha_a(40, 'a');
const std::string sha_b(40, 'b');

node_leader_view holding(const std::string& lock_sha, std::uint64_t term, const std::string& record_sha,
                         const std::string& id, std::int64_t pttl) {
  node_leader_view v;
  v.answered = true;
  v.lock_sha1 = lock_sha;
  v.record = format_leader_record({term, record_sha, id});
  v.pttl = pttl;
  return v;
}

node_leader_view empty_node() {
  node_leader_view v;
  v.answered = true;
  return v;
}

TEST(leader_record, round_trips_identity_with_spaces) {
  const auto r = parse_leader_record(format_leader_record({42, sha_a, "host a:123"}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->term, 42u);
  EXPECT_EQ(r->token_sha1, sha_a);
  EXPECT_EQ(r->identity, "host a:123");
}

TEST(leader_record, rejects_malformed_records) {
  EXPECT_FALSE(parse_leader_record(""));
  EXPECT_FALSE(parse_leader_record("12"));
  EXPECT_FALSE(parse_leader_record("12 " + sha_a));
  EXPECT_FALSE(parse_leader_record("12 " + sha_a + " "));                   // empty identity
  EXPECT_FALSE(parse_leader_record("0 " + sha_a + " id"));                  // term 0 is no term
  EXPECT_FALSE(parse_leader_record("x1 " + sha_a + " id"));                 // not digits
  EXPECT_FALSE(parse_leader_record("99999999999999999999 " + sha_a + " id"));  // above 2^64
  EXPECT_FALSE(parse_leader_record("1 " + std::string(40, 'A') + " id"));   // upper case
  EXPECT_FALSE(parse_leader_record("1 abc id"));                            // short hash
}

TEST(decide_leader, names_the_leader_a_quorum_holds_with_the_quorum_th_largest_pttl) {
  std::vector<node_leader_view> v = {holding(sha_a, 7, sha_a, "x", 900), holding(sha_a, 7, sha_a, "x", 500),
                                     holding(sha_a, 7, sha_a, "x", 700), empty_node(), empty_node()};
  const auto d = decide_leader(v, 3);
  ASSERT_TRUE(d.quorum_answered);
  ASSERT_TRUE(d.leader);
  EXPECT_EQ(d.leader->identity, "x");
  EXPECT_EQ(d.leader->term, 7u);
  EXPECT_EQ(d.ttl.count(), 500);
}

TEST(decide_leader, no_leader_when_the_record_names_another_token) {
  // The lock is held by a new holder (sha_b) whose record is not yet written:
  // the stale record of sha_a must not name a leader.
  std::vector<node_leader_view> v = {holding(sha_b, 7, sha_a, "old", 900), holding(sha_b, 7, sha_a, "old", 900),
                                     holding(sha_b, 7, sha_a, "old", 900)};
  const auto d = decide_leader(v, 2);
  EXPECT_TRUE(d.quorum_answered);
  EXPECT_FALSE(d.leader);
  EXPECT_EQ(d.ttl.count(), 0);
}

TEST(decide_leader, no_leader_when_the_lock_is_on_a_minority) {
  std::vector<node_leader_view> v = {holding(sha_a, 3, sha_a, "x", 900), holding(sha_a, 3, sha_a, "x", 900),
                                     empty_node(), empty_node(), empty_node()};
  const auto d = decide_leader(v, 3);
  EXPECT_TRUE(d.quorum_answered);
  EXPECT_FALSE(d.leader);
}

TEST(decide_leader, no_leader_when_the_record_is_gone_or_garbage) {
  std::vector<node_leader_view> v = {holding(sha_a, 3, sha_a, "x", 900), holding(sha_a, 3, sha_a, "x", 900),
                                     holding(sha_a, 3, sha_a, "x", 900)};
  v[0].record.reset();
  v[1].record = "garbage";
  EXPECT_FALSE(decide_leader(v, 2).leader);
}

TEST(decide_leader, unavailable_below_a_quorum_of_answers) {
  std::vector<node_leader_view> v = {holding(sha_a, 3, sha_a, "x", 900), holding(sha_a, 3, sha_a, "x", 900),
                                     node_leader_view{}, node_leader_view{}, node_leader_view{}};
  const auto d = decide_leader(v, 3);
  EXPECT_FALSE(d.quorum_answered);
  EXPECT_FALSE(d.leader);
}

TEST(decide_leader, a_lock_expiring_now_on_the_quorum_names_no_leader) {
  std::vector<node_leader_view> v = {holding(sha_a, 3, sha_a, "x", 900), holding(sha_a, 3, sha_a, "x", 0),
                                     holding(sha_a, 3, sha_a, "x", -2)};
  EXPECT_FALSE(decide_leader(v, 2).leader);
}

}  // namespace
}  // namespace redlock::detail
