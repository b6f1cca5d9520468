// What a failed operation is reported as, and when it counts as permanent, against
// real redis-server nodes: one node's permanent error (wrong password, ACL
// refusal) among healthy nodes is "unavailable" and retried, never a reason to
// stop retrying or to declare a held lock lost; an ACL refusal is
// permission_denied, not an authentication refusal; a user without `+time` still
// takes fenced locks and works with servers before 7.0; tokens drawn in forked
// processes never repeat.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fault_proxy.h"
#include "noise_server.h"
#include "redlock/mutex.h"
#include "redlock/redlock.h"
#include "redlock/uv.h"
#include "test_util.h"

namespace redlock::test {
namespace {

// Three nodes; node 0 requires a password the client does not send, so every
// request to it fails at once with auth_error (NOAUTH). Nodes 1 and 2 keep their
// data across a restart (AOF, fsync always).
struct one_wrong_password {
  redis_node refusing{[] {
    node_config c;
    c.password = "not-given-to-the-client";
    return c;
  }()};
  redis_cluster healthy{2, [] {
                          node_config c;
                          c.aof = true;
                          return c;
                        }()};
  std::vector<std::string> uris() {
    return {"redis://127.0.0.1:" + std::to_string(refusing.port()), healthy[0].uri(), healthy[1].uri()};
  }
};

// N=3, node 0 refuses authentication, node 1 fails (killed and restarted with its
// data) across a watchdog tick, node 2 answers. The failed tick sees one refusal,
// one failure and one grant: no quorum this time, but the next tick can reach one,
// so the watchdog must retry within the validity, not declare the lock lost. (Once
// this fired on_lost at the first failed tick, with ~28 s of validity left.)
TEST(PermanentErrors, a_node_refusing_auth_and_another_failing_at_a_watchdog_tick_do_not_lose_the_lock) {
  one_wrong_password nodes;
  client_options o = options_for(nodes.uris());
  client c(o);
  ASSERT_TRUE(wait_connected(c, 2));
  std::atomic<int> lost{0};
  acquire_options a = once(6000ms);
  a.auto_extend = true;
  a.extend_interval = 300ms;
  a.on_lost = [&](const lease&, const report&) { lost.fetch_add(1); };
  auto r = c.acquire("wd-auth-hiccup", a);
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_EQ(r.report.nodes[0].status, node_status::auth_error) << r.report.message();
  const std::string token = r.lock.info().token;

  nodes.healthy[0].kill();
  // At least two ticks run while node 1 is down (each fails at once: connection
  // refused, node 0 refused).
  std::this_thread::sleep_for(800ms);
  EXPECT_EQ(lost.load(), 0) << "the lock was declared lost while a quorum was still possible";
  EXPECT_TRUE(r.lock.owns_lock());
  nodes.healthy[0].restart(/*keep_data=*/true);
  ASSERT_EQ(nodes.healthy[0].get("wd-auth-hiccup"), token);  // the key survived
  // The watchdog extends again: the key's PTTL on the restarted node is refreshed
  // well past what was left of the first TTL.
  const auto before = r.lock.remaining_validity();
  EXPECT_TRUE(eventually([&] { return r.lock.remaining_validity() > before + 200ms; }, 4000ms))
      << "no extension after the node came back";
  EXPECT_EQ(lost.load(), 0);
  EXPECT_TRUE(r.lock.owns_lock());
  EXPECT_FALSE(r.lock.lost());
  EXPECT_TRUE(r.lock.release());
}

// One wrong-password node of 3 and a short contention on another: the first
// attempt sees refused, held, granted. Neither the refusal nor the holder rules
// out a quorum alone, so the attempt is "unavailable" and retried, and a later
// attempt gets the lock (once: auth_failed after one attempt).
TEST(PermanentErrors, acquire_retries_past_one_wrong_password_node_and_a_short_contention) {
  one_wrong_password nodes;
  client c(options_for(nodes.uris()));
  ASSERT_TRUE(wait_connected(c, 2));
  nodes.healthy[0].command({"SET", "retry-auth", "someone-else", "PX", "400"});
  acquire_options a = once(10000ms);
  a.retry.max_attempts = 40;
  a.retry.base_delay = 50ms;
  a.retry.max_delay = 100ms;
  auto r = c.acquire("retry-auth", a);
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_GE(r.report.attempts, 2) << r.report.message();
  EXPECT_EQ(r.report.nodes[0].status, node_status::auth_error);
  EXPECT_TRUE(r.lock.release());
}

TEST(PermanentErrors, one_wrong_password_node_alone_fails_an_attempt_as_unavailable_not_auth_failed) {
  one_wrong_password nodes;
  client c(options_for(nodes.uris()));
  ASSERT_TRUE(wait_connected(c, 2));
  nodes.healthy[0].command({"SET", "unavail-auth", "someone-else", "PX", "10000"});
  auto r = c.acquire("unavail-auth", once());
  EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
  EXPECT_FALSE(is_permanent(r.report.error));
  // Two of three nodes refusing authentication do rule out a quorum.
  redis_node second_refusing([] {
    node_config cfg;
    cfg.password = "also-not-given";
    return cfg;
  }());
  client d(options_for({nodes.uris()[0], "redis://127.0.0.1:" + std::to_string(second_refusing.port()),
                        nodes.healthy[1].uri()}));
  ASSERT_TRUE(wait_connected(d, 1));
  auto denied = d.acquire("unavail-auth-2", once());
  EXPECT_EQ(denied.report.error, errc::auth_failed) << denied.report.message();
  EXPECT_EQ(denied.report.attempts, 1);
}

// A refusal means what the script's kind says (issue 21 item 6: rounds take their
// script, pure/decision the refusal): for every acquire form (plain SET, fenced
// script, a set) a node holding the key for another owner is `held`, and two of
// three make "contended"; for every other script (extend of one key, of a fenced
// lease or a set; release of a set or one key) a node that does not hold the
// token is `not_owner`, and two make "not_owner". On `cl` (3 nodes, which client
// `a` names): `a` takes the three kinds of lock (resources named from `p`) and
// detaches them (bare leases: extend and release are plain rounds), another owner
// takes every key over, node 2 is killed, then `before_asking()` runs; each
// operation then must count both refusals and give its reason.
void expect_refusals_read_per_script(client& a, redis_cluster& cl, const std::string& p,
                                     const std::function<void()>& before_asking) {
  acquire_options plain = once(20000ms), fenced = once(20000ms);
  fenced.fencing = true;
  const std::vector<std::string> set_names = {p + "-a", p + "-b"};
  auto one = a.acquire(p + "-one", plain);
  auto fen = a.acquire(p + "-fenced", fenced);
  auto set = a.acquire_many(set_names, plain);
  ASSERT_TRUE(one && fen && set) << one.report.message() << " / " << fen.report.message() << " / "
                                 << set.report.message();
  const lease one_l = one.lock.detach(), fen_l = fen.lock.detach(), set_l = set.lock.detach();
  const std::vector<std::string> taken = {p + "-one", p + "-fenced", set_names[1]};
  for (std::size_t i = 0; i < cl.size(); ++i) {
    for (const std::string& key : taken) cl[i].command({"SET", key, "foreign", "PX", "60000"});
    cl[i].command({"DEL", set_names[0]});
  }
  cl[2].kill();
  before_asking();
  auto expect = [](const report& r, errc want, node_status refusal, const char* what) {
    EXPECT_EQ(r.error, want) << what << ": " << r.message();
    EXPECT_EQ(r.count(refusal), 2) << what << ": " << r.message();
  };
  expect(a.acquire(p + "-one", plain).report, errc::contended, node_status::held, "plain acquire");
  expect(a.acquire(p + "-fenced", fenced).report, errc::contended, node_status::held, "fenced acquire");
  expect(a.acquire_many(set_names, plain).report, errc::contended, node_status::held, "set acquire");
  expect(a.extend(one_l, 20000ms), errc::not_owner, node_status::not_owner, "extend");
  expect(a.extend(fen_l, 20000ms), errc::not_owner, node_status::not_owner, "extend of a fenced lease");
  expect(a.extend(set_l, 20000ms), errc::not_owner, node_status::not_owner, "extend of a set");
  expect(a.release(set_l), errc::not_owner, node_status::not_owner, "release of a set");
  expect(a.release(one_l), errc::not_owner, node_status::not_owner, "release");
  // The refused attempts rolled back nothing of the other owner's.
  for (const std::string& key : taken) {
    EXPECT_EQ(cl[0].get(key), std::optional<std::string>("foreign")) << key;
    EXPECT_EQ(cl[1].get(key), std::optional<std::string>("foreign")) << key;
  }
}

// With the third node down, a refusal the final reason reads as the wrong kind
// would not count: "unavailable".
TEST(QuorumReason, refusals_are_read_per_script_with_one_node_down) {
  redis_cluster cl(3);
  client a(options_for(cl.uris()));
  ASSERT_TRUE(wait_connected(a));
  expect_refusals_read_per_script(a, cl, "rr", [] {});
}

// The round also reads its refusals by its script while it decides (ops/round.cc:
// reason_may_change): with one refusal in, one node down and one refusal still on
// its way (a 200 ms proxy), the second refusal can still make the reason, so the
// round waits for it. A round reading its refusals as the wrong kind decides at
// the failed node already: "unavailable", one refusal counted.
TEST(QuorumReason, a_refusal_still_on_its_way_is_waited_for_by_every_script) {
  redis_cluster cl(3);
  fault_proxy slow(cl[1].port());
  client_options o = options_for({cl[0].uri(), slow.uri(), cl[2].uri()});
  o.command_timeout = 3000ms;
  client a(o);
  ASSERT_TRUE(wait_connected(a));
  expect_refusals_read_per_script(a, cl, "rw", [&] { slow.latency(200ms); });
  slow.pass();
}

// mutex::lock() waits while the lock is taken by others; with one wrong-password
// node that must not turn into an exception.
TEST(PermanentErrors, mutex_lock_waits_past_one_wrong_password_node_instead_of_throwing) {
  one_wrong_password nodes;
  client c(options_for(nodes.uris()));
  ASSERT_TRUE(wait_connected(c, 2));
  nodes.healthy[1].command({"SET", "mutex-auth", "someone-else", "PX", "300"});
  acquire_options a;
  a.ttl = 10000ms;
  a.retry.max_attempts = 40;
  a.retry.base_delay = 50ms;
  a.retry.max_delay = 100ms;
  redlock::mutex m(c, "mutex-auth", a);
  std::optional<std::string> thrown;
  try {
    m.lock();
  } catch (const std::system_error& e) {
    thrown = e.what();
  }
  ASSERT_FALSE(thrown.has_value()) << *thrown;
  m.unlock();
}

// --- ACL refusals of an authenticated user ---

TEST(Permissions, a_key_pattern_excluding_the_lock_key_is_permission_denied_not_an_auth_refusal) {
  node_config cfg;
  cfg.acl_users = {"user narrow on >narrow-pw ~jobs:* +@all"};
  redis_cluster cl(3, cfg);
  client c(options_for(uris_as(cl, "narrow", "narrow-pw")));
  ASSERT_TRUE(eventually([&] { return c.inspect("jobs:probe").report.count(node_status::ok) == 3; }));
  auto ok = c.acquire("jobs:1", once());  // inside the pattern
  ASSERT_TRUE(ok) << ok.report.message();
  EXPECT_TRUE(ok.lock.release());

  auto r = c.acquire("orders:1", once());  // outside it
  EXPECT_EQ(r.report.error, errc::permission_denied) << r.report.message();
  EXPECT_EQ(r.report.attempts, 1) << "a permission refusal by every node is not retried";
  EXPECT_TRUE(is_permanent(r.report.error));
  int noperm = 0;
  for (const node_result& n : r.report.nodes) {
    if (n.status == node_status::pending) continue;  // decided before its answer
    EXPECT_EQ(n.status, node_status::server_error) << n.detail;
    EXPECT_NE(n.detail.find("NOPERM"), std::string::npos) << n.detail;
    // The server's own words: Redis 7.0 "... to access one of the keys used as arguments",
    // Valkey 8.0.1 "No permissions to access a key".
    EXPECT_NE(n.detail.find("key"), std::string::npos) << n.detail;
    ++noperm;
  }
  EXPECT_GE(noperm, 2);
  const std::string m = r.report.message();
  EXPECT_EQ(m.find("authentication"), std::string::npos) << m;
  EXPECT_NE(m.find("NOPERM"), std::string::npos) << m;
}

TEST(Permissions, one_node_denying_the_key_leaves_the_other_two_to_grant) {
  redis_cluster open_nodes(2);
  node_config cfg;
  cfg.acl_users = {"user narrow on >narrow-pw ~jobs:* +@all"};
  redis_node narrow(cfg);
  client c(options_for({"redis://narrow:narrow-pw@127.0.0.1:" + std::to_string(narrow.port()), open_nodes[0].uri(),
                        open_nodes[1].uri()}));
  ASSERT_TRUE(eventually([&] { return c.inspect("jobs:probe").report.count(node_status::ok) == 3; }));
  acquire_options a = once();
  auto r = c.acquire("orders:2", a);
  ASSERT_TRUE(r) << r.report.message();
  if (r.report.nodes[0].status != node_status::pending) {
    EXPECT_EQ(r.report.nodes[0].status, node_status::server_error);
    EXPECT_NE(r.report.nodes[0].detail.find("NOPERM"), std::string::npos);
  }
  EXPECT_TRUE(r.lock.release());
}

// An ACL that refuses the handshake's PING: the connection never becomes ready,
// and its failure is a permission refusal too, not an authentication one.
TEST(Permissions, a_user_refused_ping_at_the_handshake_is_permission_denied) {
  node_config cfg;
  cfg.acl_users = {"user noping on >noping-pw ~* +@all -ping"};
  redis_cluster cl(3, cfg);
  client c(options_for(uris_as(cl, "noping", "noping-pw")));
  acquire_result r;
  // The first attempts may meet the connections still connecting; once they
  // failed their handshake, every request fails at once with the server's text.
  ASSERT_TRUE(eventually([&] {
    r = c.acquire("noping", once());
    return r.report.error == errc::permission_denied;
  })) << r.report.message();
  for (const node_result& n : r.report.nodes) {
    if (n.status == node_status::pending) continue;
    EXPECT_EQ(n.status, node_status::server_error) << n.detail;
    EXPECT_NE(n.detail.find("NOPERM"), std::string::npos) << n.detail;
    EXPECT_NE(n.detail.find("ping"), std::string::npos) << n.detail;
  }
  EXPECT_EQ(r.report.message().find("authentication"), std::string::npos) << r.report.message();
}

// --- a user without +time ---

constexpr const char* kNoTimeAcl = "~* -@all +set +get +del +pexpire +pttl +type +info +ping +eval +evalsha";

TEST(NoTimePermission, a_user_without_TIME_takes_a_fenced_lock) {
  node_config cfg;
  cfg.acl_users = {std::string("user lean on >lean-pw ") + kNoTimeAcl};
  redis_cluster cl(3, cfg);
  client c(options_for(uris_as(cl, "lean", "lean-pw")));
  ASSERT_TRUE(wait_connected(c));
  acquire_options a = once();
  a.fencing = true;
  for (int i = 0; i < 3; ++i) {
    auto r = c.acquire("fenced-lean", a);
    ASSERT_TRUE(r) << r.report.message();
    ASSERT_TRUE(r.lock.fence().has_value());
    EXPECT_EQ(*r.lock.fence(), static_cast<std::uint64_t>(i + 1));
    EXPECT_TRUE(r.lock.release());
  }
  auto plain = c.acquire("plain-lean", once());
  ASSERT_TRUE(plain) << plain.report.message();
  EXPECT_TRUE(plain.lock.release());
  for (std::size_t i = 0; i < cl.size(); ++i) EXPECT_EQ(cl[i].calls("time"), 0) << "node " << i;
}

// Servers before 7.0 (a proxy that refuses SET ... NX ... GET in front of a real
// node) get the acquire script; the real node's default user, which the proxy
// uses, may not run TIME.
TEST(NoTimePermission, a_server_before_7_0_whose_user_lacks_TIME_still_grants) {
  node_config cfg;
  cfg.acl_users = {std::string("user default on nopass ") + kNoTimeAcl + " +exists +dbsize"};
  redis_cluster cl(3, cfg);
  std::vector<std::unique_ptr<noise_server>> old;
  std::vector<std::string> uris;
  for (std::size_t i = 0; i < cl.size(); ++i) {
    old.push_back(std::make_unique<noise_server>(noise_server::pre_7_0{cl[i].port()}));
    uris.push_back(old.back()->uri());
  }
  client c(options_for(uris));
  ASSERT_TRUE(wait_connected(c));
  for (bool fencing : {false, true}) {
    acquire_options a = once();
    a.fencing = fencing;
    auto r = c.acquire(fencing ? "pre7-lean-fenced" : "pre7-lean", a);
    ASSERT_TRUE(r) << r.report.message();
    EXPECT_EQ(r.lock.fence().has_value(), fencing);
    EXPECT_TRUE(r.lock.release());
  }
  // Each node's first acquire met the refusal, but a round decides at its quorum: on a
  // loaded machine the third node's request can still be on its way (it failed so once).
  for (std::size_t i = 0; i < cl.size(); ++i) {
    EXPECT_TRUE(eventually([&] { return old[i]->refused_set_get() >= 1u; })) << "node " << i;
  }
}

// --- fork(): two workers of a pre-fork server ---

// Acquires on a client driven by this thread's own loop (redlock/uv.h), so the
// token is drawn on this thread — the thread that fork() copies.
acquire_result acquire_on_own_loop(const std::vector<std::string>& uris, const std::string& resource,
                                   acquire_options a) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::optional<acquire_result> out;
  {
    auto c = make_client_on_loop(options_for(uris), &loop);
    c->acquire_async(resource, std::move(a), [&](acquire_result r) {
      out = std::move(r);
      uv_stop(&loop);
    });
    while (!out) uv_run(&loop, UV_RUN_ONCE);
    if (out->lock.owns_lock()) out->lock.detach();  // keep the keys: the TTL ends them
    c.reset();
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_loop_close(&loop);
  return std::move(*out);
}

TEST(Fork, two_forked_workers_acquiring_one_resource_never_both_hold_it) {
  redis_cluster cl(3);
  const auto uris = cl.uris();
  {
    // The parent uses the library first (any per-thread token cache is warm).
    auto warm = acquire_on_own_loop(uris, "fork-warmup", once());
    ASSERT_TRUE(warm.report) << warm.report.message();
  }
  int results[2];
  ASSERT_EQ(pipe(results), 0);
  int go[2];  // the second worker starts after the first has its answer
  ASSERT_EQ(pipe(go), 0);
  pid_t pids[2];
  for (int w = 0; w < 2; ++w) {
    pids[w] = fork();
    ASSERT_GE(pids[w], 0);
    if (pids[w] == 0) {
      close(results[0]);
      if (w == 1) {
        char b = 0;
        while (read(go[0], &b, 1) < 0 && errno == EINTR) {
        }
      }
      acquire_options a = once(20000ms);
      a.retry.max_attempts = 5;
      a.retry.base_delay = 20ms;
      auto r = acquire_on_own_loop(uris, "fork-shared", a);
      const char line[1] = {r.report ? 'Y' : 'N'};
      const bool ok = write(results[1], line, 1) == 1;
      _exit(ok ? 0 : 2);
    }
  }
  close(results[1]);
  char answers[2] = {0, 0};
  for (int w = 0; w < 2; ++w) {
    if (w == 1) {
      ASSERT_EQ(write(go[1], "g", 1), 1);
    }
    ssize_t n = 0;
    do {
      n = read(results[0], &answers[w], 1);
    } while (n < 0 && errno == EINTR);
    ASSERT_EQ(n, 1) << "worker " << w << " did not answer";
  }
  close(results[0]);
  close(go[0]);
  close(go[1]);
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(answers[0], 'Y') << "the first worker found the resource free";
  EXPECT_EQ(answers[1], 'N') << "both workers hold the lock";
  // The first worker's keys are intact on every node.
  const auto v = cl[0].get("fork-shared");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(cl.count_value("fork-shared", *v), 3);
}

}  // namespace
}  // namespace redlock::test
