// Unit tests of pure/slot.h (CRC16, hash tags, key slots) and protocol/cluster.h
// (MOVED/ASK redirects, CLUSTER SHARDS and CLUSTER SLOTS into a slot map).
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "parse_resp.h"
#include "protocol/cluster.h"
#include "protocol/resp.h"
#include "pure/keys.h"
#include "pure/slot.h"

namespace redlock::detail {
namespace {

using test::parse_resp;

using test::arr;
using test::bulk;
using test::nil;
using test::num;

std::string shard_node(const std::string& id, int port, const std::string& endpoint, const std::string& role,
                       const std::string& health = "online") {
  return arr({bulk("id"), bulk(id), bulk("port"), num(port), bulk("ip"), bulk("127.0.0.1"), bulk("endpoint"),
              bulk(endpoint), bulk("role"), bulk(role), bulk("replication-offset"), num(1234), bulk("health"),
              bulk(health)});
}

// --- slots ---

TEST(KeySlot, Crc16IsXmodem) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);
  EXPECT_EQ(crc16(""), 0);
}

TEST(KeySlot, KnownSlotsOfTheClusterSpecification) {
  // Values CLUSTER KEYSLOT gives (tests/integration checks many against a real server).
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("bar"), 5061);
  EXPECT_EQ(key_slot("123456789"), 0x31C3);
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("{user1000}.followers"), key_slot("{user1000}.following"));
}

TEST(KeySlot, HashTagRule) {
  EXPECT_EQ(hash_tag("{user1000}.following"), "user1000");
  EXPECT_EQ(hash_tag("foo{bar}{zap}"), "bar") << "the first { and the first } after it";
  EXPECT_EQ(hash_tag("foo{{bar}}zap"), "{bar") << "the first '}' closes";
  EXPECT_EQ(hash_tag("foo{}{bar}"), "foo{}{bar}") << "an empty tag hashes the whole key";
  EXPECT_EQ(hash_tag("foo}{bar"), "foo}{bar") << "no '}' after the '{'";
  EXPECT_EQ(hash_tag("plain"), "plain");
  for (const char* k : {"", "{", "}", "{}", "a{b", "{a}"}) EXPECT_GE(key_slot(k), 0);
  for (const char* k : {"", "{", "}", "{}", "a{b", "{a}"}) EXPECT_LT(key_slot(k), kClusterSlots);
}

// --- redirects ---

TEST(Redirect, MovedAndAsk) {
  const auto m = parse_redirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->type, redirect::kind::moved);
  EXPECT_EQ(m->slot, 3999);
  EXPECT_EQ(m->host, "127.0.0.1");
  EXPECT_EQ(m->port, 6381);
  const auto a = parse_redirect("ASK 0 cache-1.example:7000");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->type, redirect::kind::ask);
  EXPECT_EQ(a->slot, 0);
  EXPECT_EQ(a->host, "cache-1.example");
}

TEST(Redirect, UnknownEndpointAndIpv6) {
  const auto u = parse_redirect("MOVED 16383 :6380");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "") << "the host that answered, with this port";
  EXPECT_EQ(u->port, 6380);
  const auto v6 = parse_redirect("MOVED 1 ::1:6380");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  const auto br = parse_redirect("ASK 1 [::1]:6380");
  ASSERT_TRUE(br);
  EXPECT_EQ(br->host, "::1");
}

TEST(Redirect, AnythingElseIsNoRedirect) {
  for (const char* e : {"", "MOVED", "MOVED ", "MOVED 3999", "MOVED 16384 h:1", "MOVED -1 h:1", "MOVED x h:1",
                        "MOVED 1 h", "MOVED 1 h:0", "MOVED 1 h:65536", "MOVED 1 h:1 extra", "moved 1 h:1",
                        "ERR MOVED 1 h:1", "TRYAGAIN Multiple keys request during rehashing of slot",
                        "CLUSTERDOWN The cluster is down", "ASK 1 h\n:1"}) {
    EXPECT_FALSE(parse_redirect(e)) << e;
  }
}

// --- CLUSTER SHARDS ---

