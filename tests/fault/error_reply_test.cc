// Scenario 10: error replies, one node misbehaving at a time. Each case asserts
// what real Redis 7 does (checked by hand first: OOM refuses the SET inside the
// acquire script but not PEXPIRE or DEL; a replica refuses the SET with READONLY;
// a user without +eval gets NOPERM; a cluster node answers MOVED):
//  - SCRIPT FLUSH on random nodes while clients contend: NOSCRIPT is recovered by
//    resending the body; no operation fails, no overlap.
//  - REPLICAOF (demotion): that node votes server_error (READONLY); acquire
//    succeeds with the other four; REPLICAOF NO ONE brings its vote back.
//  - maxmemory 1 + noeviction (OOM): acquire gets server_error (OOM) there; extend
//    and release of a lock taken before still work on that node.
//  - wrong password: auth_error; ACL user without EVAL: server_error (NOPERM); the password appears in
//    no message, no script ever runs on that node (not even as the default user,
//    who needs no password there), and with every node refusing, the acquire fails
//    auth_failed after one attempt.
//  - a cluster-mode node: MOVED is a server_error vote, never followed.
//  - non-Redis listeners (banner + garbage, silent, hang-up, random bytes) and a
//    lying server that passes the handshake and then answers with random RESP:
//    node errors, no crash, no hang.
//  - a server before 7.0 (a proxy refusing SET ... NX ... GET): the acquire
//    falls back to the Lua script and behaves the same.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "fake_listener.h"
#include "fault_util.h"
#include "noise_server.h"

namespace redlock::test {
namespace {

bool status_is(const report& r, std::size_t node, std::initializer_list<node_status> allowed) {
  for (node_status s : allowed) {
    if (r.nodes.at(node).status == s) return true;
  }
  return false;
}

// The vote of node `k` when it decides the outcome: two other nodes (`hold`) hold
// a foreign key, so with `k` misbehaving no quorum is possible before `k` answers
// and the round waits for its vote (an ordinary acquire is decided by the first
// three grants, and a slow misbehaving node's vote may still be pending).
node_result decisive_vote(client& c, const std::string& res, std::vector<redis_node*> hold, std::size_t k) {
  for (redis_node* n : hold) n->command({"SET", res, "foreign", "PX", "30000"});
  auto r = c.acquire(res, once());
  for (redis_node* n : hold) n->command({"DEL", res});
  EXPECT_FALSE(r) << "with two nodes held and one misbehaving, no quorum is possible";
  return r.report.nodes.at(k);
}

TEST(ErrorReplies, script_flush_mid_run_is_recovered_with_no_failed_operation) {
  redis_cluster nodes(5);
  constexpr int kClients = 4;
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < kClients; ++i)
    clients.push_back(std::make_unique<client>(scenario_options(nodes.uris())));
  for (auto& c : clients) ASSERT_TRUE(wait_connected(*c));
  // A watchdog-extended lock on another resource: extends go through EVALSHA too.
  acquire_options wd = once(600ms);
  wd.auto_extend = true;
  wd.extend_interval = 100ms;
  auto watched = clients[0]->acquire("flush-watched", wd);
  ASSERT_TRUE(watched) << watched.report.message();

