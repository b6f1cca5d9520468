// The core Redlock behaviours against real, independent redis-server processes.
#include <gtest/gtest.h>
#include <uv.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "fake_listener.h"
#include "redlock/uv.h"
#include "test_util.h"

namespace redlock::test {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

class FiveNodes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new redis_cluster(5); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    for (std::size_t i = 0; i < cluster_->size(); ++i) {
      auto& n = (*cluster_)[i];
      if (n.paused()) n.resume();
      if (!n.running()) n.start();
    }
  }
  void TearDown() override { SetUp(); }
  static redis_cluster& nodes() { return *cluster_; }
  static std::string unique(const std::string& base) {
    static std::atomic<int> n{0};
    return base + "-" + std::to_string(++n) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  static redis_cluster* cluster_;
};
redis_cluster* FiveNodes::cluster_ = nullptr;

TEST_F(FiveNodes, acquire_sets_token_with_ttl_on_every_node_and_release_removes_it) {
  client c(options_for(nodes().uris()));
  const std::string res = unique("basic");
  auto r = c.acquire(res, once(10000ms));
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_TRUE(r.lock.owns_lock());
  const lease l = r.lock.info();
  EXPECT_EQ(l.token.size(), 32u);
  EXPECT_GT(r.report.validity, 9000ms);
  EXPECT_LE(r.report.validity, 10000ms - 102ms);
  EXPECT_TRUE(eventually([&] { return nodes().count_value(res, l.token) == 5; }));
  for (std::size_t i = 0; i < 5; ++i) {
    long long pttl = nodes()[i].pttl(res);
    EXPECT_GT(pttl, 8000);
    EXPECT_LE(pttl, 10000);
  }
  auto rel = r.lock.release();
  EXPECT_TRUE(rel) << rel.message();
  EXPECT_FALSE(r.lock.owns_lock());
  EXPECT_TRUE(eventually([&] { return nodes().count_key(res) == 0; }));
}

TEST_F(FiveNodes, tokens_are_fresh_for_every_acquisition) {
  client c(options_for(nodes().uris()));
  std::set<std::string> tokens;
  for (int i = 0; i < 20; ++i) {
    auto r = c.acquire(unique("fresh"), once());
    ASSERT_TRUE(r) << r.report.message();
    tokens.insert(r.lock.info().token);
  }
  EXPECT_EQ(tokens.size(), 20u);
}

TEST_F(FiveNodes, extend_moves_the_expiry_and_reports_new_validity) {
  client c(options_for(nodes().uris()));
  const std::string res = unique("extend");
  auto r = c.acquire(res, once(2000ms));
  ASSERT_TRUE(r);
  auto e = r.lock.extend(20000ms);
  ASSERT_TRUE(e) << e.message();
  EXPECT_GT(e.validity, 19000ms);
  EXPECT_GT(r.lock.remaining_validity(), 19000ms);
  EXPECT_TRUE(eventually([&] {
    int extended = 0;
    for (std::size_t i = 0; i < 5; ++i) extended += nodes()[i].pttl(res) > 15000 ? 1 : 0;
    return extended == 5;
  }));
}

TEST_F(FiveNodes, contention_between_clients_has_exactly_one_winner) {
  const std::string res = unique("contend");
  constexpr int kClients = 8;
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(std::make_unique<client>(options_for(nodes().uris())));
  for (auto& c : clients) ASSERT_TRUE(wait_connected(*c));
  std::atomic<int> winners{0}, contended{0}, other{0};
  std::vector<lock> locks(kClients);
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      auto r = clients[i]->acquire(res, once(10000ms));
      if (r) {
        ++winners;
        locks[i] = std::move(r.lock);
      } else if (r.report.error == errc::contended || r.report.error == errc::unavailable) {
        // unavailable is possible when the votes split so that nobody has a quorum
        ++contended;
      } else {
        ++other;
      }
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_LE(winners.load(), 1);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(winners.load() + contended.load(), kClients);
  // Whoever won holds the key on a majority; losers' tokens are rolled back.
  if (winners.load() == 1) {
    for (auto& l : locks) {
      if (l.owns_lock()) {
        EXPECT_GE(nodes().count_value(res, l.info().token), 3);
      }
    }
  }
  for (auto& l : locks) (void)l.release();
  EXPECT_TRUE(eventually([&] { return nodes().count_key(res) == 0; }));
}

