// The safety guards of one node: what its connection has seen of the server (its
// run_id, its clock's TIME samples, its eviction policy) and what follows for its
// votes — the restart guard, the clock-jump guard and the fencing exclusion — with
// the quarantines they start. Pure: every call is given the time it is about
// (`now`, on the client's clock); nothing here reads a clock, sends or schedules.
// The connection (connection.cc) feeds it from the handshake and the acquire
// replies, sends the quarantine events it returns and arms the "cleared" timer.
//
// Loop thread only (one value per connection).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "redlock/client.h"
#include "redlock/observer.h"

namespace redlock::detail {

// How far a node's clock may run ahead of, or fall behind, the local monotonic
// clock between two TIME samples `gap_us` apart before the clock-jump guard calls
// it a jump: the threshold plus drift_factor x the gap, that drift part capped at
// the threshold (so never more than 2 x threshold, however long the gap), plus
// `uncertainty_us`: how far the two samples' local dates may be off (each is dated
// at the middle of its round trip, so off by up to half of it; the caller passes
// the sum of both halves). A real step larger than the result is always seen.
double clock_jump_allowance_us(std::chrono::milliseconds threshold, double drift_factor, std::int64_t gap_us,
                               std::int64_t uncertainty_us = 0);

// The guards' settings, fixed for a client's life (from client_options).
struct guard_settings {
  // The restart quarantine (node_host::restart_quarantine): 0 = restart guard off.
  std::chrono::milliseconds restart_quarantine{0};
  // The bound on every TTL: a clock jump quarantines for at least this long.
  std::chrono::milliseconds max_ttl{0};
  bool restart_guard_first_sight = false;
  std::chrono::milliseconds clock_jump_threshold{0};  // <= 0: clock-jump guard off
  double clock_drift_factor = 0;
  std::chrono::milliseconds clock_sample_interval{0};  // 0: a sample with every acquire
  bool allow_fencing_on_evicting_nodes = false;

  static guard_settings of(const client_options& o, std::chrono::milliseconds restart_quarantine);
};

// A quarantine a guard just started, for on_node_quarantined: why, until when
// (on the client's clock) and the event's detail text.
struct quarantine_note {
  quarantine_reason reason = quarantine_reason::restart;
  std::chrono::steady_clock::time_point until{};
  std::string detail;
};

class node_guards {
 public:
  explicit node_guards(guard_settings s) : s_(s) {}

  // Restart guard: the handshake's INFO server gave `run_id` and `uptime` (both
  // non-empty; uptime in seconds, as INFO writes it) at `now`. A run_id other than
  // the last one seen (a restart, or another server behind the address) starts the
  // quarantine now and drops the clock sample (a new series); the first sight, in
  // strict mode (restart_guard_first_sight), counts it from the server's start.
  // Returns the quarantine to report, if one started that is not over already.
  std::optional<quarantine_note> observe_server(const std::string& run_id, const std::string& uptime,
                                                std::chrono::steady_clock::time_point now);

  // Clock-jump guard: true when it wants a TIME sample with the next acquire or
  // extension. `now()` is called only when the answer depends on the time (a
  // sample interval is set and there is a sample).
  template <class Clock>
  bool time_sample_due(Clock&& now) const {
    if (s_.clock_jump_threshold.count() <= 0) return false;
    // Interval 0 (the default): every acquire, without reading the clock.
    return s_.clock_sample_interval.count() == 0 || !last_time_ ||
           now() - last_time_->local_mid >= s_.clock_sample_interval;
  }
  // A server TIME sample taken at `local_mid` on the client's clock (the middle of
  // the request's round trip, `half_rtt_us` being half of that round trip: the
  // sample's dating uncertainty). Compared with the previous sample (kept across
  // reconnects: a jump while disconnected is a jump too), it flags a clock step in
  // either direction larger than clock_jump_allowance_us; the sample then becomes
  // the previous one. Returns the quarantine a jump started.
  std::optional<quarantine_note> observe_server_time(std::int64_t server_us,
                                                     std::chrono::steady_clock::time_point local_mid,
                                                     std::int64_t half_rtt_us);

  // The handshake's INFO memory, printable (read again on every connection: CONFIG
  // SET may change it); forget_memory() when a new connection starts.
  void observe_memory(std::string policy, std::string maxmemory);
  void forget_memory();

