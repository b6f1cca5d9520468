// Simulated Redis Clusters in the world (issue 23): real clients with
// redis+cluster:// nodes over cluster-mode sim::nodes whose masters replicate to
// their replicas in virtual time (world_impl.h: add_cluster, failover, rejoin).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "redlock/client.h"
#include "redlock/testing.h"
#include "testing/world_impl.h"

namespace redlock::testing {
namespace {

using namespace std::chrono_literals;

// Cluster nodes are a development preview (lib/api/validate.cc), switched on by
// the environment the first client of the process reads: set before main().
const bool kPreview = ::setenv("REDLOCK_PREVIEW_CLUSTER", "1", 1) == 0;

acquire_options ttl_of(std::chrono::milliseconds ttl) {
  acquire_options o;
  o.ttl = ttl;
  o.retry = retry_policy::once();
  return o;
}

// One Redlock node: a cluster of 2 shards (node0 + replica node1, node2 + replica node3).
struct one_cluster {
  world w{[] {
    world_options o;
    o.nodes = 4;
    o.seed = 7;
    return o;
  }()};
  world::impl& wi = w.internals();
  one_cluster() {
    EXPECT_TRUE(kPreview);
    wi.add_cluster({{0, 1}, {2, 3}});
  }
  std::unique_ptr<client> make() { return wi.make_client({}, {"redis+cluster://node0:6379?seed=node2:6379"}); }
  // The world index of the master serving `key`'s lock now.
  std::size_t holder_of(const std::string& key) {
    for (std::size_t i = 0; i < 4; ++i) {
      if (w.key_at(i, key) && !wi.nodes[i].node->replica()) return i;
    }
    return 4;
  }
};

TEST(SimCluster, an_acquire_is_granted_once_the_shard_replica_has_it) {
  one_cluster c;
  auto cl = c.make();
  auto r = cl->acquire("res", ttl_of(5s));
  ASSERT_TRUE(r) << r.report.message();
  // The lock key lives on the shard master of its slot, and reached its replica
  // before the grant counted (WAIT).
  std::vector<std::size_t> with;
  for (std::size_t i = 0; i < 4; ++i) {
    for (const auto& k : c.w.keys_at(i)) {
      if (k.find("res") != std::string::npos) with.push_back(i);
    }
  }
  ASSERT_EQ(with.size(), 2u);
  EXPECT_EQ(with[0] / 2, with[1] / 2) << "a master and its own replica";
  EXPECT_GT(c.wi.nodes[with[0]].node->calls("wait"), 0u);
  EXPECT_TRUE(r.lock.release());
}

TEST(SimCluster, an_unreplicated_grant_does_not_count) {
  one_cluster c;
  auto cl = c.make();
  ASSERT_TRUE(cl->ping());
  // Both replicas black-holed: every shard's WAIT times out.
  c.w.black_hole_node(1, true);
  c.w.black_hole_node(3, true);
  auto r = cl->acquire("res", ttl_of(5s));
  EXPECT_FALSE(r);
  c.w.black_hole_node(1, false);
  c.w.black_hole_node(3, false);
  c.w.advance(6s);
  auto again = cl->acquire("res", ttl_of(5s));
  EXPECT_TRUE(again) << again.report.message();
}

TEST(SimCluster, a_failover_promotes_the_replica_and_every_map_shows_it) {
  one_cluster c;
  auto cl = c.make();
  auto r = cl->acquire("res", ttl_of(3s));
  ASSERT_TRUE(r) << r.report.message();
  const std::size_t m = c.holder_of(r.lock.info().token.empty() ? "" : "res");
  std::size_t master = 4;
  for (std::size_t i : {0u, 2u}) {
    if (!c.w.keys_at(i).empty()) master = i;
  }
  ASSERT_LT(master, 4u) << m;
  const std::size_t replica = master + 1;
  ASSERT_TRUE(c.wi.failover(master));
  EXPECT_FALSE(c.w.node_up(master));
  EXPECT_FALSE(c.wi.nodes[replica].node->replica());
  EXPECT_EQ(c.w.keys_at(replica), c.w.keys_at(master)) << "the replica had the grant (it was confirmed)";
  // Every member's map: the promoted replica first, as master.
  auto s = c.wi.nodes[2 - master].node->open_session();
  const std::string shards = c.wi.nodes[2 - master].node->execute(*s, {"CLUSTER", "SHARDS"}, 0);
  EXPECT_NE(shards.find("node" + std::to_string(replica) + "\r\n$4\r\nrole\r\n$6\r\nmaster"), std::string::npos)
      << shards;
  EXPECT_NE(shards.find("$6\r\nfailed"), std::string::npos);
  EXPECT_FALSE(c.wi.failover(master)) << "no longer a master";
  // The client's release meets the stopped master (the map is refreshed after it);
  // the key expires on the promoted replica; once the quarantine of the master
  // change (max_ttl) has passed, the client acquires on the new master.
  (void)r.lock.release();
  c.w.advance(4s);
  c.wi.rejoin(master);
  EXPECT_TRUE(c.wi.nodes[master].node->replica());
  c.w.advance(61s);  // the restart quarantine (2 x max_ttl by default)
  // The first write after a replica attached is not confirmed (the connection's
  // WAIT counted the replicas before it): a second attempt is.
  acquire_options twice = ttl_of(3s);
  twice.retry.max_attempts = 2;
  auto again = cl->acquire("res", twice);
  ASSERT_TRUE(again) << again.report.message();
  EXPECT_TRUE(c.w.key_at(replica, "{res}") || !c.w.keys_at(replica).empty());
}

}  // namespace
}  // namespace redlock::testing
