// The clock-jump guard's samples across reconnects and its bounded allowance, with
// the LD_PRELOAD clock shim moving the nodes' wall clocks.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "clock_shim.h"
#include "fault_util.h"

namespace redlock::test {
namespace {

class ClockJumpGuard : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) nodes_.push_back(std::make_unique<shimmed_node>());
  }
  std::vector<std::string> uris() {
    std::vector<std::string> u;
    for (auto& n : nodes_) u.push_back(n->node().uri());
    return u;
  }
  void jump(std::size_t i, std::chrono::milliseconds by) {
    auto& clk = nodes_[i]->clock();
    clk.set_offset(clk.offset() + by);
  }
  std::vector<std::unique_ptr<shimmed_node>> nodes_;
};

// A holds (ttl 20 s); nodes 0 and 1 jump 30 s forward, so A's keys there expire at
// once; B's connections to them are killed before B acquires again. B's new
// connections must compare their first TIME with the samples taken before the
// kill, see the jump and keep nodes 0 and 1 out of B's quorum.
void jump_then_kill_connections(std::vector<std::unique_ptr<shimmed_node>>& nodes,
                                client_options o, const std::string& res) {
  client a(o), b(o);
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));  // b took a TIME sample of every node at connect
  auto ra = a.acquire(res, once(20000ms));
  ASSERT_TRUE(ra) << ra.report.message();
  for (std::size_t i : {0u, 1u}) {
    auto& clk = nodes[i]->clock();
    clk.set_offset(clk.offset() + 30000ms);
  }
  std::this_thread::sleep_for(20ms);  // the shim picks the offset up within ~1 ms
  const auto reconnects = b.stats().reconnects;
  for (std::size_t i : {0u, 1u}) {
    // Every client connection but the harness's own (A's and B's).
    nodes[i]->node().command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  }
  ASSERT_TRUE(eventually([&] { return b.stats().reconnects >= reconnects + 2; }, 5000ms))
      << "B did not reconnect to both nodes";
  auto rb = b.acquire(res, once(20000ms));
  EXPECT_FALSE(rb) << "B acquired while A holds: " << rb.report.message();
  for (std::size_t i : {0u, 1u}) {
    EXPECT_EQ(rb.report.nodes.at(i).status, node_status::excluded) << rb.report.message();
    EXPECT_NE(rb.report.nodes.at(i).detail.find("clock-jump guard"), std::string::npos) << rb.report.message();
  }
  EXPECT_GT(ra.lock.remaining_validity(), 15000ms);
}

TEST_F(ClockJumpGuard, a_jump_before_a_reconnect_still_excludes_the_node) {
  jump_then_kill_connections(nodes_, scenario_options(uris()), "jump-reconnect");
}

// Without INFO (restart guard off, or not permitted) the client cannot tell a
// reconnect from a restart: it keeps the sample, and still sees the jump.
TEST_F(ClockJumpGuard, a_jump_before_a_reconnect_is_seen_with_the_restart_guard_off) {
  client_options o = scenario_options(uris());
  o.restart_quarantine = 0ms;
  jump_then_kill_connections(nodes_, o, "jump-reconnect-rq0");
}

// The client's clock, shifted forward on demand (an hour passes in a moment).
class shifted_clock final : public redlock::clock {
 public:
  std::chrono::steady_clock::time_point now() const noexcept override {
    return std::chrono::steady_clock::now() + std::chrono::nanoseconds(offset_ns_.load());
  }
  void advance(std::chrono::nanoseconds d) { offset_ns_ += d.count(); }

 private:
  std::atomic<std::int64_t> offset_ns_{0};
};

// The allowance between two samples is the threshold plus the drift rate over the
// gap, the drift part capped at the threshold: after an hour without a sample, a
// jump of 3 thresholds is still a jump (uncapped, 1 % of an hour would hide 36 s).
TEST_F(ClockJumpGuard, a_long_gap_between_samples_still_shows_a_jump_of_a_few_thresholds) {
  auto clk = std::make_shared<shifted_clock>();
  client_options o = scenario_options(uris());
  o.clock = clk;
  o.clock_jump_threshold = 1000ms;
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  clk->advance(std::chrono::hours(1));
  for (std::size_t i = 0; i < nodes_.size(); ++i) jump(i, std::chrono::hours(1) + 3000ms);
  std::this_thread::sleep_for(20ms);
  auto r = c.acquire("long-gap", once(10000ms));
  EXPECT_FALSE(r) << r.report.message();
  // Each grant comes back with its TIME and is refused by the guard; the round
  // decides once two are (the third may still be pending then).
  EXPECT_GE(r.report.count(node_status::excluded), 2) << r.report.message();
  EXPECT_EQ(r.report.count(node_status::ok), 0) << r.report.message();
  // Within the allowance (the drift part at its cap): no jump.
  client_options o2 = scenario_options(uris());
  auto clk2 = std::make_shared<shifted_clock>();
  o2.clock = clk2;
  client d(o2);
  ASSERT_TRUE(wait_connected(d));
  clk2->advance(std::chrono::hours(1));
  for (std::size_t i = 0; i < nodes_.size(); ++i) jump(i, std::chrono::hours(1) + 1500ms);
  std::this_thread::sleep_for(20ms);
  auto r2 = d.acquire("long-gap-2", once(10000ms));
  EXPECT_TRUE(r2) << r2.report.message();
}

}  // namespace
}  // namespace redlock::test