TEST_F(FiveNodes, sequential_clients_each_get_the_lock_after_release) {
  client a(options_for(nodes().uris()));
  client b(options_for(nodes().uris()));
  const std::string res = unique("seq");
  for (int i = 0; i < 10; ++i) {
    auto ra = a.acquire(res, once());
    ASSERT_TRUE(ra) << ra.report.message();
    auto rb = b.acquire(res, once());
    EXPECT_EQ(rb.report.error, errc::contended) << rb.report.message();
    EXPECT_EQ(rb.report.count(node_status::held), rb.report.count(node_status::held));
    ASSERT_TRUE(ra.lock.release());
    auto rb2 = b.acquire(res, once());
    ASSERT_TRUE(rb2) << rb2.report.message();
    ASSERT_TRUE(rb2.lock.release());
  }
}

TEST_F(FiveNodes, minority_down_still_acquires) {
  client c(options_for(nodes().uris()));
  ASSERT_TRUE(wait_connected(c));
  nodes()[0].kill();
  nodes()[3].kill();
  const std::string res = unique("minority");
  auto r = c.acquire(res, once());
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_EQ(nodes().count_value(res, r.lock.info().token), 3);
  EXPECT_TRUE(r.lock.release());
}

TEST_F(FiveNodes, majority_down_fails_unavailable_within_node_timeout) {
  auto o = options_for(nodes().uris());
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  nodes()[0].kill();
  nodes()[2].kill();
  nodes()[4].kill();
  const std::string res = unique("majority");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.acquire(res, once());
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
  // Bounded by the node timeouts, not by the TTL (10 s) or a retry; the slack is
  // for a sanitizer build on 2 busy cores.
  EXPECT_LT(took, o.command_timeout + o.connect_timeout + 1500ms);
  EXPECT_EQ(r.report.count(node_status::connection_error), 3);
  const std::string msg = r.report.message();
  EXPECT_NE(msg.find("nodes, quorum is 3; 3 did not answer"), std::string::npos) << msg;
  EXPECT_NE(msg.find(nodes()[0].uri()), std::string::npos) << msg;
  // Rolled back on the two live nodes.
  EXPECT_TRUE(eventually([&] { return nodes().count_key(res) == 0; }));
}

TEST_F(FiveNodes, a_down_node_fails_fast_instead_of_waiting) {
  auto o = options_for(nodes().uris());
  o.command_timeout = 5000ms;  // would be obvious if we waited for it
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  nodes()[1].kill();
  nodes()[2].kill();
  nodes()[3].kill();
  // Until the client noticed the connections dropped (polled, not a fixed sleep
  // that a loaded machine can outlast).
  ASSERT_TRUE(eventually(
      [&] { return c.inspect(unique("fast-probe")).report.count(node_status::connection_error) == 3; }, 15000ms));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.acquire(unique("fast"), once());
  EXPECT_EQ(r.report.error, errc::unavailable);
  // Far below the 5 s command timeout it would take to wait for a down node.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2000ms);
  EXPECT_EQ(r.report.count(node_status::connection_error), 3) << r.report.message();
}

TEST_F(FiveNodes, paused_minority_does_not_delay_a_successful_acquire) {
  auto o = options_for(nodes().uris());
  o.command_timeout = 4000ms;
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  nodes()[1].pause();
  nodes()[4].pause();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.acquire(unique("paused"), once());
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(r) << r.report.message();
  // Early decision: the quorum-th yes decides, the paused pair is not awaited
  // (awaiting it would take the 4 s command timeout).
  EXPECT_LT(took, 2000ms);
  EXPECT_EQ(r.report.count(node_status::pending) + r.report.count(node_status::timeout), 2);
  nodes()[1].resume();
  nodes()[4].resume();
}

TEST_F(FiveNodes, paused_majority_fails_within_command_timeout) {
  auto o = options_for(nodes().uris());
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  nodes()[0].pause();
  nodes()[1].pause();
  nodes()[2].pause();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.acquire(unique("paused-majority"), once());
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
  // The library's timers run on libuv's cached millisecond clock, which may fire
  // them up to ~2 ms early by steady_clock: 5 ms of slack below, none needed above
  // but room for a sanitizer build on busy cores (still far below the 10 s TTL).
  EXPECT_GE(took, o.command_timeout - 5ms);
  EXPECT_LT(took, o.command_timeout + 1000ms);
  EXPECT_EQ(r.report.count(node_status::timeout), 3) << r.report.message();
}

