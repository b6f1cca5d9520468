// A grant counts only once the node's replicas have it (issue 23, docs/design.md
// "Nodes that are whole deployments", item 4): WAIT pipelined behind every write on
// a connection whose writes need their replicas (a cluster shard's or a Sentinel
// group's master). Until those endpoints land, REDLOCK_PREVIEW_CONFIRM_REPLICATION=1
// turns it on for standalone nodes, which is how these tests reach it: a real
// master with a real replica (redis_node --replicaof), the replica SIGSTOPped where
// it must not confirm.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "redis_deployment.h"
#include "test_util.h"

namespace redlock::test {
namespace {

// The preview switch, on for the test's clients (read when a client is made).
struct confirm_replication {
  explicit confirm_replication(bool on = true) {
    if (on) {
      ::setenv("REDLOCK_PREVIEW_CONFIRM_REPLICATION", "1", 1);
    } else {
      ::unsetenv("REDLOCK_PREVIEW_CONFIRM_REPLICATION");
    }
  }
  ~confirm_replication() { ::unsetenv("REDLOCK_PREVIEW_CONFIRM_REPLICATION"); }
  confirm_replication(const confirm_replication&) = delete;
  confirm_replication& operator=(const confirm_replication&) = delete;
};

// A master and one replica of it, the replica's link up and the master counting it
// online (until then WAIT cannot count it: a write waits for it, and fails).
struct replicated_master {
  redis_node master{with_args({"--repl-diskless-sync-delay", "0"})};
  std::unique_ptr<redis_node> replica;

  replicated_master() {
    replica = std::make_unique<redis_node>(
        with_args({"--replicaof", "127.0.0.1", std::to_string(master.port()), "--repl-diskless-sync-delay", "0"}));
    const bool up = eventually(
        [&] {
          return replica->command({"INFO", "replication"}).find("master_link_status:up") != std::string::npos &&
                 master.command({"INFO", "replication"}).find("state=online") != std::string::npos;
        },
        20000ms);
    // Online is not yet streaming: after a diskless sync the master sends the
    // replica commands only once its first ACK came (up to a second later). Ready
    // when a write on one connection is confirmed by WAIT; then the probe key goes.
    const bool streaming = up && eventually(
                                     [&] {
                                       master.command({"SET", "replication-probe", "1"});
                                       return master.command({"WAIT", "1", "200"}) == "1";
                                     },
                                     20000ms);
    if (!streaming) throw std::runtime_error("the replica did not come up: " + replica->log_tail());
    master.command({"DEL", "replication-probe"});
  }

