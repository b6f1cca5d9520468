// Unit tests of protocol/sentinel.h: SENTINEL GET-MASTER-ADDR-BY-NAME, +switch-master
// and ROLE, as Redis 7.0 sends them (tests/integration checks them against real
// sentinels).
#include "protocol/sentinel.h"

#include <gtest/gtest.h>

#include "parse_resp.h"

namespace redlock::detail {
namespace {

using test::arr;
using test::bulk;
using test::nil;
using test::num;
using test::parse_resp;

TEST(SentinelMasterAddr, AnAddressOrUnknown) {
  auto r = parse_resp(arr({bulk("127.0.0.1"), bulk("6380")}));
  ASSERT_TRUE(r);
  const auto a = parse_master_addr(r.get());
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->known);
  EXPECT_EQ(a->address.host, "127.0.0.1");
  EXPECT_EQ(a->address.port, 6380);
  auto none = parse_resp(nil);
  ASSERT_TRUE(none);
  const auto u = parse_master_addr(none.get());
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->known);
}

// SENTINEL SENTINELS as Redis 7.0 sends it (flat field/value arrays).
TEST(SentinelPeers, TheOtherSentinelsThatAreUp) {
  const auto peer = [](const std::string& ip, const std::string& port, const std::string& flags) {
    return arr({bulk("name"), bulk("abc"), bulk("ip"), bulk(ip), bulk("port"), bulk(port), bulk("runid"), bulk("abc"),
                bulk("flags"), bulk(flags)});
  };
  auto r = parse_resp(arr({peer("127.0.0.1", "26380", "sentinel"), peer("127.0.0.2", "26381", "s_down,sentinel"),
                           peer("127.0.0.3", "26382", "sentinel,disconnected"), peer("h st", "1", "sentinel"),
                           peer("127.0.0.4", "0", "sentinel"), peer("127.0.0.5", "26383", "sentinel")}));
  ASSERT_TRUE(r);
  const auto p = parse_sentinels(r.get(), 16);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0].host, "127.0.0.1");
  EXPECT_EQ((*p)[0].port, 26380);
  EXPECT_EQ((*p)[1].host, "127.0.0.5");
  const auto capped = parse_sentinels(r.get(), 1);
  ASSERT_TRUE(capped);
  EXPECT_EQ(capped->size(), 1u);
  auto none = parse_resp(arr({}));
  ASSERT_TRUE(none);
  ASSERT_TRUE(parse_sentinels(none.get(), 16));
  EXPECT_TRUE(parse_sentinels(none.get(), 16)->empty());
  for (const std::string& wire : {arr({bulk("ip")}), arr({arr({bulk("ip")})}), bulk("x"), num(1)}) {
    auto bad = parse_resp(wire);
    ASSERT_TRUE(bad);
    EXPECT_FALSE(parse_sentinels(bad.get(), 16)) << wire;
  }
  EXPECT_FALSE(parse_sentinels(nullptr, 16));
}

TEST(SentinelMaster, FailoverTimeoutIsRead) {
  auto r = parse_resp(arr({bulk("name"), bulk("m"), bulk("ip"), bulk("127.0.0.1"), bulk("failover-timeout"),
                           bulk("5000"), bulk("parallel-syncs"), bulk("1")}));
  ASSERT_TRUE(r);
  EXPECT_EQ(parse_failover_timeout(r.get()), std::optional<std::uint64_t>(5000));
  for (const std::string& wire :
       {arr({bulk("name"), bulk("m")}), arr({bulk("failover-timeout")}), arr({bulk("failover-timeout"), bulk("0")}),
        arr({bulk("failover-timeout"), bulk("-1")}), arr({bulk("failover-timeout"), bulk("5s")}),
        arr({bulk("failover-timeout"), bulk("99999999999999999999")}), bulk("failover-timeout"), num(5000),
        std::string("-ERR unknown command\r\n")}) {
    auto bad = parse_resp(wire);
    ASSERT_TRUE(bad);
    EXPECT_FALSE(parse_failover_timeout(bad.get())) << wire;
  }
  EXPECT_FALSE(parse_failover_timeout(nullptr));
}

