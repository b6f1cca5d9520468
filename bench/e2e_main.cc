// bench_e2e: the end-to-end benchmark of the redlock library against the network
// floor, on redis-server nodes it starts itself on 127.0.0.1.
//
//   bench_e2e [--quick] [--repeat N] [--nodes N] [--json] [--out FILE] [--data-dir DIR]
//             [--scale F] [--inflight LIST] [--command-timeout MS] [--watchdog-locks N]
//             [--watchdog-ttl LIST] [SCENARIO...]
//
// SCENARIO: floor latency nodes blocking throughput contention paused slow distance watchdog memory
// tls semaphore observers handover, or all (the default; with --quick, all but distance); and the
// opt-in ones, run only when named (never by `all`, the default or --quick alone): peers.
// See docs/benchmarks.md.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "e2e.h"
#include "redlock/version.h"

namespace redlock::bench {
namespace {

const std::vector<std::string> kScenarios = {"floor",  "latency",  "nodes",     "blocking",  "throughput",
                                             "contention", "paused", "slow",   "distance",  "watchdog",
                                             "memory", "tls",      "semaphore", "observers", "handover"};
// Left out of the default list with --quick (CI's smoke run): it needs root, makes
// network namespaces and waits for 20 ms round trips. `--quick distance` runs it briefly.
const std::vector<std::string> kNotQuickByDefault = {"distance"};
// Run only when named: they need more than this machine (peers: node, npm and,
// with a cold npm cache, the registry), so neither `all`, the default nor the
// CI smoke run (`--quick`, no scenario named) includes them.
const std::vector<std::string> kOptInScenarios = {"peers"};

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_e2e [options] [SCENARIO...]\n"
               "\n"
               "Starts its own redis-server nodes on 127.0.0.1 and measures the redlock library\n"
               "against raw-hiredis floors measured in the same run.\n"
               "\n"
               "scenarios (default: all; with --quick all but distance):\n"
               "  floor       PING per node; sequential, parallel and pipelined raw floors\n"
               "  latency     single-client pair latency for 1, 3, 5, 7 nodes vs the parallel floor\n"
               "  nodes       the same for 3, 5, 7, 9 nodes, with server CPU per pair (how both grow with N)\n"
               "  throughput  pairs/s with 1, 16, 64, 256 in flight vs the pipelined floor\n"
               "  contention  4 clients, 64 in flight over 4 keys, one attempt each\n"
               "  paused      acquire latency with one node SIGSTOPped vs baseline\n"
               "  slow        acquire and pair latency with one node 50 ms slower vs the same proxy at 0 ms\n"
               "              (the proxy is a process of its own, bench_delay_proxy); CPU split\n"
               "  distance    nodes in network namespaces (veth, 127/8) at per-node RTTs of 1..20 ms (a\n"
               "              proxy process per node): pair p50 vs 2 RTTs to the quorum-th nearest node,\n"
               "              a raw quorum client and a sequential one. Needs root and `ip netns`\n"
               "              (else skipped)\n"
               "  watchdog    CPU, memory and extension spread of 100,000 auto-extended locks at ttl 30 s\n"
               "              (10,000 at ttl 3 s)\n"
               "  memory      bytes per held lock, per in-flight acquire; peak RSS\n"
               "  tls         TLS (rediss://) vs plain TCP: pair latency and 64-in-flight throughput\n"
               "  semaphore   acquisitions/s of a K-permit semaphore (K = 1, 2, 4, 8), 16 contenders\n"
               "  observers   no observer vs a no-op observer vs the metrics adapter (observer_variants(),\n"
               "              e2e.h): pair latency,\n"
               "              32-in-flight throughput and client CPU per pair, as ratios to none\n"
               "  blocking    blocking acquire + release from 1, 4, 16 caller threads on one client vs as\n"
               "              many raw parallel-floor threads; with and without the spin/linger\n"
               "  handover    waiting acquires, polling vs release notifications: hand-over latency,\n"
               "              48 contenders holding 10 ms (fairness, server commands per acquisition)\n"
               "\n"
               "opt-in scenarios (run only when named; not part of all, the default or --quick):\n"
               "  peers       node-redlock 5 (beta) over ioredis, installed by npm into a temporary\n"
               "              prefix, vs this library and the raw floors: single-client pair latency and\n"
               "              64-in-flight pairs/s. Skips (exit status unaffected) without node/npm or\n"
               "              when npm install fails (no network and a cold cache)\n"
               "\n"
               "options:\n"
               "  --quick             each scenario well under 2 s (CI smoke run)\n"
               "  --repeat N          runs of each floor/library measurement; medians reported\n"
               "                      (default 3, 1 with --quick)\n"
               "  --nodes N           nodes for every scenario but latency (default 5)\n"
               "  --json              JSON Lines on stdout (the table goes to stderr)\n"
               "  --out FILE          JSON Lines to FILE\n"
               "  --data-dir DIR      write gnuplot data files for bench/plot.sh into DIR\n"
               "  --scale F           multiply every measurement window by F (e.g. 4 for profiling)\n"
               "  --inflight LIST     in-flight levels of the throughput scenario (default 1,16,64,256)\n"
               "  --command-timeout MS  client_options::command_timeout of every client (default 50)\n"
               "  --clock-sample-interval MS  client_options::clock_sample_interval of every client\n"
               "                      (default: the library's; 0 = a TIME behind every acquire)\n"
               "  --watchdog-locks N  locks held in the watchdog (at ttl 30 s; fewer at a shorter ttl) and memory\n"
               "                      scenarios\n"
               "  --watchdog-ttl LIST lock TTLs of the watchdog scenario in ms (default 30000,3000)\n");
}