  static node_config with_args(std::vector<std::string> args) {
    node_config c;
    c.extra_args = std::move(args);
    return c;
  }
};

// SIGSTOPs a node for the scope (resumed also on a failed assertion).
struct paused {
  explicit paused(redis_node& n) : node(n) { node.pause(); }
  ~paused() { node.resume(); }
  paused(const paused&) = delete;
  paused& operator=(const paused&) = delete;
  redis_node& node;
};

// A client of `uris` with this command timeout, once every node answers (null if not).
std::unique_ptr<client> connected(const std::vector<std::string>& uris, std::chrono::milliseconds command_timeout) {
  client_options o = options_for(uris);
  o.command_timeout = command_timeout;
  auto c = std::make_unique<client>(o);
  if (!wait_connected(*c)) return nullptr;
  return c;
}

TEST(ReplicationConfirm, a_grant_and_an_extension_count_once_the_replica_has_them) {
  confirm_replication on;
  replicated_master rm;
  // WAIT takes 1 s at most: a loaded machine's replica still answers in time.
  auto c = connected({rm.master.uri()}, 2000ms);
  ASSERT_TRUE(c);
  auto r = c->acquire("confirmed", once(30000ms));
  ASSERT_TRUE(r) << r.report.message();
  // WAIT answered 1: the replica had the key before the acquire returned.
  EXPECT_EQ(rm.replica->get("confirmed"), r.lock.info().token);
  auto e = r.lock.extend(60000ms);
  ASSERT_FALSE(e.error) << e.message();
  EXPECT_GT(rm.replica->pttl("confirmed"), 30000) << "the replica had the extension before extend returned";
  ASSERT_FALSE(r.lock.release().error);
}

TEST(ReplicationConfirm, a_grant_the_replica_did_not_confirm_does_not_count_and_is_rolled_back) {
  confirm_replication on;
  replicated_master rm;
  // WAIT answers at 500 ms, long before the request's deadline.
  auto c = connected({rm.master.uri()}, 1000ms);
  ASSERT_TRUE(c);
  paused stopped(*rm.replica);
  auto r = c->acquire("unconfirmed", once(30000ms));
  ASSERT_FALSE(r) << "a grant its replica never had counted";
  EXPECT_NE(r.report.message().find("confirmed by 0 of its 1 replicas"), std::string::npos) << r.report.message();
  // The master ran the SET: the rollback deletes the key there.
  EXPECT_TRUE(eventually([&] { return !rm.master.get("unconfirmed").has_value(); }, 5000ms))
      << "the unconfirmed grant was left on the master";
}

// The negative control: without confirmation, the same grant counts although the
// replica (the one a failover would promote) never had it.
TEST(ReplicationConfirm, negative_control_without_confirmation_the_unreplicated_grant_counts) {
  confirm_replication off(false);
  replicated_master rm;
  auto c = connected({rm.master.uri()}, 300ms);
  ASSERT_TRUE(c);
  paused stopped(*rm.replica);
  auto r = c->acquire("unconfirmed", once(30000ms));
  ASSERT_TRUE(r) << r.report.message();
  ASSERT_FALSE(r.lock.release().error);
}

TEST(ReplicationConfirm, an_unconfirmed_extension_does_not_extend_and_does_not_lose_the_lock) {
  confirm_replication on;
  replicated_master rm;
  // WAIT takes 500 ms at most: a loaded machine's replica answers in time.
  auto c = connected({rm.master.uri()}, 1000ms);
  ASSERT_TRUE(c);
  auto r = c->acquire("extend-unconfirmed", once(20000ms));
  ASSERT_TRUE(r) << r.report.message();
  paused stopped(*rm.replica);
  const auto before = r.lock.remaining_validity();
  auto e = r.lock.extend(60000ms);
  EXPECT_TRUE(e.error) << "an extension its replica never had extended the validity";
  EXPECT_NE(e.error, errc::lock_lost) << e.message() << ": the replica still has the old expiry";
  EXPECT_GT(r.lock.remaining_validity().count(), 0);
  EXPECT_LE(r.lock.remaining_validity(), before);
}

TEST(ReplicationConfirm, in_a_quorum_the_unconfirmed_node_is_not_counted) {
  confirm_replication on;
  replicated_master rm;
  redis_node plain1, plain2;  // no replica: nothing to wait for there
  auto c = connected({rm.master.uri(), plain1.uri(), plain2.uri()}, 300ms);
  ASSERT_TRUE(c);
  paused stopped(*rm.replica);
  auto r = c->acquire("outvoted", once(30000ms));
  ASSERT_TRUE(r) << r.report.message();
  // Decided by the two plain nodes; the replicated master's vote, still waiting for
  // its replica then, never counts.
  EXPECT_EQ(r.report.count(node_status::ok), 2) << r.report.message();
  EXPECT_NE(r.report.nodes.at(0).status, node_status::ok) << r.report.message();
  // Its key there is this owner's all the same: the release deletes it with the others.
  ASSERT_FALSE(r.lock.release().error);
  EXPECT_TRUE(eventually([&] { return !rm.master.get("outvoted").has_value(); }, 5000ms))
      << "the release left the key on the replicated master";
}

TEST(ReplicationConfirm, a_replica_given_as_the_node_is_never_a_vote) {
  confirm_replication on;
  replicated_master rm;
  client c(options_for({rm.replica->uri()}));
  auto r = c.acquire("on-a-replica", once(10000ms));
  ASSERT_FALSE(r);
  EXPECT_NE(r.report.message().find("READONLY"), std::string::npos) << r.report.message();
  EXPECT_FALSE(rm.master.get("on-a-replica").has_value());
  // A writable replica (replica-read-only no) grants, but that grant is never a vote
  // (no failover keeps it), and the failed acquire's rollback deletes it there.
  rm.replica->command({"CONFIG", "SET", "replica-read-only", "no"});
  auto w = c.acquire("on-a-writable-replica", once(10000ms));
  ASSERT_FALSE(w) << "a writable replica's grant counted";
  EXPECT_NE(w.report.message().find("the server is a replica (of 127.0.0.1:" + std::to_string(rm.master.port())),
            std::string::npos)
      << w.report.message();
  EXPECT_TRUE(eventually([&] { return !rm.replica->get("on-a-writable-replica").has_value(); }, 5000ms))
      << "the writable replica's grant was left there";
}

}  // namespace
}  // namespace redlock::test