TEST(NodeTimeout, ConfigGetIsRead) {
  auto r = parse_resp(arr({bulk("cluster-node-timeout"), bulk("15000")}));
  ASSERT_TRUE(r);
  EXPECT_EQ(parse_node_timeout(r.get()), std::optional<std::uint64_t>(15000));
  for (const std::string& wire :
       {arr({}), arr({bulk("cluster-node-timeout")}), arr({bulk("maxmemory"), bulk("15000")}),
        arr({bulk("cluster-node-timeout"), bulk("0")}), arr({bulk("cluster-node-timeout"), bulk("x")}),
        arr({bulk("cluster-node-timeout"), bulk("1"), bulk("x"), bulk("2")}), num(15000),
        std::string("-ERR unknown command 'CONFIG'\r\n")}) {
    auto bad = parse_resp(wire);
    ASSERT_TRUE(bad);
    EXPECT_FALSE(parse_node_timeout(bad.get())) << wire;
  }
  EXPECT_FALSE(parse_node_timeout(nullptr));
}

TEST(ClusterShards, ThreeShardsWithReplicas) {
  const std::string wire = arr({
      arr({bulk("slots"), arr({num(0), num(5460)}), bulk("nodes"),
           arr({shard_node("a1", 7000, "127.0.0.1", "master"), shard_node("a2", 7003, "127.0.0.1", "replica")})}),
      arr({bulk("slots"), arr({num(5461), num(10922)}), bulk("nodes"),
           arr({shard_node("b2", 7004, "127.0.0.1", "replica", "loading"),
                shard_node("b1", 7001, "127.0.0.1", "master")})}),
      arr({bulk("slots"), arr({num(10923), num(12000), num(12001), num(16383)}), bulk("nodes"),
           arr({shard_node("c1", 7002, "", "master")})}),
  });
  auto r = parse_resp(wire);
  ASSERT_TRUE(r);
  slot_map m;
  std::string error;
  ASSERT_TRUE(parse_cluster_shards(r.get(), "10.1.2.3", m, error)) << error;
  ASSERT_EQ(m.shards().size(), 3u);
  EXPECT_EQ(m.covered(), kClusterSlots);
  EXPECT_EQ(m.shard_of(0), 0);
  EXPECT_EQ(m.shard_of(5460), 0);
  EXPECT_EQ(m.shard_of(5461), 1);
  EXPECT_EQ(m.shard_of(16383), 2);
  EXPECT_EQ(m.shard_of(16384), -1);
  EXPECT_EQ(m.shard_of(-1), -1);
  const cluster_shard& b = m.shards()[1];
  ASSERT_EQ(b.master, 1) << "the master need not come first";
  EXPECT_EQ(b.nodes[1].id, "b1");
  EXPECT_EQ(b.nodes[1].port, 7001);
  EXPECT_FALSE(b.nodes[0].online) << "loading is not online";
  EXPECT_EQ(b.nodes[0].replication_offset, 1234);
  EXPECT_EQ(m.shards()[2].nodes[0].host, "127.0.0.1") << "an empty endpoint falls back to the IP";
  EXPECT_EQ(m.shards()[2].ranges.size(), 2u);
}

TEST(ClusterShards, UnknownFieldsAreIgnoredAndTlsPortsKept) {
  const std::string node = arr({bulk("id"), bulk("x"), bulk("tls-port"), num(7443), bulk("ip"), bulk(""),
                                bulk("endpoint"), bulk("?"), bulk("hostname"), bulk("cache.example"), bulk("role"),
                                bulk("master"), bulk("availability-zone"), bulk("az-1")});
  auto r = parse_resp(arr({arr({bulk("slots"), arr({num(0), num(16383)}), bulk("nodes"), arr({node}),
                                bulk("future-field"), arr({num(1)})})}));
  ASSERT_TRUE(r);
  slot_map m;
  std::string error;
  ASSERT_TRUE(parse_cluster_shards(r.get(), "seed.example", m, error)) << error;
  const cluster_node& n = m.shards()[0].nodes[0];
  EXPECT_EQ(n.port, 0);
  EXPECT_EQ(n.tls_port, 7443);
  EXPECT_EQ(n.host, "seed.example") << "endpoint '?' and no IP: the host that answered";
}

TEST(ClusterShards, AShardWithoutAMasterServesNothing) {
  auto r = parse_resp(arr({arr({bulk("slots"), arr({num(0), num(99)}), bulk("nodes"),
                                arr({shard_node("r", 7003, "127.0.0.1", "replica")})})}));
  ASSERT_TRUE(r);
  slot_map m;
  std::string error;
  ASSERT_TRUE(parse_cluster_shards(r.get(), "h", m, error)) << error;
  EXPECT_EQ(m.shards()[0].master, -1);
  EXPECT_EQ(m.shard_of(0), -1);
  EXPECT_EQ(m.covered(), 0);
}

