// One node's guards (guards.h): the restart guard, the clock-jump guard and the
// fencing exclusion, as decisions over what the node's handshakes and replies showed.
#include "node/guards.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <utility>

#include "protocol/info.h"
#include "protocol/reply.h"

namespace redlock::detail {

double clock_jump_allowance_us(std::chrono::milliseconds threshold, double drift_factor, std::int64_t gap_us,
                               std::int64_t uncertainty_us) {
  const double threshold_us = static_cast<double>(threshold.count()) * 1000.0;
  const double drift_us = static_cast<double>(std::max<std::int64_t>(gap_us, 0)) * drift_factor;
  return threshold_us + std::min(threshold_us, drift_us) + static_cast<double>(std::max<std::int64_t>(uncertainty_us, 0));
}

guard_settings guard_settings::of(const client_options& o, std::chrono::milliseconds restart_quarantine) {
  guard_settings s;
  s.restart_quarantine = restart_quarantine;
  s.max_ttl = o.max_ttl;
  s.restart_guard_first_sight = o.restart_guard_first_sight;
  s.clock_jump_threshold = o.clock_jump_threshold;
  s.clock_drift_factor = o.clock_drift_factor;
  s.clock_sample_interval = o.clock_sample_interval;
  s.allow_fencing_on_evicting_nodes = o.allow_fencing_on_evicting_nodes;
  return s;
}

std::optional<quarantine_note> node_guards::observe_server(const std::string& run_id, const std::string& uptime,
                                                           std::chrono::steady_clock::time_point now) {
  std::optional<quarantine_note> note;
  const auto started = now - std::chrono::seconds(std::atoll(uptime.c_str()));
  const bool first = run_id_.empty();
  if (!first && run_id != run_id_) {
    // Another server process behind the address: it may be one that has been
    // running for long (a failover, a re-pointed socket path or DNS name), so its
    // uptime says nothing about the keys this address held. The quarantine counts
    // from now, when this client saw it.
    restarted_at_ = now;
    note = quarantine_note{quarantine_reason::restart, now + s_.restart_quarantine,
                           "new run_id (the server restarted, or another server took over the address): no acquire "
                           "vote until the quarantine ends (restart guard)"};
  } else if (first && s_.restart_guard_first_sight) {
    restarted_at_ = started;
    if (started + s_.restart_quarantine > now) {
      note = quarantine_note{quarantine_reason::first_sight, started + s_.restart_quarantine,
                             "first seen with an uptime of " + uptime +
                                 " s, below the quarantine: no acquire vote until it has been up that long (restart "
                                 "guard, first sight)"};
    }
  }
  // Another server process (maybe another machine) behind the address: its first
  // TIME (next in this handshake) starts a new series. Only here: without INFO
  // (restart guard off, or not permitted) the run_id is unknown and the sample is
  // kept, so that a jump during a disconnection is never hidden.
  if (!first && run_id != run_id_) last_time_.reset();
  run_id_ = run_id;
  return note;
}

std::optional<quarantine_note> node_guards::observe_server_time(std::int64_t server_us,
                                                                std::chrono::steady_clock::time_point local_mid,
                                                                std::int64_t half_rtt_us) {
  const auto threshold = s_.clock_jump_threshold;
  if (threshold.count() <= 0) return std::nullopt;
  std::optional<quarantine_note> note;
  if (last_time_) {
    const std::int64_t local_us =
        std::chrono::duration_cast<std::chrono::microseconds>(local_mid - last_time_->local_mid).count();
    const std::int64_t step = (server_us - last_time_->server_us) - local_us;
    // Either direction: a key granted while the clock is behind expires early once
    // the clock is corrected forward, and a client whose samples straddle both the
    // step back and the correction sees no step at all (net zero).
    const std::int64_t magnitude = step < 0 ? -step : step;
    if (static_cast<double>(magnitude) > clock_jump_allowance_us(threshold, s_.clock_drift_factor, local_us,
                                                                  last_time_->half_rtt_us + half_rtt_us)) {
      jumped_at_ = local_mid;
      jump_ms_ = step / 1000;
      const auto q = std::max(s_.restart_quarantine, s_.max_ttl);
      note = quarantine_note{quarantine_reason::clock_jump, local_mid + q,
                             std::string("server clock jumped ") + (jump_ms_ < 0 ? "back " : "forward ") +
                                 std::to_string(jump_ms_ < 0 ? -jump_ms_ : jump_ms_) +
                                 " ms: no acquire vote until the quarantine ends (clock-jump guard)"};
    }
  }
  last_time_ = time_sample{local_mid, server_us, half_rtt_us};
  return note;
}

void node_guards::observe_memory(std::string policy, std::string maxmemory) {
  maxmemory_policy_ = std::move(policy);
  maxmemory_ = std::move(maxmemory);
}

void node_guards::forget_memory() {
  maxmemory_.clear();
  maxmemory_policy_.clear();
}

std::string node_guards::fencing_exclusion() const {
  if (s_.allow_fencing_on_evicting_nodes) return {};
  if (eviction_risk_of(maxmemory_policy_) != eviction_risk::any_key) return {};
  return "maxmemory-policy " + printable_line(maxmemory_policy_) +
         " may evict the fence counter (a key without TTL): no vote for fenced acquires "
         "(set noeviction, or client_options::allow_fencing_on_evicting_nodes)";
}

std::string node_guards::acquire_exclusion(std::chrono::steady_clock::time_point now,
                                           std::chrono::milliseconds quarantine,
                                           const std::string* same_server) const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  // One server named twice (a unix socket and TCP, two names of one address, two
  // dbs): the later-named node gets no vote, so one server never counts twice.
  if (!run_id_.empty() && same_server != nullptr) {
    return "same server as " + *same_server + " (run_id " + run_id_ + "): configure each server once";
  }
  if (restarted_at_ && quarantine.count() > 0 && now - *restarted_at_ < quarantine) {
    const auto left = duration_cast<milliseconds>(quarantine - (now - *restarted_at_)).count();
    return "restarted: no acquire vote for " + std::to_string(left) + " ms more (restart guard)";
  }
  return clock_exclusion(now, quarantine);
}

