// Test harness: whole Redis deployments as one Redlock node (issue 23), on loopback,
// started and stopped by the test (every process is a child of the test process,
// stopped by PID; directories removed):
//   - a real Redis Cluster of redis_node processes (--cluster-enabled yes), made by
//     `redis-cli --cluster create`;
//   - a real Sentinel group: a master and its replicas (redis_node processes) and
//     Sentinel processes (`redis-server sentinel.conf --sentinel`) that monitor it.
//
// Thread safety: one thread uses a deployment (the redis_node helpers it hands out
// are thread-safe, see redis_node.h).
#pragma once

#include <hiredis/hiredis.h>
#include <sys/types.h>

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
// GET `key` on server `n` (a replica answers too: not a cluster node): its value,
// "<nil>" when absent, "<ERROR TEXT>" for an error reply, "<unreachable: ...>".
std::string value_on(redis_node& n, const std::string& key);
// The same for the server on `port` (AUTH with `password` first, if any).
std::string value_at(int port, const std::string& key, const std::string& password = "");
// GET `key` on a cluster replica: READONLY first on the same connection (else it
// redirects). "<cannot connect>", "<no reply>" or "<other>" when it is not a value.
std::string value_on_replica(int port, const std::string& key);
// ROLE on `port` says master (false when it cannot be asked).
bool is_master_at(int port);
// INFO replication of `port` on one line (line breaks as " | "), or why it failed.
std::string replication_info(int port);

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

// One Sentinel process: `<server> <dir>/sentinel.conf --sentinel` on a free port of
// 127.0.0.1, in its own directory (sentinel.conf, which Sentinel rewrites, and
// sentinel.log). Without a password.
class sentinel_node {
 public:
  // Writes sentinel.conf (port, bind 127.0.0.1, dir, logfile, then `config_lines`
  // in order, e.g. "sentinel monitor NAME 127.0.0.1 PORT 2"), starts the server and
  // waits (<= 20 s) until it answers INFO with its own pid; a start that lost its
  // port to another process is retried on a new one (up to 5 attempts). Throws
  // std::runtime_error with the log tail on failure (the process is stopped then).
  sentinel_node(const std::string& server, const std::vector<std::string>& config_lines);
  // stop(), remove the directory. Never throws.
  ~sentinel_node();
  sentinel_node(const sentinel_node&) = delete;
  sentinel_node& operator=(const sentinel_node&) = delete;

  int port() const { return port_; }
  // The process id, -1 once stopped (or exited).
  pid_t pid() const;
  bool running() const;
  std::string dir() const { return dir_; }
  // The last lines of sentinel.log and of its stdout/stderr.
  std::string log_tail(std::size_t max_lines = 30) const;
  // SIGTERM, up to 5 s, then SIGKILL. No-op once stopped.
  void stop() noexcept;

 private:
  std::string dir_;
  int port_ = 0;
  mutable pid_t pid_ = -1;
};

class redis_sentinel_deployment {
 public:
  // One master and `replicas` replicas (redis_node processes with `cfg`; the replicas
  // started with --replicaof the master; every server gets --masterauth when cfg has
  // a password, so any of them can follow another after a failover; all with
  // --repl-diskless-sync-delay 0: a full sync starts at once) and `sentinels`
  // Sentinel processes monitoring the master as `master_name`, with quorum
  // sentinels/2+1, down-after-milliseconds `down_after`, failover-timeout 5 s,
  // parallel-syncs 1 and `sentinel auth-pass` with cfg's password. The sentinels'
  // periodic timers are shortened with SENTINEL DEBUG (hello every 250 ms, INFO
  // every 500 ms: they find each other, the replicas and a promoted replica within
  // about a second, and turn a master that a failover left behind into a replica
  // about a second after it) and TILT needs a 5 s timer stall (a loaded machine
  // must not freeze them for the default 30 s of TILT).
  // Returns once every replica reports master_link_status:up and every sentinel
  // names the master, lists every replica (flags "slave", link ok) and every other
  // sentinel; within 30 s, else std::runtime_error with what was missing and the
  // sentinels' log tails (never a password). On any failure every process already
  // started is stopped and its directory removed. std::invalid_argument for
  // replicas < 0, sentinels < 1, a master name that is empty or has characters
  // other than letters, digits and "-_.", or cfg.tls (not supported).
  redis_sentinel_deployment(std::string master_name, int replicas, int sentinels, node_config cfg = {},
                            std::chrono::milliseconds down_after = std::chrono::milliseconds(1000));
  // Stops the sentinels (first, so none reacts to the servers going), then the servers.
  ~redis_sentinel_deployment() = default;
  redis_sentinel_deployment(const redis_sentinel_deployment&) = delete;
  redis_sentinel_deployment& operator=(const redis_sentinel_deployment&) = delete;

  const std::string& master_name() const { return name_; }
  // redis+sentinel://[:PASSWORD@]127.0.0.1:<sentinel 0>/NAME[?seed=127.0.0.1:<sentinel 1>&seed=...]
  // (the servers' password, not percent-encoded, as redis_node::uri).
  std::string uri() const;
  // The servers: index 0 is the first master, 1.. the replicas it started with.
  std::size_t server_count() const { return servers_.size(); }
  redis_node& server(std::size_t i) { return *servers_.at(i); }
  std::size_t sentinel_count() const { return sentinels_.size(); }
  sentinel_node& sentinel(std::size_t i) { return *sentinels_.at(i); }
  int sentinel_port(std::size_t i) const { return sentinels_.at(i)->port(); }
  // Index of the server listening on `port`; -1 if none.
  int index_of_port(int port) const;
  // The server whose INFO replication says role:master (running, unpaused servers
  // that answer); -1 if none does, or more than one (just after a failover the old
  // master says master until Sentinel turns it into a replica).
  int master_index();
  // The master's port as sentinel `i` names it (SENTINEL GET-MASTER-ADDR-BY-NAME,
  // read by the harness itself); 0 when it names none or cannot be reached.
  int named_master_port(std::size_t i);
  // SENTINEL FAILOVER NAME through sentinel `via`: a failover without agreement, the
  // master stays up. Retries while the sentinel answers NOGOODSLAVE or INPROG (<= 10
  // s); std::runtime_error with the reply otherwise.
  void failover(std::size_t via = 0);
  // Waits (<= timeout) until every sentinel names one server other than `old_index`
  // and that server says role:master; returns its index. std::runtime_error with
  // what the sentinels named and their log tails when it does not happen in time.
  std::size_t wait_master_change(int old_index, std::chrono::milliseconds timeout);

 private:
  // The log tails of every sentinel (for error messages).
  std::string sentinel_logs() const;

  std::string name_;
  node_config cfg_;
  std::vector<std::unique_ptr<redis_node>> servers_;
  std::vector<std::unique_ptr<sentinel_node>> sentinels_;
};

}  // namespace redlock::test
