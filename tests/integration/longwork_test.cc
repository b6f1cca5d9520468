// Long work under a lock: the watchdog, lost-lock signalling, and quorum fencing
// tokens, against real redis-server processes.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "test_util.h"

namespace redlock::test {
namespace {

using std::chrono::milliseconds;
using clk = std::chrono::steady_clock;

class LongWork : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new redis_cluster(5); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void TearDown() override {
    for (std::size_t i = 0; i < 5; ++i) {
      if (nodes()[i].paused()) nodes()[i].resume();
      if (!nodes()[i].running()) nodes()[i].start();
    }
  }
  static redis_cluster& nodes() { return *cluster_; }
  static std::string unique(const std::string& base) {
    static std::atomic<int> n{0};
    return base + "-" + std::to_string(++n);
  }
  static redis_cluster* cluster_;
};
redis_cluster* LongWork::cluster_ = nullptr;

acquire_options watched(milliseconds ttl, milliseconds interval = milliseconds(0)) {
  acquire_options o;
  o.ttl = ttl;
  o.retry = retry_policy::once();
  o.auto_extend = true;
  o.extend_interval = interval;
  return o;
}

TEST_F(LongWork, watchdog_keeps_the_lock_through_work_five_times_the_ttl) {
  client holder(options_for(nodes().uris()));
  client rival(options_for(nodes().uris()));
  const std::string res = unique("watchdog");
  // A 600 ms TTL (not 300 ms): the watchdog's extensions must meet it on 2 busy
  // cores under TSan too; 5 TTLs still pass while the rival keeps trying.
  auto r = holder.acquire(res, watched(600ms));
  ASSERT_TRUE(r) << r.report.message();
  const auto until = clk::now() + 3100ms;  // > 5 x TTL
  int rival_attempts = 0;
  while (clk::now() < until) {
    auto other = rival.acquire(res, once(1000ms));
    ++rival_attempts;
    EXPECT_EQ(other.report.error, errc::contended) << other.report.message();
    EXPECT_TRUE(r.lock.owns_lock());
    EXPECT_GT(r.lock.remaining_validity(), 0ms);
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_GT(rival_attempts, 10);
  EXPECT_FALSE(r.lock.lost());
  EXPECT_GE(holder.stats().extends, 4u);
  ASSERT_TRUE(r.lock.release());
  auto now_free = rival.acquire(res, once(1000ms));
  EXPECT_TRUE(now_free) << now_free.report.message();
}

TEST_F(LongWork, release_stops_the_watchdog_before_anything_else) {
  client c(options_for(nodes().uris()));
  const std::string res = unique("stop");
  auto r = c.acquire(res, watched(300ms, 30ms));
  ASSERT_TRUE(r);
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(r.lock.release());
  const auto extends = c.stats().extends;
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(c.stats().extends, extends);
  EXPECT_EQ(nodes().count_key(res), 0);
  EXPECT_EQ(c.stats().locks_lost, 0u);
}

TEST_F(LongWork, guard_destruction_stops_the_watchdog_and_releases) {
  client c(options_for(nodes().uris()));
  const std::string res = unique("guard");
  {
    auto r = c.acquire(res, watched(300ms, 30ms));
    ASSERT_TRUE(r);
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(eventually([&] { return nodes().count_key(res) == 0; }));
  const auto extends = c.stats().extends;
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(c.stats().extends, extends);
}

TEST_F(LongWork, deleted_keys_make_the_watchdog_declare_the_lock_lost_promptly) {
  auto o = options_for(nodes().uris());
  client c(o);
  const std::string res = unique("deleted");
  std::atomic<int> lost_calls{0};
  std::atomic<long long> lost_at_ns{0};
  // A 3 s TTL with a 300 ms interval: a watchdog that noticed the loss only when
  // the validity ran out would take >= 2.7 s, far above the bound below.
  auto opts = watched(3000ms, 300ms);
  opts.on_lost = [&](const lease& l, const report& why) {
    EXPECT_EQ(l.resource, res);
    EXPECT_EQ(why.error, errc::lock_lost);
    lost_at_ns = clk::now().time_since_epoch().count();
    ++lost_calls;
  };
  auto r = c.acquire(res, opts);
  ASSERT_TRUE(r);
  auto work = r.lock.token_for_work();
  EXPECT_FALSE(work.stop_requested());
  ASSERT_TRUE(eventually([&] { return nodes().count_key(res) == 5; }));
  const auto deleted_at = clk::now();
  for (std::size_t i = 0; i < 5; ++i) nodes()[i].command({"DEL", res});
  ASSERT_TRUE(eventually([&] { return lost_calls.load() == 1; }, 3000ms));
  const auto took = clk::time_point(clk::duration(lost_at_ns.load())) - deleted_at;
  // Within one extension interval plus the node timeout (and scheduling slack
  // for a sanitizer build on busy cores).
  EXPECT_LT(took, 300ms + o.command_timeout + 850ms);
  EXPECT_TRUE(r.lock.lost());
  EXPECT_FALSE(r.lock.owns_lock());
  EXPECT_TRUE(work.stop_requested());
  EXPECT_EQ(r.lock.remaining_validity(), 0ms);
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(lost_calls.load(), 1);  // once
  EXPECT_EQ(r.lock.extend(1000ms).error, errc::lock_lost);
}

TEST_F(LongWork, paused_majority_makes_the_lock_lost_when_validity_runs_out) {
  auto o = options_for(nodes().uris());
  client c(o);
  const std::string res = unique("paused");
  std::atomic<int> lost_calls{0};
  std::atomic<int> unreachable{0};
  auto opts = watched(900ms, 300ms);
  opts.on_lost = [&](const lease&, const report& why) {
    // The report shows what the last failed extension saw.
    unreachable = why.count(node_status::timeout) + why.count(node_status::connection_error);
    ++lost_calls;
  };
  auto r = c.acquire(res, opts);
  ASSERT_TRUE(r);
  // Pause right after a successful extension would have happened or not: the
  // bound is measured from the last validity the lock had.
  nodes()[0].pause();
  nodes()[1].pause();
  nodes()[2].pause();
  const auto paused_at = clk::now();
  const auto valid_until = *r.lock.info().valid_until;
  ASSERT_TRUE(eventually([&] { return lost_calls.load() == 1; }, 3000ms));
  const auto detected = clk::now();
  EXPECT_TRUE(r.lock.lost());
  EXPECT_GE(unreachable.load(), 3);
  // Never before the validity it had when the nodes stopped answering...
  EXPECT_GE(detected + 5ms, valid_until);
  // ...and at most the TTL (the longest validity an extension can give) plus
  // the node timeout after the pause.
  // (The slack is for a sanitizer build on busy cores; `detected` is polled.)
  EXPECT_LT(detected - paused_at, 900ms + o.command_timeout + 600ms);
  for (std::size_t i = 0; i < 3; ++i) nodes()[i].resume();
}

TEST_F(LongWork, transient_extension_failure_is_retried_within_validity) {
  auto o = options_for(nodes().uris());
  client c(o);
  const std::string res = unique("transient");
  std::atomic<int> lost_calls{0};
  auto opts = watched(1500ms, 300ms);
  opts.on_lost = [&](const lease&, const report&) { ++lost_calls; };
  auto r = c.acquire(res, opts);
  ASSERT_TRUE(r);
  // A majority is unreachable for a while shorter than the validity.
  nodes()[0].pause();
  nodes()[1].pause();
  nodes()[2].pause();
  std::this_thread::sleep_for(500ms);
  for (std::size_t i = 0; i < 3; ++i) nodes()[i].resume();
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(lost_calls.load(), 0);
  EXPECT_TRUE(r.lock.owns_lock());
  EXPECT_GT(r.lock.remaining_validity(), 500ms);
  ASSERT_TRUE(r.lock.release());
}

TEST_F(LongWork, fencing_tokens_strictly_increase_across_clients) {
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(std::make_unique<client>(options_for(nodes().uris())));
  const std::string res = unique("fence-seq");
  acquire_options o = once(5000ms);
  o.fencing = true;
  std::uint64_t last = 0;
  for (int i = 0; i < 150; ++i) {
    auto r = clients[static_cast<std::size_t>(i) % 3]->acquire(res, o);
    ASSERT_TRUE(r) << r.report.message();
    ASSERT_TRUE(r.lock.fence());
    EXPECT_GT(*r.lock.fence(), last) << "at " << i;
    last = *r.lock.fence();
    ASSERT_TRUE(r.lock.release());
  }
  EXPECT_GE(last, 150u);
}

TEST(Fencing, tokens_strictly_increase_with_nodes_killed_and_restarted_with_aof) {
  node_config cfg;
  cfg.aof = true;
  redis_cluster cl(5, cfg);
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < 3; ++i) {
    auto co = options_for(cl.uris());
    // Nodes with appendfsync always keep their data: no need to quarantine restarts.
    co.restart_quarantine = 0ms;
    clients.push_back(std::make_unique<client>(co));
  }
  acquire_options o;
  o.ttl = 5000ms;
  o.fencing = true;
  o.retry.max_attempts = 50;
  o.retry.base_delay = 20ms;
  o.retry.max_delay = 50ms;
  std::uint64_t last = 0;
  int acquired = 0;
  for (int i = 0; i < 200; ++i) {
    if (i % 20 == 10) {
      // Kill a node (a different one each time) and bring it back with its data.
      auto& n = cl[static_cast<std::size_t>(i / 20) % 5];
      n.kill();
      n.restart(true);
    }
    if (i % 50 == 25) {
      // Two nodes down at once: still a majority.
      cl[1].kill();
      cl[3].kill();
    }
    if (i % 50 == 35) {
      cl[1].start();
      cl[3].start();
    }
    auto r = clients[static_cast<std::size_t>(i) % 3]->acquire("fenced-aof", o);
    ASSERT_TRUE(r) << i << ": " << r.report.message();
    ++acquired;
    ASSERT_GT(*r.lock.fence(), last) << "at " << i;
    last = *r.lock.fence();
    (void)r.lock.release();
  }
  EXPECT_EQ(acquired, 200);
}

TEST_F(LongWork, stale_fenced_writer_is_rejected_by_the_resource) {
  client a(options_for(nodes().uris()));
  client b(options_for(nodes().uris()));
  const std::string res = unique("stale-writer");
  acquire_options o = once(300ms);
  o.fencing = true;
  auto ra = a.acquire(res, o);
  ASSERT_TRUE(ra);
  const auto fa = *ra.lock.fence();
  // A stalls past its TTL (no watchdog); B takes the lock and writes.
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(ra.lock.remaining_validity(), 0ms);
  o.ttl = 5000ms;
  auto rb = b.acquire(res, o);
  ASSERT_TRUE(rb) << rb.report.message();
  const auto fb = *rb.lock.fence();
  EXPECT_GT(fb, fa);
  auto& store = nodes()[0];
  const std::string data = "data:" + res, seen = "data:" + res + ":fence";
  auto write = [&](std::uint64_t token, const std::string& value) {
    return store.command({"EVAL", fenced_write_script, "2", data, seen, std::to_string(token), value});
  };
  EXPECT_EQ(write(fb, "from-b"), "1");
  // A resumes and tries to write with its old token: refused.
  EXPECT_EQ(write(fa, "from-a"), "0");
  EXPECT_EQ(*store.get(data), "from-b");
  // And A is told its lock is gone before any extension can succeed.
  EXPECT_EQ(ra.lock.extend(1000ms).error, errc::lock_lost);
  EXPECT_EQ(write(fb, "again-b"), "1");
  EXPECT_NE(store.command({"EVAL", fenced_write_script, "2", data, seen, "abc", "v"}).find("not a number"),
            std::string::npos);
}

TEST_F(LongWork, fenced_critical_sections_under_contention_see_increasing_tokens) {
  constexpr int kThreads = 4;
  constexpr int kEach = 15;
  const std::string res = unique("fence-contend");
  std::mutex mu;
  std::vector<std::uint64_t> order;
  std::atomic<int> inside{0}, overlap{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      client c(options_for(nodes().uris()));
      acquire_options o;
      o.ttl = 5000ms;
      o.fencing = true;
      o.retry.max_attempts = 1000;
      o.retry.base_delay = 5ms;
      o.retry.max_delay = 20ms;
      o.retry.deadline = 20000ms;
      for (int i = 0; i < kEach; ++i) {
        auto r = c.acquire(res, o);
        if (!r) {
          ADD_FAILURE() << r.report.message();
          return;
        }
        if (inside.fetch_add(1) != 0) ++overlap;
        {
          std::lock_guard<std::mutex> g(mu);
          order.push_back(*r.lock.fence());
        }
        std::this_thread::sleep_for(1ms);
        inside.fetch_sub(1);
        (void)r.lock.release();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlap.load(), 0);
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kThreads * kEach));
  for (std::size_t i = 1; i < order.size(); ++i) EXPECT_GT(order[i], order[i - 1]) << "at " << i;
}

TEST_F(LongWork, fence_counter_is_persistent_and_separate_from_the_lock_key) {
  client c(options_for(nodes().uris()));
  const std::string res = unique("fence-key");
  acquire_options o = once(5000ms);
  o.fencing = true;
  auto r = c.acquire(res, o);
  ASSERT_TRUE(r);
  ASSERT_TRUE(eventually([&] { return nodes().count_value(res + ":fence", std::to_string(*r.lock.fence())) >= 3; }));
  for (std::size_t i = 0; i < 5; ++i) {
    if (nodes()[i].exists(res + ":fence")) {
      EXPECT_EQ(nodes()[i].pttl(res + ":fence"), -1);
    }
  }
  // Without fencing there is no counter traffic and no fence.
  auto plain = c.acquire(unique("plain"), once());
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain.lock.fence());
}

}  // namespace
}  // namespace redlock::test
