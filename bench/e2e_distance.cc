// The distance scenarios of bench_e2e (issue 14, targets 4 and 6):
//
//  - slow: one of n nodes 50 ms slower. The delay sits in a proxy process of its
//    own (bench_delay_proxy), in front of the last node, for both phases: the base
//    phase runs through the same proxy at 0 delay, so the two differ only by the
//    delay. Client, servers and proxy CPU are measured apart.
//  - distance: every node in a network namespace of its own behind a veth pair on
//    127/8 addresses, with a per-node round-trip time added by one proxy process per
//    node (half each way). The library's pair latency is compared with the physical
//    limit (two round trips to the quorum-th nearest node), with a raw client that
//    decides at the quorum and with a sequential one (which pays every node's RTT).
//
// Thread-safety: run from the driver's main thread, like every scenario (the child
// processes die with it).
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "e2e.h"
#include "library_load.h"
#include "netns_lab.h"
#include "raw_floor.h"

namespace redlock::bench {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

constexpr std::uint64_t kUnbounded = 100'000'000;  // loops are bounded by time first

// A client on `uris` with the run's options, warmed up by `warmup` pairs.
std::unique_ptr<client> distance_client(const env& e, std::vector<std::string> uris, milliseconds command_timeout,
                                        std::uint64_t warmup) {
  client_options o;
  o.nodes = std::move(uris);
  o.command_timeout = command_timeout;
  o.clock_sample_interval = e.size.clock_sample_interval;
  auto c = std::make_unique<client>(std::move(o));
  const auto deadline = bench_clock::now() + seconds(10);
  std::uint64_t ok = 0;
  for (std::uint64_t i = 0; ok < warmup && bench_clock::now() < deadline; ++i) {
    acquire_result a = c->acquire("bench:warmup:" + unique_key_suffix(), bench_acquire_options());
    if (a && !a.lock.release().error) ++ok;
  }
  if (ok < warmup) throw std::runtime_error("warm-up failed: the client cannot lock");
  return c;
}

double per_second(std::uint64_t n, double secs) { return secs > 0 ? static_cast<double>(n) / secs : 0; }

// CPU per pair of the client (this process), the servers and the proxies since
// construction, and the other tenants' load.
class cpu_split {
 public:
  cpu_split(std::vector<int> servers, std::vector<int> proxies)
      : proxies_(std::move(proxies)), proxies0_(processes_cpu_seconds(proxies_)), meter_(std::move(servers)) {}
  void add(record& r, const std::string& prefix, std::uint64_t pairs) const {
    r.set(prefix + "client_cpu_us_per_pair", meter_.own_us_per(pairs));
    r.set(prefix + "server_cpu_us_per_pair", meter_.servers_us_per(pairs));
    const double proxy = processes_cpu_seconds(proxies_) - proxies0_;
    r.set(prefix + "proxy_cpu_us_per_pair", pairs > 0 ? proxy * 1e6 / static_cast<double>(pairs) : NAN);
    // The proxies are ours too: not the other tenants'.
    const double secs = std::max(1e-9, to_seconds(bench_clock::now() - t0_));
    r.set(prefix + "others_busy_cores", std::max(0.0, meter_.other_busy_cores() - proxy / secs));
  }