  figures fig;
  fig.scenario = "error_script_flush";
  history h;
  std::uint64_t bad = 0, release_failures = 0;
  std::mt19937 rng(1);
  fig.runs = repeat_for_soak([&](int round) {
    std::atomic<bool> stop{false};
    std::vector<workload_result> results(kClients);
    std::vector<std::thread> threads;
    const auto until = steady::now() + 3000ms;
    for (int i = 0; i < kClients; ++i) {
      threads.emplace_back([&, i] {
        workload w;
        w.resource = "flush-" + std::to_string(round);
        w.owner = "c" + std::to_string(i);
        results[static_cast<std::size_t>(i)] =
            run_workload(*clients[static_cast<std::size_t>(i)], w, h, stop, until, /*keep_log=*/true);
      });
    }
    while (steady::now() < until) {
      EXPECT_EQ(nodes[rng() % 5].command({"SCRIPT", "FLUSH"}), "OK");
      ++fig.faults;
      std::this_thread::sleep_for(30ms);
    }
    for (auto& t : threads) t.join();
    for (const auto& r : results) {
      fig.operations += r.attempts;
      release_failures += r.release_failures;
      for (const auto& e : r.release_errors) ADD_FAILURE() << "release failed: " << e;
      for (const attempt& at : r.log) {
        if (!at.error.empty() && at.error != "contended") {
          ++bad;
          ADD_FAILURE() << "attempt failed: " << at.message;
        }
      }
    }
  });
  EXPECT_TRUE(watched.lock.owns_lock());
  EXPECT_FALSE(watched.lock.lost()) << "the watchdog lost its lock across SCRIPT FLUSH";
  EXPECT_TRUE(watched.lock.release());
  const auto overlaps = check_mutual_exclusion(h.grants());
  EXPECT_TRUE(overlaps.empty());
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(release_failures, 0u);
  EXPECT_GT(h.grants().size(), 20u);
  fig.violations = overlaps.size() + bad + release_failures;
  fig.extra = "grants=" + std::to_string(h.grants().size()) +
              " watchdog_extends=" + std::to_string(clients[0]->stats().extends);
  fig.publish();
}

TEST(ErrorReplies, replica_demotion_votes_server_error_readonly_and_recovers) {
  redis_cluster nodes(5);
  redis_node master;  // outside the lock's nodes: a sync must not copy lock keys around
  client c(scenario_options(nodes.uris()));
  ASSERT_TRUE(wait_connected(c));
  figures fig;
  fig.scenario = "error_replica_demotion";
  int readonly_seen = 0;
  fig.runs = repeat_for_soak([&](int round) {
    const std::size_t k = static_cast<std::size_t>(round) % 5;
    ASSERT_EQ(nodes[k].command({"REPLICAOF", "127.0.0.1", std::to_string(master.port())}), "OK");
    ++fig.faults;
    for (int i = 0; i < 10; ++i) {
      const std::string res = "demoted-" + std::to_string(round) + "-" + std::to_string(i);
      auto r = c.acquire(res, once());
      ++fig.operations;
      ASSERT_TRUE(r) << r.report.message();
      EXPECT_TRUE(status_is(r.report, k, {node_status::server_error, node_status::pending}))
          << r.report.message();
      if (r.report.nodes[k].status == node_status::server_error) {
        EXPECT_NE(r.report.nodes[k].detail.find("READONLY"), std::string::npos) << r.report.nodes[k].detail;
        ++readonly_seen;
      }
      EXPECT_FALSE(nodes[k].exists(res));
      const report rel = r.lock.release();
      ++fig.operations;
      EXPECT_TRUE(rel) << rel.message();
    }
    const node_result v = decisive_vote(c, "demoted-decisive-" + std::to_string(round),
                                        {&nodes[(k + 1) % 5], &nodes[(k + 2) % 5]}, k);
    EXPECT_EQ(v.status, node_status::server_error) << v.detail;
    EXPECT_NE(v.detail.find("READONLY"), std::string::npos) << v.detail;
    ++fig.operations;
    ASSERT_EQ(nodes[k].command({"REPLICAOF", "NO", "ONE"}), "OK");
    auto back = c.acquire("promoted-" + std::to_string(round), once());
    ++fig.operations;
    ASSERT_TRUE(back) << back.report.message();
    const std::string token = back.lock.info().token;
    EXPECT_TRUE(eventually([&] {
      return nodes.count_value("promoted-" + std::to_string(round), token) == 5;
    })) << "the promoted node does not take the lock again";
    EXPECT_TRUE(back.lock.release());
  });
  fig.extra = "readonly_votes=" + std::to_string(readonly_seen);
  fig.publish();
}

TEST(ErrorReplies, maxmemory_oom_refuses_acquire_but_extend_and_release_still_work) {
  redis_cluster nodes(5);
  client c(scenario_options(nodes.uris()));
  ASSERT_TRUE(wait_connected(c));
  figures fig;
  fig.scenario = "error_oom";
  int oom_seen = 0;
  fig.runs = repeat_for_soak([&](int round) {
    const std::size_t k = static_cast<std::size_t>(round) % 5;
    const std::string filler(1000, 'x');
    for (int i = 0; i < 200; ++i) nodes[k].command({"SET", "fill-" + std::to_string(i), filler});
    const std::string held_res = "oom-held-" + std::to_string(round);
    auto held = c.acquire(held_res, once(10000ms));
    ASSERT_TRUE(held) << held.report.message();
    ASSERT_TRUE(eventually([&] { return nodes[k].exists(held_res); }));
    ASSERT_EQ(nodes[k].command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}), "OK");
    ASSERT_EQ(nodes[k].command({"CONFIG", "SET", "maxmemory", "1"}), "OK");
    ++fig.faults;
    for (int i = 0; i < 10; ++i) {
      const std::string res = "oom-" + std::to_string(round) + "-" + std::to_string(i);
      auto r = c.acquire(res, once());
      ++fig.operations;
      ASSERT_TRUE(r) << r.report.message();
      EXPECT_TRUE(status_is(r.report, k, {node_status::server_error, node_status::pending}))
          << r.report.message();
      if (r.report.nodes[k].status == node_status::server_error) {
        EXPECT_EQ(r.report.nodes[k].detail.rfind("OOM", 0), 0u) << r.report.nodes[k].detail;
        ++oom_seen;
      }
      EXPECT_FALSE(nodes[k].exists(res));
      EXPECT_TRUE(r.lock.release());
      ++fig.operations;
    }
    const node_result v = decisive_vote(c, "oom-decisive-" + std::to_string(round),
                                        {&nodes[(k + 1) % 5], &nodes[(k + 2) % 5]}, k);
    EXPECT_EQ(v.status, node_status::server_error) << v.detail;
    EXPECT_EQ(v.detail.rfind("OOM", 0), 0u) << v.detail;
    ++fig.operations;
    // Extend (PEXPIRE) and release (DEL) do not grow memory: Redis allows them.
    const report ext = held.lock.extend(30000ms);
    ++fig.operations;
    EXPECT_TRUE(ext) << ext.message();
    EXPECT_TRUE(eventually([&] { return nodes[k].pttl(held_res) > 20000; }))
        << "extend did not reach the OOM node: pttl " << nodes[k].pttl(held_res);
    const report rel = held.lock.release();
    ++fig.operations;
    EXPECT_TRUE(rel) << rel.message();
    EXPECT_TRUE(eventually([&] { return !nodes[k].exists(held_res); }))
        << "release did not reach the OOM node";
    ASSERT_EQ(nodes[k].command({"CONFIG", "SET", "maxmemory", "0"}), "OK");
  });
  fig.extra = "oom_votes=" + std::to_string(oom_seen);
  fig.publish();
}