TEST(ClusterShards, MalformedRepliesAreNamed) {
  const std::string good_nodes = arr({shard_node("a", 7000, "127.0.0.1", "master")});
  const std::pair<std::string, std::string> cases[] = {
      {num(1), "not an array"},
      {arr({num(1)}), "a shard is not a map"},
      {arr({arr({bulk("slots"), arr({num(0)}), bulk("nodes"), good_nodes})}), "slots are not pairs"},
      {arr({arr({bulk("slots"), arr({num(0), num(16384)}), bulk("nodes"), good_nodes})}), "not within 0-16383"},
      {arr({arr({bulk("slots"), arr({num(9), num(1)}), bulk("nodes"), good_nodes})}), "not within 0-16383"},
      {arr({arr({bulk("slots"), arr({num(0), num(1)}), bulk("nodes"), good_nodes}),
            arr({bulk("slots"), arr({num(1), num(2)}), bulk("nodes"), good_nodes})}),
       "slot 1 is claimed by two shards"},
      {arr({arr({bulk("slots"), arr({num(0), num(1)})})}), "lacks its slots or its nodes"},
      {arr({arr({bulk("slots"), arr({}), bulk("nodes"), arr({arr({bulk("id"), bulk("x"), bulk("port"), num(1)})})})}),
       "a node has no role"},
      {arr({arr({bulk("slots"), arr({}), bulk("nodes"), arr({arr({bulk("role"), bulk("master")})})})}),
       "neither port nor tls-port"},
      {arr({arr({bulk("slots"), arr({}), bulk("nodes"), arr({arr({bulk("port"), num(70000), bulk("role"),
                                                                  bulk("master")})})})}),
       "port is not 0..65535"},
  };
  for (const auto& [wire, problem] : cases) {
    auto r = parse_resp(wire);
    ASSERT_TRUE(r);
    slot_map m;
    std::string error;
    EXPECT_FALSE(parse_cluster_shards(r.get(), "h", m, error)) << problem;
    EXPECT_NE(error.find(problem), std::string::npos) << error;
    EXPECT_EQ(error.rfind("CLUSTER SHARDS: ", 0), 0u) << error;
  }
}

// --- CLUSTER SLOTS ---

TEST(ClusterSlots, RangesOfOneMasterFormOneShard) {
  auto r = parse_resp(arr({
      arr({num(0), num(100), arr({bulk("127.0.0.1"), num(7000), bulk("a")}), arr({bulk("127.0.0.1"), num(7003), bulk("ar")})}),
      arr({num(101), num(16000), arr({bulk("127.0.0.1"), num(7001), bulk("b")})}),
      arr({num(16001), num(16383), arr({nil, num(7000), bulk("a")})}),
  }));
  ASSERT_TRUE(r);
  slot_map m;
  std::string error;
  ASSERT_TRUE(parse_cluster_slots(r.get(), "seed.example", m, error)) << error;
  ASSERT_EQ(m.shards().size(), 2u);
  EXPECT_EQ(m.covered(), kClusterSlots);
  EXPECT_EQ(m.shard_of(16383), 0);
  EXPECT_EQ(m.shard_of(101), 1);
  EXPECT_EQ(m.shards()[0].ranges.size(), 2u);
  ASSERT_EQ(m.shards()[0].nodes.size(), 2u);
  EXPECT_TRUE(m.shards()[0].nodes[0].master);
  EXPECT_FALSE(m.shards()[0].nodes[1].master);
}

