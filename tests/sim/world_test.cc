// The simulated world of redlock/testing.h: real clients over simulated nodes in
// virtual time. Each test pins a behaviour testing.h documents, through the
// public API only (the blocking calls run the world until their answer is in).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redlock/client.h"
#include "redlock/testing.h"

namespace redlock::testing {
namespace {

using namespace std::chrono_literals;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

acquire_options ttl_of(milliseconds ttl) {
  acquire_options o;
  o.ttl = ttl;
  o.retry = retry_policy::once();
  return o;
}

// The world's clients connect in the background: one blocking ping waits for it.
void connected(client& c) { ASSERT_TRUE(c.ping()) << "the simulated nodes did not answer a ping"; }

TEST(World, a_client_connects_and_acquires_in_virtual_time) {
  world w;
  auto c = w.make_client();
  EXPECT_EQ(c->node_count(), 3u);
  EXPECT_EQ(c->node_names(), w.node_uris());
  auto r = c->acquire("report", ttl_of(10s));
  ASSERT_TRUE(r) << r.report.message();
  // Connect, handshake and one round trip at 0.1-0.4 ms one way: a few ms of virtual time.
  EXPECT_LT(w.elapsed(), 20ms);
  EXPECT_GT(w.elapsed(), 0us);
  for (std::size_t i = 0; i < w.node_count(); ++i) {
    auto k = w.key_at(i, "report");
    ASSERT_TRUE(k) << "node " << i;
    EXPECT_EQ(k->value, r.lock.info().token);
    EXPECT_GT(k->pttl_ms, 9'900);
    EXPECT_LE(k->pttl_ms, 10'000);
  }
  ASSERT_TRUE(r.lock.release());
  for (std::size_t i = 0; i < w.node_count(); ++i) EXPECT_FALSE(w.key_at(i, "report"));
  EXPECT_GT(w.events_run(), 0u);
  EXPECT_GT(w.commands_run(), 0u);
}

TEST(World, time_stands_still_until_advanced_and_keys_expire_in_virtual_time) {
  world w;
  auto c = w.make_client();
  auto r = c->acquire("k", ttl_of(1s));
  ASSERT_TRUE(r);
  const auto t = w.elapsed();
  EXPECT_EQ(w.elapsed(), t);  // nothing runs by itself
  EXPECT_TRUE(r.lock.owns_lock());
  w.advance(1100ms);
  EXPECT_EQ(w.elapsed(), t + 1100ms);
  EXPECT_FALSE(r.lock.owns_lock());
  for (std::size_t i = 0; i < w.node_count(); ++i) EXPECT_FALSE(w.key_at(i, "k"));
  EXPECT_TRUE(w.keys_at(0).empty());
}

// Runs a fixed sequence; returns its tokens, its virtual time and its events.
struct trace {
  std::vector<std::string> tokens;
  microseconds elapsed{0};
  std::uint64_t events = 0;
};
trace sequence(std::uint64_t seed) {
  world_options o;
  o.seed = seed;
  o.nodes = 5;
  world w(o);
  auto a = w.make_client();
  auto b = w.make_client();
  trace t;
  for (int i = 0; i < 5; ++i) {
    auto r = a->acquire("x", ttl_of(500ms));
    auto s = b->acquire("x", ttl_of(500ms));  // contended: a holds it
    EXPECT_TRUE(r);
    EXPECT_EQ(s.report.error, errc::contended);
    t.tokens.push_back(r.lock.info().token);
    w.advance(600ms);
  }
  t.elapsed = w.elapsed();
  t.events = w.events_run();
  return t;
}

// The nodes report their maxmemory-policy: the client warns about an evicting
// one, and a fenced acquire gives a node that may evict fence counters no vote.
TEST(World, nodes_report_their_eviction_policy_to_the_client) {
  world_options wo;
  wo.maxmemory_policies = {"allkeys-lru", "noeviction", "volatile-ttl"};
  world w(wo);
  std::vector<warning> seen;
  client_options co;
  co.on_warning = [&seen](const warning& x) { seen.push_back(x); };
  auto c = w.make_client(co);
  connected(*c);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].code, warning_code::eviction_policy);
  const inspect_result ir = c->inspect("evict");
  EXPECT_EQ(ir.nodes[0].maxmemory_policy, "allkeys-lru");
  EXPECT_EQ(ir.nodes[1].maxmemory_policy, "noeviction");
  EXPECT_EQ(ir.nodes[2].warnings.size(), 1u);
  acquire_options fenced = ttl_of(10s);
  fenced.fencing = true;
  auto r = c->acquire("evict", fenced);
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_EQ(r.report.nodes[0].status, node_status::excluded);
  EXPECT_NE(r.report.nodes[0].detail.find("allkeys-lru"), std::string::npos) << r.report.nodes[0].detail;
  EXPECT_FALSE(w.key_at(0, "evict").has_value());
}

TEST(World, the_same_seed_gives_the_same_tokens_and_the_same_run) {
  const trace one = sequence(7), two = sequence(7), other = sequence(8);
  EXPECT_EQ(one.tokens, two.tokens);
  EXPECT_EQ(one.elapsed, two.elapsed);
  EXPECT_EQ(one.events, two.events);
  EXPECT_NE(one.tokens, other.tokens);
  for (const auto& tok : one.tokens) EXPECT_EQ(tok.size(), 32u);
}

TEST(World, a_paused_node_queues_requests_and_runs_them_when_resumed) {
  world w;
  auto c = w.make_client();
  connected(*c);
  w.pause_node(0);
  auto r = c->acquire("p", ttl_of(10s));
  ASSERT_TRUE(r) << r.report.message();  // two of three granted
  EXPECT_EQ(r.report.nodes[0].status, node_status::pending);  // decided without it
  EXPECT_FALSE(w.key_at(0, "p"));  // frozen: the SET waits in its socket
  w.advance(100ms);
  EXPECT_FALSE(w.key_at(0, "p"));
  w.resume_node(0);
  w.advance(10ms);
  auto k = w.key_at(0, "p");  // it ran on resume, late
  ASSERT_TRUE(k);
  EXPECT_EQ(k->value, r.lock.info().token);
}

// A set (client::acquire_many) in virtual time: all or none per node, the
// overlapping set and the single key contended until the TTL frees the set.
TEST(World, a_set_of_resources_is_held_all_or_none_and_frees_every_key_at_its_ttl) {
  world w;
  auto a = w.make_client();
  auto b = w.make_client();
  auto r = a->acquire_many({"x", "y"}, ttl_of(1s));
  ASSERT_TRUE(r) << r.report.message();
  w.advance(5ms);  // the answer after the quorum lands too
  for (std::size_t i = 0; i < w.node_count(); ++i) {
    ASSERT_TRUE(w.key_at(i, "x")) << i;
    EXPECT_EQ(w.key_at(i, "y")->value, r.lock.info().token);
  }
  EXPECT_EQ(b->acquire("y", ttl_of(1s)).report.error, errc::contended);
  auto overlap = b->acquire_many({"z", "y"}, ttl_of(1s));
  EXPECT_EQ(overlap.report.error, errc::contended);
  w.advance(5ms);
  for (std::size_t i = 0; i < w.node_count(); ++i) EXPECT_FALSE(w.key_at(i, "z")) << i;
  w.advance(1100ms);
  EXPECT_FALSE(r.lock.owns_lock());
  auto later = b->acquire_many({"z", "y"}, ttl_of(1s));
  EXPECT_TRUE(later) << later.report.message();
  ASSERT_TRUE(later.lock.release());
  w.advance(5ms);
  for (std::size_t i = 0; i < w.node_count(); ++i) EXPECT_TRUE(w.keys_at(i).empty()) << i;
}

// Overlapping sets ({a,b}, {b,c}) and a single key (c) from three clients with
// faults (lost replies, a black hole, a crash of a persistent node, a paused node,
// slow links), for 20 s of virtual time. Per resource, the intervals in which a
// client believed it held it (from the acquire's callback to the earlier of the
// release call and the lease's validity end) never overlap; every client gets
// its resources; once all has healed and the TTLs have passed, no node holds a
// key (partial grants and late grants were all rolled back).
TEST(World, overlapping_sets_under_faults_exclude_each_other_per_resource_and_leave_no_key) {
  world_options wo;
  wo.nodes = 5;
  wo.seed = 7;
  wo.persistent_nodes = {false, false, false, true, false};
  world w(wo);
  struct span {
    std::chrono::steady_clock::time_point from, to;
    int who;
  };
  struct actor {
    std::vector<std::string> set;
    std::unique_ptr<client> c;
    bool busy = false, holding = false;
    lock held;
    std::chrono::steady_clock::time_point from, hold_until, next_at;
    int wins = 0, tries = 0;
  };
  std::vector<actor> actors(3);
  actors[0].set = {"a", "b"};
  actors[1].set = {"b", "c"};
  actors[2].set = {"c"};
  for (auto& a : actors) a.c = w.make_client();
  std::map<std::string, std::vector<span>> spans;
  std::uint64_t rng = 12345;
  auto next = [&rng](std::int64_t below) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::int64_t>((rng >> 33) % static_cast<std::uint64_t>(below));
  };
  const auto end = w.now() + 20s;
  while (w.now() < end) {
    const auto t = w.elapsed();
    if (t == 3s) w.drop_replies(1, true);
    if (t == 3400ms) w.drop_replies(1, false);
    if (t == 6s) w.black_hole_node(2, true);
    if (t == 6500ms) w.black_hole_node(2, false);
    if (t == 9s) w.crash_node(3);
    if (t == 10s) w.restart_node(3);
    if (t == 12s) w.pause_node(0);
    if (t == 12300ms) w.resume_node(0);
    if (t == 14s) w.set_node_latency(4, 5000, 20000);
    if (t == 16s) w.set_node_latency(4, 100, 400);
    for (std::size_t i = 0; i < actors.size(); ++i) {
      actor& a = actors[i];
      if (a.busy) continue;
      const auto now = w.now();
      if (a.holding && (now >= a.hold_until || !a.held.owns_lock())) {
        const auto until = a.held.info().valid_until.value_or(now);
        for (const auto& r : a.set) spans[r].push_back({a.from, std::min(now, until), static_cast<int>(i)});
        a.holding = false;
        a.busy = true;
        a.held.release_async([&a](report) { a.busy = false; });
        a.next_at = now + milliseconds(next(20));
      } else if (!a.holding && now >= a.next_at) {
        acquire_options o = ttl_of(milliseconds(400 + next(800)));
        o.auto_extend = i == 1 && next(2) == 0;
        a.busy = true;
        ++a.tries;
        auto done = [&a, &w, &next](acquire_result r) {
          a.busy = false;
          if (!r) {
            a.next_at = w.now() + milliseconds(next(30));
            return;
          }
          ++a.wins;
          a.holding = true;
          a.from = w.now();
          a.hold_until = a.from + milliseconds(next(300));
          a.held = std::move(r.lock);
        };
        if (a.set.size() == 1) {
          a.c->acquire_async(a.set[0], o, done);
        } else {
          a.c->acquire_many_async(a.set, o, done);
        }
      }
    }
    w.advance(1ms);
  }
  // Stop: release what is held, let every TTL and rollback run out.
  for (auto& a : actors) {
    if (a.holding) (void)a.held.release();
  }
  w.advance(5s);
  for (const auto& a : actors) {
    EXPECT_GT(a.wins, 3) << a.set[0] << ": " << a.wins << " of " << a.tries;
  }
  int checked = 0;
  for (auto& [res, list] : spans) {
    std::sort(list.begin(), list.end(), [](const span& x, const span& y) { return x.from < y.from; });
    for (std::size_t i = 1; i < list.size(); ++i) {
      ++checked;
      EXPECT_LE(list[i - 1].to, list[i].from)
          << res << ": holders " << list[i - 1].who << " and " << list[i].who << " overlap";
    }
  }
  EXPECT_GT(checked, 20);
  for (std::size_t n = 0; n < w.node_count(); ++n) EXPECT_TRUE(w.keys_at(n).empty()) << "node " << n;
}

TEST(World, a_crash_resets_connections_and_refuses_connects_until_the_restart) {
  world_options o;
  o.persistent_nodes = {true, false, false};
  world w(o);
  auto c = w.make_client();
  auto r = c->acquire("d", ttl_of(10s));
  ASSERT_TRUE(r);
  w.crash_node(0);
  w.crash_node(1);
  EXPECT_FALSE(w.node_up(0));
  EXPECT_FALSE(w.node_up(1));
  auto s = c->acquire("e", ttl_of(10s));
  EXPECT_EQ(s.report.error, errc::unavailable);
  EXPECT_EQ(s.report.nodes[0].status, node_status::connection_error);
  w.restart_node(0);
  w.restart_node(1);
  EXPECT_TRUE(w.node_up(0));
  // Node 0 keeps its data (appendfsync always), node 1 lost it.
  ASSERT_TRUE(w.key_at(0, "d"));
  EXPECT_EQ(w.key_at(0, "d")->value, r.lock.info().token);
  EXPECT_FALSE(w.key_at(1, "d"));
  EXPECT_TRUE(w.key_at(2, "d"));
  w.advance(2s);  // reconnects
  EXPECT_GE(c->stats().reconnects, 2u);
}

TEST(World, a_restarted_node_gets_no_acquire_vote_until_the_quarantine_has_passed) {
  world w;
  client_options co;
  co.max_ttl = 2s;  // the quarantine
  auto c = w.make_client(co);
  connected(*c);
  w.restart_node(0);
  w.restart_node(1);
  w.advance(500ms);  // the client reconnects and sees new run_ids
  auto r = c->acquire("q", ttl_of(1s));
  EXPECT_EQ(r.report.error, errc::unavailable);
  EXPECT_EQ(r.report.nodes[0].status, node_status::excluded);
  EXPECT_EQ(r.report.nodes[1].status, node_status::excluded);
  EXPECT_EQ(r.report.nodes[2].status, node_status::pending);  // no quorum possible: decided at once
  w.advance(2s);
  auto s = c->acquire("q", ttl_of(1s));
  EXPECT_TRUE(s) << s.report.message();
}

TEST(World, a_black_hole_holds_bytes_back_and_delivers_them_in_order_when_it_ends) {
  world w;
  auto c = w.make_client();
  connected(*c);
  w.black_hole_node(0, true);
  auto r = c->acquire("b", ttl_of(10s));
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_EQ(r.report.nodes[0].status, node_status::pending);
  w.advance(200ms);  // under the stall detector's 1 s: the connection lives
  EXPECT_FALSE(w.key_at(0, "b"));
  // A client connecting now hangs on node 0.
  auto late = w.make_client();
  w.advance(100ms);
  w.black_hole_node(0, false);
  w.advance(10ms);
  auto k = w.key_at(0, "b");  // the SET held back by the black hole ran now
  ASSERT_TRUE(k);
  EXPECT_EQ(k->value, r.lock.info().token);
  // The late client's connect got through too (or its retry did).
  w.advance(2s);
  auto i = late->inspect("b");
  ASSERT_TRUE(i.report) << i.report.message();
  EXPECT_EQ(i.report.nodes[0].status, node_status::ok);
  EXPECT_EQ(i.holder, r.lock.info().token);
}

TEST(World, dropped_replies_run_on_the_node_and_their_connection_is_reset_after) {
  world w;
  auto c = w.make_client();
  connected(*c);
  const auto before = c->stats().reconnects;
  w.drop_replies(0, true);
  auto r = c->acquire("r", ttl_of(10s));
  ASSERT_TRUE(r);
  EXPECT_EQ(r.report.nodes[0].status, node_status::pending);
  auto k = w.key_at(0, "r");  // executed, the answer lost
  ASSERT_TRUE(k);
  EXPECT_EQ(k->value, r.lock.info().token);
  w.drop_replies(0, false);
  w.advance(1s);
  EXPECT_GT(c->stats().reconnects, before);
  EXPECT_TRUE(r.lock.release());
  EXPECT_FALSE(w.key_at(0, "r"));
}

TEST(World, reset_connections_makes_clients_reconnect) {
  world w;
  auto c = w.make_client();
  connected(*c);
  const auto before = c->stats().reconnects;
  w.reset_connections(1);
  w.advance(500ms);
  EXPECT_EQ(c->stats().reconnects, before + 1);
  EXPECT_TRUE(c->ping());
}

TEST(World, a_partition_cuts_one_client_off_one_node_only) {
  world w;
  auto a = w.make_client();
  auto b = w.make_client();
  connected(*a);
  connected(*b);
  w.partition(*a, 0, true);
  w.partition(*a, 1, true);
  auto r = a->acquire("cut", ttl_of(1s));
  EXPECT_EQ(r.report.error, errc::unavailable);
  auto s = b->acquire("cut", ttl_of(1s));
  EXPECT_TRUE(s) << s.report.message();
  ASSERT_TRUE(s.lock.release());
  w.partition(*a, 0, false);
  w.partition(*a, 1, false);
  w.advance(3s);  // a's stalled connections are reset and come back
  auto t = a->acquire("cut", ttl_of(1s));
  EXPECT_TRUE(t) << t.report.message();
}

TEST(World, a_forward_clock_jump_expires_keys_early_and_the_guard_excludes_the_node) {
  world w;
  auto a = w.make_client();
  auto b = w.make_client();
  connected(*a);
  connected(*b);
  auto r = a->acquire("j", ttl_of(10s));
  ASSERT_TRUE(r);
  const auto before = w.node_clock(0);
  w.jump_node_clock(0, 20s);
  w.jump_node_clock(1, 20s);
  EXPECT_GE(w.node_clock(0) - before, 20s);
  EXPECT_FALSE(w.key_at(0, "j"));  // expired at once
  EXPECT_FALSE(w.key_at(1, "j"));
  EXPECT_TRUE(w.key_at(2, "j"));
  auto s = b->acquire("j", ttl_of(10s));
  EXPECT_FALSE(s);
  // Nodes 0 and 1 granted (the key was gone there), but the TIME behind each SET
  // showed the jump: the grants do not count (and are rolled back).
  for (std::size_t i : {0, 1}) {
    EXPECT_EQ(s.report.nodes[i].status, node_status::excluded);
    EXPECT_NE(s.report.nodes[i].detail.find("clock jumped"), std::string::npos) << s.report.nodes[i].detail;
  }
  w.advance(10ms);
  EXPECT_FALSE(w.key_at(0, "j"));
  EXPECT_TRUE(r.lock.owns_lock());
}

TEST(World, with_the_clock_guard_off_a_jump_on_a_majority_lets_a_second_client_in) {
  world w;
  client_options off;
  off.clock_jump_threshold = 0ms;
  auto a = w.make_client(off);
  auto b = w.make_client(off);
  connected(*a);
  connected(*b);
  auto r = a->acquire("j", ttl_of(10s));
  ASSERT_TRUE(r);
  w.jump_node_clock(0, 20s);
  w.jump_node_clock(1, 20s);
  auto s = b->acquire("j", ttl_of(10s));
  EXPECT_TRUE(s);  // the documented negative control: two holders
  EXPECT_TRUE(r.lock.owns_lock());
}

TEST(World, clock_drift_runs_a_node_clock_at_its_rate) {
  world w;
  w.set_node_clock_rate(0, 0.01);
  const auto a0 = w.node_clock(0), b0 = w.node_clock(1);
  w.advance(10s);
  EXPECT_EQ(w.node_clock(1) - b0, 10s);
  EXPECT_EQ(w.node_clock(0) - a0, 10100ms);
}

TEST(World, a_paused_client_runs_nothing_until_its_pause_ends) {
  world w;
  auto c = w.make_client();
  connected(*c);
  int lost = 0;
  report why;
  acquire_options o = ttl_of(1s);
  o.auto_extend = true;
  o.on_lost = [&](const lease&, const report& r) {
    ++lost;
    why = r;
  };
  auto r = c->acquire("gc", o);
  ASSERT_TRUE(r);
  w.advance(2s);
  EXPECT_TRUE(r.lock.owns_lock());  // the watchdog kept it
  w.pause_client(*c, 3s);
  w.advance(2s);
  // Frozen: no extension, so the keys expired, and nothing ran yet.
  EXPECT_FALSE(w.key_at(0, "gc"));
  EXPECT_EQ(lost, 0);
  EXPECT_FALSE(r.lock.owns_lock());  // its clock runs: the validity is over
  w.advance(2s);
  EXPECT_EQ(lost, 1);  // on resume, the watchdog finds the validity gone
  EXPECT_EQ(why.error, errc::lock_lost);
  EXPECT_TRUE(r.lock.lost());
}

TEST(World, a_stolen_key_makes_the_watchdog_report_the_loss) {
  world w;
  auto c = w.make_client();
  int lost = 0;
  acquire_options o = ttl_of(3s);
  o.auto_extend = true;
  o.on_lost = [&](const lease&, const report&) { ++lost; };
  auto r = c->acquire("s", o);
  ASSERT_TRUE(r);
  w.steal_key_everywhere("s", "someone-else", 10s);
  w.advance(2s);
  EXPECT_EQ(lost, 1);
  EXPECT_TRUE(r.lock.lost());
  EXPECT_EQ(w.key_at(0, "s")->value, "someone-else");
  w.delete_key_everywhere("s");
  EXPECT_FALSE(w.key_at(0, "s"));
}

TEST(World, an_injected_error_reply_is_that_nodes_vote) {
  world w;
  auto c = w.make_client();
  w.inject_error(0, "SET", "READONLY You can't write against a read only replica.");
  auto r = c->acquire("ro", ttl_of(1s));
  ASSERT_TRUE(r) << r.report.message();
  EXPECT_EQ(r.report.nodes[0].status, node_status::server_error);
  EXPECT_NE(r.report.nodes[0].detail.find("READONLY"), std::string::npos);
  w.inject_error(0, "SET", "");
  ASSERT_TRUE(r.lock.release());
  auto s = c->acquire("ro", ttl_of(1s));
  ASSERT_TRUE(s);
  EXPECT_EQ(s.report.nodes[0].status, node_status::ok);
}

TEST(World, latency_is_the_one_way_delay_of_every_message) {
  world w;
  auto c = w.make_client();
  connected(*c);
  for (std::size_t i = 0; i < w.node_count(); ++i) w.set_node_latency(i, 20'000, 20'000);
  const auto t0 = w.elapsed();
  auto r = c->acquire("l", ttl_of(1s));
  ASSERT_TRUE(r);
  // One round trip of 2 x 20 ms (the command timeout is 50 ms).
  EXPECT_GE(w.elapsed() - t0, 40ms);
  EXPECT_LT(w.elapsed() - t0, 45ms);
}

TEST(World, a_blocking_call_inside_a_callback_would_deadlock) {
  world w;
  std::optional<acquire_result> inner;
  bool done = false;
  auto c = w.make_client();
  c->acquire_async("cb", ttl_of(1s), [&](acquire_result r) {
    EXPECT_TRUE(r);
    inner = c->acquire("other", ttl_of(1s));  // on the loop: refused
    done = true;
  });
  ASSERT_TRUE(w.run_until([&] { return done; }, 1s));
  ASSERT_TRUE(inner);
  EXPECT_EQ(inner->report.error, errc::would_deadlock);
}

}  // namespace
}  // namespace redlock::testing