TEST_F(FiveNodes, stale_owner_release_and_extend_are_refused_and_leave_new_owner_intact) {
  client a(options_for(nodes().uris()));
  client b(options_for(nodes().uris()));
  const std::string res = unique("stale");
  auto ra = a.acquire(res, once(300ms));
  ASSERT_TRUE(ra);
  const lease stale = ra.lock.detach();
  std::this_thread::sleep_for(400ms);
  auto rb = b.acquire(res, once(10000ms));
  ASSERT_TRUE(rb) << rb.report.message();
  const std::string btoken = rb.lock.info().token;

  auto rel = a.release(stale);
  EXPECT_EQ(rel.error, errc::not_owner) << rel.message();
  EXPECT_EQ(rel.count(node_status::not_owner), 5 - rel.count(node_status::pending));

  // With its known validity passed, extend says "lock lost" without pretending.
  auto ext = a.extend(stale, 10000ms);
  EXPECT_EQ(ext.error, errc::lock_lost) << ext.message();
  // A lease without known validity goes to the nodes, which refuse it.
  lease bare{stale.resource, stale.token, std::nullopt, std::nullopt, std::nullopt};
  auto ext2 = a.extend(bare, 10000ms);
  EXPECT_EQ(ext2.error, errc::not_owner) << ext2.message();

  EXPECT_TRUE(eventually([&] { return nodes().count_value(res, btoken) == 5; }));
  for (std::size_t i = 0; i < 5; ++i) EXPECT_GT(nodes()[i].pttl(res), 5000);
}

TEST_F(FiveNodes, failed_acquire_rolls_back_on_every_node_leaving_no_key) {
  const std::string res = unique("rollback");
  // A foreign owner holds the key on three nodes.
  for (std::size_t i : {0u, 2u, 4u}) nodes()[i].command({"SET", res, "foreign", "PX", "60000"});
  client c(options_for(nodes().uris()));
  auto r = c.acquire(res, once());
  EXPECT_EQ(r.report.error, errc::contended) << r.report.message();
  EXPECT_EQ(r.report.count(node_status::held), 3);
  EXPECT_TRUE(eventually([&] { return !nodes()[1].exists(res) && !nodes()[3].exists(res); }));
  // Give any late write time to land, then check again: nothing of ours remains.
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(nodes()[1].exists(res));
  EXPECT_FALSE(nodes()[3].exists(res));
  EXPECT_EQ(nodes().count_value(res, "foreign"), 3);
}

TEST_F(FiveNodes, failure_with_held_and_down_nodes_is_unavailable_and_rolled_back) {
  const std::string res = unique("mixed");
  client c(options_for(nodes().uris()));
  ASSERT_TRUE(wait_connected(c));
  nodes()[0].command({"SET", res, "foreign", "PX", "60000"});
  nodes()[1].kill();
  nodes()[2].kill();
  auto r = c.acquire(res, once());
  EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
  EXPECT_TRUE(eventually([&] { return !nodes()[3].exists(res) && !nodes()[4].exists(res); }));
}

TEST_F(FiveNodes, quorum_reached_too_late_is_validity_exhausted_and_rolled_back) {
  auto o = options_for(nodes().uris());
  o.command_timeout = 5000ms;
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  const std::string res = unique("exhausted");
  // Three nodes stop (SIGSTOP, in effect before pause() returns) and go on 300 ms
  // later: the quorum arrives after the 100 ms TTL has run out. (A late resume
  // only makes it later; the command timeout is far above it.) This used to be
  // DEBUG SLEEP from three threads and a 50 ms sleep hoping they had started.
  nodes()[3].kill();
  nodes()[4].kill();
  for (std::size_t i : {0u, 1u, 2u}) nodes()[i].pause();
  std::thread resumer([] {
    std::this_thread::sleep_for(300ms);
    for (std::size_t i : {0u, 1u, 2u}) nodes()[i].resume();
  });
  auto r = c.acquire(res, once(100ms));
  resumer.join();
  EXPECT_EQ(r.report.error, errc::validity_exhausted) << r.report.message();
  EXPECT_FALSE(r.lock.owns_lock());
  EXPECT_TRUE(eventually([&] { return nodes().count_key(res) == 0; }));
}

// How many NOSCRIPT error replies the node sent (INFO errorstats; 0 if none yet).
long long noscript_replies(redis_node& n) {
  const std::string info = n.command({"INFO", "errorstats"});
  const std::string field = "errorstat_NOSCRIPT:count=";
  const auto at = info.find(field);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + field.size()));
}

