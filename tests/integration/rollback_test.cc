// What a client may believe after an operation that only partly reached the
// nodes, and what it cleans up after a failed acquire: a shorter extension that
// reached a minority, a grant that lands after the acquire was decided, and the
// names reserved for fence counters. (Rollbacks through a faulty network are in
// tests/fault/rollback_fault_test.cc.)
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <future>
#include <string>
#include <thread>

#include "test_util.h"

namespace redlock::test {
namespace {

using clk = std::chrono::steady_clock;

long long ms_between(clk::time_point from, clk::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}
long long ms_from_now(clk::time_point t) { return ms_between(clk::now(), t); }

// Whether the node answers PING within `limit` on a fresh connection.
bool answers_ping_within(int port, std::chrono::milliseconds limit) {
  const timeval tv{0, static_cast<suseconds_t>(std::chrono::microseconds(limit).count())};
  redisContext* ctx = redisConnectWithTimeout("127.0.0.1", port, timeval{1, 0});
  if (ctx == nullptr) return false;
  bool ok = false;
  if (ctx->err == 0 && redisSetTimeout(ctx, tv) == REDIS_OK) {
    auto* reply = static_cast<redisReply*>(redisCommand(ctx, "PING"));
    ok = reply != nullptr && reply->type == REDIS_REPLY_STATUS;
    if (reply != nullptr) freeReplyObject(reply);
  }
  redisFree(ctx);
  return ok;
}

// Resumes a paused node when the test ends, also on a failed assertion.
struct resume_at_exit {
  redis_node& node;
  ~resume_at_exit() { node.resume(); }
};

// A holds nodes 1+2 (node 3 lost the key). With node 2 silent, an extension to a
// much shorter TTL reaches node 1 only: it fails, but node 1 now expires soon. A
// must not go on believing in its old validity, or B takes nodes 1+3 while A
// still "holds" the lock.
TEST(ShorterExtension, extend_to_shorter_ttl_on_minority_lowers_validity) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  client b(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string res = "shorter-extend";
  auto r = a.acquire(res, once(10000ms));
  ASSERT_TRUE(r) << r.report.message();
  cl[2].command({"DEL", res});  // node 3 lost it (expired early, restarted empty)
  cl[1].pause();
  resume_at_exit resume{cl[1]};

  auto e = r.lock.extend(500ms);
  EXPECT_EQ(e.error, errc::unavailable) << e.message();
  // The extension reached node 1 (whether or not its reply beat the timeout): its
  // key now expires within 500 ms, or already has.
  EXPECT_LE(cl[0].pttl(res), 500);
  // The failed extension may have shortened keys: the validity is at most the
  // new TTL from the extension's start.
  EXPECT_LE(r.lock.remaining_validity().count(), 500);
  ASSERT_TRUE(r.lock.info().valid_until);

  std::this_thread::sleep_for(700ms);
  auto rb = b.acquire(res, once(10000ms));
  ASSERT_TRUE(rb) << rb.report.message();  // nodes 1 and 3
  EXPECT_EQ(r.lock.remaining_validity().count(), 0) << "A still has validity left while B holds the lock";
  EXPECT_LE(ms_from_now(*r.lock.info().valid_until), 0) << "A's lease is still valid while B holds the lock";
}

// The watchdog shortens its extensions under max_hold; a shortened extension that
// reaches a minority lowers the validity the same way.
TEST(ShorterExtension, watchdog_extension_shortened_by_max_hold_on_minority_lowers_validity) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  const std::string res = "shorter-watchdog";
  acquire_options o = once(3000ms);
  o.auto_extend = true;
  o.extend_interval = 1000ms;
  o.max_hold = 1800ms;  // the first tick (t = 1 s) asks for ~800 ms instead of 3 s
  // (The acquire's validity is capped at acquire + max_hold already (issue 20):
  // the shortened extension must not move it later, however few nodes it reached.)
  const auto before = clk::now();
  auto r = a.acquire(res, o);
  ASSERT_TRUE(r) << r.report.message();
  const auto old_valid_until = *r.lock.info().valid_until;
  cl[2].command({"DEL", res});
  cl[1].pause();
  resume_at_exit resume{cl[1]};
  const auto extends = a.stats().extends;
  // The first tick's round ends when node 2 is declared stalled or the (lowered)
  // validity runs out; wait for it (bounded).
  ASSERT_TRUE(eventually([&] { return a.stats().extends > extends; }, 5000ms));
  EXPECT_LE(cl[0].pttl(res), 1800);
  // Node 1 expires by acquire + max_hold: so does the lock, whatever it hoped for before.
  const auto valid_until = r.lock.info().valid_until;
  ASSERT_TRUE(valid_until);
  EXPECT_LE(ms_between(old_valid_until, *valid_until), 0) << "ms past the validity before the extension";
  EXPECT_LE(ms_between(before + o.max_hold, *valid_until), 0) << "ms past acquire + max_hold";
}

// A fenced acquire whose EVALSHA meets a flushed script cache on node 1 is resent
// with the script body, behind the rollback of the (contended) attempt: the grant
// lands after the rollback. The late grant must be released.
TEST(LateGrant, noscript_resend_of_a_fenced_acquire_is_released_after_contention) {
  redis_cluster cl(3);
  auto o = options_for(cl.uris());
  o.command_timeout = 2000ms;  // node 1 answers after a 300 ms DEBUG SLEEP
  client a(o);
  ASSERT_TRUE(wait_connected(a));
  acquire_options fenced = once(30000ms);
  fenced.fencing = true;
  {
    // Loads the scripts on a's connections (EVALSHA from now on).
    auto warm = a.acquire("late-grant-warm", fenced);
    ASSERT_TRUE(warm) << warm.report.message();
    ASSERT_TRUE(warm.lock.release());
  }
  const std::string res = "late-grant-noscript";
  EXPECT_EQ(cl[0].command({"SCRIPT", "FLUSH"}), "OK");
  cl[1].command({"SET", res, "rival", "PX", "30000"});
  cl[2].command({"SET", res, "rival", "PX", "30000"});
  // Node 1 is busy while nodes 2 and 3 refuse: the attempt is decided (contended)
  // and rolled back before node 1 answers NOSCRIPT.
  std::promise<std::string> slept;
  std::thread sleeper([&] {
    try {
      slept.set_value(cl[0].command({"DEBUG", "SLEEP", "0.5"}));
    } catch (const std::exception& e) {
      slept.set_value(e.what());
    }
  });
  ASSERT_TRUE(eventually([&] { return !answers_ping_within(cl[0].port(), 50ms); }, 2000ms))
      << "node 1 never started sleeping";
  auto r = a.acquire(res, fenced);
  sleeper.join();
  EXPECT_EQ(slept.get_future().get(), "OK");
  EXPECT_EQ(r.report.error, errc::contended) << r.report.message();
  EXPECT_EQ(r.report.nodes[0].status, node_status::pending) << r.report.message();  // decided without node 1
  EXPECT_TRUE(eventually([&] { return !cl[0].exists(res); }, 3000ms))
      << "node 1 kept our key: PTTL " << cl[0].pttl(res) << " ms";
  EXPECT_EQ(cl[1].get(res), "rival");
}

// `x:fence` is the fence counter of `x` (key + ":fence"): a lock on that name
// would collide with it (contended forever, or worse, overwrite the counter).
TEST(FenceNames, resource_names_ending_in_fence_suffix_are_refused) {
  redis_cluster cl(3);
  std::promise<acquire_result> done;
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  acquire_options fenced = once(5000ms);
  fenced.fencing = true;
  {
    auto f = a.acquire("orders", fenced);
    ASSERT_TRUE(f) << f.report.message();
    ASSERT_TRUE(f.lock.release());
  }
  auto r = a.acquire("orders:fence", once());
  EXPECT_EQ(r.report.error, errc::invalid_argument) << r.report.message();
  EXPECT_NE(r.report.message().find("fence counter"), std::string::npos) << r.report.message();
  EXPECT_EQ(r.report.attempts, 0);
  EXPECT_EQ(a.acquire(":fence", once()).report.error, errc::invalid_argument);
  EXPECT_EQ(a.acquire("orders:fence", fenced).report.error, errc::invalid_argument);

  a.acquire_async("orders:fence", once(), [&](acquire_result res) { done.set_value(std::move(res)); });
  auto fut = done.get_future();
  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(fut.get().report.error, errc::invalid_argument);

  // Names that merely contain the word stay usable.
  auto ok1 = a.acquire("orders:fence-2", once());
  EXPECT_TRUE(ok1) << ok1.report.message();
  auto ok2 = a.acquire("orders:fenced", once());
  EXPECT_TRUE(ok2) << ok2.report.message();
  // And the counter of `orders` is untouched: still a number.
  EXPECT_EQ(cl[0].get("orders:fence").value_or("").find_first_not_of("0123456789"), std::string::npos);
}

}  // namespace
}  // namespace redlock::test
