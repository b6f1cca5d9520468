// The master a Redis Sentinel group names, as one Redlock node (issue 23, plan item
// 6; docs/design.md "Nodes that are whole deployments"): an endpoint (node/endpoint.h)
// made of a connection per sentinel asked (SENTINEL GET-MASTER-ADDR-BY-NAME), a
// subscriber per sentinel asked (+switch-master), and one `connection` per master
// address Sentinel has named, made through the node's node_host with the node's
// index, so TLS, AUTH, the handshake and every guard run on the master connection
// as on a standalone node. A master connection's display name (its observer events,
// warnings, and the name credentials_provider is called with) is the node's display
// followed by " (master HOST:PORT)". Keys have their plain names (the master is a
// standalone server).
//
// Discovery: the URI's sentinel, then its ?seed= sentinels, in order, until one
// names the master; until then requests wait (node/waiting_requests.h). When none
// does, the waiting requests fail (`connection_error`, naming each sentinel's
// answer), and discovery is tried again after the reconnect backoff; requests
// submitted meanwhile fail at once. The first sentinel that answers, and the one
// answering once a minute after, is asked SENTINEL SENTINELS: the group's other
// sentinels that are up join the list (at most kMaxSentinels in all), asked in
// turn after the URI's when one fails. Sentinel links are plain TCP without AUTH
// (`rediss+sentinel://` is TLS to the master; the URI's credentials are the
// master's).
//
// Following the master: the sentinel that answered last is asked again once a
// second, at once after a request failed on the master's connection (down,
// timed out, or a READONLY error: a demoted master), and its +switch-master
// messages (for this master's name) are followed as they come; a sentinel that
// fails is replaced by the next one. A request goes to the master Sentinel named
// last.
//
// Failover safety (plan items 4 and 5): the master connection confirms its writes
// (connection::set_confirm_replication: a grant counts once the master's replicas
// have it, and no write of a server whose INFO replication says it is not a master
// counts, whatever a sentinel said). A master change this client sees (Sentinel
// names another address than before) gives the node no acquire vote for the
// restart quarantine (max_ttl by default) from when it was seen: at an attempt's
// start (acquire_exclusion) and for every acquire reply in that time, and neither a
// grant nor an extension from a master Sentinel no longer names counts. A master
// whose replicas dropped below the most it had counts no write until as many are
// attached again, or until a sentinel asked a failover-timeout (plus a margin,
// settle_ms) after the drop names it again (connection::confirm_master): its other
// replicas may be about to follow a promoted one and drop what they confirmed, and
// a sentinel asked sooner may not know yet of the failover under way. A client that never saw the
// master before the change (a fresh process) cannot tell; a replica that was not
// attached at the grant and is promoted later can lose a lock (docs/safety.md).
//
// Loop thread only. Every submitted request gets exactly one sink call.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "node/connection.h"
#include "node/endpoint.h"
#include "node/host.h"
#include "node/waiting_requests.h"
#include "pure/uri.h"

namespace redlock::detail {

class sentinel_endpoint final : public endpoint {
 public:
  // `address` is a deployment::sentinel node (its host:port is the first sentinel).
  // `confirm`: the master connections confirm their writes (off only for the
  // failover tests' negative controls: endpoint.h, replication_confirmation).
  sentinel_endpoint(node_host& host, std::size_t index, node_address address, bool confirm = true);
  ~sentinel_endpoint() override;
  sentinel_endpoint(const sentinel_endpoint&) = delete;
  sentinel_endpoint& operator=(const sentinel_endpoint&) = delete;

  const std::string& name() const noexcept override { return address_.display; }
  std::size_t index() const noexcept override { return index_; }

  // Starts discovery (the first sentinel).
  void start() override;
  void submit(std::shared_ptr<const wire> w, bool force_eval, std::shared_ptr<sink> s,
              std::uint32_t tag) override;
  void flush() override;
  bool quiet() const noexcept override;
  void shutdown() override;

  std::string acquire_exclusion(std::chrono::steady_clock::time_point now,
                                std::chrono::milliseconds quarantine) const override;
  std::string fencing_exclusion() const override;
  const std::string& run_id() const noexcept override;
  const std::string& maxmemory_policy() const noexcept override;
  const std::string& maxmemory() const noexcept override;
  const std::optional<std::chrono::steady_clock::time_point>& restarted_at() const noexcept override;
  const std::optional<std::chrono::steady_clock::time_point>& jumped_at() const noexcept override;
  // The master Sentinel named last; nothing until one is named.
  std::optional<node_address> subscriber_address(const node_address& configured,
                                                 const std::string& avoid = "") const override;
  // The master Sentinel named last (true until one is named): an old master, paused
  // or cut off from the new one, hears nothing published there.
  bool hears_releases_at(const std::string& host, int port) const override;
  // The master Sentinel named last, then the sentinels (connected: its query link is up).
  std::vector<deployment_member> members() const override;
  std::optional<std::chrono::steady_clock::time_point> master_changed_at() const override { return master_changed_at_; }