TEST_F(FiveNodes, noscript_after_script_flush_is_recovered) {
  client c(options_for(nodes().uris()));
  const std::string res = unique("noscript");
  for (int round = 0; round < 3; ++round) {
    auto r = c.acquire(res, once());
    ASSERT_TRUE(r) << r.report.message();
    for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(nodes()[i].command({"SCRIPT", "FLUSH"}), "OK");
    std::vector<long long> noscript, evals;
    for (std::size_t i = 0; i < 5; ++i) {
      noscript.push_back(noscript_replies(nodes()[i]));
      evals.push_back(nodes()[i].calls("eval"));
    }
    auto e = r.lock.extend(5000ms);
    EXPECT_TRUE(e) << e.message();
    if (round > 0) {
      // The extend script ran in the round before, so the client sent its SHA-1, got
      // NOSCRIPT (the server's text differs: Redis 7.0 adds "Please use EVAL.", Valkey
      // 8.0.1 does not) and sent the body with EVAL. A node decided after the quorum
      // may answer after extend() returned.
      for (std::size_t i = 0; i < 5; ++i) {
        EXPECT_TRUE(eventually([&] {
          return noscript_replies(nodes()[i]) > noscript[i] && nodes()[i].calls("eval") > evals[i];
        })) << "node " << i << " (" << to_string(nodes()[i].server()) << ") round " << round;
      }
    }
    for (std::size_t i = 0; i < 5; ++i) nodes()[i].command({"SCRIPT", "FLUSH"});
    auto rel = r.lock.release();
    EXPECT_TRUE(rel) << rel.message();
    EXPECT_TRUE(eventually([&] { return nodes().count_key(res) == 0; }));
  }
}

TEST_F(FiveNodes, wrong_type_is_a_clear_error_that_is_not_retried) {
  const std::string res = unique("wrongtype");
  for (std::size_t i = 0; i < 5; ++i) nodes()[i].command({"HSET", res, "f", "v"});
  client c(options_for(nodes().uris()));
  acquire_options o;
  o.retry.max_attempts = 5;
  o.retry.base_delay = 50ms;
  auto r = c.acquire(res, o);
  EXPECT_EQ(r.report.error, errc::wrong_type) << r.report.message();
  EXPECT_EQ(r.report.attempts, 1);
  EXPECT_NE(r.report.message().find("WRONGTYPE"), std::string::npos) << r.report.message();
  auto rel = c.release(lease{res, std::string(32, 'a'), std::nullopt, std::nullopt, std::nullopt});
  EXPECT_EQ(rel.error, errc::wrong_type) << rel.message();
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(nodes()[i].command({"TYPE", res}), "hash");
}

TEST_F(FiveNodes, retries_are_bounded_and_jittered) {
  const std::string res = unique("retry");
  for (std::size_t i = 0; i < 5; ++i) nodes()[i].command({"SET", res, "foreign", "PX", "60000"});
  client c(options_for(nodes().uris()));
  acquire_options o;
  o.retry.max_attempts = 4;
  o.retry.base_delay = 40ms;
  o.retry.max_delay = 60ms;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.acquire(res, o);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.report.error, errc::contended);
  EXPECT_EQ(r.report.attempts, 4);
  // Delays: [20,40] + [30,60] + [30,60] ms, at least 80 ms. The library's timers
  // run on libuv's cached millisecond clock and may each fire up to ~2 ms early
  // by steady_clock: 6 ms of slack. Retrying without a delay takes a few ms.
  EXPECT_GE(took, 80ms - 6ms);
  EXPECT_LT(took, 2000ms);
  EXPECT_NE(r.report.message().find("after 4 attempts"), std::string::npos) << r.report.message();
}

TEST_F(FiveNodes, retry_deadline_bounds_the_total_wait) {
  const std::string res = unique("deadline");
  for (std::size_t i = 0; i < 5; ++i) nodes()[i].command({"SET", res, "foreign", "PX", "60000"});
  client c(options_for(nodes().uris()));
  acquire_options o;
  o.retry.max_attempts = 1000;
  o.retry.base_delay = 20ms;
  o.retry.max_delay = 40ms;
  o.retry.deadline = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.acquire(res, o);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.report.error, errc::contended);
  EXPECT_GT(r.report.attempts, 3);
  // 1000 attempts without the deadline would take > 20 s.
  EXPECT_LT(took, 300ms + 1500ms);
}

TEST_F(FiveNodes, retry_succeeds_once_the_holder_releases) {
  client a(options_for(nodes().uris()));
  client b(options_for(nodes().uris()));
  const std::string res = unique("retry-ok");
  auto ra = a.acquire(res, once());
  ASSERT_TRUE(ra);
  // Releases after b's first attempts (the 300 ms is b's head start, not a
  // synchronisation: b retries for >= 4 s).
  std::thread releaser([&] {
    std::this_thread::sleep_for(300ms);
    (void)ra.lock.release();
  });
  acquire_options o;
  o.retry.max_attempts = 200;
  o.retry.base_delay = 30ms;
  o.retry.max_delay = 50ms;
  auto rb = b.acquire(res, o);
  releaser.join();
  ASSERT_TRUE(rb) << rb.report.message();
  EXPECT_GT(rb.report.attempts, 1);
}