std::string node_guards::clock_exclusion(std::chrono::steady_clock::time_point now,
                                         std::chrono::milliseconds quarantine) const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  // The jump quarantine is never shorter than max_ttl (the bound on every TTL),
  // even with the restart guard off (restart_quarantine = 0).
  const auto jump_quarantine = std::max(quarantine, s_.max_ttl);
  if (jumped_at_ && now - *jumped_at_ < jump_quarantine) {
    const auto left = duration_cast<milliseconds>(jump_quarantine - (now - *jumped_at_)).count();
    return std::string("server clock jumped ") + (jump_ms_ < 0 ? "back " : "forward ") +
           std::to_string(jump_ms_ < 0 ? -jump_ms_ : jump_ms_) + " ms: no acquire vote for " +
           std::to_string(left) + " ms more (clock-jump guard)";
  }
  return {};
}

std::string node_guards::grant_exclusion(grant kind, std::chrono::steady_clock::time_point now,
                                         std::chrono::milliseconds quarantine,
                                         const std::string* same_server) const {
  if (kind == grant::extension) return clock_exclusion(now, quarantine);
  std::string why = acquire_exclusion(now, quarantine, same_server);
  // A fenced grant from a node whose policy may evict the fence counter (a
  // reconnect during the attempt may have shown a new policy).
  if (why.empty() && kind == grant::fenced_acquire) why = fencing_exclusion();
  return why;
}

std::chrono::steady_clock::time_point node_guards::quarantine_end() const {
  std::chrono::steady_clock::time_point end{};
  const auto q = s_.restart_quarantine;
  if (restarted_at_ && q.count() > 0) end = *restarted_at_ + q;
  if (jumped_at_) end = std::max(end, *jumped_at_ + std::max(q, s_.max_ttl));
  return end;
}

void replica_mark::observe(const std::string& run_id, std::vector<std::string> attached, std::uint64_t now_ms) {
  if (!seen_ || run_id != run_id_) {
    seen_ = true;
    run_id_ = run_id;
    mark_ = attached;
    attached_ = std::move(attached);
    dropped_ = false;
    return;
  }
  // A replica attached at the last observation and missing now left since: the
  // settling time counts from its leaving, also while an earlier drop is pending
  // (the adversarial pass: a replica dead for 20 s, then the one being promoted
  // leaving, confirmed from the first drop, re-admitted the old master 3 s into
  // the failover).
  const bool left_now = !std::includes(attached.begin(), attached.end(), attached_.begin(), attached_.end());
  attached_ = std::move(attached);
  const bool all_there = std::includes(attached_.begin(), attached_.end(), mark_.begin(), mark_.end());
  if (all_there) {
    dropped_ = false;
  } else if (!dropped_ || left_now) {
    dropped_ = true;
    dropped_at_ms_ = now_ms;
  }
  // Whoever attached since joins the mark: its leaving is a drop too. (Usually no
  // one: every counted write observes, so nothing is allocated then.)
  if (!std::includes(mark_.begin(), mark_.end(), attached_.begin(), attached_.end())) {
    std::vector<std::string> joined;
    std::set_union(mark_.begin(), mark_.end(), attached_.begin(), attached_.end(), std::back_inserter(joined));
    mark_ = std::move(joined);
  }
}

std::string replica_mark::drop_text() const {
  std::vector<std::string> gone;
  std::set_difference(mark_.begin(), mark_.end(), attached_.begin(), attached_.end(), std::back_inserter(gone));
  // dropped(): at least one of the mark is missing from the last observation.
  const bool named = !gone.empty() && gone.front()[0] != '#';
  std::string t = named ? "its replica " + gone.front() + " left it" : "a replica left it";
  if (gone.size() > 1) t += " (and " + std::to_string(gone.size() - 1) + " more)";
  return t + ": replicas dropped from " + std::to_string(mark_.size()) + " to " +
         std::to_string(mark_.size() - gone.size());
}

void replica_mark::confirm(std::uint64_t asked_ms, std::uint64_t settle_ms) {
  if (!dropped_ || asked_ms < dropped_at_ms_ + settle_ms) return;
  dropped_ = false;
  mark_ = attached_;
}

}  // namespace redlock::detail
