// A Redis Cluster as one Redlock node (issue 23, plan item 2; docs/design.md "Nodes
// that are whole deployments"): an endpoint (node/endpoint.h) made of one
// `connection` per shard master, all made through the node's node_host with the
// node's index, so TLS, AUTH, the handshake and every guard run per shard, and
// every sink hears node i. A shard connection's display name (its observer
// events, warnings, and the name credentials_provider is called with) is the
// node's display followed by " (cluster node HOST:PORT)".
//
// The slot map comes from CLUSTER SHARDS (CLUSTER SLOTS when the server refuses
// it: before 7.0), asked of the URI's seeds in order. Until it is known, requests
// wait in a bounded queue: each is failed with `timeout` (unsent) when its
// command_timeout passes first (an untimed one waits until discovery fails), and
// all of them with `connection_error` (unsent, the detail naming each seed's
// failure) when every seed failed; discovery is then tried again after the
// reconnect backoff, and requests submitted meanwhile fail at once.
//
// A request goes, in its cluster form (wire::cluster_form: every key in its
// resource's hash tag), to the connection of its slot's master (wire::slot); a
// key-less one (PING, INFO) to the first shard's master; one whose keys are in
// different slots fails at once (server_error, unsent). Redirects are followed
// between the connection and the request's sink, which hears exactly one
// reply_event per request: MOVED updates that slot's owner (making the
// connection if new), refreshes the map in the background (at most once a
// second; a refresh never holds back a request) and resends, at most 3 times
// per request, then the MOVED is delivered as the error it is; ASK sends ASKING
// and the request, pipelined on the target's connection, once. An acquire granted
// through ASK (on a slot's importing node, mid-reshard) does not count: the
// migration state is the source master's alone, so its failover would hide the
// grant (excluded_by; rolled back). Extensions through ASK count. TRYAGAIN and
// CLUSTERDOWN are delivered as the error votes they are. A resent request gets
// the command timeout again on its new connection (its latency counts from the
// first submission): a request redirected 3 times may take up to 4 command
// timeouts; the round's own deadline still bounds the round.
//
// What is approximate (the guards answer for the node as a whole, not per slot):
//   - acquire_exclusion / fencing_exclusion: the first shard master (in map
//     order) whose guards exclude it excludes the whole node, even for a resource
//     whose slot another master serves (conservative: a vote lost, never one
//     counted that a shard's guard refuses). Each reply is still judged by the
//     guards of the shard that sent it (reply_event::excluded_by).
//   - restarted_at / jumped_at: the latest among the shard masters.
//   - run_id, maxmemory_policy, maxmemory: the first shard master's whose policy
//     may evict (allkeys-*), else the first master's; run_id for the
//     same-server check is the first master's only (each shard connection still
//     checks its own run_id against the nodes before it).
//   - Key-less requests (PING, probe's INFO and TIME) reach the first master
//     only: what probe reports of the node is that shard's.
//   - A map refresh happens after a MOVED, and after a request failed on its
//     connection (at most once a second either way).
//
// Failover safety (plan items 4 and 5): every shard connection confirms its
// writes (connection::set_confirm_replication: a grant counts once the shard's
// replicas have it; a replica's write never votes). A master change this client
// sees — a refreshed map whose master for some slots was no master in the map
// before it (a promoted replica, or a node added since), or a MOVED to a node
// that is no master of the current map — gives the node no acquire vote for the
// restart quarantine (max_ttl by default) from when it was seen: the check at an
// attempt's start (acquire_exclusion), and every acquire's reply that arrives in
// that time (its excluded_by), including the request that was redirected there.
// A client that never saw the map before the change (a fresh process) cannot tell.
//   - Connections, once made (seeds, old masters), live as long as the endpoint;
//     only the current map's masters count for the guard queries.
//
// Loop thread only. Every submitted request gets exactly one sink call.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "node/connection.h"
#include "node/endpoint.h"
#include "node/host.h"
#include "node/waiting_requests.h"
#include "protocol/cluster.h"
#include "pure/uri.h"