TEST_F(FiveNodes, async_acquire_runs_callbacks_on_the_loop_and_cancel_stops_retries) {
  // What the callbacks touch is declared before the client: after a failed ASSERT
  // the client's destructor still runs a pending callback (cancelled).
  std::mutex mu;
  std::condition_variable cv;
  std::optional<acquire_result> got;
  std::thread::id cb_thread;
  std::atomic<int> calls{0};
  std::optional<acquire_result> second;
  client c(options_for(nodes().uris()));
  const std::string res = unique("async");
  c.acquire_async(res, once(), [&](acquire_result r) {
    std::lock_guard<std::mutex> g(mu);
    cb_thread = std::this_thread::get_id();
    // A synchronous call here would deadlock: the library refuses it.
    auto nested = r.lock.release();
    EXPECT_EQ(nested.error, errc::would_deadlock);
    got = std::move(r);
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> g(mu);
    ASSERT_TRUE(cv.wait_for(g, 5s, [&] { return got.has_value(); }));
  }
  ASSERT_TRUE(got->report) << got->report.message();
  EXPECT_NE(cb_thread, std::this_thread::get_id());

  // A second acquirer retries for a long time; cancel() ends it with "cancelled".
  acquire_options slow;
  slow.retry.max_attempts = 1000;
  slow.retry.base_delay = 50ms;
  const long long scripts0 = nodes()[0].calls("evalsha") + nodes()[0].calls("eval") + nodes()[0].calls("set");
  auto id = c.acquire_async(res, slow, [&](acquire_result r) {
    std::lock_guard<std::mutex> g(mu);
    ++calls;
    second = std::move(r);
    cv.notify_all();
  });
  // Cancel once it is retrying: node 0 saw at least two of its attempts (polled,
  // not a sleep hoping it has started; a cancel before the start is another test).
  ASSERT_TRUE(eventually([&] {
    return nodes()[0].calls("evalsha") + nodes()[0].calls("eval") + nodes()[0].calls("set") >= scripts0 + 2;
  }, 10000ms));
  c.cancel(id);
  {
    std::unique_lock<std::mutex> g(mu);
    ASSERT_TRUE(cv.wait_for(g, 5s, [&] { return second.has_value(); }));
  }
  EXPECT_EQ(second->report.error, errc::cancelled) << second->report.message();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(got->lock.release());
}

TEST_F(FiveNodes, lock_handle_destructor_releases_without_blocking) {
  client c(options_for(nodes().uris()));
  const std::string res = unique("raii");
  {
    auto r = c.acquire(res, once());
    ASSERT_TRUE(r);
    EXPECT_TRUE(eventually([&] { return nodes().count_key(res) >= 3; }));
  }
  EXPECT_TRUE(eventually([&] { return nodes().count_key(res) == 0; }));
  EXPECT_EQ(c.stats().release_failures, 0u);
}

TEST_F(FiveNodes, destructor_release_failure_is_reported_not_thrown) {
  auto o = options_for(nodes().uris());
  std::atomic<int> failures{0};
  o.on_release_failure = [&](const lease&, const report& r) {
    EXPECT_EQ(r.error, errc::not_owner);
    ++failures;
  };
  const std::string res = unique("raii-fail");
  {
    client c(o);
    auto r = c.acquire(res, once());
    ASSERT_TRUE(r);
    // Someone deletes the keys behind our back.
    for (std::size_t i = 0; i < 5; ++i) nodes()[i].command({"DEL", res});
  }  // lock handle, then client: the client drains the release before closing.
  EXPECT_EQ(failures.load(), 1);
}

TEST_F(FiveNodes, mutex_adapter_works_with_standard_lock_types_and_excludes_threads) {
  client c(options_for(nodes().uris()));
  acquire_options o;
  o.ttl = 5000ms;
  o.retry.max_attempts = 1;
  o.retry.base_delay = 5ms;
  o.retry.max_delay = 20ms;
  redlock::mutex m(c, unique("mutex"), o);
  {
    std::unique_lock<redlock::mutex> g(m, std::try_to_lock);
    ASSERT_TRUE(g.owns_lock()) << m.last_report().message();
    redlock::mutex other(c, "x", o);  // a different resource is independent
    EXPECT_TRUE(other.try_lock());
    other.unlock();
  }
  int counter = 0;  // protected by the distributed mutex only
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      redlock::mutex mine(c, m.held().info().resource.empty() ? "shared-counter" : "shared-counter", o);
      for (int i = 0; i < 10; ++i) {
        std::lock_guard<redlock::mutex> g(mine);
        int v = counter;
        std::this_thread::sleep_for(1ms);
        counter = v + 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 40);
  std::unique_lock<redlock::mutex> timed(m, std::defer_lock);
  EXPECT_TRUE(timed.try_lock_for(500ms));
}

TEST_F(FiveNodes, mutex_lock_throws_for_non_contention_failures) {
  auto o = options_for({"redis://127.0.0.1:1"});
  client c(o);
  redlock::mutex m(c, "nowhere", once());
  try {
    m.lock();
    FAIL() << "lock() returned without a lock";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), errc::unavailable);
  }
  EXPECT_FALSE(m.try_lock());
}