TEST(ErrorReplies, wrong_password_is_auth_error_never_the_default_user) {
  // Node 4 has an ACL user alice; its default user needs no password, so a client
  // that fell back to it after a refused AUTH could run scripts there.
  redis_cluster nodes(4);
  node_config acl;
  acl.acl_users = {"user alice on >alice-pw ~* &* +@all"};
  redis_node guarded(acl);
  std::vector<std::string> uris = nodes.uris();
  uris.push_back("redis://alice:wrong-secret@127.0.0.1:" + std::to_string(guarded.port()));
  client c(scenario_options(uris));
  figures fig;
  fig.scenario = "error_wrong_password";
  fig.runs = repeat_for_soak([&](int round) {
    for (int i = 0; i < 10; ++i) {
      const std::string res = "auth-" + std::to_string(round) + "-" + std::to_string(i);
      auto r = c.acquire(res, once());
      ++fig.operations;
      ++fig.faults;
      ASSERT_TRUE(r) << r.report.message();
      EXPECT_TRUE(status_is(r.report, 4, {node_status::auth_error, node_status::pending}))
          << r.report.message();
      EXPECT_EQ(r.report.message().find("wrong-secret"), std::string::npos) << r.report.message();
      EXPECT_EQ(r.report.nodes[4].detail.find("wrong-secret"), std::string::npos);
      EXPECT_TRUE(r.lock.release());
      std::this_thread::sleep_for(20ms);
    }
  });
  const node_result v = decisive_vote(c, "auth-decisive", {&nodes[0], &nodes[1]}, 4);
  EXPECT_EQ(v.status, node_status::auth_error) << v.detail;
  EXPECT_EQ(v.detail.find("wrong-secret"), std::string::npos) << v.detail;
  EXPECT_EQ(
      guarded.calls("set") + guarded.calls("eval") + guarded.calls("evalsha"), 0)
      << "a script ran on the node whose AUTH failed";
  fig.publish();
}

