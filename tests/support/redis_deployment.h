// Test harness: whole Redis deployments as one Redlock node (issue 23). A real
// Redis Cluster of redis_node processes (--cluster-enabled yes) on loopback, made
// by `redis-cli --cluster create`, started and stopped by the test (the nodes are
// redis_node children: killed by PID, directories removed).
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "redis_node.h"

namespace redlock::test {

struct reply_free {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using owned_reply = std::unique_ptr<redisReply, reply_free>;

// One command on a fresh hiredis connection to 127.0.0.1:port (AUTH first when
// `password` is set); the raw reply, never null. Throws std::runtime_error when the
// node cannot be reached. For tests that parse replies the way the library does.
owned_reply raw_command(int port, const std::vector<std::string>& argv, const std::string& password = "");

// Runs argv (PATH lookup) with stdout and stderr to `log`, waiting at most
// `timeout` (then SIGKILL). Returns the exit status (128 + N if killed by N).
int run_program(const std::vector<std::string>& argv, const std::string& log, std::chrono::milliseconds timeout);

class redis_cluster_deployment {
 public:
  // masters * (1 + replicas_per_master) nodes, each on a free port with a free
  // cluster-bus port, joined by `redis-cli --cluster create --cluster-replicas R`;
  // returns once every node reports cluster_state:ok, every slot assigned and every
  // node known (<= 60 s, else std::runtime_error with redis-cli's output).
  // cluster-node-timeout is `node_timeout` (failovers happen within a few of it).
  redis_cluster_deployment(int masters, int replicas_per_master, node_config cfg = {},
                           std::chrono::milliseconds node_timeout = std::chrono::milliseconds(1000));

  std::size_t size() const { return nodes_.size(); }
  redis_node& operator[](std::size_t i) { return *nodes_.at(i); }
  // redis+cluster://127.0.0.1:<port of node 0> (password included, as redis_node::uri).
  std::string uri() const;
  // The node that CLUSTER SHARDS (asked of node `via`) names master of `slot`; -1 if none.
  int master_of(int slot, std::size_t via = 0);
  // The nodes replicating node `master` (by CLUSTER SHARDS, asked of `via`).
  std::vector<std::size_t> replicas_of(std::size_t master, std::size_t via = 0);
  // Index of the node listening on `port`; -1 if none.
  int index_of_port(int port) const;
  // Waits (<= timeout) until every running, unpaused node reports cluster_state:ok.
  bool wait_ok(std::chrono::milliseconds timeout);

 private:
  node_config cfg_;
  std::vector<std::unique_ptr<redis_node>> nodes_;
};

}  // namespace redlock::test