TEST_F(FiveNodes, key_prefix_is_prepended_to_the_resource) {
  auto o = options_for(nodes().uris());
  o.key_prefix = "app:locks:";
  client c(o);
  const std::string res = unique("prefixed");
  auto r = c.acquire(res, once());
  ASSERT_TRUE(r);
  EXPECT_TRUE(eventually([&] { return nodes().count_key("app:locks:" + res) == 5; }));
  EXPECT_EQ(nodes().count_key(res), 0);
  EXPECT_EQ(r.lock.info().resource, res);
}

TEST_F(FiveNodes, interoperates_with_the_plain_protocol) {
  // Another implementation's lock (plain SET NX PX) blocks ours, and ours blocks theirs.
  client c(options_for(nodes().uris()));
  const std::string res = unique("interop");
  auto r = c.acquire(res, once());
  ASSERT_TRUE(r);
  ASSERT_TRUE(eventually([&] { return nodes().count_key(res) == 5; }));
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(nodes()[i].command({"SET", res, "x", "NX", "PX", "1000"}), "(nil)");
  ASSERT_TRUE(r.lock.release());
  ASSERT_TRUE(eventually([&] { return nodes().count_key(res) == 0; }));
}

TEST_F(FiveNodes, node_restart_is_reconnected_in_the_background) {
  client c(options_for(nodes().uris()));
  ASSERT_TRUE(wait_connected(c));
  nodes()[2].kill();
  nodes()[2].start();
  EXPECT_TRUE(wait_connected(c));
  EXPECT_GE(c.stats().reconnects, 1u);
}

TEST_F(FiveNodes, inspect_reports_holder_and_ttl_per_node) {
  client c(options_for(nodes().uris()));
  const std::string res = unique("inspect");
  auto free_view = c.inspect(res);
  ASSERT_TRUE(free_view.report) << free_view.report.message();
  EXPECT_FALSE(free_view.holder);
  auto r = c.acquire(res, once(20000ms));
  ASSERT_TRUE(r);
  ASSERT_TRUE(eventually([&] { return nodes().count_key(res) == 5; }));
  auto v = c.inspect(res);
  ASSERT_TRUE(v.report);
  ASSERT_TRUE(v.holder);
  EXPECT_EQ(*v.holder, r.lock.info().token);
  for (const auto& n : v.nodes) {
    EXPECT_EQ(n.token, r.lock.info().token);
    EXPECT_GT(n.pttl, 15000ms);
  }
  nodes()[0].kill();
  nodes()[1].kill();
  nodes()[2].kill();
  auto down = c.inspect(res);
  EXPECT_EQ(down.report.error, errc::unavailable);
}

TEST_F(FiveNodes, client_shutdown_completes_in_flight_work_exactly_once) {
  std::atomic<int> callbacks{0};
  std::atomic<int> cancelled{0};
  {
    client c(options_for(nodes().uris()));
    for (int i = 0; i < 50; ++i) {
      acquire_options o;
      o.ttl = 5000ms;
      o.retry.max_attempts = 100;
      o.retry.base_delay = 100ms;
      c.acquire_async("shutdown-" + std::to_string(i % 5), o, [&](acquire_result r) {
        ++callbacks;
        if (r.report.error == errc::cancelled) ++cancelled;
      });
    }
  }
  EXPECT_EQ(callbacks.load(), 50);
  EXPECT_GT(cancelled.load(), 0);
  // The winners' lock handles died with the callbacks: keys are released or left
  // to expire; nothing of ours is left after the TTL at worst. Check the prompt path:
  EXPECT_TRUE(eventually([&] {
    int left = 0;
    for (int i = 0; i < 5; ++i) left += nodes().count_key("shutdown-" + std::to_string(i));
    return left == 0;
  }));
}