namespace redlock::detail {

class cluster_endpoint final : public endpoint {
 public:
  // `address` is a deployment::cluster node (its host:port is the first seed).
  // `confirm`: the shard connections confirm their writes (off only for the
  // failover tests' negative controls: endpoint.h, replication_confirmation).
  cluster_endpoint(node_host& host, std::size_t index, node_address address, bool confirm = true);
  ~cluster_endpoint() override;
  cluster_endpoint(const cluster_endpoint&) = delete;
  cluster_endpoint& operator=(const cluster_endpoint&) = delete;

  const std::string& name() const noexcept override { return address_.display; }
  std::size_t index() const noexcept override { return index_; }

  // Starts discovery (a connection to the first seed, CLUSTER SHARDS).
  void start() override;
  void submit(std::shared_ptr<const wire> w, bool force_eval, std::shared_ptr<sink> s,
              std::uint32_t tag) override;
  // Every connection's.
  void flush() override;
  // No request waits for the map, and every connection is quiet.
  bool quiet() const noexcept override;
  // Fails the requests waiting for the map with `cancelled`, then shuts every
  // connection down (theirs fail with `cancelled` too).
  void shutdown() override;

  std::string acquire_exclusion(std::chrono::steady_clock::time_point now,
                                std::chrono::milliseconds quarantine) const override;
  std::string fencing_exclusion() const override;
  const std::string& run_id() const noexcept override;
  const std::string& maxmemory_policy() const noexcept override;
  const std::string& maxmemory() const noexcept override;
  const std::optional<std::chrono::steady_clock::time_point>& restarted_at() const noexcept override;
  const std::optional<std::chrono::steady_clock::time_point>& jumped_at() const noexcept override;
  // The first seed as a standalone server while it is up, a node of the latest map
  // and not `avoid`; else a shard master that is up (not `avoid`).
  std::optional<node_address> subscriber_address(const node_address& configured,
                                                 const std::string& avoid = "") const override;
  // A node of the latest map (a master or a replica: classic pub/sub reaches each).
  bool hears_releases_at(const std::string& host, int port) const override;
  void refresh_for_subscribers() override;
  // The current map's shard masters, in map order.
  std::vector<deployment_member> members() const override;
  std::optional<std::chrono::steady_clock::time_point> master_changed_at() const override { return master_changed_at_; }

  // At most this many requests wait for the first map; more fail at once.
  static constexpr std::size_t kMaxWaiting = waiting_requests::kMax;
  // Redirects followed per request (MOVED and ASK together), then the error is delivered.
  static constexpr int kMaxRedirects = 3;
  // Connections made at most (a redirect to a further address is delivered as the error it is).
  static constexpr std::size_t kMaxConnections = 1024;
  // A shard master whose replicas dropped is confirmed by a map asked this long after
  // the drop or later (connection::confirm_master): a replica's failover attempt
  // ends within about four node timeouts of its master becoming unreachable to it
  // (failure detection, the election's delay, its vote timeout of twice the node
  // timeout), plus a margin for the new configuration to reach the node asked.
  // The node timeout is CONFIG GET's (the largest that the node answering a map and
  // every shard master gave), Redis's default until a node answers.
  static constexpr std::uint64_t kDefaultNodeTimeoutMs = 15000;
  static constexpr std::uint64_t kSettleMarginMs = 10000;
  std::uint64_t settle_ms() const noexcept { return 4 * node_timeout_ms_ + kSettleMarginMs; }
  // How often the node timeout is asked again (with a map refresh).
  static constexpr std::uint64_t kNodeTimeoutIntervalMs = 60000;

 private:
  class request_sink;
  class map_sink;
  friend class request_sink;
  friend class map_sink;

  enum class state { idle, discovering, ready, down, closed };
  struct shard_link {
    std::string host;
    int port = 0;
    std::unique_ptr<connection> conn;
  };

