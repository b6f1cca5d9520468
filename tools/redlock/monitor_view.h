// What `redlock monitor` shows each interval, and its renderings: the terminal
// screen, the one-line text form, the JSON line and the Prometheus text. Pure.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace redlock::cli {

// The last `capacity` round trips of one node, for its p50 and p99, and the
// count and sum of all of them (a Prometheus summary's _count and _sum).
class rtt_window {
 public:
  explicit rtt_window(std::size_t capacity = 60);
  void add(std::uint64_t us);
  std::size_t size() const noexcept { return values_.size(); }
  std::uint64_t total_count() const noexcept { return total_count_; }
  std::uint64_t total_us() const noexcept { return total_us_; }
  // Nearest-rank percentile for p in (0, 100] over the window: the smallest
  // value such that at least p % of the values are <= it. nullopt when empty.
  std::optional<std::uint64_t> percentile(double p) const;

 private:
  std::vector<std::uint64_t> values_;  // a ring once full
  std::size_t next_ = 0;
  std::size_t capacity_;
  std::uint64_t total_count_ = 0;
  std::uint64_t total_us_ = 0;
};

// One server of a cluster or Sentinel node (redlock::deployment_member).
struct monitor_member {
  std::string role;     // "shard master", "master", "sentinel"
  std::string address;  // host:port
  bool connected = false;
  int replicas = -1;  // -1: not a master
  int slots = 0;      // shard masters
};

class json_writer;

// The keys "members" (an array of {role, address, connected, replicas, slots}) and
// "master_changed_ms_ago", as monitor's JSON line and status --json give them.
void write_members_json(json_writer& j, const std::vector<monitor_member>& members,
                        const std::optional<std::int64_t>& master_changed_ms_ago);
// The lines under a node's row: one per member ("  shard master 127.0.0.1:7000  up
// 1 replica, 5461 slots"), then "  master changed ... ago"; `width` pads the first column.
std::string members_text(const std::vector<monitor_member>& members,
                         const std::optional<std::int64_t>& master_changed_ms_ago, std::size_t width);

struct monitor_node {
  std::string node;    // redacted URI
  std::string status;  // "ok" when it answered, else why not ("timeout", "auth_error", ...)
  std::string detail;  // why not, one line
  bool reachable = false;
  std::optional<std::uint64_t> rtt_us;  // this interval's PING round trip
  std::optional<std::uint64_t> rtt_p50_us;
  std::optional<std::uint64_t> rtt_p99_us;
  std::uint64_t rtt_count = 0;  // round trips since the monitor started (rtt_window::total_count)
  std::uint64_t rtt_sum_us = 0;  // their sum
  bool quarantined = false;
  std::string quarantine_detail;
  std::optional<std::int64_t> quarantine_left_ms;  // until the quarantine ends, if it ends
  std::string run_id;  // "" = unknown
  std::optional<std::int64_t> uptime_s;
  std::string redis_version;
  std::string maxmemory_policy;  // "" = unknown
  std::optional<bool> aof_enabled;
  // The probe's warning_code::eviction_policy holds: its maxmemory-policy may evict lock keys.
  bool eviction_risk = false;
  // A cluster or Sentinel node: its servers as the client knows them
  // (node_health::members), and how long ago the client saw its master change.
  std::vector<monitor_member> members;
  std::optional<std::int64_t> master_changed_ms_ago;
};

struct monitor_sample {
  std::int64_t unix_ms = 0;  // wall clock at the start of the interval
  std::uint64_t seq = 0;     // 1 for the first interval
  std::size_t quorum = 0;
  std::size_t reachable = 0;
  std::size_t voting = 0;  // reachable and not quarantined
  bool quorum_ok = false;  // voting >= quorum
  // The test lock's acquire + release round trip; unset when it failed (lock_error).
  std::optional<std::uint64_t> lock_pair_us;
  std::string lock_error;
  std::vector<monitor_node> nodes;
  std::vector<std::string> warnings;
};

// "2026-12-01T13:20:00.123Z".
std::string iso_time(std::int64_t unix_ms);
// "850us", "1.25ms", "2.50s".
std::string format_us(std::uint64_t us);
// "1 node", "3 nodes": `noun`, with an "s" unless n is 1.
std::string counted(std::size_t n, const char* noun);
// "45s", "12m05s", "3h02m", "4d07h".
std::string format_uptime(std::int64_t s);

// One JSON object and "\n" (the --json form).
std::string monitor_json_line(const monitor_sample& s);
// One line and "\n" (stdout not a terminal).
std::string monitor_text_line(const monitor_sample& s);
// The terminal screen: cursor home and clear, then the whole view.
std::string monitor_screen(const monitor_sample& s, std::chrono::milliseconds interval);
// Prometheus text format (0.0.4) for the last sample (none yet: only the counter).
std::string monitor_prometheus(const monitor_sample* last, std::uint64_t intervals);
// `v` escaped for a Prometheus label value (\\, \", \n).
std::string prometheus_label(const std::string& v);

}  // namespace redlock::cli