TEST(Auth, wrong_password_is_a_clear_error_that_is_not_retried) {
  node_config cfg;
  cfg.password = "s3cret-pw";
  redis_cluster cl(3, cfg);
  std::vector<std::string> bad;
  for (std::size_t i = 0; i < 3; ++i) bad.push_back("redis://:wrong-pw@127.0.0.1:" + std::to_string(cl[i].port()));
  client c(options_for(bad));
  acquire_options o;
  o.retry.max_attempts = 5;
  auto r = c.acquire("auth", o);
  EXPECT_EQ(r.report.error, errc::auth_failed) << r.report.message();
  EXPECT_EQ(r.report.attempts, 1);
  EXPECT_GE(r.report.count(node_status::auth_error), 2);  // decided at the second refusal
  const std::string msg = r.report.message();
  EXPECT_EQ(msg.find("wrong-pw"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("s3cret-pw"), std::string::npos) << msg;
  EXPECT_NE(msg.find("redis://:***@127.0.0.1"), std::string::npos) << msg;

  // The right password works, also with an ACL user name.
  client good(options_for(cl.uris()));
  auto g = good.acquire("auth", once());
  EXPECT_TRUE(g) << g.report.message();
}

TEST(Auth, missing_password_is_auth_failed) {
  node_config cfg;
  cfg.password = "pw";
  redis_cluster cl(3, cfg);
  std::vector<std::string> none;
  for (std::size_t i = 0; i < 3; ++i) none.push_back("redis://127.0.0.1:" + std::to_string(cl[i].port()));
  client c(options_for(none));
  auto r = c.acquire("auth", once());
  EXPECT_EQ(r.report.error, errc::auth_failed) << r.report.message();
}

TEST(Auth, acl_user_name_is_sent_with_the_password) {
  node_config cfg;
  cfg.acl_users = {"user locker on >lockpw ~* +@all"};
  redis_cluster cl(3, cfg);
  client c(options_for(uris_as(cl, "locker", "lockpw")));
  auto r = c.acquire("acl", once());
  ASSERT_TRUE(r) << r.report.message();
  client w(options_for(uris_as(cl, "locker", "nope")));
  EXPECT_EQ(w.acquire("acl2", once()).report.error, errc::auth_failed);
}

TEST(Topology, single_node_and_three_nodes) {
  for (int n : {1, 3}) {
    redis_cluster cl(n);
    client c(options_for(cl.uris()));
    EXPECT_EQ(c.quorum(), static_cast<std::size_t>(n / 2 + 1));
    auto r = c.acquire("topo", once());
    ASSERT_TRUE(r) << r.report.message();
    auto again = c.acquire("topo", once());
    EXPECT_EQ(again.report.error, errc::contended);
    EXPECT_TRUE(r.lock.release());
  }
}

TEST(Topology, unix_socket_and_database_selection) {
  node_config cfg;
  cfg.unix_socket = true;
  redis_cluster cl(3, cfg);
  std::vector<std::string> uris;
  for (std::size_t i = 0; i < 3; ++i) uris.push_back(cl[i].unix_uri() + "?db=3");
  client c(options_for(uris));
  auto r = c.acquire("unix-db", once());
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_TRUE(eventually([&] {
    int n = 0;
    for (std::size_t i = 0; i < 3; ++i) n += cl[i].command({"EVAL", "redis.call('SELECT','3') return redis.call('EXISTS', KEYS[1])", "1", "unix-db"}) == "1" ? 1 : 0;
    return n == 3;
  }));
  EXPECT_FALSE(cl[0].exists("unix-db"));  // db 0
  // TCP with /db works the same way.
  std::vector<std::string> tcp;
  for (std::size_t i = 0; i < 3; ++i) tcp.push_back(cl[i].uri() + "/5");
  client t(options_for(tcp));
  ASSERT_TRUE(t.acquire("tcp-db", once()));
}

TEST(Robustness, non_redis_listener_is_a_bounded_node_error) {
  redis_cluster cl(2);
  fake_listener garbage(fake_listener::mode::garbage);
  fake_listener silent(fake_listener::mode::silent);
  auto o = options_for({cl[0].uri(), garbage.uri(), silent.uri()});
  client c(o);
  std::this_thread::sleep_for(50ms);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.acquire("fake", once());
  // Bounded by the node timeouts; the slack is for a sanitizer build on busy cores.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, o.connect_timeout + o.command_timeout + 2000ms);
  EXPECT_FALSE(r) << r.report.message();
  EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
  EXPECT_NE(r.report.nodes[1].status, node_status::ok);
  EXPECT_NE(r.report.nodes[2].status, node_status::ok);
  // And two real nodes of three are enough.
  client ok(options_for({cl[0].uri(), cl[1].uri(), garbage.uri()}));
  ASSERT_TRUE(wait_connected(ok, 2));
  EXPECT_TRUE(ok.acquire("fake-ok", once()));
}

TEST(Config, malformed_uris_throw_a_clear_config_error_without_the_password) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"http://h:1", "scheme"},
      {"redis://:topsecret@host:99999", "port"},
      {"redis://", "host"},
      {"unix://relative.sock", "absolute"},
      {"redis://h:1/x", "database"},
      {"redis+cluster://:topsecret@h:1/2", "database 0 only"},
      {"redis+sentinel://:topsecret@h:1", "master name"},
      // Well-formed, but this version connects to standalone masters only: refused
      // by name, never connected to as if the seed or the sentinel were a master.
      {"redis+cluster://:topsecret@127.0.0.1:7000?seed=127.0.0.1:7001", "a Redis Cluster as one node is not supported"},
      {"rediss+sentinel://:topsecret@127.0.0.1/mymaster", "a Sentinel-managed master as one node is not supported"},
  };
  for (const auto& [uri, what] : cases) {
    client_options o;
    o.nodes = {uri};
    try {
      client c(o);
      ADD_FAILURE() << uri << " was accepted";
    } catch (const config_error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_EQ(msg.find("topsecret"), std::string::npos) << msg;
      EXPECT_EQ(e.code(), errc::invalid_argument);
    }
  }
  client_options dup;
  dup.nodes = {"redis://127.0.0.1:7000", "redis://127.0.0.1:7000"};
  EXPECT_THROW(client c(dup), config_error);
  client_options empty;
  EXPECT_THROW(client c(empty), config_error);
}