 private:
  std::vector<int> proxies_;
  double proxies0_;
  bench_clock::time_point t0_ = bench_clock::now();
  cpu_meter meter_;
};

// CPU summed over several slices: the client (this process), the servers and the
// proxies, per pair; and the other tenants' load over the slices.
class cpu_total {
 public:
  struct mark {
    mark(const std::vector<int>& servers, const std::vector<int>& proxies)
        : own(process_cpu_seconds()), servers_s(processes_cpu_seconds(servers)),
          proxies_s(processes_cpu_seconds(proxies)), switches(context_switches()), meter(servers) {}
    double own, servers_s, proxies_s, switches;
    cpu_meter meter;
    bench_clock::time_point t0 = bench_clock::now();
  };
  void add(const mark& m, const std::vector<int>& servers, const std::vector<int>& proxies, std::uint64_t pairs) {
    const double secs = to_seconds(bench_clock::now() - m.t0);
    const double proxy = processes_cpu_seconds(proxies) - m.proxies_s;
    own_ += process_cpu_seconds() - m.own;
    servers_ += processes_cpu_seconds(servers) - m.servers_s;
    proxies_ += proxy;
    others_core_seconds_ += std::max(0.0, m.meter.other_busy_cores() - proxy / std::max(secs, 1e-9)) * secs;
    switches_ += context_switches() - m.switches;
    seconds_ += secs;
    pairs_ += pairs;
  }
  void put(record& r, const std::string& prefix) const {
    const double p = pairs_ > 0 ? static_cast<double>(pairs_) : NAN;
    r.set(prefix + "client_cpu_us_per_pair", own_ * 1e6 / p);
    r.set(prefix + "server_cpu_us_per_pair", servers_ * 1e6 / p);
    r.set(prefix + "proxy_cpu_us_per_pair", proxies_ * 1e6 / p);
    r.set(prefix + "others_busy_cores", seconds_ > 0 ? others_core_seconds_ / seconds_ : NAN);
    // Every thread of this process: each time one blocked (a wait for a reply, an
    // idle event loop) or was preempted. The loop thread's wake-ups show here.
    r.set(prefix + "client_context_switches_per_pair", switches_ / p);
  }
  // Voluntary + involuntary context switches of every thread of this process.
  static double context_switches() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_nvcsw + ru.ru_nivcsw);
  }

 private:
  double own_ = 0, servers_ = 0, proxies_ = 0, others_core_seconds_ = 0, seconds_ = 0, switches_ = 0;
  std::uint64_t pairs_ = 0;
};

std::string rtt_label(const std::vector<int>& rtts_ms) {
  std::string s = "{";
  for (std::size_t i = 0; i < rtts_ms.size(); ++i) s += (i ? "," : "") + std::to_string(rtts_ms[i]);
  return s + "}";
}

}  // namespace

// ------------------------------------------------------------------ one slow node