TEST(ErrorReplies, every_node_refusing_auth_fails_auth_failed_after_one_attempt) {
  node_config cfg;
  cfg.password = "right-pw";
  redis_cluster nodes(3, cfg);
  std::vector<std::string> uris;
  for (std::size_t i = 0; i < 3; ++i)
    uris.push_back("redis://:wrong-pw-123@127.0.0.1:" + std::to_string(nodes[i].port()));
  client c(scenario_options(uris));
  acquire_options o;
  o.ttl = 5000ms;
  o.retry.max_attempts = 3;
  o.retry.base_delay = 10ms;
  auto r = c.acquire("auth-all", o);
  EXPECT_EQ(r.report.error, errc::auth_failed) << r.report.message();
  EXPECT_EQ(r.report.attempts, 1) << "auth_failed must not be retried";
  EXPECT_EQ(r.report.message().find("wrong-pw-123"), std::string::npos) << r.report.message();
  for (const auto& n : r.report.nodes) EXPECT_EQ(n.node.find("wrong-pw-123"), std::string::npos) << n.node;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(nodes[i].calls("set") + nodes[i].calls("eval"), 0);
  }
  figures fig{"error_auth_all_nodes", 1, 1, 3, 0, ""};
  fig.publish();
}

TEST(ErrorReplies, acl_user_without_eval_gets_noperm_and_stays_that_user) {
  redis_cluster nodes(4);
  node_config acl;
  // Without the commands the library sends to take a lock (SET, or EVAL/EVALSHA).
  acl.acl_users = {"user limited on >limited-pw ~* &* +@all -set -eval -evalsha -eval_ro -evalsha_ro"};
  redis_node limited(acl);
  std::vector<std::string> uris = nodes.uris();
  uris.push_back("redis://limited:limited-pw@127.0.0.1:" + std::to_string(limited.port()));
  client c(scenario_options(uris));
  ASSERT_TRUE(eventually([&] {
    return limited.command({"CLIENT", "LIST"}).find("user=limited") != std::string::npos;
  }));
  figures fig;
  fig.scenario = "error_acl_noperm";
  int noperm_seen = 0;
  fig.runs = repeat_for_soak([&](int round) {
    for (int i = 0; i < 10; ++i) {
      const std::string res = "noperm-" + std::to_string(round) + "-" + std::to_string(i);
      auto r = c.acquire(res, once());
      ++fig.operations;
      ++fig.faults;
      ASSERT_TRUE(r) << r.report.message();
      // An ACL refusal of an authenticated user: a server error naming NOPERM, not
      // an authentication refusal. Once a release's EVAL was refused there (NOPERM
      // naming eval), the node votes on no acquire until it reconnects: excluded.
      EXPECT_TRUE(status_is(r.report, 4, {node_status::server_error, node_status::excluded, node_status::pending}))
          << r.report.message();
      if (r.report.nodes[4].status == node_status::server_error) {
        EXPECT_EQ(r.report.nodes[4].detail.rfind("NOPERM", 0), 0u) << r.report.nodes[4].detail;
        ++noperm_seen;
      } else if (r.report.nodes[4].status == node_status::excluded) {
        EXPECT_NE(r.report.nodes[4].detail.find("refused by the user's ACL"), std::string::npos)
            << r.report.nodes[4].detail;
      }
      EXPECT_EQ(r.report.message().find("limited-pw"), std::string::npos);
      EXPECT_TRUE(r.lock.release());
    }
  });
  // Every connection of the client is the configured user; no script ever ran.
  const std::string clients = limited.command({"CLIENT", "LIST"});
  std::size_t pos = 0;
  int lines = 0, as_limited = 0;
  while ((pos = clients.find("id=", pos)) != std::string::npos) {
    ++lines;
    auto end = clients.find("id=", pos + 3);
    const std::string line = clients.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (line.find("user=limited") != std::string::npos) ++as_limited;
    pos += 3;
  }
  EXPECT_EQ(as_limited, lines - 1) << clients;  // all but this helper's own connection
  EXPECT_EQ(
      limited.calls("set") + limited.calls("eval") + limited.calls("evalsha"), 0);
  // By now a release's EVAL was refused there: the decisive vote is the exclusion.
  const node_result v = decisive_vote(c, "noperm-decisive", {&nodes[0], &nodes[1]}, 4);
  EXPECT_EQ(v.status, node_status::excluded) << v.detail;
  EXPECT_NE(v.detail.find("refused by the user's ACL"), std::string::npos) << v.detail;
  fig.extra = "noperm_votes=" + std::to_string(noperm_seen);
  fig.publish();
}

