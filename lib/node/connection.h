// One standalone master as an endpoint (node/endpoint.h): a link (io/reactor.h) carrying pipelined RESP, with
// deadlines, stall detection, background reconnects, and on every connect a
// handshake (node/handshake.h) whose INFO and TIME feed the node's guards
// (node/guards.h). It sees its owner through node/host.h only. hiredis is used for
// decoding replies only (redisReader); requests are encoded by protocol/resp.h.
//
// Loop thread only. Every submitted request gets exactly one sink call: a reply,
// or timeout / connection_error / auth_error / cancelled.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/reactor.h"
#include "node/endpoint.h"
#include "node/guards.h"
#include "node/handshake.h"
#include "node/host.h"
#include "redlock/observer.h"
#include "redlock/report.h"
#include "protocol/resp.h"
#include "protocol/scripts.h"
#include "pure/uri.h"

namespace redlock::detail {

class connection final : public endpoint, private link_events {
 public:
  connection(node_host& owner, std::size_t index, node_address address);
  ~connection() override;
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  const std::string& name() const noexcept override { return address_.display; }
  std::size_t index() const noexcept override { return index_; }

  void start() override;
  // Queue a request. Fails at once (synchronously, through the sink) when the node
  // is known down (backing off) or closed.
  void submit(std::shared_ptr<const wire> w, bool force_eval, std::shared_ptr<sink> s, std::uint32_t tag) override;
  // Writes what submit() buffered. Called by the owner once per loop iteration
  // (node_host::want_flush).
  void flush() override;
  // True when no request awaits an answer within its deadline.
  bool quiet() const noexcept override;
  // Fails everything still queued with `cancelled` and closes the handles.
  void shutdown() override;
  bool ready() const noexcept { return state_ == state::ready; }
  // Subscriber mode (RESP2): "message" pushes go to `l`, not to the request queue;
  // SUBSCRIBE and UNSUBSCRIBE of one channel each answer like any request. Set
  // before start().
  void set_push_listener(push_listener* l) noexcept { push_ = l; }
  // Writes (acquires, extensions, the fence commit) count only once the server's
  // replicas have them. Every handshake reads INFO replication (no write of a
  // server that is not role:master counts, though the connection stays up for
  // what else it answers; connected_slaves is the count to wait for). Behind each
  // write go `WAIT n t` (n that count, t half the request's time left; none when
  // n is 0) and INFO replication again: the write counts only when WAIT's answer
  // covers every replica attached after it (one attached since the count was
  // taken may lack it; one attached later gets it by its sync), else its reply
  // is delivered with unreplicated set and excluded_by naming the shortfall, and
  // the new count is what the next write waits for.
  // For the masters of a cluster's shards and of a Sentinel group (issue 23). Set
  // before start().
  void set_confirm_replication(bool on) noexcept { confirm_ = on; }
  // No AUTH on this connection: neither the URI's credentials nor the
  // credentials_provider's (a Sentinel endpoint's links to its sentinels: the node
  // URI's credentials are the master's). Set before start().
  void set_no_auth() noexcept { no_auth_ = true; }
  // The replicas the next write waits for (INFO replication's count after the last one).
  int replicas() const noexcept { return replicas_; }
  // Confirmation also keeps a mark (replica_mark): the replicas, by address, this
  // connection's server had since this client first saw it. One of them missing (a
  // replica gone: maybe to follow a promoted master) makes every write
  // unreplicated ("its replica h:p left it: replicas dropped from m to n") until
  // every one is attached again (a new replica does not stand in for it), or until
  // the endpoint learns, from a query it sent at `asked_ms` (now_ms), `settle_ms` or
  // more after the drop was seen, that this server is still the master (a sentinel
  // naming it, a slot map listing it): then the mark is the replicas attached now. The settling time is the
  // deployment's bound on a failover begun before the drop (Sentinel's
  // failover-timeout and the time its sentinels take to tell each other): a
  // sentinel asked sooner may not know yet of a failover under way (the adversarial
  // pass: one asked 0.3 s after the promoted replica left re-admitted the old
  // master). A drop seen after the query is not cleared.
  void confirm_master(std::uint64_t asked_ms, std::uint64_t settle_ms);