namespace redlock::testing {
namespace {

// A loop that re-arms a zero-delay timer until a deadline passes ends in the
// simulator as on a machine, where each turn takes time: the watchdog of a lock
// whose every node is down retries its extension, failing at once, with less
// than a millisecond of validity left (found by the harness: seeds froze the
// world at one instant).
TEST(World, a_zero_delay_timer_loop_lets_virtual_time_pass) {
  world w;
  auto c = w.make_client();
  connected(*c);
  int lost = 0;
  acquire_options o = ttl_of(std::chrono::milliseconds(300));
  o.auto_extend = true;
  o.on_lost = [&](const lease&, const report&) { ++lost; };
  auto r = c->acquire("z", o);
  ASSERT_TRUE(r);
  for (std::size_t i = 0; i < w.node_count(); ++i) w.crash_node(i);
  const auto events = w.events_run();
  ASSERT_TRUE(w.run_until([&] { return lost > 0; }, std::chrono::seconds(2)));
  EXPECT_LT(w.events_run() - events, 20'000u);
  EXPECT_FALSE(r.lock.owns_lock());
}

// Waiting without polling (docs/coordination.md): the simulated nodes refuse
// SUBSCRIBE, so a waiting acquire falls back to its retry schedule — and still
// gets the lock once the holder's keys expire.
TEST(World, a_waiting_acquire_falls_back_to_its_timer_when_nodes_refuse_subscribe) {
  world w;
  auto holder = w.make_client();
  auto waiter = w.make_client();
  connected(*holder);
  connected(*waiter);
  auto h = holder->acquire("w", ttl_of(600ms));
  ASSERT_TRUE(h) << h.report.message();
  const auto start = w.elapsed();
  acquire_options o = ttl_of(10s);
  o.retry.max_attempts = 100;
  o.retry.base_delay = 100ms;
  o.retry.max_delay = 100ms;
  o.retry.deadline = 5s;
  auto r = waiter->acquire("w", o);
  ASSERT_TRUE(r) << r.report.message();
  const auto waited = w.elapsed() - start;
  EXPECT_GE(waited, 590ms);
  EXPECT_LT(waited, 900ms);
  EXPECT_GT(r.report.attempts, 3);
  h.lock.detach();
  ASSERT_TRUE(r.lock.release());
}

}  // namespace
}  // namespace redlock::testing