TEST(ErrorReplies, cluster_mode_node_moved_is_an_error_vote_never_followed) {
  redis_cluster nodes(4);
  // The bus port is set explicitly: port + 10000 may not exist for an ephemeral port.
  auto cluster_cfg = [](int bus_port) {
    node_config cfg;
    cfg.extra_args = {"--cluster-enabled",     "yes",       "--cluster-port", std::to_string(bus_port),
                      "--cluster-config-file", "nodes.conf"};
    return cfg;
  };
  const int owner_bus = free_port();
  redis_node mover(cluster_cfg(free_port()));  // in the lock's node list; owns no slot
  redis_node owner(cluster_cfg(owner_bus));    // owns every slot; not in the lock's node list
  ASSERT_EQ(owner.command({"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}), "OK");
  ASSERT_EQ(mover.command(
                {"CLUSTER", "MEET", "127.0.0.1", std::to_string(owner.port()), std::to_string(owner_bus)}),
            "OK");
  ASSERT_TRUE(eventually(
      [&] {
        return mover.command({"GET", "probe"}).rfind("(error) MOVED", 0) == 0;
      },
      15000ms))
      << mover.command({"GET", "probe"});
  std::vector<std::string> uris = nodes.uris();
  uris.push_back(mover.uri());
  client c(scenario_options(uris));
  figures fig;
  fig.scenario = "error_cluster_moved";
  int moved_seen = 0;
  fig.runs = repeat_for_soak([&](int round) {
    for (int i = 0; i < 10; ++i) {
      const std::string res = "moved-" + std::to_string(round) + "-" + std::to_string(i);
      auto r = c.acquire(res, once());
      ++fig.operations;
      ++fig.faults;
      ASSERT_TRUE(r) << r.report.message();
      EXPECT_TRUE(status_is(r.report, 4, {node_status::server_error, node_status::pending}))
          << r.report.message();
      if (r.report.nodes[4].status == node_status::server_error) {
        EXPECT_EQ(r.report.nodes[4].detail.rfind("MOVED", 0), 0u) << r.report.nodes[4].detail;
        ++moved_seen;
      }
      EXPECT_TRUE(r.lock.release());
      EXPECT_EQ(owner.dbsize(), 0) << "the redirection was followed";
    }
  });
  const node_result v = decisive_vote(c, "moved-decisive", {&nodes[0], &nodes[1]}, 4);
  EXPECT_EQ(v.status, node_status::server_error) << v.detail;
  EXPECT_EQ(v.detail.rfind("MOVED", 0), 0u) << v.detail;
  EXPECT_EQ(owner.dbsize(), 0) << "the redirection was followed";
  fig.extra = "moved_votes=" + std::to_string(moved_seen);
  fig.publish();
}

TEST(ErrorReplies, non_redis_listeners_are_node_errors_not_crashes) {
  redis_cluster nodes(4);
  figures fig;
  fig.scenario = "error_non_redis_listener";
  fig.runs = repeat_for_soak([&](int round) {
    std::vector<std::unique_ptr<fake_listener>> fakes;
    fakes.push_back(std::make_unique<fake_listener>(fake_listener::mode::garbage));
    fakes.push_back(std::make_unique<fake_listener>(fake_listener::mode::silent));
    fakes.push_back(std::make_unique<fake_listener>(fake_listener::mode::close));
    noise_server noise(static_cast<std::uint32_t>(round) + 7u, /*handshake=*/false);
    std::vector<std::string> odd = {fakes[0]->uri(), fakes[1]->uri(), fakes[2]->uri(), noise.uri()};
    for (const std::string& bad : odd) {
      std::vector<std::string> uris = nodes.uris();
      uris.push_back(bad);
      client c(scenario_options(uris));
      for (int i = 0; i < 10; ++i) {
        auto r = c.acquire("odd-" + std::to_string(round) + "-" + std::to_string(i), once());
        ++fig.operations;
        ASSERT_TRUE(r) << bad << ": " << r.report.message();
        EXPECT_TRUE(status_is(r.report, 4,
                              {node_status::protocol_error, node_status::connection_error,
                               node_status::timeout, node_status::pending}))
            << r.report.message();
        EXPECT_TRUE(r.lock.release());
      }
      ++fig.faults;
    }
    // All of them at once, and a real node: no quorum, and a prompt answer.
    std::vector<std::string> uris = odd;
    uris.push_back(nodes[0].uri());
    client c(scenario_options(uris));
    const auto t0 = steady::now();
    auto r = c.acquire("odd-all", once());
    EXPECT_EQ(r.report.error, errc::unavailable) << r.report.message();
    EXPECT_LT(steady::now() - t0, 2000ms);
  });
  fig.publish();
}

TEST(ErrorReplies, lying_server_random_replies_never_crash_or_hang) {
  redis_cluster nodes(4);
  figures fig;
  fig.scenario = "error_lying_server";
  std::uint64_t noise_replies = 0, by_status[16] = {};
  fig.runs = repeat_for_soak([&](int round) {
    noise_server liar(static_cast<std::uint32_t>(round) * 31u + 5u);
    std::vector<std::string> uris = nodes.uris();
    uris.push_back(liar.uri());
    client c(scenario_options(uris));
    acquire_options fenced = once();
    fenced.fencing = true;
    for (int i = 0; i < 150; ++i) {
      const std::string res = "lie-" + std::to_string(round) + "-" + std::to_string(i);
      auto r = c.acquire(res, i % 3 == 0 ? fenced : once());
      ++fig.operations;
      ASSERT_EQ(r.report.nodes.size(), 5u);
      ++by_status[static_cast<int>(r.report.nodes[4].status) & 15];
      if (r) {
        (void)r.lock.extend(5000ms);
        (void)c.inspect(res);
        (void)r.lock.release();
        fig.operations += 3;
      }
    }
    noise_replies += liar.noise_replies();
    fig.faults += liar.noise_replies();
  });
  // Five liars and nothing else: any outcome, but every call returns.
  std::vector<std::unique_ptr<noise_server>> liars;
  std::vector<std::string> uris;
  for (std::uint32_t i = 0; i < 5; ++i) {
    liars.push_back(std::make_unique<noise_server>(100u + i));
    uris.push_back(liars.back()->uri());
  }
  {
    client c(scenario_options(uris));
    for (int i = 0; i < 100; ++i) {
      auto r = c.acquire("all-lies-" + std::to_string(i), once());
      ++fig.operations;
      if (r) (void)r.lock.release();
    }
  }
  std::string statuses;
  for (int s = 0; s < 16; ++s) {
    if (by_status[s] != 0) {
      statuses += std::string(statuses.empty() ? "" : ",") + to_string(static_cast<node_status>(s)) + ":" +
                  std::to_string(by_status[s]);
    }
  }
  fig.extra = "noise_replies=" + std::to_string(noise_replies) + " liar_votes=" + statuses;
  fig.publish();
}

TEST(ErrorReplies, a_server_before_7_0_refusing_set_nx_get_gets_the_lua_acquire_script) {
  // Real Redis 7.0 nodes behind proxies that refuse SET ... NX ... GET the way
  // servers before 7.0 do ("ERR syntax error"): the first acquire on each
  // connection (with its pipelined TIME) falls back to the acquire script, and
  // later ones use the script directly.
  redis_cluster nodes(3);
  std::vector<std::unique_ptr<noise_server>> old;
  std::vector<std::string> uris;
  for (std::size_t i = 0; i < 3; ++i) {
    old.push_back(std::make_unique<noise_server>(noise_server::pre_7_0{nodes[i].port()}));
    uris.push_back(old.back()->uri());
  }
  client a(scenario_options(uris));
  client b(scenario_options(uris));
  for (int i = 0; i < 5; ++i) {
    const std::string res = "pre7-" + std::to_string(i);
    auto r = a.acquire(res, once());
    ASSERT_TRUE(r) << r.report.message();
    const std::string token = r.lock.info().token;
    EXPECT_TRUE(eventually([&] { return nodes.count_value(res, token) == 3; }));
    auto rival = b.acquire(res, once());
    EXPECT_EQ(rival.report.error, errc::contended) << rival.report.message();
    EXPECT_TRUE(r.lock.release());
    EXPECT_TRUE(eventually([&] { return nodes.count_key(res) == 0; }));
  }
  acquire_options fenced = once();
  fenced.fencing = true;
  auto f = b.acquire("pre7-fenced", fenced);
  ASSERT_TRUE(f) << f.report.message();
  EXPECT_TRUE(f.lock.fence().has_value());
  EXPECT_TRUE(f.lock.release());
  for (std::size_t i = 0; i < 3; ++i) {
    // One refusal per client connection; every acquire after it ran the script.
    // (Calls return at the quorum: the last node may still be catching up.)
    EXPECT_TRUE(eventually([&] { return nodes[i].calls("eval") >= 10; })) << "node " << i;
    EXPECT_EQ(old[i]->refused_set_get(), 2u) << "node " << i;
  }
}

}  // namespace
}  // namespace redlock::test
