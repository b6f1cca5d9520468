// What the operations (lib/ops/) talk to for one Redlock node: an endpoint. Today
// every endpoint is one standalone master's connection (node/connection.h); a node
// that is a whole deployment (a Redis Cluster, a Sentinel group: issue 23,
// docs/design.md) is an endpoint made of several connections, routing each request
// by the slot of its keys. What a request's sink hears is the same either way: one
// reply_event per request, with the index of the Redlock node.
//
// Loop thread only. Every submitted request gets exactly one sink call: a reply,
// or timeout / connection_error / auth_error / cancelled.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/resp.h"
#include "pure/uri.h"
#include "redlock/client.h"
#include "redlock/report.h"

namespace redlock::detail {

class node_host;

// What a sink gets for one request.
struct reply_event {
  node_status status = node_status::pending;  // pending means: a reply arrived, see `reply`
  const redisReply* reply = nullptr;            // valid during the call only
  std::string_view detail;
  std::chrono::microseconds latency{0};
  // The connection sampled the server's TIME right after this request (pipelined)
  // and fed it to the clock-jump guard before delivering this reply.
  bool time_sampled = false;
  // What the node's guards say of a grant in this reply, judged as the reply is
  // delivered (node_guards::grant_exclusion; the TIME behind it observed already):
  // why a grant must not count, "" when it may. Judged for acquires, and for
  // extensions with time_sampled; "" for every other reply. Whether the reply is a
  // grant is the sink's reading (round::on_reply). Valid during the call only.
  std::string_view excluded_by;
  // The reply is a write the node ran, but fewer of its replicas than it had
  // confirmed it within the time left (WAIT, on a node whose writes need their
  // replicas: a cluster shard's or a Sentinel group's master); excluded_by says so.
  // Such a grant does not count, and an extension's old expiry still stands there
  // (unlike a clock jump's).
  bool unreplicated = false;
  // A failure for a request that was never written to the node (refused at once,
  // or still queued when the connection failed or the deadline passed): the
  // server cannot have run it.
  bool unsent = false;
};

class sink {
 public:
  virtual ~sink() = default;
  virtual void on_reply(std::size_t node, std::uint32_t tag, const reply_event& ev) = 0;
};

// A sink for a reply nobody reads: ASKING's, a SUBSCRIBE sent again on a handshake,
// the notifier sweep's PING (whose silence trips the stall detector).
class discard_sink final : public sink {
 public:
  void on_reply(std::size_t, std::uint32_t, const reply_event&) override {}
};

// A sink that hands the reply to a function: an endpoint's own queries (a
// sentinel's SENTINEL SENTINELS and SENTINEL MASTER, a cluster node's CONFIG GET).
// The function may capture the endpoint: every request is answered (or cancelled)
// before its endpoint is destroyed.
template <typename F>
class reply_fn_sink final : public sink {
 public:
  explicit reply_fn_sink(F f) : f_(std::move(f)) {}
  void on_reply(std::size_t, std::uint32_t, const reply_event& ev) override { f_(ev); }

 private:
  F f_;
};
template <typename F>
std::shared_ptr<sink> reply_fn(F f) {
  return std::make_shared<reply_fn_sink<F>>(std::move(f));
}

// A subscriber connection's listener (ops/notify_subscriptions.cc): pushed messages, and the
// connection coming up (every handshake's end) or going down (subscriptions lost).
class push_listener {
 public:
  virtual void on_push(std::size_t node, const redisReply& message) = 0;
  virtual void on_sub_ready(std::size_t node) = 0;
  virtual void on_sub_down(std::size_t node) = 0;

 protected:
  ~push_listener() = default;
};

// One Redlock node, as the operations see it.
class endpoint {
 public:
  virtual ~endpoint() = default;

  // The node's display name (its URI, password as ***), and its index in the
  // client's node list (what its requests' sinks are told).
  virtual const std::string& name() const noexcept = 0;
  virtual std::size_t index() const noexcept = 0;