  // How often the last sentinel that answered is asked again.
  static constexpr std::chrono::milliseconds kPollInterval{1000};
  // Master connections made at most (Sentinel naming a further address is an error vote).
  static constexpr std::size_t kMaxMasters = 64;
  // Sentinels known at most (the URI's, and those SENTINEL SENTINELS names), when the
  // URI lists fewer.
  static constexpr std::size_t kMaxSentinels = 16;
  // How often the sentinel that answers is asked for the group's other sentinels.
  static constexpr std::uint64_t kPeersIntervalMs = 60000;
  // A master whose replicas dropped is confirmed by a sentinel asked this long after
  // the drop or later (connection::confirm_master): the group's failover-timeout,
  // within which a failover under way promotes its replica or is aborted, plus the
  // margin for the leader's new configuration to reach the other sentinels (hello
  // messages every 2 s). Each sentinel has its own failover-timeout and any of them
  // may lead a failover, so it is the largest that every known sentinel gave
  // (SENTINEL MASTER, asked of each on the peers cadence), and Sentinel's default
  // while one of them has not answered yet (down, refused, just discovered).
  static constexpr std::uint64_t kDefaultFailoverTimeoutMs = 180000;
  static constexpr std::uint64_t kSettleMarginMs = 5000;
  std::uint64_t settle_ms() const noexcept;

 private:
  class request_sink;
  class answer_sink;
  class listener;
  friend class request_sink;
  friend class answer_sink;
  friend class listener;

  enum class state { idle, discovering, ready, down, closed };
  struct link {
    std::string host;
    int port = 0;
    std::unique_ptr<connection> conn;
  };
  // A sentinel's links: made on first need, kept for the endpoint's life.
  // Both are non-voting (a push listener set: the handshake is PING only, no guard).
  struct sentinel_links {
    sentinel_links();
    ~sentinel_links();
    sentinel_links(sentinel_links&&) noexcept;
    sentinel_links& operator=(sentinel_links&&) noexcept;
    std::unique_ptr<listener> query_listener;
    std::unique_ptr<connection> query;
    std::unique_ptr<listener> subscriber_listener;
    std::unique_ptr<connection> subscriber;
    // Its SENTINEL MASTER's failover-timeout, once it answered one (settle_ms).
    std::optional<std::uint64_t> failover_timeout_ms;
  };

  // A non-voting link to sentinels_[sentinel], started.
  std::unique_ptr<connection> sentinel_link(std::size_t sentinel, bool subscriber);
  connection& query_link(std::size_t sentinel);
  void subscribe_at(std::size_t sentinel);
  connection& master_link(const host_port& at);
  // The link to `at` among masters_, or to master_ (the one Sentinel named last); null if none.
  const link* find_link(const host_port& at) const noexcept;
  const link* current_link() const noexcept;
  // Asks sentinels_[sentinel] for the master.
  void ask(std::size_t sentinel);
  // The answer to a query sent at asked_ms (now_ms).
  void on_answer(std::size_t sentinel, std::uint64_t asked_ms, const reply_event& ev);
  // SENTINEL SENTINELS' answer: the sentinels not known yet join sentinels_.
  void on_peers(const reply_event& ev);
  // SENTINEL MASTER's answer from sentinels_[sentinel]: its failover-timeout (settle_ms).
  void on_master_info(std::size_t sentinel, const reply_event& ev);
  // Sentinel named `at` (how: "SENTINEL GET-MASTER-ADDR-BY-NAME", "+switch-master"),
  // as of asked_ms (now_ms).
  void use_master(const host_port& at, const std::string& how, std::uint64_t asked_ms);
  void discovery_failed();
  void arm_poll();
  // A request failed on the master's connection, or the master answered READONLY:
  // a sentinel is asked again now (at most every 100 ms).
  void ask_soon();
  // A grant (`acquire`) or an extension from `c` does not count: why, or "" (see the
  // header comment; the master-change quarantine holds acquires only).
  std::string grant_exclusion(const connection* c, bool acquire) const;
  bool master_change_quarantined() const noexcept;
  std::string sentinel_text(std::size_t sentinel) const;

  // A subscriber's message: +switch-master.
  void on_switch_message(const redisReply& message);

  node_host& host_;
  std::size_t index_;
  node_address address_;
  bool confirm_;
  std::vector<host_port> sentinels_;  // the URI's host:port, its ?seed= entries, then those discovered
  std::size_t max_sentinels_ = kMaxSentinels;  // sentinels_'s reserved size
  bool peers_asked_ = false;
  std::uint64_t peers_asked_ms_ = 0;
  std::vector<sentinel_links> sentinel_links_;  // per sentinel
  std::vector<link> masters_;  // every master connection made, in the order made
  connection* master_ = nullptr;  // the master Sentinel named last
  state state_ = state::idle;
  std::size_t current_ = 0;  // the sentinel asked last (and, once one answered, the one that did)
  bool asking_ = false;      // a query is in flight
  std::size_t tried_ = 0;    // sentinels asked in this round (a round ends at the first answer)
  std::uint64_t last_ask_ms_ = 0;
  std::string errors_;  // this discovery's failures, one "sentinel: why" each
  waiting_requests waiting_;  // submitted before a master was named
  std::string down_detail_;
  int failures_ = 0;  // discoveries failed in a row (the retry's backoff)
  std::uint64_t retry_timer_ = 0;
  std::uint64_t poll_timer_ = 0;
  std::uint64_t started_ms_ = 0;
  std::optional<std::chrono::steady_clock::time_point> master_changed_at_;
  std::string master_change_;  // why, for excluded_by and acquire_exclusion
  std::shared_ptr<const wire> ask_wire_;
  std::shared_ptr<const wire> subscribe_wire_;
  std::shared_ptr<const wire> peers_wire_;
  std::shared_ptr<const wire> master_info_wire_;
  std::optional<std::chrono::steady_clock::time_point> none_;
  std::string empty_;
};

}  // namespace redlock::detail