void scenario_slow(env& e, std::size_t n, milliseconds delay) {
  e.flush_nodes();
  const milliseconds timeout = e.size.command_timeout;
  proxy_process proxy("127.0.0.1", (*e.cluster)[n - 1].port(), microseconds(0), false);
  std::vector<std::string> uris = e.uris(n - 1);
  uris.push_back(proxy.uri());
  auto c = distance_client(e, uris, timeout, e.size.warmup_pairs);
  std::vector<int> raw_ports = e.ports(n - 1);
  raw_ports.push_back(proxy.port());
  raw_nodes raw(raw_ports);
  const std::size_t quorum = n / 2 + 1;
  // Each repeat interleaves base and slow in short slices (the order alternating),
  // library and raw client each: on a shared machine the load drifts within
  // seconds, and slices see the same drift on both sides.
  constexpr int kSlices = 6;
  const auto slice = e.size.fault_time / kSlices;
  std::vector<record> runs;
  for (int rep = 0; rep < e.size.repeats; ++rep) {
    record r("fault.slow");
    r.set_int("nodes", static_cast<std::int64_t>(n));
    r.set_int("command_timeout_ms", timeout.count());
    r.set_int("delay_ms", delay.count());
    r.set_int("slices", kSlices);
    struct side {
      pair_result lib;
      floor_result raw;
      cpu_total lib_cpu, raw_cpu;
      std::uint64_t reconnects = 0;
    };
    side sides[2];  // 0 base, 1 slow
    std::vector<int> servers = e.pids(n);
    std::vector<int> proxies = {static_cast<int>(proxy.pid())};
    for (int s = 0; s < kSlices; ++s) {
      for (int k = 0; k < 2; ++k) {
        const int which = (k + s + rep) % 2;
        side& sd = sides[which];
        proxy.set_delay(which == 1 ? microseconds(delay) : microseconds(0));
        // Requests held at the old delay drain first (at most one delay).
        std::this_thread::sleep_for(delay + milliseconds(20));
        const client_stats s0 = c->stats();
        cpu_total::mark m0(servers, proxies);
        pair_result l = sync_pairs(*c, bench_acquire_options(), slice, kUnbounded);
        sd.lib_cpu.add(m0, servers, proxies, l.pairs);
        sd.reconnects += c->stats().reconnects - s0.reconnects;
        sd.lib.pair.append(l.pair);
        sd.lib.acquire.append(l.acquire);
        sd.lib.release.append(l.release);
        sd.lib.pairs += l.pairs;
        sd.lib.errors += l.errors;
        sd.lib.seconds += l.seconds;
        // A raw client that decides at the quorum and reads the late replies while
        // it goes on (as the library does), through the same proxy: what the slow
        // node costs a minimal client on this machine.
        cpu_total::mark m1(servers, proxies);
        floor_result q = async_quorum_floor(raw, quorum, slice, kUnbounded);
        sd.raw_cpu.add(m1, servers, proxies, q.pairs);
        sd.raw.pair.append(q.pair);
        sd.raw.acquire.append(q.acquire);
        sd.raw.pairs += q.pairs;
        sd.raw.errors += q.errors;
      }
    }
    for (int which = 0; which < 2; ++which) {
      side& sd = sides[which];
      const std::string name = which == 0 ? "base" : "fault";
      sd.lib_cpu.put(r, name + "_");
      sd.raw_cpu.put(r, "raw_quorum_" + name + "_");
      r.set_summary(name + "_acquire", sd.lib.acquire.summarize());
      r.set_summary(name + "_release", sd.lib.release.summarize());
      r.set_summary(name + "_pair", sd.lib.pair.summarize());
      r.set_int(name + "_errors", static_cast<std::int64_t>(sd.lib.errors));
      r.set(name + "_pairs_per_s", per_second(sd.lib.pairs, sd.lib.seconds));
      r.set_int(name + "_reconnects", static_cast<std::int64_t>(sd.reconnects));
      r.set_summary("raw_quorum_" + name + "_acquire", sd.raw.acquire.summarize());
      r.set_summary("raw_quorum_" + name + "_pair", sd.raw.pair.summarize());
      r.set_int("raw_quorum_" + name + "_errors", static_cast<std::int64_t>(sd.raw.errors));
    }
    runs.push_back(r);
  }
  proxy.set_delay(microseconds(0));
  record m = record::median_of(runs, {"base_acquire_p50_us", "fault_acquire_p50_us", "base_pair_p50_us",
                                      "fault_pair_p50_us", "fault_acquire_p99_us"});
  for (const char* what : {"acquire", "release", "pair"}) {
    for (const char* p : {"p50", "p99"}) {
      const std::string b = std::string("base_") + what + "_" + p + "_us";
      const std::string f = std::string("fault_") + what + "_" + p + "_us";
      m.set(std::string(what) + "_" + p + "_ratio", m.num(f) / m.num(b));
    }
  }
  m.set("p50_ratio", m.num("acquire_p50_ratio"));  // the name the summary table reads
  m.set("p99_delta_us", m.num("fault_acquire_p99_us") - m.num("base_acquire_p99_us"));
  m.set("raw_quorum_p50_ratio", m.num("raw_quorum_fault_acquire_p50_us") / m.num("raw_quorum_base_acquire_p50_us"));
  for (const char* what : {"acquire", "pair"}) {
    for (const char* p : {"p50", "p99"}) {
      const std::string b = std::string("raw_quorum_base_") + what + "_" + p + "_us";
      const std::string f = std::string("raw_quorum_fault_") + what + "_" + p + "_us";
      m.set(std::string("raw_quorum_") + what + "_" + p + "_ratio", m.num(f) / m.num(b));
    }
  }
  const bool met = m.num("acquire_p50_ratio") <= 1.10 && m.num("acquire_p99_ratio") <= 1.10 &&
                   m.num("pair_p50_ratio") <= 1.10 && m.num("pair_p99_ratio") <= 1.10;
  m.set_str("target", "pair and acquire p50, p99 within +10% of base");
  m.set_str("target_met", met ? "yes" : "no");
  e.out->emit(m);
  const record& r = e.out->all().back();
  e.out->note(
      "  slow node (+%lld ms, proxy process): acquire p50 %.0f -> %.0f us (%.2fx), p99 %.0f -> %.0f us (%.2fx); "
      "pair p50 %.0f -> %.0f us (%.2fx), p99 %.0f -> %.0f us (%.2fx); errors %.0f; raw quorum client pair p50 "
      "%.0f -> %.0f us (%.2fx), p99 %.2fx; "
      "CPU us/pair client %.1f -> %.1f, servers %.1f -> %.1f, proxy %.1f -> %.1f; target %s",
      static_cast<long long>(delay.count()), r.num("base_acquire_p50_us"), r.num("fault_acquire_p50_us"),
      r.num("acquire_p50_ratio"), r.num("base_acquire_p99_us"), r.num("fault_acquire_p99_us"),
      r.num("acquire_p99_ratio"), r.num("base_pair_p50_us"), r.num("fault_pair_p50_us"), r.num("pair_p50_ratio"),
      r.num("base_pair_p99_us"), r.num("fault_pair_p99_us"), r.num("pair_p99_ratio"), r.num("fault_errors"),
      r.num("raw_quorum_base_pair_p50_us"), r.num("raw_quorum_fault_pair_p50_us"), r.num("raw_quorum_pair_p50_ratio"),
      r.num("raw_quorum_pair_p99_ratio"), r.num("base_client_cpu_us_per_pair"), r.num("fault_client_cpu_us_per_pair"),
      r.num("base_server_cpu_us_per_pair"), r.num("fault_server_cpu_us_per_pair"),
      r.num("base_proxy_cpu_us_per_pair"), r.num("fault_proxy_cpu_us_per_pair"), met ? "MET" : "MISSED");
}

