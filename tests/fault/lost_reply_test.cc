// Scenario 8: lost replies. Client A reaches the five nodes through proxies that
// can drop every reply while still forwarding requests: the servers apply A's SET,
// A never hears. For each mask of "deaf" nodes:
//  - with a majority deaf, A's attempt fails `unavailable`, and its rollback is
//    applied on every node, including the ones A believes failed (checked while
//    the replies are still being dropped);
//  - with a minority deaf, A acquires, and its release deletes the key on every
//    node, deaf ones included;
//  - either way, once the proxies pass again, client B acquires at once: no key
//    is left to wait a TTL for.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "fault_proxy.h"
#include "fault_util.h"

namespace redlock::test {
namespace {

constexpr auto kTtl = 10000ms;  // long: "at once" must be far below it
// Generous for a sanitizer build on busy cores, yet far below the TTL it must beat.
constexpr auto kNextAcquireBound = 3000ms;

TEST(LostReplies, attempts_with_lost_replies_are_rolled_back_on_every_node) {
  redis_cluster nodes(5);
  std::vector<std::string> via;
  auto proxies = proxy_each(nodes, via);
  client a(scenario_options(via));
  client b(scenario_options(nodes.uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  figures fig;
  fig.scenario = "lost_replies";
  std::mt19937 rng(808);
  double worst_next_ms = 0;
  std::uint64_t failed_attempts = 0, successful_attempts = 0;
  fig.runs = repeat_for_soak(
      [&](int round) {
        // The first rounds walk masks of 1..5 deaf nodes; later rounds are random.
        unsigned mask = 0;
        if (round < 5) {
          for (int i = 0; i <= round; ++i) mask |= 1u << ((i * 2 + round) % 5);
        } else {
          mask = static_cast<unsigned>(rng()) % 31 + 1;
        }
        const int deaf = __builtin_popcount(mask);
        const std::string res = "lost-" + std::to_string(round);
        for (std::size_t i = 0; i < 5; ++i) {
          if ((mask & (1u << i)) != 0) proxies[i]->drop_replies();
        }
        fig.faults += static_cast<std::uint64_t>(deaf);
        auto r = a.acquire(res, once(kTtl));
        ++fig.operations;
        if (deaf >= 3) {
          ++failed_attempts;
          EXPECT_EQ(r.report.error, errc::unavailable) << "mask " << mask << ": " << r.report.message();
          // Decided as soon as no quorum was possible: a deaf node may still be pending.
          EXPECT_EQ(r.report.count(node_status::timeout) + r.report.count(node_status::pending), deaf)
              << r.report.message();
        } else {
          ++successful_attempts;
          ASSERT_TRUE(r) << "mask " << mask << ": " << r.report.message();
          // The deaf nodes applied the SET although A never heard.
          const std::string token = r.lock.info().token;
          EXPECT_TRUE(eventually([&] { return nodes.count_value(res, token) == 5; }, 5000ms));
          auto rel = r.lock.release();
          ++fig.operations;
          EXPECT_TRUE(rel) << rel.message();
        }
        // Rolled back (or released) everywhere, while the replies are still lost.
        // (Polled for up to 5 s: still half the TTL, so an expiry cannot pass for it.)
        EXPECT_TRUE(eventually([&] { return nodes.count_key(res) == 0; }, 5000ms))
            << "mask " << mask << ": a key of A's is left on " << nodes.count_key(res) << " node(s)";
        for (auto& p : proxies) p->pass();
        // The next acquirer does not wait a TTL.
        const auto t0 = steady::now();
        acquire_result next;
        while (!(next = b.acquire(res, once(kTtl))) && steady::now() - t0 < kNextAcquireBound) {
          std::this_thread::sleep_for(10ms);
        }
        const double next_ms = std::chrono::duration<double, std::milli>(steady::now() - t0).count();
        worst_next_ms = std::max(worst_next_ms, next_ms);
        ++fig.operations;
        EXPECT_TRUE(next) << "mask " << mask << ": B could not acquire: " << next.report.message();
        if (next) {
          const report rel = next.lock.release();
          EXPECT_TRUE(rel) << rel.message();
        }
        ASSERT_TRUE(wait_connected(a));  // connections that lost bytes were reset
      },
      /*min_rounds=*/20);
  std::uint64_t dropped = 0, resets = 0;
  for (auto& p : proxies) {
    dropped += p->stats().bytes_dropped;
    resets += p->stats().reset;
  }
  fig.extra = "failed_attempts=" + std::to_string(failed_attempts) +
              " successful_attempts=" + std::to_string(successful_attempts) +
              " reply_bytes_dropped=" + std::to_string(dropped) +
              " connections_reset=" + std::to_string(resets) +
              " worst_next_acquire_ms=" + std::to_string(static_cast<int>(worst_next_ms));
  fig.publish();
}

}  // namespace
}  // namespace redlock::test
