// Adversarial review of the issue-9 hardening: reproductions against real
// redis-server processes. Each test states the guarantee it attacks.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "test_util.h"

namespace redlock::test {
namespace {

using clk = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Points `link` at `target` atomically (a new symlink renamed over the old one).
void point(const std::string& link, const std::string& target) {
  const std::string tmp = link + ".tmp";
  ::unlink(tmp.c_str());
  ASSERT_EQ(::symlink(target.c_str(), tmp.c_str()), 0);
  ASSERT_EQ(::rename(tmp.c_str(), link.c_str()), 0);
}

// Guarantee (docs/safety.md, options.h restart_quarantine): a node that may have
// lost its keys (another server process behind the address: a new run_id) gets no
// acquire vote for max_ttl. Attack: the address is taken over by a server that has
// been running for longer than max_ttl (failover to another process, a socket
// path or DNS name re-pointed). Its run_id is new, but the quarantine is counted
// from ITS start (uptime), not from when this client first saw it, so it votes at
// once: two of three addresses swapped give B a quorum while A still holds.
TEST(ReviewAttack, address_taken_over_by_a_long_running_server_gets_no_vote_while_a_lock_may_be_valid) {
  node_config unix_cfg;
  unix_cfg.unix_socket = true;
  redis_node y1(unix_cfg), y2(unix_cfg);  // the long-running servers that take over
  const auto y_started = clk::now();
  redis_node x1(unix_cfg), x2(unix_cfg), z;
  const std::string dir = "/tmp/redlock-review-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string p1 = dir + "/n1.sock", p2 = dir + "/n2.sock";
  point(p1, x1.unix_path());
  point(p2, x2.unix_path());
  const std::vector<std::string> uris = {"unix://" + p1, "unix://" + p2, z.uri()};

  client_options o = options_for(uris);
  o.max_ttl = 3000ms;  // restart_quarantine defaults to it
  client a(o);
  client b(o);
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));  // B has seen X1's and X2's run_ids
  // Y1 and Y2 have been up for longer than the quarantine.
  std::this_thread::sleep_until(y_started + 4500ms);

  const std::string res = "takeover";
  auto held = a.acquire(res, once(3000ms));
  ASSERT_TRUE(held) << held.report.message();

  point(p1, y1.unix_path());
  point(p2, y2.unix_path());
  x1.command({"CLIENT", "KILL", "TYPE", "normal"});
  x2.command({"CLIENT", "KILL", "TYPE", "normal"});
  // B reconnects to both addresses (now Y1 and Y2), well within A's validity.
  ASSERT_TRUE(eventually([&] { return b.inspect("probe").report.count(node_status::ok) == 3; }, 1500ms));

  auto rival = b.acquire(res, once(3000ms));
  const bool a_holds = held.lock.owns_lock();
  const auto a_left = held.lock.remaining_validity();
  EXPECT_FALSE(rival && a_holds) << "two holders: A has " << a_left.count() << " ms of validity left, B acquired: "
                                 << rival.report.message();
  std::filesystem::remove_all(dir);
}

