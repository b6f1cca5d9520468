// The end-to-end benchmark driver's scenarios. Each starts from the shared
// cluster of redis-server nodes, measures, and emits one record per figure.
//
// Thread-safety: the driver runs scenarios one after another on the main thread.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "record.h"
#include "redlock/observer.h"
#include "redlock/options.h"
#include "redis_node.h"

namespace redlock::bench {

// How long and how much each scenario measures.
struct sizing {
  bool quick = false;
  int repeats = 3;                        // runs of each measured pair (floor, library)
  bench_clock::duration floor_time;       // per floor measurement
  bench_clock::duration latency_time;     // per library latency measurement
  bench_clock::duration throughput_time;  // per in-flight level
  bench_clock::duration contention_time;
  bench_clock::duration fault_time;  // baseline and faulty phase each
  std::uint64_t ping_count = 0;      // per node
  std::uint64_t warmup_pairs = 0;    // per new client
  // Locks of the watchdog scenario at TTL 30 s; a run at a shorter TTL holds
  // proportionally fewer (the same extensions per second): 10 % at TTL 3 s.
  std::size_t watchdog_locks = 0;
  std::size_t memory_locks = 0;  // held locks of the memory scenario
  std::vector<std::pair<std::chrono::milliseconds, bench_clock::duration>> watchdog_runs;  // (ttl, window)
  std::size_t memory_ops = 0;                     // in-flight operations for bytes per operation
  std::chrono::milliseconds command_timeout{50};  // client_options::command_timeout of every client
  // client_options::clock_sample_interval of every client (default: the library's).
  std::chrono::milliseconds clock_sample_interval = client_options{}.clock_sample_interval;

  static sizing make(bool quick);
  // Multiplies every measurement window (not counts) by `factor`.
  void scale(double factor);
};

// Where records go: JSON Lines (file or stdout) and a list kept for the summary.
class sink {
 public:
  sink(std::FILE* json, bool progress_to_stderr);
  void emit(const record& r);
  const std::vector<record>& all() const noexcept { return records_; }
  // Progress lines (stderr if JSON goes to stdout, else stdout).
  void note(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  std::FILE* human() const noexcept { return human_; }

 private:
  std::FILE* json_;
  std::FILE* human_;
  std::vector<record> records_;
};

struct env {
  sizing size;
  test::redis_cluster* cluster = nullptr;
  sink* out = nullptr;

  std::vector<int> ports(std::size_t n) const;
  // Process ids of the first n nodes (for their CPU time).
  std::vector<int> pids(std::size_t n) const;
  std::vector<std::string> uris(std::size_t n) const;
  // FLUSHALL on every running node (keeps the data sets small between scenarios).
  void flush_nodes() const;
};

void scenario_floor(env& e, std::size_t nodes);
// One record per node count, named `name` ("latency"; "nodes" for the N = 3..9 run).
void scenario_latency(env& e, const std::vector<std::size_t>& node_counts, const char* name = "latency");
// Blocking acquire + release from 1, 4 and 16 caller threads sharing one client,
// against as many raw parallel-floor threads (issue 14, target 1).
void scenario_blocking(env& e, std::size_t nodes);
void scenario_throughput(env& e, std::size_t nodes, const std::vector<int>& inflight);
void scenario_contention(env& e, std::size_t nodes);
void scenario_paused(env& e, std::size_t nodes);
// e2e_distance.cc: one node slower by `delay` (a proxy process in front of it), and
// nodes in network namespaces at the round-trip times of each set (ms; every set
// of the same size; skipped with a note unless root with `ip netns`).
void scenario_slow(env& e, std::size_t nodes, std::chrono::milliseconds delay);
std::vector<std::vector<int>> distance_sets(bool quick);
void scenario_distance(env& e, const std::vector<std::vector<int>>& rtt_sets_ms);
void scenario_watchdog(env& e, std::size_t nodes);
void scenario_memory(env& e, std::size_t nodes);
void scenario_tls(env& e, std::size_t nodes, int inflight);
void scenario_semaphore(env& e, std::size_t nodes);  // e2e_semaphore.cc

// The observer variants scenario_observers compares, in order: "none" (no
// observer: the baseline every ratio is against) and "noop" (one observer that
// overrides nothing: the cost of the event sites). More variants (the metrics
// adapter, ...) are added by appending {name, factory} here before the scenario
// runs; the factory makes one observer per client.
using observer_factory = std::function<std::shared_ptr<observer>()>;
std::vector<std::pair<std::string, observer_factory>>& observer_variants();
void scenario_observers(env& e, std::size_t nodes, int inflight);
void scenario_handover(env& e, std::size_t nodes);
// node-redlock (node, npm) vs the library and the floors; skips, with its reason
// in a "peers.skipped" record, when node, npm or the packages are unavailable.
void scenario_peers(env& e, std::size_t nodes);  // e2e_peers.cc

// The summary table (floors, library figures, ratios, targets) on `f`.
void print_summary(std::FILE* f, const std::vector<record>& records);
// gnuplot data files in `dir`: latency_vs_nodes.dat, throughput_vs_inflight.dat,
// and (when those scenarios ran) nodes.dat and distance.dat.
// Returns false (and says why on stderr) if a file cannot be written.
bool write_plot_data(const std::string& dir, const std::vector<record>& records);

}  // namespace redlock::bench