TEST(SentinelMasterAddr, OtherShapesAreNothing) {
  for (const std::string& wire : {arr({bulk("127.0.0.1")}), arr({bulk("127.0.0.1"), bulk("0")}),
                                  arr({bulk("127.0.0.1"), bulk("70000")}), arr({bulk("h st"), bulk("1")}),
                                  arr({bulk(""), bulk("1")}), bulk("127.0.0.1:6380"), num(1),
                                  arr({bulk("127.0.0.1"), bulk("6380"), bulk("x")})}) {
    auto r = parse_resp(wire);
    ASSERT_TRUE(r);
    EXPECT_FALSE(parse_master_addr(r.get())) << wire;
  }
  EXPECT_FALSE(parse_master_addr(nullptr));
}

TEST(SwitchMaster, FromAndTo) {
  const auto s = parse_switch_master("mymaster 127.0.0.1 6379 127.0.0.1 6380");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "mymaster");
  EXPECT_EQ(s->from.port, 6379);
  EXPECT_EQ(s->to.host, "127.0.0.1");
  EXPECT_EQ(s->to.port, 6380);
  for (const char* bad : {"", "mymaster", "mymaster 127.0.0.1 6379 127.0.0.1", "m 127.0.0.1 6379 127.0.0.1 6380 x",
                          "m 127.0.0.1 0 127.0.0.1 6380", "m 127.0.0.1 6379 127.0.0.1 port",
                          " 127.0.0.1 6379 127.0.0.1 6380"}) {
    EXPECT_FALSE(parse_switch_master(bad)) << bad;
  }
}

TEST(Role, MasterReplicaSentinel) {
  auto m = parse_resp(arr({bulk("master"), num(3129659),
                           arr({arr({bulk("127.0.0.1"), bulk("9001"), bulk("3129242")}),
                                arr({bulk("127.0.0.1"), bulk("9002"), bulk("3129543")})})}));
  ASSERT_TRUE(m);
  const auto master = parse_role(m.get());
  ASSERT_TRUE(master);
  EXPECT_EQ(master->type, server_role::kind::master);
  EXPECT_EQ(master->offset, 3129659);
  ASSERT_EQ(master->replicas.size(), 2u);
  EXPECT_EQ(master->replicas[1].port, 9002);

  auto s = parse_resp(arr({bulk("slave"), bulk("127.0.0.1"), num(9000), bulk("connected"), num(3167038)}));
  ASSERT_TRUE(s);
  const auto replica = parse_role(s.get());
  ASSERT_TRUE(replica);
  EXPECT_EQ(replica->type, server_role::kind::replica);
  EXPECT_EQ(replica->master.port, 9000);
  EXPECT_TRUE(replica->link_up);
  EXPECT_EQ(replica->offset, 3167038);
  auto syncing = parse_resp(arr({bulk("slave"), bulk("127.0.0.1"), num(9000), bulk("sync"), num(-1)}));
  ASSERT_TRUE(syncing);
  EXPECT_FALSE(parse_role(syncing.get())->link_up);

  auto sen = parse_resp(arr({bulk("sentinel"), arr({bulk("mymaster")})}));
  ASSERT_TRUE(sen);
  EXPECT_EQ(parse_role(sen.get())->type, server_role::kind::sentinel);
}

TEST(Role, OtherShapesAreNothing) {
  for (const std::string& wire :
       {arr({bulk("master")}), arr({bulk("master"), num(1)}), arr({bulk("master"), num(1), bulk("x")}),
        arr({bulk("master"), num(1), arr({arr({bulk("h")})})}), arr({bulk("slave"), bulk("h"), num(1)}),
        arr({bulk("slave"), bulk("h"), num(0), bulk("connected"), num(1)}), arr({bulk("leader"), num(1)}),
        bulk("master")}) {
    auto r = parse_resp(wire);
    ASSERT_TRUE(r);
    EXPECT_FALSE(parse_role(r.get())) << wire;
  }
}

}  // namespace
}  // namespace redlock::detail