  // Why this node must not vote on an acquire at `now`, given the quarantine
  // period; "" when it may. `same_server`: the name of an earlier node that reported
  // this node's run_id (node_host::same_server), or null.
  std::string acquire_exclusion(std::chrono::steady_clock::time_point now,
                                std::chrono::milliseconds quarantine, const std::string* same_server) const;
  // The clock-jump part of acquire_exclusion alone: why this node's clock is
  // suspect now; "" when it is not. Extensions use it (a restarted node that still
  // holds our key, from its AOF, may extend it).
  std::string clock_exclusion(std::chrono::steady_clock::time_point now,
                              std::chrono::milliseconds quarantine) const;
  // Why this node must not vote on a fenced acquire: its policy may evict the fence
  // counter (allkeys-*), and allow_fencing_on_evicting_nodes is off; "" when it may.
  std::string fencing_exclusion() const;
  // What a grant is: an acquire's, a fenced acquire's or an extension's.
  enum class grant { acquire, fenced_acquire, extension };
  // Why a grant of that kind, in a reply this node just gave, must not count,
  // judged at `now` (the reply's delivery) with the quarantine period: an acquire's,
  // acquire_exclusion; a fenced acquire's, that or, when it is "", fencing_exclusion;
  // an extension's, clock_exclusion alone. "" when it counts (no allocation then).
  // The connection puts it in the reply's event (reply_event::excluded_by).
  std::string grant_exclusion(grant kind, std::chrono::steady_clock::time_point now,
                              std::chrono::milliseconds quarantine, const std::string* same_server) const;

  // When the latest quarantine ends on the client's clock (the epoch if none).
  std::chrono::steady_clock::time_point quarantine_end() const;
  // The reason of the last quarantine reported, for its on_node_cleared.
  quarantine_reason last_reason() const noexcept { return last_reason_; }
  void note_reported(quarantine_reason reason) noexcept { last_reason_ = reason; }

  // What was seen, for probe and reports: the server's run_id ("" if none was
  // read), when the restart quarantine counts from and when a jump was seen
  // (unset: none), the eviction policy and maxmemory ("" when unknown).
  const std::string& run_id() const noexcept { return run_id_; }
  const std::optional<std::chrono::steady_clock::time_point>& restarted_at() const noexcept {
    return restarted_at_;
  }
  const std::optional<std::chrono::steady_clock::time_point>& jumped_at() const noexcept {
    return jumped_at_;
  }
  const std::string& maxmemory_policy() const noexcept { return maxmemory_policy_; }
  const std::string& maxmemory() const noexcept { return maxmemory_; }

 private:
  guard_settings s_;
  // Restart guard: the server's run_id, and when its quarantine starts on our clock
  // once a restart was seen: when this client first saw the new run_id (a changed
  // run_id may be another, long-running server taking over the address), or the
  // server's start (now - uptime) on first sight in strict mode.
  std::string run_id_;
  std::optional<std::chrono::steady_clock::time_point> restarted_at_;
  // Clock-jump guard: the last TIME sample, and when a jump was seen. The sample
  // outlives reconnects: it is dropped only when INFO shows a different run_id (a
  // restart, which the restart guard handles), never when the run_id is unknown.
  struct time_sample {
    std::chrono::steady_clock::time_point local_mid;
    std::int64_t server_us;
    std::int64_t half_rtt_us;  // how far local_mid may be off
  };
  std::optional<time_sample> last_time_;
  std::optional<std::chrono::steady_clock::time_point> jumped_at_;
  std::int64_t jump_ms_ = 0;  // > 0 forward, < 0 back
  // Fencing exclusion: from the handshake's INFO memory; "" = unknown.
  std::string maxmemory_policy_;
  std::string maxmemory_;
  quarantine_reason last_reason_ = quarantine_reason::restart;
};

// The failover guard of a node whose writes need their replicas (issue 23): the
// replicas its server had since this client first saw that server (its run_id),
// by address (info_replicas). One of them missing — gone, maybe to follow a
// promoted master, whose other replicas Sentinel or the cluster then moves one by
// one and which drop what only this master gave them — is a drop: no write of
// this server counts until every replica of the mark is attached again, or until
// confirm(). By address, not by count: a replica that attached since (a new one,
// synced from this master) does not stand in for the one that left, which may be
// the master now. Pure; loop thread only.
class replica_mark {
 public:
  // INFO replication of server `run_id` (the restart guard's; "" when unknown)
  // listed `attached` (sorted) at `now_ms`. Another server than the mark's (or the
  // first sight) starts a new mark with no drop: a restart is the restart guard's.
  void observe(const std::string& run_id, std::vector<std::string> attached, std::uint64_t now_ms);
  // A replica of the mark was missing at an observation and nothing cleared it since.
  bool dropped() const noexcept { return dropped_; }
  // The exclusion's reason, while dropped(): which replica left, and the counts
  // ("its replica 127.0.0.1:7004 left it: replicas dropped from 2 to 1").
  std::string drop_text() const;
  // The endpoint learned, from a query it sent at `asked_ms`, that this server is
  // still the master: the drop is over if that query was sent `settle_ms` or more
  // after the drop was last seen to grow — the latest observation at which a
  // replica attached at the one before was missing (connection::confirm_master);
  // the mark is then the replicas attached now.
  void confirm(std::uint64_t asked_ms, std::uint64_t settle_ms);

 private:
  std::string run_id_;
  bool seen_ = false;
  std::vector<std::string> mark_;      // sorted: every replica seen since the mark began
  std::vector<std::string> attached_;  // sorted: at the last observation
  bool dropped_ = false;
  std::uint64_t dropped_at_ms_ = 0;
};

}  // namespace redlock::detail