std::string first_line_of_command(const char* cmd) {
  std::string out;
  if (std::FILE* p = ::popen(cmd, "r")) {
    char buf[512];
    if (std::fgets(buf, sizeof buf, p) != nullptr) out = buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown";
}

record run_record(const sizing& size, std::size_t nodes) {
  record r("run");
  r.set_str("library_version", REDLOCK_VERSION_STRING);
  r.set_str("mode", size.quick ? "quick" : "full");
  r.set_int("repeats", size.repeats);
  r.set_int("nodes", static_cast<std::int64_t>(nodes));
  r.set_int("nproc", static_cast<std::int64_t>(std::thread::hardware_concurrency()));
  r.set_str("cpu_model", cpu_model());
  const char* server = std::getenv("REDLOCK_TEST_REDIS_SERVER");
  const std::string cmd =
      std::string(server != nullptr && *server ? server : "redis-server") + " --version 2>&1";
  r.set_str("redis_version", first_line_of_command(cmd.c_str()));
  r.set_int("unix_time", static_cast<std::int64_t>(std::time(nullptr)));
  r.set_int("command_timeout_ms", size.command_timeout.count());
  r.set_int("clock_sample_interval_ms", size.clock_sample_interval.count());
  return r;
}

bool parse_int(const char* s, long lo, long hi, long& out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

int run(int argc, char** argv) {
  bool quick = false, json_stdout = false;
  long repeat = -1, nodes = 5, watchdog_locks = -1, command_timeout_ms = -1, sample_interval_ms = -1;
  double scale = 1.0;
  std::string out_path, data_dir;
  std::vector<std::string> chosen;
  std::vector<int> inflight = {1, 16, 64, 256};
  std::vector<long> watchdog_ttls;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_e2e: %s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    auto int_value = [&](const char* name, long lo, long hi) {
      long v = 0;
      if (!parse_int(value(name), lo, hi, v)) {
        std::fprintf(stderr, "bench_e2e: %s must be an integer in [%ld, %ld]\n", name, lo, hi);
        std::exit(2);
      }
      return v;
    };
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--json") {
      json_stdout = true;
    } else if (a == "--repeat") {
      repeat = int_value("--repeat", 1, 15);
    } else if (a == "--nodes") {
      nodes = int_value("--nodes", 1, 15);
    } else if (a == "--command-timeout") {
      command_timeout_ms = int_value("--command-timeout", 1, 60000);
    } else if (a == "--clock-sample-interval") {
      sample_interval_ms = int_value("--clock-sample-interval", 0, 3600000);
    } else if (a == "--watchdog-locks") {
      watchdog_locks = int_value("--watchdog-locks", 1, 1000000);
    } else if (a == "--scale") {
      char* end = nullptr;
      const char* v = value("--scale");
      scale = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(scale >= 0.01 && scale <= 100)) {
        std::fprintf(stderr, "bench_e2e: --scale must be a number in [0.01, 100]\n");
        return 2;
      }
    } else if (a == "--inflight") {
      inflight.clear();
      std::string list = value("--inflight");
      for (std::size_t at = 0; at <= list.size();) {
        std::size_t comma = std::min(list.find(',', at), list.size());
        long v = 0;
        if (!parse_int(list.substr(at, comma - at).c_str(), 1, 4096, v)) {
          std::fprintf(stderr, "bench_e2e: --inflight takes integers in [1, 4096], comma-separated\n");
          return 2;
        }
        inflight.push_back(static_cast<int>(v));
        at = comma + 1;
      }
    } else if (a == "--watchdog-ttl") {
      std::string list = value("--watchdog-ttl");
      for (std::size_t at = 0; at <= list.size();) {
        std::size_t comma = std::min(list.find(',', at), list.size());
        long v = 0;
        if (!parse_int(list.substr(at, comma - at).c_str(), 100, 3600000, v)) {
          std::fprintf(stderr, "bench_e2e: --watchdog-ttl takes integers in [100, 3600000], comma-separated\n");
          return 2;
        }
        watchdog_ttls.push_back(v);
        at = comma + 1;
      }
    } else if (a == "--out") {
      out_path = value("--out");
    } else if (a == "--data-dir") {
      data_dir = value("--data-dir");
    } else if (a == "all") {
      chosen = kScenarios;
    } else if (std::find(kScenarios.begin(), kScenarios.end(), a) != kScenarios.end() ||
               std::find(kOptInScenarios.begin(), kOptInScenarios.end(), a) != kOptInScenarios.end()) {
      if (std::find(chosen.begin(), chosen.end(), a) == chosen.end()) chosen.push_back(a);
    } else {
      std::fprintf(stderr, "bench_e2e: unknown argument '%s'\n\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (chosen.empty()) {
    for (const auto& s : kScenarios) {
      if (!quick || std::find(kNotQuickByDefault.begin(), kNotQuickByDefault.end(), s) == kNotQuickByDefault.end())
        chosen.push_back(s);
    }
  }
  // Run in the canonical order whatever the command-line order.
  std::vector<std::string> order;
  for (const auto* list : {&kScenarios, &kOptInScenarios}) {
    for (const auto& s : *list) {
      if (std::find(chosen.begin(), chosen.end(), s) != chosen.end()) order.push_back(s);
    }
  }

  sizing size = sizing::make(quick);
  if (repeat > 0) size.repeats = static_cast<int>(repeat);
  if (watchdog_locks > 0) size.watchdog_locks = size.memory_locks = static_cast<std::size_t>(watchdog_locks);
  if (!watchdog_ttls.empty()) {
    // The default window for a default TTL; otherwise 10 s (or one TTL, if longer).
    std::vector<std::pair<std::chrono::milliseconds, bench_clock::duration>> runs;
    for (long ms : watchdog_ttls) {
      const std::chrono::milliseconds ttl(ms);
      bench_clock::duration window = quick ? bench_clock::duration(std::chrono::milliseconds(500))
                                           : bench_clock::duration(std::max(ttl, std::chrono::milliseconds(10000)));
      for (const auto& d : size.watchdog_runs) {
        if (d.first == ttl) window = d.second;
      }
      runs.emplace_back(ttl, window);
    }
    size.watchdog_runs = runs;
  }
  size.scale(scale);
  if (command_timeout_ms > 0) size.command_timeout = std::chrono::milliseconds(command_timeout_ms);
  if (sample_interval_ms >= 0) size.clock_sample_interval = std::chrono::milliseconds(sample_interval_ms);

  std::FILE* json = nullptr;
  if (!out_path.empty()) {
    json = std::fopen(out_path.c_str(), "w");
    if (json == nullptr) {
      std::fprintf(stderr, "bench_e2e: cannot write %s: %s\n", out_path.c_str(), std::strerror(errno));
      return 1;
    }
  } else if (json_stdout) {
    json = stdout;
  }
  sink out(json, json == stdout);

  const std::vector<std::size_t> latency_nodes = {1, 3, 5, 7};
  const auto n = static_cast<std::size_t>(nodes);
  std::size_t cluster_size = n;
  if (std::find(order.begin(), order.end(), "latency") != order.end())
    cluster_size = std::max<std::size_t>(n, 7);
  if (std::find(order.begin(), order.end(), "nodes") != order.end())
    cluster_size = std::max<std::size_t>(cluster_size, 9);

  // The library and hiredis write to sockets; a node that dies must not kill us.
  ::signal(SIGPIPE, SIG_IGN);

  const auto t0 = bench_clock::now();
  out.note("bench_e2e: starting %zu redis-server nodes (%s mode, %d repeats)", cluster_size,
           quick ? "quick" : "full", size.repeats);
  test::redis_cluster cluster(static_cast<int>(cluster_size));
  env e;
  e.size = size;
  e.cluster = &cluster;
  e.out = &out;
  out.emit(run_record(size, n));

  const std::vector<std::pair<std::string, std::function<void()>>> table = {
      {"floor", [&] { scenario_floor(e, n); }},
      {"latency", [&] { scenario_latency(e, latency_nodes); }},
      {"nodes", [&] { scenario_latency(e, {3, 5, 7, 9}, "nodes"); }},
      {"throughput", [&] { scenario_throughput(e, n, inflight); }},
      {"contention", [&] { scenario_contention(e, n); }},
      {"paused", [&] { scenario_paused(e, n); }},
      {"slow", [&] { scenario_slow(e, n, std::chrono::milliseconds(50)); }},
      {"distance", [&] { scenario_distance(e, distance_sets(quick)); }},
      {"watchdog", [&] { scenario_watchdog(e, n); }},
      {"memory", [&] { scenario_memory(e, n); }},
      {"tls", [&] { scenario_tls(e, n, 64); }},
      {"semaphore", [&] { scenario_semaphore(e, n); }},
      {"observers", [&] { scenario_observers(e, n, 32); }},
      {"handover", [&] { scenario_handover(e, n); }},
      {"blocking", [&] { scenario_blocking(e, n); }},
      {"peers", [&] { scenario_peers(e, n); }},
  };
  int failures = 0;
  for (const auto& name : order) {
    for (const auto& [id, fn] : table) {
      if (id != name) continue;
      const auto s0 = bench_clock::now();
      out.note("[%s]", id.c_str());
      try {
        fn();
      } catch (const std::exception& ex) {
        ++failures;
        record err("error");
        err.set_str("failed_scenario", id);
        err.set_str("what", ex.what());
        out.emit(err);
        out.note("  FAILED: %s", ex.what());
      }
      out.note("  (%.1f s)", to_seconds(bench_clock::now() - s0));
    }
  }

  record proc("process");
  proc.set("total_seconds", to_seconds(bench_clock::now() - t0));
  proc.set_int("peak_rss_bytes", peak_rss_bytes());
  proc.set("cpu_seconds", process_cpu_seconds());
  out.emit(proc);

  print_summary(out.human(), out.all());
  if (!data_dir.empty() && !write_plot_data(data_dir, out.all())) ++failures;
  if (json != nullptr && json != stdout) std::fclose(json);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace redlock::bench

int main(int argc, char** argv) {
  try {
    return redlock::bench::run(argc, argv);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "bench_e2e: %s\n", ex.what());
    return 1;
  }
}