  // The owner's flush list (node_host::want_flush): whether this connection is on
  // it. flush() takes it off.
  bool flush_queued() const noexcept { return dirty_; }
  void set_flush_queued(bool queued) noexcept { dirty_ = queued; }

  // Safety guards (loop thread). Why this node must not vote on an acquire now,
  // given the quarantine period; "" when it may.
  std::string acquire_exclusion(std::chrono::steady_clock::time_point now,
                                std::chrono::milliseconds quarantine) const override;
  // A server TIME sample taken at `local_mid` on the client's clock (the middle of
  // the request's round trip, `half_rtt_us` being half of that round trip: the
  // sample's dating uncertainty). Flags a clock step in either direction.
  void observe_server_time(std::int64_t server_us, std::chrono::steady_clock::time_point local_mid,
                           std::int64_t half_rtt_us);
  // The server's run_id from the last handshake INFO ("" if none was read).
  const std::string& run_id() const noexcept override { return guards_.run_id(); }
  // The server's maxmemory-policy, read by the handshake of the current (or last)
  // connection; "" when unknown (INFO memory refused, or never connected).
  const std::string& maxmemory_policy() const noexcept override { return guards_.maxmemory_policy(); }
  // Why this node must not vote on a fenced acquire: its policy may evict the fence
  // counter (allkeys-*), and allow_fencing_on_evicting_nodes is off; "" when it may.
  std::string fencing_exclusion() const override { return guards_.fencing_exclusion(); }
  // Its maxmemory in bytes, as INFO gave it ("" when unknown).
  const std::string& maxmemory() const noexcept override { return guards_.maxmemory(); }
  // The guards' raw state, for probe (lib/probe.cc): when the restart quarantine
  // counts from, and when a clock jump was seen (unset: none).
  const std::optional<std::chrono::steady_clock::time_point>& restarted_at() const noexcept override {
    return guards_.restarted_at();
  }
  const std::optional<std::chrono::steady_clock::time_point>& jumped_at() const noexcept override {
    return guards_.jumped_at();
  }

 private:
  enum class state { idle, resolving, connecting, handshake, ready, backoff, closed };
  static constexpr std::uint64_t kUnwritten = ~std::uint64_t{0};
  struct request {
    std::shared_ptr<const wire> cmd;
    bool force_eval = false;
    std::shared_ptr<sink> target;
    std::uint32_t tag = 0;
    std::chrono::steady_clock::time_point submitted;
    std::uint64_t deadline_ms = 0;  // on the reactor's now_ms(); kNoDeadline for untimed commands
    std::uint64_t overdue_ms = 0;   // on the reactor's now_ms(): submission + command_timeout (stall detection)
    std::uint64_t written_ms = kUnwritten;  // on the reactor's now_ms(): when flush() wrote it (stall detection)
    bool sent = false;
    bool used_sha = false;
    bool with_time = false;  // an acquire with a TIME pipelined after it: one more reply
    int wait_for = 0;        // > 0: a WAIT for that many replicas pipelined after it (and the TIME): one more
    bool counted = false;    // an INFO replication pipelined after that (the replicas attached then): one more
    bool expired = false;    // the sink was told "timeout"; a late reply is dropped
  };
  struct reply_deleter {
    void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
  };

