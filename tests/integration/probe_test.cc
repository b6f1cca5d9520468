// client::probe against real redis-server nodes: what it reads from a healthy
// node, and how it reports a paused node, a refused password and a restart.
#include <gtest/gtest.h>

#include <string>
#include <future>
#include <thread>

#include "test_util.h"

namespace redlock::test {
namespace {

using clk = std::chrono::steady_clock;

TEST(Probe, reads_round_trip_identity_policy_and_persistence_of_each_node) {
  node_config aof;
  aof.extra_args = {"--appendonly", "yes"};
  redis_node plain;
  redis_node with_aof(aof);
  client c(options_for({plain.uri(), with_aof.uri()}));
  const probe_result r = c.probe();
  ASSERT_EQ(r.nodes.size(), 2u);
  EXPECT_EQ(r.reachable, 2u);
  EXPECT_EQ(r.voting, 2u);
  EXPECT_TRUE(r.quorum_ok);
  for (const node_health& h : r.nodes) {
    EXPECT_EQ(h.status, node_status::ok) << h.detail;
    EXPECT_GT(h.rtt.count(), 0);
    EXPECT_LT(h.rtt, std::chrono::seconds(1));
    EXPECT_EQ(h.run_id.size(), 40u) << h.run_id;
    ASSERT_TRUE(h.uptime_s);
    EXPECT_LT(*h.uptime_s, 600);
    EXPECT_FALSE(h.redis_version.empty());
    EXPECT_EQ(h.maxmemory_policy, "noeviction");
    EXPECT_FALSE(h.quarantined);
    EXPECT_TRUE(h.warnings.empty());
  }
  EXPECT_EQ(r.nodes[0].node, plain.uri());
  EXPECT_EQ(r.nodes[0].aof_enabled, false);
  EXPECT_EQ(r.nodes[1].aof_enabled, true);
  EXPECT_NE(r.nodes[0].run_id, r.nodes[1].run_id);
}

TEST(Probe, a_paused_node_times_out_and_an_evicting_policy_warns) {
  node_config lru;
  lru.extra_args = {"--maxmemory-policy", "allkeys-lru"};
  redis_cluster cl(3, lru);
  client c(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(c));
  cl[1].pause();
  const auto before = clk::now();
  const probe_result r = c.probe();
  EXPECT_LT(clk::now() - before, std::chrono::seconds(2));  // bounded by the command timeout
  cl[1].resume();
  EXPECT_EQ(r.nodes[1].status, node_status::timeout) << to_string(r.nodes[1].status) << ": " << r.nodes[1].detail;
  EXPECT_EQ(r.nodes[1].run_id, "");
  EXPECT_EQ(r.nodes[0].status, node_status::ok);
  EXPECT_EQ(r.reachable, 2u);
  EXPECT_TRUE(r.quorum_ok);
  ASSERT_EQ(r.nodes[0].warnings.size(), 1u);
  EXPECT_EQ(r.nodes[0].warnings[0].code, warning_code::eviction_policy);
  EXPECT_EQ(r.nodes[0].maxmemory_policy, "allkeys-lru");
}

TEST(Probe, a_node_that_wants_a_password_reports_an_auth_failure) {
  node_config secret;
  secret.password = "s3cret";
  redis_node guarded(secret);
  redis_node open;
  // The URI without the password.
  const std::string bare = "redis://127.0.0.1:" + std::to_string(guarded.port());
  client c(options_for({bare, open.uri()}));
  const probe_result r = c.probe();
  EXPECT_EQ(r.nodes[0].status, node_status::auth_error) << to_string(r.nodes[0].status) << ": " << r.nodes[0].detail;
  EXPECT_EQ(r.nodes[1].status, node_status::ok);
  EXPECT_FALSE(r.quorum_ok);  // 1 of 2, quorum 2
  // And with the password, it answers.
  client ok(options_for({guarded.uri()}));
  EXPECT_EQ(ok.probe().nodes[0].status, node_status::ok);
}

TEST(Probe, a_restarted_node_is_quarantined_until_the_restart_guard_lets_it_vote) {
  redis_cluster cl(3);
  auto o = options_for(cl.uris());
  o.max_ttl = std::chrono::seconds(30);  // the quarantine
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  const std::string old_id = c.probe().nodes[2].run_id;
  cl[2].restart(false);
  const auto restarted = clk::now();
  // The client sees the restart at its reconnect: bounded wait for it.
  probe_result r;
  for (int i = 0; i < 100; ++i) {
    r = c.probe();
    if (r.nodes[2].status == node_status::ok && r.nodes[2].quarantined) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const node_health& h = r.nodes[2];
  ASSERT_EQ(h.status, node_status::ok) << h.detail;
  ASSERT_TRUE(h.quarantined);
  EXPECT_NE(h.quarantine_detail.find("restart guard"), std::string::npos) << h.quarantine_detail;
  ASSERT_TRUE(h.quarantined_until);
  EXPECT_GT(*h.quarantined_until, restarted + std::chrono::seconds(25));
  EXPECT_LE(*h.quarantined_until, clk::now() + o.max_ttl);
  EXPECT_NE(h.run_id, old_id);
  EXPECT_EQ(r.voting, 2u);
  EXPECT_TRUE(r.quorum_ok);
  EXPECT_FALSE(r.nodes[0].quarantined);
}

TEST(Probe, async_answers_once) {
  redis_node n;
  std::promise<probe_result> p;
  auto c = std::make_unique<client>(options_for({n.uri()}));
  c->probe_async([&p](probe_result r) { p.set_value(std::move(r)); });
  auto f = p.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(f.get().nodes[0].status, node_status::ok);
}

}  // namespace
}  // namespace redlock::test
