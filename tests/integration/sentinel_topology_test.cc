// What a real Sentinel group says, read by the library's parsers (issue 23): the
// master SENTINEL GET-MASTER-ADDR-BY-NAME names, ROLE of a master, a replica and a
// sentinel, and the +switch-master message of a failover, checked against what the
// harness (tests/support/redis_deployment) started and reads by itself.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "protocol/sentinel.h"
#include "pure/uri.h"
#include "redis_deployment.h"
#include "test_util.h"

namespace redlock::test {
namespace {

using detail::parse_master_addr;
using detail::parse_role;
using detail::parse_switch_master;
using detail::server_role;

// None of these tests needs a failover that Sentinel decides by itself: a long
// down-after keeps a loaded machine's stall from starting one.
constexpr std::chrono::milliseconds kDownAfter = 5000ms;

std::optional<server_role> role_of(redis_node& n) {
  return parse_role(raw_command(n.port(), {"ROLE"}, n.config().password).get());
}

// The same while Sentinel reconfigures `n`: it closes every client connection of a
// server it turns into a replica or a master (CLIENT KILL TYPE normal), so a poll may
// find its connection closed; nothing then.
std::optional<server_role> polled_role_of(redis_node& n) {
  try {
    return role_of(n);
  } catch (const std::runtime_error&) {
    return std::nullopt;
  }
}

// The ports of the replicas a master's ROLE lists.
std::set<int> replica_ports(const server_role& r) {
  std::set<int> out;
  for (const detail::host_port& e : r.replicas) out.insert(e.port);
  return out;
}

TEST(SentinelTopology, every_sentinel_names_the_master_and_an_unknown_name_is_not_known) {
  redis_sentinel_deployment group("redlock-main", 2, 3, {}, kDownAfter);
  ASSERT_EQ(group.master_index(), 0);
  for (std::size_t s = 0; s < group.sentinel_count(); ++s) {
    const owned_reply r =
        raw_command(group.sentinel_port(s), {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "redlock-main"});
    const auto addr = parse_master_addr(r.get());
    ASSERT_TRUE(addr) << "sentinel " << s;
    EXPECT_TRUE(addr->known);
    EXPECT_EQ(addr->address.host, "127.0.0.1");
    EXPECT_EQ(addr->address.port, group.server(0).port()) << "sentinel " << s;

    const owned_reply none =
        raw_command(group.sentinel_port(s), {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "no-such"});
    const auto unknown = parse_master_addr(none.get());
    ASSERT_TRUE(unknown) << "sentinel " << s;
    EXPECT_FALSE(unknown->known);
  }
  // The deployment's URI is one the library reads as this Sentinel group.
  detail::node_address a;
  std::string error;
  ASSERT_TRUE(detail::parse_node_uri(group.uri(), a, error)) << error;
  EXPECT_EQ(a.topology, detail::node_address::deployment::sentinel);
  EXPECT_EQ(a.master_name, "redlock-main");
  EXPECT_EQ(a.port, group.sentinel_port(0));
  ASSERT_EQ(a.seeds.size(), 2u);
  EXPECT_EQ(a.seeds[0].port, group.sentinel_port(1));
  EXPECT_EQ(a.seeds[1].port, group.sentinel_port(2));
}

TEST(SentinelTopology, role_of_master_replica_and_sentinel_parses_to_what_each_is) {
  redis_sentinel_deployment group("redlock-main", 2, 1, {}, kDownAfter);
  const auto master = role_of(group.server(0));
  ASSERT_TRUE(master);
  EXPECT_EQ(master->type, server_role::kind::master);
  EXPECT_GE(master->offset, 0);
  EXPECT_EQ(replica_ports(*master), (std::set<int>{group.server(1).port(), group.server(2).port()}));
  for (std::size_t i = 1; i < group.server_count(); ++i) {
    const auto replica = role_of(group.server(i));
    ASSERT_TRUE(replica) << "server " << i;
    EXPECT_EQ(replica->type, server_role::kind::replica);
    EXPECT_EQ(replica->master.host, "127.0.0.1");
    EXPECT_EQ(replica->master.port, group.server(0).port());
    EXPECT_TRUE(replica->link_up) << "the harness waited for master_link_status:up";
  }
  const auto sentinel = parse_role(raw_command(group.sentinel_port(0), {"ROLE"}).get());
  ASSERT_TRUE(sentinel);
  EXPECT_EQ(sentinel->type, server_role::kind::sentinel);
}

struct context_free {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};

TEST(SentinelTopology, a_failover_publishes_switch_master_and_the_old_master_rejoins_as_a_replica) {
  redis_sentinel_deployment group("redlock-main", 2, 3, {}, kDownAfter);
  const int old_master = group.master_index();
  ASSERT_EQ(old_master, 0);

  // A subscriber on the sentinel that will not lead the failover: it learns the new
  // configuration from the leader's hello messages and publishes it too.
  std::unique_ptr<redisContext, context_free> sub(
      redisConnectWithTimeout("127.0.0.1", group.sentinel_port(1), {2, 0}));
  ASSERT_TRUE(sub && sub->err == 0) << (sub ? sub->errstr : "out of memory");
  redisSetTimeout(sub.get(), {2, 0});
  owned_reply ack(static_cast<redisReply*>(redisCommand(sub.get(), "SUBSCRIBE +switch-master")));
  ASSERT_TRUE(ack) << sub->errstr;
  ASSERT_EQ(ack->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(ack->elements, 3u);
  EXPECT_EQ(std::string(ack->element[0]->str), "subscribe");

  group.failover(0);
  // Every sentinel names the new master and it says so; 20 s is far above the second
  // or two a failover with these timers takes on a quiet machine.
  const std::size_t promoted = group.wait_master_change(old_master, 20000ms);
  ASSERT_NE(promoted, 0u);

  redisSetTimeout(sub.get(), {10, 0});
  void* raw = nullptr;
  ASSERT_EQ(redisGetReply(sub.get(), &raw), REDIS_OK) << "no +switch-master message: " << sub->errstr;
  const owned_reply msg(static_cast<redisReply*>(raw));
  ASSERT_EQ(msg->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(msg->elements, 3u);
  EXPECT_EQ(std::string(msg->element[0]->str), "message");
  EXPECT_EQ(std::string(msg->element[1]->str), "+switch-master");
  const std::string payload(msg->element[2]->str, msg->element[2]->len);
  const auto sw = parse_switch_master(payload);
  ASSERT_TRUE(sw) << payload;
  EXPECT_EQ(sw->name, "redlock-main");
  EXPECT_EQ(sw->from.host, "127.0.0.1");
  EXPECT_EQ(sw->from.port, group.server(0).port()) << payload;
  EXPECT_EQ(sw->to.host, "127.0.0.1");
  EXPECT_EQ(sw->to.port, group.server(promoted).port()) << payload;

  const auto now_master = role_of(group.server(promoted));
  ASSERT_TRUE(now_master);
  EXPECT_EQ(now_master->type, server_role::kind::master);

  // The old master stayed up; Sentinel turns it into a replica of the new one.
  std::optional<server_role> old_role;
  const bool rejoined = eventually(
      [&] {
        old_role = polled_role_of(group.server(0));
        return old_role && old_role->type == server_role::kind::replica &&
               old_role->master.port == group.server(promoted).port() && old_role->link_up;
      },
      20000ms);
  ASSERT_TRUE(rejoined) << "the old master's ROLE: "
                        << (old_role ? (old_role->type == server_role::kind::master
                                            ? "master"
                                            : "replica of port " + std::to_string(old_role->master.port))
                                     : std::string("unparsed"));
  EXPECT_EQ(group.master_index(), static_cast<int>(promoted));
  // And the new master lists both others as its replicas, once the third follows it too.
  const std::size_t third = promoted == 1 ? 2 : 1;
  std::optional<server_role> lists;
  EXPECT_TRUE(eventually(
      [&] {
        lists = polled_role_of(group.server(promoted));
        return lists &&
               replica_ports(*lists) == std::set<int>{group.server(0).port(), group.server(third).port()};
      },
      10000ms));
}

TEST(SentinelTopology, discovery_and_role_work_with_a_password_that_no_failure_message_shows) {
  node_config cfg;
  // Spaces and quotes: sentinel.conf's auth-pass line must quote it.
  cfg.password = "sentinel test \"secret\" 4711";
  redis_sentinel_deployment group("redlock-auth", 1, 2, cfg, kDownAfter);
  EXPECT_NE(group.uri().find(":" + cfg.password + "@127.0.0.1:"), std::string::npos) << "as redis_node::uri";

  // The servers refuse a client without the password; the sentinels (auth-pass) still see them.
  const owned_reply refused = raw_command(group.server(0).port(), {"ROLE"});
  ASSERT_EQ(refused->type, REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(refused->str).rfind("NOAUTH", 0), 0u) << refused->str;
  for (std::size_t s = 0; s < group.sentinel_count(); ++s) {
    const auto addr = parse_master_addr(
        raw_command(group.sentinel_port(s), {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "redlock-auth"}).get());
    ASSERT_TRUE(addr && addr->known) << "sentinel " << s;
    EXPECT_EQ(addr->address.port, group.server(0).port());
  }
  const auto master = role_of(group.server(0));
  ASSERT_TRUE(master);
  EXPECT_EQ(master->type, server_role::kind::master);
  EXPECT_EQ(replica_ports(*master), std::set<int>{group.server(1).port()});
  const auto replica = role_of(group.server(1));
  ASSERT_TRUE(replica);
  EXPECT_EQ(replica->type, server_role::kind::replica);
  EXPECT_EQ(replica->master.port, group.server(0).port());
  EXPECT_TRUE(replica->link_up) << "the replica authenticated to its master (masterauth)";

  // The harness's failure messages carry the sentinels' logs and replies, never the password.
  try {
    group.wait_master_change(0, 300ms);
    ADD_FAILURE() << "no failover happened, yet a new master was reported";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sentinel.log"), std::string::npos) << what;
    EXPECT_EQ(what.find(cfg.password), std::string::npos) << "the password leaks into: " << what;
  }
}

// The processes whose parent is this test process (zombies included), from /proc.
std::set<int> children() {
  std::set<int> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string pid = it->path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(it->path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so read after its last ')'.
    std::istringstream rest(line.substr(line.rfind(')') + 1));
    std::string state;
    int ppid = 0;
    if (rest >> state >> ppid && ppid == ::getpid()) out.insert(std::stoi(pid));
  }
  return out;
}

TEST(SentinelTopology, no_process_outlives_the_deployment_or_a_failed_start) {
  const std::set<int> before = children();
  {
    redis_sentinel_deployment group("redlock-main", 1, 2, {}, kDownAfter);
    EXPECT_EQ(children().size(), before.size() + 4) << "two servers and two sentinels";
  }
  EXPECT_EQ(children(), before) << "the destructor stops (and reaps) every process it started";

  // Sentinel refuses a down-after of 0 and exits: the servers are up by then.
  node_config cfg;
  cfg.password = "never-shown-4711";
  try {
    redis_sentinel_deployment bad("redlock-main", 1, 2, cfg, 0ms);
    ADD_FAILURE() << "a Sentinel group with down-after-milliseconds 0 started";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("exited during startup"), std::string::npos) << what;
    EXPECT_NE(what.find("down-after-milliseconds"), std::string::npos)
        << "Sentinel's own complaint: " << what;
    EXPECT_EQ(what.find(cfg.password), std::string::npos) << "the password leaks into: " << what;
  }
  EXPECT_EQ(children(), before) << "a failed start stops (and reaps) what it had started";
}

}  // namespace
}  // namespace redlock::test