TEST(ClusterSlots, MalformedRepliesAreNamed) {
  const std::pair<std::string, std::string> cases[] = {
      {bulk("x"), "not an array"},
      {arr({arr({num(0), num(1)})}), "an entry is not [start, end, master"},
      {arr({arr({num(0), bulk("x"), arr({bulk("h"), num(1)})})}), "an entry is not"},
      {arr({arr({num(0), num(1), arr({bulk("h")})})}), "a node is not [host, port"},
      {arr({arr({num(0), num(1), arr({num(5), num(1)})})}), "a node is not [host, port"},
      {arr({arr({num(0), num(20000), arr({bulk("h"), num(1)})})}), "not within 0-16383"},
      {arr({arr({num(0), num(5), arr({bulk("h"), num(1), bulk("a")})}),
            arr({num(5), num(6), arr({bulk("h"), num(2), bulk("b")})})}),
       "slot 5 is claimed by two shards"},
  };
  for (const auto& [wire, problem] : cases) {
    auto r = parse_resp(wire);
    ASSERT_TRUE(r);
    slot_map m;
    std::string error;
    EXPECT_FALSE(parse_cluster_slots(r.get(), "h", m, error)) << problem;
    EXPECT_NE(error.find(problem), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace redlock::detail

// --- A cluster node's key names (issue 23): one resource, one slot ---

namespace redlock::detail {
namespace {

command fenced_acquire(const std::string& lock_key) {
  command c;
  c.script = script_id::acquire_fenced;
  c.key = lock_key;
  c.key2 = fence_key(lock_key);
  c.arg1 = "token";
  c.arg2 = "5000";
  return c;
}

TEST(ClusterKeys, EveryKeyOfAResourceSitsInTheLockKeysHashTag) {
  EXPECT_EQ(cluster_key("app:R", "app:R"), "{app:R}");
  EXPECT_EQ(cluster_key("app:R", "app:R:fence"), "{app:R}:fence");
  EXPECT_EQ(cluster_key("app:R", "app:R:leader"), "{app:R}:leader");
  EXPECT_EQ(cluster_key("app:R", "other"), "{other}") << "a key not made from the lock key is wrapped whole";
}

TEST(ClusterKeys, TheClusterFormTagsTheKeysAndKeepsTheStandaloneFormAsItWas) {
  const wire w(fenced_acquire("app:R"));
  const std::string plain = w.sha_form();
  EXPECT_EQ(plain.find('{'), std::string::npos) << "standalone nodes keep today's names";
  const wire& c = w.cluster_form();
  EXPECT_NE(&c, &w);
  EXPECT_NE(c.sha_form().find("$7\r\n{app:R}\r\n"), std::string::npos) << c.sha_form();
  EXPECT_NE(c.sha_form().find("$13\r\n{app:R}:fence\r\n"), std::string::npos) << c.sha_form();
  EXPECT_NE(c.eval_form().find("{app:R}:fence"), std::string::npos);
  EXPECT_EQ(&c.cluster_form(), &c) << "a cluster form is never tagged twice";
  EXPECT_EQ(&w.cluster_form(), &c) << "made once, shared";
  EXPECT_EQ(w.slot(), key_slot("app:R"));
  EXPECT_EQ(c.slot(), w.slot());
  EXPECT_EQ(w.sha_form(), plain);
}

TEST(ClusterKeys, AResourceWithBracesStillKeepsItsKeysInOneSlot) {
  // The first '}' ends the tag in both keys at the same place.
  for (const std::string L : {"a}b", "x{y}z", "{t}r", "p{", "a}"}) {
    const wire w(fenced_acquire(L));
    EXPECT_GE(w.slot(), 0) << L;
    EXPECT_EQ(key_slot(cluster_key(L, L)), key_slot(cluster_key(L, fence_key(L)))) << L;
  }
  // Except one that starts with '}': "{}x}" has an empty tag and hashes whole, so
  // its fence counter lands elsewhere; a cluster node cannot run it.
  for (const std::string L : {"}x", "}"}) EXPECT_EQ(wire(fenced_acquire(L)).slot(), wire::kCrossSlot) << L;
}

TEST(ClusterKeys, ASetSharesASlotWhenItsResourcesShareATag) {
  command set;
  set.script = script_id::acquire_many;
  set.keys = {"app:{orders}1", "app:{orders}2", "app:{orders}3"};
  set.arg1 = "token";
  set.arg2 = "5000";
  const wire shared(set);
  EXPECT_EQ(shared.slot(), key_slot("app:{orders"));
  EXPECT_NE(shared.cluster_form().sha_form().find("{app:{orders}1}"), std::string::npos);
  set.keys = {"app:a", "app:b"};
  ASSERT_NE(key_slot("app:a"), key_slot("app:b"));
  EXPECT_EQ(wire(set).slot(), wire::kCrossSlot);
}

TEST(ClusterKeys, AWireWithoutKeysHasNoSlotAndIsItsOwnClusterForm) {
  command ping;
  ping.script = script_id::ping;
  const wire w(ping);
  EXPECT_EQ(&w.cluster_form(), &w);
  EXPECT_EQ(w.slot(), wire::kNoSlot);
  const wire info(wire::plain_tag{}, "*1\r\n$4\r\nINFO\r\n");
  EXPECT_EQ(&info.cluster_form(), &info);
  EXPECT_EQ(info.slot(), wire::kNoSlot);
}

}  // namespace
}  // namespace redlock::detail
