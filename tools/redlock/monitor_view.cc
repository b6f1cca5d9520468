#include "monitor_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "json.h"

namespace redlock::cli {

rtt_window::rtt_window(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

void rtt_window::add(std::uint64_t us) {
  ++total_count_;
  total_us_ += us;
  if (values_.size() < capacity_) {
    values_.push_back(us);
  } else {
    values_[next_] = us;
    next_ = (next_ + 1) % capacity_;
  }
}

std::optional<std::uint64_t> rtt_window::percentile(double p) const {
  if (values_.empty()) return std::nullopt;
  std::vector<std::uint64_t> sorted = values_;
  std::sort(sorted.begin(), sorted.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const std::size_t idx = rank < 1 ? 0 : std::min(sorted.size() - 1, static_cast<std::size_t>(rank) - 1);
  return sorted[idx];
}

std::string iso_time(std::int64_t unix_ms) {
  const std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(unix_ms % 1000));
  return buf;
}

std::string counted(std::size_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string format_us(std::uint64_t us) {
  char buf[32];
  if (us < 1000) {
    std::snprintf(buf, sizeof buf, "%lluus", static_cast<unsigned long long>(us));
  } else if (us < 1'000'000) {
    std::snprintf(buf, sizeof buf, "%.2fms", static_cast<double>(us) / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.2fs", static_cast<double>(us) / 1e6);
  }
  return buf;
}

std::string format_uptime(std::int64_t s) {
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  }
  return buf;
}

namespace {

// Control characters escaped, so that a server's text cannot move the cursor.
std::string printable_text(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

json_writer& opt(json_writer& j, const std::optional<std::uint64_t>& v) { return v ? j.number(*v) : j.null(); }
json_writer& opt(json_writer& j, const std::optional<std::int64_t>& v) { return v ? j.number(*v) : j.null(); }
json_writer& opt(json_writer& j, const std::optional<bool>& v) { return v ? j.boolean(*v) : j.null(); }
json_writer& opt(json_writer& j, const std::string& v) { return v.empty() ? j.null() : j.string(v); }

// A node's state in one word: up, quarantined, or why it is down.
std::string state_word(const monitor_node& n) {
  if (!n.reachable) return n.status == "auth_error" ? "AUTH-FAIL" : "DOWN(" + n.status + ")";
  return n.quarantined ? "quarantined" : "up";
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s + " ";
}

}  // namespace

void write_members_json(json_writer& j, const std::vector<monitor_member>& members,
                        const std::optional<std::int64_t>& master_changed_ms_ago) {
  j.key("members").begin_array();
  for (const monitor_member& m : members) {
    j.begin_object();
    j.key("role").string(m.role);
    j.key("address").string(m.address);
    j.key("connected").boolean(m.connected);
    j.key("replicas");
    if (m.replicas < 0) {
      j.null();
    } else {
      j.number(static_cast<std::uint64_t>(m.replicas));
    }
    j.key("slots").number(static_cast<std::uint64_t>(m.slots));
    j.end_object();
  }
  j.end_array();
  j.key("master_changed_ms_ago");
  opt(j, master_changed_ms_ago);
}

std::string members_text(const std::vector<monitor_member>& members,
                         const std::optional<std::int64_t>& master_changed_ms_ago, std::size_t width) {
  std::string out;
  for (const monitor_member& m : members) {
    out += "  " + pad(m.role + " " + printable_text(m.address), width > 2 ? width - 2 : 0) +
           pad(m.connected ? "up" : "down", 16);
    if (m.replicas >= 0) out += counted(static_cast<std::size_t>(m.replicas), "replica");
    if (m.slots > 0) out += ", " + counted(static_cast<std::size_t>(m.slots), "slot");
    out += "\n";
  }
  if (master_changed_ms_ago) {
    out += "  master changed " + format_us(static_cast<std::uint64_t>(*master_changed_ms_ago) * 1000) + " ago\n";
  }
  return out;
}

std::string monitor_json_line(const monitor_sample& s) {
  json_writer j;
  j.begin_object();
  j.key("time").string(iso_time(s.unix_ms));
  j.key("seq").number(static_cast<std::uint64_t>(s.seq));
  j.key("quorum_ok").boolean(s.quorum_ok);
  j.key("quorum").number(static_cast<std::uint64_t>(s.quorum));
  j.key("reachable").number(static_cast<std::uint64_t>(s.reachable));
  j.key("voting").number(static_cast<std::uint64_t>(s.voting));
  j.key("lock_pair_us");
  opt(j, s.lock_pair_us);
  j.key("lock_error");
  opt(j, s.lock_error);
  j.key("nodes").begin_array();
  for (const monitor_node& n : s.nodes) {
    j.begin_object();
    j.key("node").string(n.node);
    j.key("reachable").boolean(n.reachable);
    j.key("status").string(n.status);
    j.key("detail");
    opt(j, n.detail);
    j.key("rtt_us");
    opt(j, n.rtt_us);
    j.key("rtt_p50_us");
    opt(j, n.rtt_p50_us);
    j.key("rtt_p99_us");
    opt(j, n.rtt_p99_us);
    j.key("quarantined").boolean(n.quarantined);
    j.key("quarantine_detail");
    opt(j, n.quarantine_detail);
    j.key("quarantine_left_ms");
    opt(j, n.quarantine_left_ms);
    j.key("run_id");
    opt(j, n.run_id);
    j.key("uptime_s");
    opt(j, n.uptime_s);
    j.key("redis_version");
    opt(j, n.redis_version);
    j.key("maxmemory_policy");
    opt(j, n.maxmemory_policy);
    j.key("aof_enabled");
    opt(j, n.aof_enabled);
    // Only for a node that is a whole deployment (a plain node's line is unchanged).
    if (!n.members.empty()) write_members_json(j, n.members, n.master_changed_ms_ago);
    j.end_object();
  }
  j.end_array();
  j.key("warnings").begin_array();
  for (const std::string& w : s.warnings) j.string(w);
  j.end_array();
  j.end_object();
  return j.str() + "\n";
}

std::string monitor_text_line(const monitor_sample& s) {
  std::string out = iso_time(s.unix_ms);
  out += s.quorum_ok ? " quorum ok" : " NO QUORUM";
  out += " (" + std::to_string(s.voting) + "/" + std::to_string(s.nodes.size()) + " voting, need " +
         std::to_string(s.quorum) + ")";
  out += " lock " + (s.lock_pair_us ? format_us(*s.lock_pair_us) : std::string("FAILED"));
  for (const monitor_node& n : s.nodes) {
    out += " | " + printable_text(n.node) + " " + state_word(n);
    if (n.reachable && n.rtt_p50_us) out += " p50 " + format_us(*n.rtt_p50_us) + " p99 " + format_us(*n.rtt_p99_us);
  }
  out += " | warnings " + std::to_string(s.warnings.size()) + "\n";
  return out;
}

std::string monitor_screen(const monitor_sample& s, std::chrono::milliseconds interval) {
  std::string out = "\x1b[H\x1b[2J";
  out += "redlock monitor  " + iso_time(s.unix_ms) + "  every " +
         format_us(static_cast<std::uint64_t>(interval.count()) * 1000) + "  (Ctrl-C to stop)\n\n";
  out += std::string("quorum: ") + (s.quorum_ok ? "ok" : "NONE") + " (" + std::to_string(s.voting) + " of " +
         counted(s.nodes.size(), "node") + " vote, quorum " + std::to_string(s.quorum) + ")";
  out += "   test lock acquire+release: " +
         (s.lock_pair_us ? format_us(*s.lock_pair_us) : "FAILED: " + printable_text(s.lock_error)) + "\n\n";
  std::size_t w = 4;
  for (const monitor_node& n : s.nodes) w = std::max(w, printable_text(n.node).size());
  out += pad("NODE", w) + pad("STATE", 16) + pad("RTT p50", 9) + pad("RTT p99", 9) + pad("RUN_ID", 8) +
         pad("UPTIME", 7) + pad("VERSION", 8) + pad("POLICY", 15) + "AOF\n";
  for (const monitor_node& n : s.nodes) {
    out += pad(printable_text(n.node), w) + pad(state_word(n), 16);
    out += pad(n.reachable && n.rtt_p50_us ? format_us(*n.rtt_p50_us) : "-", 9);
    out += pad(n.reachable && n.rtt_p99_us ? format_us(*n.rtt_p99_us) : "-", 9);
    out += pad(n.run_id.empty() ? "-" : printable_text(n.run_id.substr(0, 8)), 8);
    out += pad(n.uptime_s ? format_uptime(*n.uptime_s) : "-", 7);
    out += pad(n.redis_version.empty() ? "-" : printable_text(n.redis_version), 8);
    out += pad(n.maxmemory_policy.empty() ? "-" : printable_text(n.maxmemory_policy), 15);
    out += n.aof_enabled ? (*n.aof_enabled ? "yes" : "no") : "-";
    out += "\n";
    out += members_text(n.members, n.master_changed_ms_ago, w);
  }
  out += "\n";
  if (s.warnings.empty()) {
    out += "no warnings\n";
  } else {
    out += "warnings:\n";
    for (const std::string& warn : s.warnings) out += "  " + printable_text(warn) + "\n";
  }
  return out;
}

std::string prometheus_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string monitor_prometheus(const monitor_sample* last, std::uint64_t intervals) {
  std::string out;
  const auto family = [&out](const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  const auto seconds = [](std::uint64_t us) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.6f", static_cast<double>(us) / 1e6);
    return std::string(buf);
  };
  family("redlock_monitor_intervals_total", "counter", "Probe intervals completed by redlock monitor.");
  out += "redlock_monitor_intervals_total " + std::to_string(intervals) + "\n";
  if (last == nullptr) return out;
  const auto per_node = [&out, last](const char* name, const auto& value) {
    for (const monitor_node& n : last->nodes) {
      const std::string v = value(n);
      if (!v.empty()) out += std::string(name) + "{node=\"" + prometheus_label(n.node) + "\"} " + v + "\n";
    }
  };
  family("redlock_monitor_quorum_ok", "gauge",
         "Monitor probe: 1 when at least redlock_monitor_quorum nodes answered it and are not quarantined.");
  out += std::string("redlock_monitor_quorum_ok ") + (last->quorum_ok ? "1" : "0") + "\n";
  family("redlock_monitor_quorum", "gauge", "Nodes an acquire needs: a majority of the configured nodes.");
  out += "redlock_monitor_quorum " + std::to_string(last->quorum) + "\n";
  family("redlock_monitor_voting_nodes", "gauge",
         "Monitor probe: nodes that answered the last probe and are not quarantined (can vote on acquires).");
  out += "redlock_monitor_voting_nodes " + std::to_string(last->voting) + "\n";
  family("redlock_monitor_lock_pair_seconds", "gauge",
         "Round trip of the test lock's acquire and release (absent when it failed).");
  if (last->lock_pair_us) out += "redlock_monitor_lock_pair_seconds " + seconds(*last->lock_pair_us) + "\n";
  family("redlock_monitor_node_up", "gauge",
         "Monitor probe: 1 when the node answered this monitor's last PING, 0 when not. (The connection "
         "state of a client, the monitor's own included, is redlock_node_up.)");
  per_node("redlock_monitor_node_up", [](const monitor_node& n) { return std::string(n.reachable ? "1" : "0"); });
  family("redlock_monitor_node_quarantined", "gauge", "1 while a safety guard keeps the node out of acquires.");
  per_node("redlock_monitor_node_quarantined",
           [](const monitor_node& n) { return std::string(n.quarantined ? "1" : "0"); });
  // A summary, as client libraries make one: quantiles over a sliding window (the
  // last 60 replies), _sum and _count over every reply since the start.
  family("redlock_monitor_node_rtt_seconds", "summary",
         "Monitor probe: PING round trip; quantiles over the last 60 replies, sum and count over all.");
  for (const monitor_node& n : last->nodes) {
    const std::string node = "node=\"" + prometheus_label(n.node) + "\"";
    if (n.rtt_p50_us && n.rtt_p99_us) {
      out += "redlock_monitor_node_rtt_seconds{" + node + ",quantile=\"0.5\"} " + seconds(*n.rtt_p50_us) + "\n";
      out += "redlock_monitor_node_rtt_seconds{" + node + ",quantile=\"0.99\"} " + seconds(*n.rtt_p99_us) + "\n";
    }
    out += "redlock_monitor_node_rtt_seconds_sum{" + node + "} " + seconds(n.rtt_sum_us) + "\n";
    out += "redlock_monitor_node_rtt_seconds_count{" + node + "} " + std::to_string(n.rtt_count) + "\n";
  }
  family("redlock_monitor_node_uptime_seconds", "gauge", "The server's uptime_in_seconds.");
  per_node("redlock_monitor_node_uptime_seconds",
           [](const monitor_node& n) { return n.uptime_s ? std::to_string(*n.uptime_s) : std::string(); });
  family("redlock_monitor_node_eviction_risk", "gauge",
         "1 when the node's maxmemory-policy may evict lock keys (anything but noeviction), 0 when it cannot; "
         "absent while the policy is unknown.");
  per_node("redlock_monitor_node_eviction_risk", [](const monitor_node& n) {
    return n.maxmemory_policy.empty() ? std::string() : std::string(n.eviction_risk ? "1" : "0");
  });
  // Deployment nodes' members (issue 23): a label per member, bounded: a cluster's
  // shard masters (at most the cluster's shards), a Sentinel group's master and
  // sentinels, never more than kMaxMemberSeries per node.
  constexpr std::size_t kMaxMemberSeries = 64;
  const auto per_member = [&out, last](const char* name, const auto& value) {
    for (const monitor_node& n : last->nodes) {
      for (std::size_t i = 0; i < n.members.size() && i < kMaxMemberSeries; ++i) {
        const monitor_member& m = n.members[i];
        const std::string v = value(m);
        if (v.empty()) continue;
        out += std::string(name) + "{node=\"" + prometheus_label(n.node) + "\",member=\"" +
               prometheus_label(m.address) + "\",role=\"" + prometheus_label(m.role) + "\"} " + v + "\n";
      }
    }
  };
  // Only when some node is a deployment: a quorum of plain nodes exports none of
  // these families (the dashboard and the rules do not use them).
  const bool deployments = std::any_of(last->nodes.begin(), last->nodes.end(),
                                       [](const monitor_node& n) { return !n.members.empty(); });
  if (deployments) {
    family("redlock_monitor_member_up", "gauge",
           "Deployment nodes (a Redis Cluster, a Sentinel group): 1 while the monitor's connection to the member "
           "(a shard master, the master, a sentinel) is up, 0 while not; at most 64 members per node.");
    per_member("redlock_monitor_member_up",
               [](const monitor_member& m) { return std::string(m.connected ? "1" : "0"); });
    family("redlock_monitor_member_replicas", "gauge",
           "Deployment nodes: the replicas attached to each master member, as its last INFO replication said.");
    per_member("redlock_monitor_member_replicas",
               [](const monitor_member& m) { return m.replicas < 0 ? std::string() : std::to_string(m.replicas); });
    family("redlock_monitor_member_slots", "gauge", "Redis Cluster nodes: the hash slots each shard master serves.");
    per_member("redlock_monitor_member_slots", [](const monitor_member& m) {
      return m.role == "shard master" ? std::to_string(m.slots) : std::string();
    });
    family("redlock_monitor_node_master_changed_seconds", "gauge",
           "Deployment nodes: seconds since the monitor's client last saw a master change in the node (a failover); "
           "absent while it saw none.");
    per_node("redlock_monitor_node_master_changed_seconds", [&seconds](const monitor_node& n) {
      if (!n.master_changed_ms_ago) return std::string();
      return seconds(static_cast<std::uint64_t>(std::max<std::int64_t>(0, *n.master_changed_ms_ago)) * 1000);
    });
  }
  family("redlock_monitor_warnings", "gauge", "Warnings in the last interval.");
  out += "redlock_monitor_warnings " + std::to_string(last->warnings.size()) + "\n";
  return out;
}

}  // namespace redlock::cli