TEST(Config, bad_acquire_arguments_are_invalid_argument) {
  client c(options_for({"redis://127.0.0.1:1"}));
  EXPECT_EQ(c.acquire("", once()).report.error, errc::invalid_argument);
  EXPECT_EQ(c.acquire("r", once(0ms)).report.error, errc::invalid_argument);
  EXPECT_EQ(c.acquire("r", once(2ms)).report.error, errc::invalid_argument);  // <= drift
  acquire_options bad;
  bad.retry.max_attempts = 0;
  EXPECT_EQ(c.acquire("r", bad).report.error, errc::invalid_argument);
  EXPECT_EQ(c.release(lease{}).error, errc::invalid_argument);
  EXPECT_EQ(c.extend(lease{"r", "t", std::nullopt, std::nullopt, std::nullopt}, -5ms).error, errc::invalid_argument);
}

TEST(ExternalLoop, client_runs_on_the_callers_loop) {
  redis_cluster cl(3);
  uv_loop_t loop;
  uv_loop_init(&loop);
  auto c = make_client_on_loop(options_for(cl.uris()), &loop);
  // Synchronous calls on the loop thread would deadlock: refused.
  EXPECT_EQ(c->acquire("ext", once()).report.error, errc::would_deadlock);
  bool done = false;
  bool acquired = false;
  c->acquire_async("ext", once(), [&](acquire_result r) {
    acquired = static_cast<bool>(r);
    r.lock.release_async([&](report rel) {
      EXPECT_TRUE(rel) << rel.message();
      done = true;
    });
  });
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (!done && std::chrono::steady_clock::now() < end) uv_run(&loop, UV_RUN_ONCE);
  EXPECT_TRUE(acquired);
  EXPECT_TRUE(done);
  c.reset();
  // The client's handles close as the loop runs on; then the loop is empty.
  const auto drained_by = std::chrono::steady_clock::now() + 5s;
  while (uv_run(&loop, UV_RUN_NOWAIT) != 0 && std::chrono::steady_clock::now() < drained_by) {
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace
}  // namespace redlock::test

namespace redlock::test {
namespace {

TEST(Ping, measures_each_node_round_trip_and_names_down_nodes) {
  redis_cluster cl(3);
  client c(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(c));
  auto p = c.ping();
  ASSERT_TRUE(p) << p.message();
  for (const auto& n : p.nodes) {
    EXPECT_EQ(n.status, node_status::ok);
    EXPECT_GT(n.latency.count(), 0);
    EXPECT_LT(n.latency, 1000ms);
  }
  cl[0].kill();
  cl[1].kill();
  auto down = c.ping();
  EXPECT_EQ(down.error, errc::unavailable) << down.message();
  EXPECT_EQ(down.nodes[2].status, node_status::ok);
}

}  // namespace
}  // namespace redlock::test
