// The server implementations the library is tested against (issue 22 item 14):
// Redis 7.0 (Debian 12's redis-server) and Valkey 8.0.1 (built from source by
// tools/valkey.sh), alone and together in one quorum. The scenarios that depend on
// server behaviour run on Valkey and on mixed quorums through the VALKEY_TESTS of
// tests/CMakeLists.txt (the same test bodies, REDLOCK_TEST_SERVER=valkey|mixed); this
// file pins that the harness really starts the server it names, and one quorum of
// both kinds end to end.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redis_node.h"
#include "redlock/fencing.h"
#include "redlock/redlock.h"
#include "test_util.h"

namespace redlock::test {
namespace {

std::string info_server(redis_node& n) { return n.command({"INFO", "server"}); }

bool has_line(const std::string& info, const std::string& line) {
  return ("\n" + info).find("\n" + line + "\r") != std::string::npos;
}

TEST(Servers, a_valkey_node_reports_server_name_valkey_and_version_8_0_1) {
  node_config cfg;
  cfg.server = server_kind::valkey;
  redis_node n(cfg);
  EXPECT_EQ(n.server(), server_kind::valkey);
  const std::string info = info_server(n);
  EXPECT_TRUE(has_line(info, "server_name:valkey")) << info;
  EXPECT_TRUE(has_line(info, "valkey_version:8.0.1")) << info;
  // What a client that reads redis_version sees: the Redis release Valkey forked.
  EXPECT_TRUE(has_line(info, "redis_version:7.2.4")) << info;
}

TEST(Servers, a_redis_node_is_redis_7_and_not_valkey) {
  node_config cfg;
  cfg.server = server_kind::redis;
  redis_node n(cfg);
  const std::string info = info_server(n);
  EXPECT_FALSE(has_line(info, "server_name:valkey")) << info;
  EXPECT_NE(info.find("redis_version:7."), std::string::npos) << info;
}

// The process default follows REDLOCK_TEST_SERVER, so the valkey.* and mixed.* runs
// of this test (tests/CMakeLists.txt) prove that their nodes are what they claim.
TEST(Servers, cluster_nodes_run_the_server_that_REDLOCK_TEST_SERVER_names) {
  redis_cluster cl(3);
  const server_mix mix = default_server_mix();
  for (std::size_t i = 0; i < cl.size(); ++i) {
    const bool want_valkey =
        mix == server_mix::valkey || (mix == server_mix::mixed && i % 2 == 1);
    EXPECT_EQ(cl[i].server(), want_valkey ? server_kind::valkey : server_kind::redis) << "node " << i;
    EXPECT_EQ(has_line(info_server(cl[i]), "server_name:valkey"), want_valkey) << "node " << i;
  }
}

// Three Redis and two Valkey nodes in one client: the quorum of 3 needs a Valkey
// node whenever a Redis node is down, which the second half checks.
TEST(MixedQuorum, three_redis_and_two_valkey_nodes_acquire_extend_release_and_fence) {
  redis_cluster cl({server_kind::redis, server_kind::valkey, server_kind::redis, server_kind::valkey,
                    server_kind::redis});
  ASSERT_TRUE(has_line(info_server(cl[1]), "server_name:valkey"));
  ASSERT_FALSE(has_line(info_server(cl[0]), "server_name:valkey"));
  client c(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(c));

  acquire_options fenced = once(5000ms);
  fenced.fencing = true;
  auto first = c.acquire("mixed", fenced);
  ASSERT_TRUE(first) << first.report.message();
  ASSERT_TRUE(first.lock.fence().has_value());
  const std::string token = first.lock.info().token;
  // Decided at the quorum: the last answers may come after the call returned.
  EXPECT_TRUE(eventually([&] { return cl.count_value("mixed", token) == 5; }));

  auto e = first.lock.extend(20000ms);
  ASSERT_TRUE(e) << e.message();
  for (std::size_t i = 0; i < cl.size(); ++i) EXPECT_GT(cl[i].pttl("mixed"), 15000) << "node " << i;

  // The fence protects a resource on either server: the holder's token is accepted
  // by the fenced write script on a Valkey node and on a Redis node alike.
  const std::string fence = std::to_string(*first.lock.fence());
  for (std::size_t i : {0u, 1u}) {
    EXPECT_EQ(cl[i].command({"EVAL", fenced_write_script, "2", "mixed:data", "mixed:seen", fence, "v1"}), "1")
        << "node " << i;
  }

  auto rel = first.lock.release();
  ASSERT_TRUE(rel) << rel.message();
  EXPECT_TRUE(eventually([&] { return cl.count_key("mixed") == 0; }));

  // Two Redis nodes down: the quorum is one Redis and both Valkey nodes, and the
  // next fence is still greater (the counter lives on every node of the quorum).
  cl[0].kill();
  cl[2].kill();
  auto second = c.acquire("mixed", fenced);
  ASSERT_TRUE(second) << second.report.message();
  ASSERT_TRUE(second.lock.fence().has_value());
  EXPECT_GT(*second.lock.fence(), *first.lock.fence());
  EXPECT_EQ(second.report.nodes[1].status, node_status::ok);
  EXPECT_EQ(second.report.nodes[3].status, node_status::ok);
  EXPECT_EQ(second.report.nodes[4].status, node_status::ok);
  // The older holder's token is now refused on the Valkey node's resource.
  const std::string newer = std::to_string(*second.lock.fence());
  EXPECT_EQ(cl[1].command({"EVAL", fenced_write_script, "2", "mixed:data", "mixed:seen", newer, "v2"}), "1");
  EXPECT_EQ(cl[1].command({"EVAL", fenced_write_script, "2", "mixed:data", "mixed:seen", fence, "stale"}), "0");
  EXPECT_EQ(cl[1].get("mixed:data"), "v2");
  auto rel2 = second.lock.release();
  EXPECT_TRUE(rel2) << rel2.message();
  EXPECT_TRUE(eventually([&] { return cl.count_key("mixed") == 0; }));
}

}  // namespace
}  // namespace redlock::test