// Guarantee (item 25, client.h lock::info): a lease read after the loss must not
// look valid. Attack: an explicit lock::extend is in flight when the client shuts
// down (the watchdog's lock is declared lost, validity lowered to now); the
// extension's success then arrives during the drain and extension_succeeded()
// moves valid_until forward again, since extend_held's callback checks
// `finished` but not `lost`.
TEST(ReviewAttack, lease_read_after_shutdown_loss_does_not_look_valid_when_an_extension_lands_in_the_drain) {
  redis_cluster nodes(3);
  client_options o = options_for(nodes.uris());
  auto c = std::make_unique<client>(o);
  ASSERT_TRUE(wait_connected(*c));
  acquire_options ao = once(10000ms);
  ao.auto_extend = true;
  auto r = c->acquire("drain-extend", ao);
  ASSERT_TRUE(r) << r.report.message();
  redlock::lock l = std::move(r.lock);

  nodes[0].pause();
  nodes[1].pause();
  std::atomic<bool> extended{false};
  report ext;
  std::thread t([&] {
    ext = l.extend(10000ms);
    extended = true;
  });
  std::this_thread::sleep_for(30ms);  // the extension is in flight on the paused nodes
  std::thread stopper([&] { c.reset(); });  // shutdown: the watched lock is declared lost
  std::this_thread::sleep_for(40ms);
  nodes[0].resume();
  nodes[1].resume();
  stopper.join();
  t.join();
  ASSERT_TRUE(l.lost()) << "the shutdown declares the watched lock lost";
  const auto until = l.info().valid_until;
  ASSERT_TRUE(until.has_value());
  EXPECT_LE(*until, clk::now()) << "lease after loss still looks valid for "
                                << std::chrono::duration_cast<milliseconds>(*until - clk::now()).count()
                                << " ms (extension result: " << ext.message() << ")";
}

// Guarantee (item 5, client.h/options.h: every node must be an independent master;
// one server named twice is a configuration error). Attack: the same server named
// once by its unix socket and once by TCP (or through a symlinked socket path) is
// accepted, and that one server alone then forms a quorum of 3. Names cannot be
// compared without connecting, but the handshake's INFO gives every node's run_id:
// two nodes with one run_id are one server.
TEST(ReviewAttack, one_server_named_by_its_unix_socket_and_by_tcp_never_forms_a_quorum_alone) {
  node_config unix_cfg;
  unix_cfg.unix_socket = true;
  redis_node x(unix_cfg), y;
  // Another database on the socket: the keys do not collide, as with
  // redis://h:p/0 and redis://h:p/1, which validate() rejects.
  const std::vector<std::string> uris = {x.unix_uri() + "?db=1", x.uri(), y.uri()};
  std::unique_ptr<client> c;
  try {
    c = std::make_unique<client>(options_for(uris));
  } catch (const config_error&) {
    SUCCEED() << "rejected at construction";
    return;
  }
  ASSERT_TRUE(wait_connected(*c));
  y.pause();
  auto r = c->acquire("one-server", once(5000ms));
  y.resume();
  EXPECT_FALSE(r) << "one redis-server (" << x.uri() << ", also as " << x.unix_uri()
                  << ") granted a quorum alone: " << r.report.message();
}

// The same attack with TCP only: "127.1" is 127.0.0.1 to the resolver (inet_aton
// form) but not to validate()'s inet_pton comparison; with db 1 the keys do not
// collide either.
TEST(ReviewAttack, one_server_named_as_127_1_and_127_0_0_1_never_forms_a_quorum_alone) {
  redis_node x, y;
  const std::vector<std::string> uris = {"redis://127.1:" + std::to_string(x.port()) + "/1", x.uri(), y.uri()};
  std::unique_ptr<client> c;
  try {
    c = std::make_unique<client>(options_for(uris));
  } catch (const config_error&) {
    SUCCEED() << "rejected at construction";
    return;
  }
  ASSERT_TRUE(wait_connected(*c));
  y.pause();
  auto r = c->acquire("one-server-tcp", once(5000ms));
  y.resume();
  EXPECT_FALSE(r) << "one redis-server (" << x.uri() << ", also as " << uris[0]
                  << ") granted a quorum alone: " << r.report.message();
}