  // Connects (in the background); once, before the first submit.
  virtual void start() = 0;
  // Queues a request; `force_eval` sends a script's body instead of its SHA. Fails
  // at once (synchronously, through the sink) when the node is known down or closed.
  virtual void submit(std::shared_ptr<const wire> w, bool force_eval, std::shared_ptr<sink> s,
                      std::uint32_t tag) = 0;
  // Writes whatever is buffered now (the stop's last flush; in normal running each
  // connection is flushed through node_host::want_flush).
  virtual void flush() = 0;
  // True when no request awaits an answer within its deadline.
  virtual bool quiet() const noexcept = 0;
  // Fails everything still queued with `cancelled` and closes the handles.
  virtual void shutdown() = 0;

  // Safety guards. Why this node must not vote on an acquire now, given the
  // quarantine period; "" when it may.
  virtual std::string acquire_exclusion(std::chrono::steady_clock::time_point now,
                                        std::chrono::milliseconds quarantine) const = 0;
  // Why this node must not vote on a fenced acquire (a policy that may evict the
  // fence counter, allow_fencing_on_evicting_nodes off); "" when it may.
  virtual std::string fencing_exclusion() const = 0;
  // The server's run_id from the last handshake ("" if none): the same-server check.
  virtual const std::string& run_id() const noexcept = 0;
  // maxmemory-policy and maxmemory as the last handshake read them ("" when unknown).
  virtual const std::string& maxmemory_policy() const noexcept = 0;
  virtual const std::string& maxmemory() const noexcept = 0;
  // The guards' raw state, for probe: when the restart quarantine counts from, and
  // when a clock jump was seen (unset: none).
  virtual const std::optional<std::chrono::steady_clock::time_point>& restarted_at() const noexcept = 0;
  virtual const std::optional<std::chrono::steady_clock::time_point>& jumped_at() const noexcept = 0;
  // Where release notifications of this node can be heard, for the waiters'
  // subscriber connection (ops/notify): the node's own address (`configured`) for a
  // standalone master; a cluster's first seed as a standalone server (a cluster
  // delivers classic pub/sub to every node); a Sentinel group's current master;
  // nothing while it is not known. `avoid` ("host:port", or ""): where a subscriber
  // just went down (a dead or paused server); a cluster picks another node then.
  virtual std::optional<node_address> subscriber_address(const node_address& configured,
                                                         const std::string& avoid = "") const {
    (void)avoid;
    return configured;
  }
  // Whether a subscriber connected to host:port hears this node's releases now, as
  // far as this endpoint knows: a cluster's node of the latest slot map (one that
  // left the cluster hears nothing of its bus), a Sentinel group's current master
  // (an old master, paused or cut off, hears nothing published on the new one);
  // true while that is not known, and for a standalone master. The notifier moves a
  // subscriber that does not, up or not.
  virtual bool hears_releases_at(const std::string& host, int port) const {
    (void)host;
    (void)port;
    return true;
  }
  // Called by the notifier's sweep while a subscriber of this node is open: a
  // cluster asks its slot map again (at most once a second, in the background), so
  // that a seed that left the cluster is seen without a request failing first.
  virtual void refresh_for_subscribers() {}
  // A deployment's servers as this endpoint knows them now (node_health::members),
  // and when it last saw a master change; empty and unset for a standalone master.
  virtual std::vector<deployment_member> members() const { return {}; }
  virtual std::optional<std::chrono::steady_clock::time_point> master_changed_at() const { return std::nullopt; }

 protected:
  endpoint() = default;
  endpoint(const endpoint&) = default;
  endpoint& operator=(const endpoint&) = default;
};

// The endpoint for node `index` at `address`, reaching its owner through `host`: a
// connection (node/connection.h) for a standalone master, a cluster_endpoint
// (node/cluster_endpoint.h) for a Redis Cluster, a sentinel_endpoint
// (node/sentinel_endpoint.h) for the master a Sentinel group names.
// Whose writes wait for their replicas (connection::set_confirm_replication):
// by default a cluster's shard masters and a Sentinel group's master; `everywhere`
// standalone nodes too (the REDLOCK_PREVIEW_CONFIRM_REPLICATION=1 preview);
// `nowhere` none (=0: the negative controls of the failover tests, which must then
// find two holders).
enum class replication_confirmation { by_deployment, everywhere, nowhere };
std::unique_ptr<endpoint> make_endpoint(node_host& host, std::size_t index, const node_address& address,
                                        replication_confirmation confirm);

}  // namespace redlock::detail