  // The connection to host:port, made (and started) on first need.
  connection& connection_to(const std::string& host, int port);
  // Asks seeds_[seed] for the map (discovery).
  void ask_seed(std::size_t seed);
  // Asks `via` for the map: CLUSTER SHARDS (`shards`) or CLUSTER SLOTS; `refresh`:
  // a background refresh, else discovery through seeds_[seed].
  void ask_map(connection& via, const std::string& via_host, bool shards, bool refresh, std::size_t seed);
  // A map reply (or a failure).
  void on_map_reply(bool refresh, std::size_t seed, const std::string& via_host, const reply_event& ev,
                    bool shards, connection& via, std::uint64_t asked_ms);
  void discovery_failed(std::size_t seed, std::string why);
  // Takes a parsed map: the masters and each slot's owner. False (and `error`) when
  // it serves no slot or names a master without a usable port. `via`: the node the
  // map was asked of, which confirms no master of its own shard (confirm_master).
  bool install(const slot_map& map, std::string& error, std::uint64_t asked_ms, const connection& via);
  void refresh_soon(connection& via, const std::string& via_host);
  // Sends a request (the map known) to its slot's master.
  void route(std::shared_ptr<const wire> w, bool force_eval, std::shared_ptr<sink> s, std::uint32_t tag);
  // A redirect for a request in flight: true when it was resent.
  bool follow(request_sink& r, const redirect& to);
  connection* first_master() const noexcept { return masters_.empty() ? nullptr : masters_.front(); }
  // The master whose memory settings answer for the node (see the header comment).
  const connection* memory_master() const noexcept;
  // The link of a connection this endpoint made.
  const shard_link& link_of(const connection* c) const;
  // A shard's master changed (plan item 5): noted now, with why.
  void note_master_change(std::string why);
  // True while a master change noted by this client quarantines the node's acquire
  // votes (node_host::restart_quarantine() from the change; 0 = never).
  bool master_change_quarantined() const noexcept;
  // A request failed on its connection (down, timed out): the map is asked again,
  // of another master (else the first seed), in the background.
  void refresh_after_failure(const std::string& failed_host, int failed_port);

  node_host& host_;
  std::size_t index_;
  node_address address_;
  bool confirm_;
  std::vector<host_port> seeds_;  // the URI's host:port, then its ?seed= entries
  state state_ = state::idle;
  std::vector<shard_link> links_;     // every connection made, in the order made
  std::vector<connection*> masters_;  // the current map's shard masters, in map order
  std::vector<connection*> owner_;    // per slot, once a map is known (nullptr: no master)
  std::string discovery_errors_;  // this discovery's failures, one "seed: why" each
  waiting_requests waiting_;      // submitted before the map was known
  std::string down_detail_;
  int failures_ = 0;  // discoveries failed in a row (the retry's backoff)
  std::uint64_t retry_timer_ = 0;
  std::uint64_t started_ms_ = 0;  // on now_ms(): when start() ran (the first discovery's deadlines)
  // Plan item 5: the node ids of the current map's masters ("" entries skipped), and
  // the last master change this client saw (a node that was no master in the map
  // before it, or a MOVED to one): the node's acquire votes wait out the quarantine.
  std::vector<std::string> master_ids_;
  std::vector<host_port> map_nodes_;  // every node of the latest map (masters and replicas; TLS and plain ports)
  bool mapped_ = false;  // a map was installed before
  std::optional<std::chrono::steady_clock::time_point> master_changed_at_;
  std::string master_change_;  // why, for excluded_by and acquire_exclusion
  bool refreshing_ = false;
  std::uint64_t last_refresh_ms_ = 0;
  bool refreshed_once_ = false;
  // The map requests and ASKING, encoded once.
  std::shared_ptr<const wire> shards_wire_;
  std::shared_ptr<const wire> slots_wire_;
  std::shared_ptr<const wire> asking_wire_;
  std::shared_ptr<const wire> node_timeout_wire_;
  // The cluster's node timeout (CONFIG GET, the largest a node gave; Redis's default
  // until one answers or when CONFIG is refused) and when it was last asked.
  std::uint64_t node_timeout_ms_ = kDefaultNodeTimeoutMs;
  bool node_timeout_learned_ = false;
  bool node_timeout_asked_ = false;
  std::uint64_t node_timeout_asked_ms_ = 0;
  void ask_node_timeout(connection& via);
  std::optional<std::chrono::steady_clock::time_point> none_;  // restarted_at / jumped_at without masters
  std::string empty_;
};

}  // namespace redlock::detail
