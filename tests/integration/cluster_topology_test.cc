// What a real Redis Cluster says, read by the library's parsers (issue 23): key
// slots against CLUSTER KEYSLOT, the slot map of CLUSTER SHARDS and CLUSTER SLOTS
// against CLUSTER NODES (parsed by the harness, independently), and MOVED / ASK
// redirects as a cluster sends them.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "protocol/cluster.h"
#include "pure/slot.h"
#include "redis_deployment.h"

namespace redlock::test {
namespace {

using detail::key_slot;
using detail::parse_redirect;
using detail::redirect;
using detail::slot_map;

TEST(ClusterTopology, key_slots_match_cluster_keyslot) {
  node_config cfg;
  cfg.extra_args = {"--cluster-enabled", "yes", "--cluster-port", std::to_string(free_port())};
  redis_node node(cfg);
  std::mt19937 rng(20261202);
  const std::string alphabet = "ab{}x:.-_0123456789\xff";
  std::uniform_int_distribution<std::size_t> len(0, 12), pick(0, alphabet.size() - 1);
  for (int i = 0; i < 2000; ++i) {
    std::string key;
    for (std::size_t n = len(rng); n > 0; --n) key.push_back(alphabet[pick(rng)]);
    const owned_reply r = raw_command(node.port(), {"CLUSTER", "KEYSLOT", key});
    ASSERT_EQ(r->type, REDIS_REPLY_INTEGER) << key;
    ASSERT_EQ(key_slot(key), r->integer) << "key '" << key << "'";
  }
}

TEST(ClusterTopology, shards_and_slots_give_the_map_that_cluster_nodes_shows) {
  redis_cluster_deployment cluster(3, 1);
  const owned_reply shards = raw_command(cluster[0].port(), {"CLUSTER", "SHARDS"});
  const owned_reply slots = raw_command(cluster[0].port(), {"CLUSTER", "SLOTS"});
  slot_map from_shards, from_slots;
  std::string error;
  ASSERT_TRUE(detail::parse_cluster_shards(shards.get(), "127.0.0.1", from_shards, error)) << error;
  ASSERT_TRUE(detail::parse_cluster_slots(slots.get(), "127.0.0.1", from_slots, error)) << error;
  EXPECT_EQ(from_shards.covered(), detail::kClusterSlots);
  EXPECT_EQ(from_slots.covered(), detail::kClusterSlots);
  ASSERT_EQ(from_shards.shards().size(), 3u);
  EXPECT_EQ(from_slots.shards().size(), 3u);
  for (const detail::cluster_shard& s : from_shards.shards()) {
    EXPECT_EQ(s.nodes.size(), 2u) << "a master and its replica";
    ASSERT_GE(s.master, 0);
    EXPECT_EQ(s.nodes[static_cast<std::size_t>(s.master)].host, "127.0.0.1");
  }
  for (int slot = 0; slot < detail::kClusterSlots; slot += 97) {
    for (int probe : {slot, std::min(slot + 96, detail::kClusterSlots - 1)}) {
      const int expected = cluster.master_of(probe);
      ASSERT_GE(expected, 0) << "slot " << probe;
      const detail::cluster_shard& a = from_shards.shards()[static_cast<std::size_t>(from_shards.shard_of(probe))];
      const detail::cluster_shard& b = from_slots.shards()[static_cast<std::size_t>(from_slots.shard_of(probe))];
      EXPECT_EQ(a.nodes[static_cast<std::size_t>(a.master)].port, cluster[static_cast<std::size_t>(expected)].port())
          << "slot " << probe;
      EXPECT_EQ(b.nodes[static_cast<std::size_t>(b.master)].port, cluster[static_cast<std::size_t>(expected)].port())
          << "slot " << probe;
      const auto replicas = cluster.replicas_of(static_cast<std::size_t>(expected));
      ASSERT_EQ(replicas.size(), 1u);
      const detail::cluster_node& replica = a.nodes[a.master == 0 ? 1 : 0];
      EXPECT_FALSE(replica.master);
      EXPECT_EQ(replica.port, cluster[replicas[0]].port());
    }
  }
}

TEST(ClusterTopology, moved_and_ask_name_where_the_slot_is) {
  redis_cluster_deployment cluster(3, 0);
  const std::string key = "redlock-topology-key";
  const int slot = key_slot(key);
  const int owner = cluster.master_of(slot);
  ASSERT_GE(owner, 0);
  const std::size_t other = owner == 0 ? 1 : 0;
  const owned_reply moved = raw_command(cluster[other].port(), {"GET", key});
  ASSERT_EQ(moved->type, REDIS_REPLY_ERROR);
  const auto m = parse_redirect(std::string_view(moved->str, moved->len));
  ASSERT_TRUE(m) << moved->str;
  EXPECT_EQ(m->type, redirect::kind::moved);
  EXPECT_EQ(m->slot, slot);
  EXPECT_EQ(m->port, cluster[static_cast<std::size_t>(owner)].port());

  // The slot migrates from its owner to `other`: a key the owner no longer has is asked for there.
  const std::string other_id = raw_command(cluster[other].port(), {"CLUSTER", "MYID"})->str;
  const std::string owner_id = raw_command(cluster[static_cast<std::size_t>(owner)].port(), {"CLUSTER", "MYID"})->str;
  const std::string s = std::to_string(slot);
  ASSERT_EQ(cluster[other].command({"CLUSTER", "SETSLOT", s, "IMPORTING", owner_id}), "OK");
  ASSERT_EQ(cluster[static_cast<std::size_t>(owner)].command({"CLUSTER", "SETSLOT", s, "MIGRATING", other_id}), "OK");
  const owned_reply ask = raw_command(cluster[static_cast<std::size_t>(owner)].port(), {"GET", key});
  ASSERT_EQ(ask->type, REDIS_REPLY_ERROR);
  const auto a = parse_redirect(std::string_view(ask->str, ask->len));
  ASSERT_TRUE(a) << ask->str;
  EXPECT_EQ(a->type, redirect::kind::ask);
  EXPECT_EQ(a->slot, slot);
  EXPECT_EQ(a->port, cluster[other].port());
}

}  // namespace
}  // namespace redlock::test