// Guarantee (item 11, docs/fencing.md: names ending in ":fence" are reserved so
// that no lock key collides with a fence counter). Attack: the check is on the
// resource name, not on the key: a client whose key_prefix ends in "orders:" locking
// "fence" uses the key "orders:fence", the fence counter of "orders" for a client
// without a prefix. The lock is then contended forever (SET NX finds the counter).
TEST(ReviewAttack, a_key_prefix_cannot_make_a_lock_key_collide_with_a_fence_counter) {
  redis_cluster nodes(3);
  client plain(options_for(nodes.uris()));
  client_options po = options_for(nodes.uris());
  po.key_prefix = "orders:";
  client prefixed(po);
  ASSERT_TRUE(wait_connected(plain));
  ASSERT_TRUE(wait_connected(prefixed));
  acquire_options fenced = once(5000ms);
  fenced.fencing = true;
  {
    auto r = plain.acquire("orders", fenced);
    ASSERT_TRUE(r) << r.report.message();
    ASSERT_FALSE(r.lock.release().error);
  }
  auto other = prefixed.acquire("fence", once(5000ms));
  EXPECT_TRUE(other || other.report.error == errc::invalid_argument)
      << "key 'orders:fence' is the fence counter of 'orders': " << other.report.message();
}

// Guarantee (client.h: owns_lock()/remaining_validity() never outlive what the
// nodes hold; "the belief never outlives a key this extension may have
// shortened"). Attack, with no fault at all: the handle's lease extended through
// client::extend(lease) to a shorter TTL (both are public; client.h only notes that
// a handle does "this bookkeeping itself"). The extension succeeds and shortens the
// keys, but the handle never hears of it: owns_lock() stays true with ~10 s left
// while another client acquires.
TEST(ReviewAttack, extending_a_handles_lease_through_the_client_to_a_shorter_ttl_never_leaves_two_holders) {
  redis_cluster nodes(3);
  client a(options_for(nodes.uris()));
  client b(options_for(nodes.uris()));
  ASSERT_TRUE(wait_connected(a));
  ASSERT_TRUE(wait_connected(b));
  const std::string res = "lease-extend-behind-the-handle";
  auto held = a.acquire(res, once(10000ms));
  ASSERT_TRUE(held) << held.report.message();
  report ext = a.extend(held.lock.info(), 300ms);
  ASSERT_FALSE(ext.error) << ext.message();
  std::this_thread::sleep_for(400ms);
  auto rival = b.acquire(res, once(10000ms));
  const bool a_holds = held.lock.owns_lock();
  EXPECT_FALSE(rival && a_holds) << "two holders: A's handle has " << held.lock.remaining_validity().count()
                                 << " ms left, B acquired: " << rival.report.message();
}

// Guarantee (options.h clock_jump_threshold: a node is quarantined when its clock
// advanced faster than the local clock by more than the allowance). Attack: no
// clock moves at all; the node is only paused (SIGSTOP, a fork for BGSAVE, a VM
// hiccup) for 3 s, shorter than the stall detector (4 x command_timeout) while an
// acquire's SET + TIME is outstanding. The late TIME is still observed
// (connection.cc: before the expired check) and dated at the midpoint between the
// submission and the late reply, 1.5 s before the server really answered: a
// "jump" of 1.5 s, and the node gets no acquire vote for max_ttl (60 s). The same
// misdating hides up to that much of a real forward jump in the next comparison.
TEST(ReviewAttack, a_paused_node_is_not_taken_for_a_clock_jump) {
  redis_cluster nodes(3);
  client_options o = options_for(nodes.uris());
  o.command_timeout = 1000ms;  // far below the TTLs in use (30 s)
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  nodes[0].pause();
  {
    auto r = c.acquire("pause-then-jump-1", once(30000ms));
    ASSERT_TRUE(r) << r.report.message();  // nodes 2 and 3
    std::this_thread::sleep_for(3000ms);  // < the 4 s stall bound
    nodes[0].resume();
    ASSERT_FALSE(r.lock.release().error);
  }
  std::this_thread::sleep_for(200ms);
  auto r2 = c.acquire("pause-then-jump-2", once(30000ms));
  ASSERT_TRUE(r2) << r2.report.message();
  EXPECT_NE(r2.report.nodes[0].status, node_status::excluded)
      << "node 1 was only paused, its clock never moved: " << r2.report.message();
}

}  // namespace
}  // namespace redlock::test