  void connect_now();
  // link_events: the current link's connect, bytes and end.
  void on_link_up() override;
  void on_link_data(const char* data, std::size_t n) override;
  void on_link_down(node_status status, std::string detail) override;
  void on_handshake_reply(redisReply* r);
  void on_info(std::string_view info);
  void on_info_memory(std::string_view info);
  // Takes the reply (it is freed here or kept for the request's second reply).
  void on_request_reply(std::unique_ptr<redisReply, reply_deleter> r);
  void fail_connection(node_status status, std::string detail, bool permanent = false);
  void become_ready();
  void encode(request& r);
  // True when the clock-jump guard wants a new TIME sample from this node.
  bool time_sample_due() const;
  void arm_deadline_timer();
  std::uint64_t stall_ms() const noexcept;
  // When the oldest outstanding request (the first sent one in the queue) counts
  // as stalled: stall_ms() after the later of its write and the last complete
  // reply, and not before its own overdue time. 0 when nothing is outstanding.
  std::uint64_t stall_at(std::uint64_t now) const noexcept;
  void on_deadline_timer();
  void complete(request& r, const reply_event& ev);
  // Observer events: a guard quarantined this node (on_node_quarantined, dated
  // `at`), and the timer that sends on_node_cleared when the latest quarantine is over.
  void note_quarantine(const quarantine_note& note, std::chrono::steady_clock::time_point at);
  void arm_quarantine_timer();
  void resend_with_body(request& r);
  // Pipelines WAIT (when there are replicas to wait for) and INFO replication behind a
  // write being encoded, when its replicas must confirm it.
  void append_wait(request& r);

  node_host& host_;
  push_listener* push_ = nullptr;
  std::size_t index_;
  node_address address_;
  node_guards guards_;  // restart, clock-jump and fencing guards: what this node has shown
  state state_ = state::idle;
  std::unique_ptr<link> link_;  // the current connect attempt's byte stream
  redisReader* reader_ = nullptr;
  std::deque<request> queue_;  // in write order; replies match the front
  // The front request's replies while its pipelined TIME or WAIT are still to come.
  std::vector<std::unique_ptr<redisReply, reply_deleter>> held_;
  std::string out_;            // encoded, not yet written
  bool dirty_ = false;
  handshake handshake_;  // the current connect attempt's
  std::uint64_t connect_timer_ = 0;
  std::uint64_t connect_deadline_ms_ = 0;  // on now_ms(): end of the current connect attempt
  std::uint64_t backoff_timer_ = 0;
  std::uint64_t deadline_timer_ = 0;
  std::uint64_t deadline_armed_at_ = 0;
  int failures_ = 0;
  bool ever_connected_ = false;
  bool permanent_failure_ = false;
  node_status down_status_ = node_status::connection_error;
  std::string down_detail_ = "not connected yet";
  // Stall detection and the reply cap: when the last complete reply arrived (on
  // the reactor's now_ms()), and the bytes received since then (the reply being read).
  std::uint64_t last_reply_ms_ = 0;
  std::size_t partial_reply_bytes_ = 0;
  unsigned scripts_loaded_ = 0;  // bit per script_id: body sent on this connection
  bool set_get_unsupported_ = false;  // the server refused SET ... NX ... GET
  bool confirm_ = false;    // set_confirm_replication
  bool no_auth_ = false;    // set_no_auth
  // EVAL/EVALSHA answered "unknown command" on the server with this run_id (renamed:
  // only a restart changes it): kept across reconnects to that server.
  bool scripts_unknown_ = false;
  std::string scripts_unknown_run_id_;
  // The user's ACL refused EVAL (NOPERM) on this connection: an ACL can change live,
  // so the next handshake gives the vote back until the next refusal.
  bool scripts_refused_by_acl_ = false;
  bool evalsha_refused_ = false;  // EVALSHA refused (ACL or renamed) on this connection: EVAL with the body
  bool scripts_refused() const noexcept { return scripts_unknown_ || scripts_refused_by_acl_; }
  int replicas_ = 0;        // what writes wait for (INFO replication's connected_slaves)
  replica_mark mark_;       // the replicas its server had (confirm_master)
  std::string no_vote_;                  // why no write of this server counts (not a master); "" = it may
  std::chrono::steady_clock::time_point time_sent_;  // the handshake's TIME, for its sample's date
  // Observer events only: a node_down was sent and no node_up since; the cleared timer.
  bool reported_down_ = false;
  std::uint64_t quarantine_timer_ = 0;
};

}  // namespace redlock::detail
