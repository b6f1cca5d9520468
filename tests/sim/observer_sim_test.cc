// Observer events in the simulated world (redlock/testing.h): the clock-jump
// quarantine and its end, a slow node, and determinism (the same seed gives the
// same events, at the same virtual instants).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "../integration/observer_recorder.h"
#include "redlock/client.h"
#include "redlock/testing.h"

namespace redlock::testing {
namespace {

using namespace std::chrono_literals;
using redlock::test::recorder;

acquire_options ttl_of(std::chrono::milliseconds ttl) {
  acquire_options o;
  o.ttl = ttl;
  o.retry = retry_policy::once();
  return o;
}

TEST(ObserverSim, a_clock_jump_quarantines_the_node_until_max_ttl_then_clears_it) {
  world w;
  auto rec = std::make_shared<recorder>();
  client_options co;
  co.observers.push_back(rec);
  co.max_ttl = 5s;
  auto c = w.make_client(co);
  ASSERT_TRUE(c->ping());
  ASSERT_TRUE(c->acquire("sim-a", ttl_of(2s)));
  w.jump_node_clock(1, 10s);
  const auto before = w.now();
  auto r = c->acquire("sim-b", ttl_of(2s));
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_EQ(r.report.nodes[1].status, node_status::excluded);
  const auto q = rec->get(&recorder::quarantines_);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].index, 1u);
  EXPECT_EQ(q[0].reason, quarantine_reason::clock_jump);
  EXPECT_NE(q[0].detail.find("jumped forward"), std::string::npos) << q[0].detail;
  EXPECT_GE(q[0].at, before);
  // until = the sample's instant + max(quarantine, max_ttl) = about now + 5 s.
  EXPECT_GE(q[0].until, before + 5s - 10ms);
  EXPECT_LE(q[0].until, q[0].at + 5s);
  w.advance(4s);
  EXPECT_TRUE(rec->get(&recorder::cleared_).empty());
  w.advance(2s);
  const auto cl = rec->get(&recorder::cleared_);
  ASSERT_EQ(cl.size(), 1u);
  EXPECT_EQ(cl[0].index, 1u);
  EXPECT_EQ(cl[0].reason, quarantine_reason::clock_jump);
  EXPECT_GE(cl[0].at, q[0].until);
  EXPECT_LE(cl[0].at - q[0].until, 5ms);
  auto r2 = c->acquire("sim-c", ttl_of(2s));
  ASSERT_TRUE(r2) << r2.report.message();
  EXPECT_EQ(r2.report.nodes[1].status, node_status::ok);
}

TEST(ObserverSim, a_slow_node_is_reported_with_the_operation_kind) {
  world w;
  auto rec = std::make_shared<recorder>();
  client_options co;
  co.observers.push_back(rec);
  co.slow_node_threshold = 10ms;
  co.command_timeout = 200ms;
  auto c = w.make_client(co);
  ASSERT_TRUE(c->ping());
  w.set_node_latency(2, 20000, 20000);  // 20 ms each way
  auto r = c->acquire("sim-slow", ttl_of(2s));
  ASSERT_TRUE(r);
  ASSERT_TRUE(r.lock.release());
  w.advance(100ms);
  const auto slow = rec->get(&recorder::slow_);
  ASSERT_EQ(slow.size(), 2u);
  EXPECT_EQ(slow[0].index, 2u);
  EXPECT_EQ(slow[0].kind, operation_kind::acquire);
  EXPECT_GE(slow[0].latency, 40ms);
  EXPECT_EQ(slow[1].kind, operation_kind::release);
}

// Every event with its virtual instant, for one seeded run.
std::vector<std::string> run(std::uint64_t seed) {
  world_options wo;
  wo.seed = seed;
  world w(wo);
  auto rec = std::make_shared<recorder>();
  std::vector<std::string> out;
  rec->then = [&](const std::string& line) {
    out.push_back(std::to_string(w.elapsed().count()) + " " + line);
  };
  client_options co;
  co.observers.push_back(rec);
  co.max_ttl = 3s;
  auto c = w.make_client(co);
  acquire_options o = ttl_of(1500ms);
  o.auto_extend = true;
  auto r = c->acquire("d", o);
  w.advance(1s);
  w.restart_node(0);
  w.advance(50ms);
  acquire_options retry = ttl_of(1s);
  retry.retry.max_attempts = 3;
  (void)c->acquire("d", retry);
  w.delete_key_everywhere("d");
  w.advance(4s);
  return out;
}

TEST(ObserverSim, the_same_seed_gives_the_same_events) {
  const auto a = run(7);
  const auto b = run(7);
  EXPECT_GT(a.size(), 20u);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace redlock::testing
