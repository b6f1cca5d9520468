// Adversarial review of the issue-9 hardening: reproductions that need the fault
// harness (clock shim, fault proxy).
#include <gtest/gtest.h>

#include <thread>

#include "clock_shim.h"
#include "fault_proxy.h"
#include "fault_util.h"

namespace redlock::test {
namespace {

// Guarantee (operations.cc cleanup/rollback, docs/safety.md on rollbacks): a failed
// attempt's key is removed from every node that may hold it. Attack: a node whose
// clock jumped forward grants the SET (the key IS written), and the clock-jump
// guard, reading the TIME pipelined behind it, turns the vote into `excluded`
// (round::on_reply). rollback() skips every `excluded` node on the assumption that
// an excluded node was never asked; this one was, and keeps the failed attempt's
// key for the whole TTL, blocking that node for every other client.
TEST(ReviewAttackFault, a_grant_the_clock_jump_guard_excludes_after_the_fact_is_rolled_back) {
  std::vector<std::unique_ptr<shimmed_node>> n;
  for (int i = 0; i < 3; ++i) n.push_back(std::make_unique<shimmed_node>());
  std::vector<std::string> uris;
  for (auto& s : n) uris.push_back(s->node().uri());
  client c(scenario_options(uris));
  ASSERT_TRUE(wait_connected(c));  // every handshake took a TIME sample
  n[0]->clock().set_offset(std::chrono::milliseconds(30000));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the shim picks it up within ~1 ms
  // Nodes 2 and 3 do not answer in time: the decision waits for their timeouts, so
  // node 1's (excluded) grant is in before it.
  n[1]->node().pause();
  n[2]->node().pause();
  const std::string res = "excluded-grant";
  auto r = c.acquire(res, once(std::chrono::milliseconds(10000)));
  n[1]->node().resume();
  n[2]->node().resume();
  ASSERT_FALSE(r) << r.report.message();
  ASSERT_EQ(r.report.nodes[0].status, node_status::excluded) << r.report.message();
  const bool cleaned = eventually([&] { return !n[0]->node().exists(res); }, std::chrono::milliseconds(3000));
  EXPECT_TRUE(cleaned) << "the failed attempt's key stays on the excluded node, PTTL " << n[0]->node().pttl(res)
                       << " ms, value " << n[0]->node().get(res).value_or("(none)") << "; report: "
                       << r.report.message();
  // The other nodes were rolled back once they answered.
  EXPECT_TRUE(eventually([&] { return !n[1]->node().exists(res) && !n[2]->node().exists(res); }));
}

// Guarantee (docs/safety.md assumption 2 and the clock-jump guard): a forward step
// of a server's clock larger than clock_jump_threshold does not go unnoticed. Attack:
// the clock of two of three nodes steps BACK 30 s (ignored by the guard: only
// forward steps count), A acquires (its keys there get an absolute expiry 30 s
// early), then the clocks are corrected forward again. A's keys on those nodes are
// gone at once, while A has ~10 s of validity. B's two samples straddle both steps
// (before the step back, after the correction): net zero, the forward step goes
// unnoticed, and B gets a quorum. Whoever granted a key while the clock was behind
// had to be distrusted (a backward step is followed by a forward correction).
TEST(ReviewAttackFault, a_clock_stepped_back_and_then_corrected_forward_does_not_give_two_holders) {
  std::vector<std::unique_ptr<shimmed_node>> n;
  for (int i = 0; i < 3; ++i) n.push_back(std::make_unique<shimmed_node>());
  std::vector<std::string> uris;
  for (auto& s : n) uris.push_back(s->node().uri());
  client a(scenario_options(uris));
  client b(scenario_options(uris));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));  // both have a TIME sample of every node at offset 0
  n[0]->clock().set_offset(std::chrono::milliseconds(-30000));
  n[1]->clock().set_offset(std::chrono::milliseconds(-30000));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string res = "stepped-back";
  auto held = a.acquire(res, once(std::chrono::milliseconds(10000)));
  if (!held) {
    // The guard sees the step back on the very grants (TIME pipelined behind
    // them): A is refused, which defeats the attack; anything else is a failure.
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(held.report.nodes[i].status, node_status::excluded) << held.report.message();
      ASSERT_NE(held.report.nodes[i].detail.find("clock jumped back"), std::string::npos) << held.report.message();
    }
  }
  n[0]->clock().set_offset(std::chrono::milliseconds(0));  // the correction (NTP step forward)
  n[1]->clock().set_offset(std::chrono::milliseconds(0));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto rival = b.acquire(res, once(std::chrono::milliseconds(10000)));
  const bool a_holds = held.lock.owns_lock();
  EXPECT_FALSE(rival && a_holds) << "two holders: A has " << held.lock.remaining_validity().count()
                                 << " ms of validity left, B acquired: " << rival.report.message();
}

// Guarantee (items 8/9, operations.cc on_late: "release any grant that arrives after
// a failed attempt was decided"; rollbacks delivered until confirmed). Attack: a
// fenced acquire whose EVALSHA meets NOSCRIPT on node 1 after the attempt was
// decided (contended on nodes 2 and 3). The rollback was queued first, so it runs
// first (not owner: "confirmed"); the resent acquire (EVAL) then writes the key.
// If the resend's reply is lost (a partition that drops replies, a reset after
// the server applied it), the request times out, its late reply can never reach
// on_late (dropped at the connection as expired, or failed with the connection),
// and nothing deletes the key: it stays for the whole TTL.
TEST(ReviewAttackFault, a_resent_acquire_whose_reply_is_lost_after_the_decision_is_rolled_back) {
  redis_cluster nodes(3);
  fault_proxy px(nodes[0].port());
  const std::vector<std::string> uris = {px.uri(), nodes[1].uri(), nodes[2].uri()};
  client_options o = scenario_options(uris);
  o.command_timeout = std::chrono::milliseconds(1000);
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  acquire_options fenced = once(std::chrono::milliseconds(10000));
  fenced.fencing = true;
  {
    auto warm = c.acquire("warm-scripts", fenced);  // the connections now use EVALSHA
    ASSERT_TRUE(warm) << warm.report.message();
    ASSERT_FALSE(warm.lock.release().error);
  }
  const std::string res = "resend-lost";
  nodes[1].command({"SET", res, "someone-else", "PX", "30000"});
  nodes[2].command({"SET", res, "someone-else", "PX", "30000"});
  nodes[0].command({"SCRIPT", "FLUSH"});
  px.latency(std::chrono::milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.acquire(res, fenced);
  ASSERT_FALSE(r);
  ASSERT_EQ(r.report.error, errc::contended) << r.report.message();
  // NOSCRIPT reaches the client at ~600 ms, the resend reaches node 1 at ~900 ms.
  std::this_thread::sleep_until(t0 + std::chrono::milliseconds(750));
  px.drop_replies();
  std::this_thread::sleep_until(t0 + std::chrono::milliseconds(2500));  // the resend timed out
  px.pass();
  const bool cleaned = eventually([&] { return !nodes[0].exists(res); }, std::chrono::milliseconds(3000));
  EXPECT_TRUE(cleaned) << "the failed attempt's key stays on node 1: value "
                       << nodes[0].get(res).value_or("(none)") << ", PTTL " << nodes[0].pttl(res) << " ms";
}

}  // namespace
}  // namespace redlock::test