// ------------------------------------------------------------------ nodes at a distance

std::vector<std::vector<int>> distance_sets(bool quick) {
  if (quick) return {{0, 0, 0, 0, 0}, {1, 1, 2, 5, 10}};
  return {{0, 0, 0, 0, 0}, {1, 1, 2, 5, 10}, {1, 2, 5, 10, 20}, {2, 2, 2, 2, 2}, {1, 20, 20, 20, 20}};
}

void scenario_distance(env& e, const std::vector<std::vector<int>>& sets) {
  const std::string why = netns_lab::unavailable();
  if (!why.empty()) {
    record r("distance.skipped");
    r.set_str("reason", why);
    e.out->emit(r);
    e.out->note("  distance: skipped: %s", why.c_str());
    return;
  }
  std::size_t n = 0;
  for (const auto& s : sets) n = std::max(n, s.size());
  netns_lab lab(n);
  const std::size_t quorum = n / 2 + 1;
  // The path's own pair latency (veth, proxies, servers) from an all-zero set, when
  // one ran first: the limit plus this is what a perfect client could reach here.
  double path_us = NAN;
  for (const auto& rtts : sets) {
    if (rtts.size() != n) throw std::runtime_error("distance: every set needs " + std::to_string(n) + " nodes");
    std::vector<std::unique_ptr<proxy_process>> proxies;
    std::vector<std::string> uris;
    std::vector<int> ports, proxy_pids;
    for (std::size_t k = 0; k < n; ++k) {
      // Half the round trip each way.
      // At nice -10, so that a loaded machine delays the proxies' wakeups less.
      proxies.push_back(std::make_unique<proxy_process>(lab.node_host(k), lab.node_port(k),
                                                        microseconds(rtts[k] * 500), true, -10));
      uris.push_back(proxies.back()->uri());
      ports.push_back(proxies.back()->port());
      proxy_pids.push_back(static_cast<int>(proxies.back()->pid()));
    }
    const int max_rtt = *std::max_element(rtts.begin(), rtts.end());
    const milliseconds timeout = std::max(e.size.command_timeout, milliseconds(3 * max_rtt + 20));
    auto c = distance_client(e, uris, timeout, e.size.quick ? 5 : 20);
    raw_nodes raw(ports);
    std::vector<int> sorted = rtts;
    std::sort(sorted.begin(), sorted.end());
    const double limit_us = 2.0 * sorted[quorum - 1] * 1000;
    const double sequential_limit_us = 2.0 * std::accumulate(rtts.begin(), rtts.end(), 0) * 1000;
    std::vector<record> runs;
    for (int rep = 0; rep < e.size.repeats; ++rep) {
      record r("distance");
      r.set_str("rtts_ms", rtt_label(rtts));
      r.set_int("nodes", static_cast<std::int64_t>(n));
      r.set_int("quorum", static_cast<std::int64_t>(quorum));
      r.set_int("command_timeout_ms", timeout.count());
      const std::vector<std::function<void()>> parts = {
          [&] {
            cpu_split cpu(lab.server_pids(), proxy_pids);
            pair_result l = sync_pairs(*c, bench_acquire_options(), e.size.latency_time, kUnbounded);
            cpu.add(r, "lib_", l.pairs);
            r.set_summary("lib_pair", l.pair.summarize());
            r.set_summary("lib_acquire", l.acquire.summarize());
            r.set_summary("lib_release", l.release.summarize());
            r.set_int("lib_errors", static_cast<std::int64_t>(l.errors));
          },
          [&] {
            cpu_split cpu(lab.server_pids(), proxy_pids);
            floor_result q = quorum_floor(raw, quorum, e.size.latency_time, kUnbounded);
            cpu.add(r, "quorum_floor_", q.pairs);
            r.set_summary("quorum_floor_pair", q.pair.summarize());
            r.set_int("quorum_floor_errors", static_cast<std::int64_t>(q.errors));
          },
          [&] {
            floor_result s = sequential_floor(raw, e.size.latency_time, kUnbounded);
            r.set_summary("sequential_pair", s.pair.summarize());
            r.set_int("sequential_errors", static_cast<std::int64_t>(s.errors));
          },
      };
      // Rotate the order so no part always runs first.
      for (std::size_t k = 0; k < parts.size(); ++k) parts[(k + static_cast<std::size_t>(rep)) % parts.size()]();
      runs.push_back(r);
    }
    record m = record::median_of(runs, {"lib_pair_p50_us", "quorum_floor_pair_p50_us"});
    m.set("limit_us", limit_us);
    m.set("sequential_limit_us", sequential_limit_us);
    m.set("ratio_vs_limit", limit_us > 0 ? m.num("lib_pair_p50_us") / limit_us : NAN);
    if (limit_us == 0) path_us = m.num("quorum_floor_pair_p50_us");
    m.set("path_us", path_us);
    m.set("ratio_vs_limit_plus_path", limit_us > 0 ? m.num("lib_pair_p50_us") / (limit_us + path_us) : NAN);
    m.set("ratio_vs_quorum_floor", m.num("lib_pair_p50_us") / m.num("quorum_floor_pair_p50_us"));
    m.set("sequential_over_lib", m.num("sequential_pair_p50_us") / m.num("lib_pair_p50_us"));
    e.out->emit(m);
    const record& r = e.out->all().back();
    if (limit_us == 0) {
      e.out->note(
          "  distance RTT %s ms (the path alone: veth, proxies, servers): pair p50 %.0f us, raw quorum client "
          "%.0f us (%.3fx), sequential client %.0f us; CPU us/pair client %.1f, servers %.1f, proxies %.1f",
          rtt_label(rtts).c_str(), r.num("lib_pair_p50_us"), r.num("quorum_floor_pair_p50_us"),
          r.num("ratio_vs_quorum_floor"), r.num("sequential_pair_p50_us"), r.num("lib_client_cpu_us_per_pair"),
          r.num("lib_server_cpu_us_per_pair"), r.num("lib_proxy_cpu_us_per_pair"));
      continue;
    }
    e.out->note(
        "  distance RTT %s ms: pair p50 %.0f us, limit %.0f us (%.3fx; %.3fx with the path's %.0f us), raw "
        "quorum client %.0f us (%.3fx), "
        "sequential client %.0f us (%.1fx the library); CPU us/pair client %.1f, servers %.1f, proxies %.1f",
        rtt_label(rtts).c_str(), r.num("lib_pair_p50_us"), limit_us, r.num("ratio_vs_limit"),
        r.num("ratio_vs_limit_plus_path"), path_us,
        r.num("quorum_floor_pair_p50_us"), r.num("ratio_vs_quorum_floor"), r.num("sequential_pair_p50_us"),
        r.num("sequential_over_lib"), r.num("lib_client_cpu_us_per_pair"), r.num("lib_server_cpu_us_per_pair"),
        r.num("lib_proxy_cpu_us_per_pair"));
  }
}

}  // namespace redlock::bench
