// The scenarios of bench_e2e: each measures the library and the raw floor it is
// compared with on the shared redis-server nodes, and emits its records.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "e2e.h"
#include "library_load.h"
#include "raw_floor.h"
#include "redlock/metrics.h"
#include "tls_certs.h"

namespace redlock::bench {

using std::chrono::milliseconds;
using std::chrono::seconds;

// ------------------------------------------------------------------ sizing, sink, env

sizing sizing::make(bool quick) {
  sizing s;
  s.quick = quick;
  if (quick) {
    s.repeats = 1;
    s.floor_time = milliseconds(150);
    s.latency_time = milliseconds(200);
    s.throughput_time = milliseconds(250);
    s.contention_time = milliseconds(500);
    s.fault_time = milliseconds(300);
    s.ping_count = 200;
    s.warmup_pairs = 20;
    s.watchdog_locks = 1000;
    s.memory_locks = 1000;
    s.watchdog_runs = {{milliseconds(30000), milliseconds(500)}, {milliseconds(3000), milliseconds(1200)}};
    s.memory_ops = 1000;
  } else {
    s.repeats = 3;
    s.floor_time = milliseconds(1500);
    s.latency_time = milliseconds(2000);
    s.throughput_time = milliseconds(3000);
    s.contention_time = milliseconds(5000);
    s.fault_time = milliseconds(3000);
    s.ping_count = 5000;
    s.warmup_pairs = 300;
    s.watchdog_locks = 100000;
    s.memory_locks = 10000;
    s.watchdog_runs = {{milliseconds(30000), seconds(30)}, {milliseconds(3000), seconds(10)}};
    s.memory_ops = 10000;
  }
  return s;
}

void sizing::scale(double factor) {
  auto times = [factor](bench_clock::duration& d) {
    d = std::chrono::duration_cast<bench_clock::duration>(d * factor);
  };
  for (auto* d : {&floor_time, &latency_time, &throughput_time, &contention_time, &fault_time}) times(*d);
  for (auto& run : watchdog_runs) times(run.second);
}

sink::sink(std::FILE* json, bool progress_to_stderr)
    : json_(json), human_(progress_to_stderr ? stderr : stdout) {}

void sink::emit(const record& r) {
  records_.push_back(r);
  if (json_ != nullptr) {
    std::fprintf(json_, "%s\n", r.to_json().c_str());
    std::fflush(json_);
  }
}

void sink::note(const char* fmt, ...) {
  std::va_list ap;
  va_start(ap, fmt);
  std::vfprintf(human_, fmt, ap);
  va_end(ap);
  std::fputc('\n', human_);
  std::fflush(human_);
}

std::vector<int> env::ports(std::size_t n) const {
  std::vector<int> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back((*cluster)[i].port());
  return v;
}

std::vector<int> env::pids(std::size_t n) const {
  std::vector<int> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(static_cast<int>((*cluster)[i].pid()));
  return v;
}

std::vector<std::string> env::uris(std::size_t n) const {
  std::vector<std::string> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back((*cluster)[i].uri());
  return v;
}

void env::flush_nodes() const {
  for (std::size_t i = 0; i < cluster->size(); ++i) {
    if ((*cluster)[i].running() && !(*cluster)[i].paused()) (*cluster)[i].command({"FLUSHALL"});
  }
}

namespace {

constexpr std::uint64_t kUnbounded = 100'000'000;  // loops are bounded by time first

// A client with the run's command timeout (or `command_timeout` if not zero), warmed up.
std::unique_ptr<client> make_client(const env& e, std::vector<std::string> uris,
                                    milliseconds command_timeout = milliseconds(0), const tls_options& tls = {},
                                    std::vector<std::shared_ptr<observer>> observers = {}) {
  client_options o;
  o.nodes = std::move(uris);
  o.observers = std::move(observers);
  o.tls = tls;
  o.command_timeout = command_timeout.count() > 0 ? command_timeout : e.size.command_timeout;
  o.clock_sample_interval = e.size.clock_sample_interval;
  auto c = std::make_unique<client>(std::move(o));
  // The first acquires wait for the connections; the next ones load the scripts.
  const auto deadline = bench_clock::now() + seconds(5);
  std::uint64_t ok = 0;
  for (std::uint64_t i = 0; ok < e.size.warmup_pairs && bench_clock::now() < deadline; ++i) {
    acquire_result a = c->acquire("bench:warmup:" + unique_key_suffix(), bench_acquire_options());
    if (a && !a.lock.release().error) ++ok;
  }
  if (ok < e.size.warmup_pairs) throw std::runtime_error("warm-up failed: the client cannot lock");
  return c;
}

double per_second(std::uint64_t n, double secs) { return secs > 0 ? static_cast<double>(n) / secs : 0; }

record floor_record(const char* name, std::size_t nodes, floor_result& f) {
  record r(name);
  r.set_int("nodes", static_cast<std::int64_t>(nodes));
  r.set_int("pairs", static_cast<std::int64_t>(f.pairs));
  r.set_int("errors", static_cast<std::int64_t>(f.errors));
  r.set("seconds", f.seconds);
  r.set("pairs_per_s", per_second(f.pairs, f.seconds));
  r.set_summary("pair", f.pair.summarize());
  r.set_summary("acquire", f.acquire.summarize());
  r.set_summary("release", f.release.summarize());
  return r;
}

// CPU per pair of this process (the client) and of the servers, since `m` started.
void add_cpu(record& r, const std::string& prefix, const cpu_meter& m, std::uint64_t pairs) {
  r.set(prefix + "client_cpu_us_per_pair", m.own_us_per(pairs));
  r.set(prefix + "server_cpu_us_per_pair", m.servers_us_per(pairs));
  r.set(prefix + "others_busy_cores", m.other_busy_cores());
}

// Pauses a node for the guard's lifetime (resumes it even when a measurement throws).
class pause_guard {
 public:
  explicit pause_guard(test::redis_node& n) : n_(n) { n_.pause(); }
  ~pause_guard() { n_.resume(); }
  pause_guard(const pause_guard&) = delete;
  pause_guard& operator=(const pause_guard&) = delete;

 private:
  test::redis_node& n_;
};

// A node's INFO commandstats: calls and microseconds spent executing, per command
// ("set", "evalsha", ...). Empty if the node cannot be asked.
struct command_stat {
  double calls = 0, usec = 0;
};
std::map<std::string, command_stat> command_stats(test::redis_node& node) {
  std::map<std::string, command_stat> out;
  std::string text;
  try {
    text = node.command({"INFO", "commandstats"});
  } catch (const std::exception&) {
    return out;
  }
  // Lines like "cmdstat_set:calls=12,usec=34,usec_per_call=2.83,...".
  for (std::size_t at = text.find("cmdstat_"); at != std::string::npos; at = text.find("cmdstat_", at + 1)) {
    const std::size_t colon = text.find(':', at);
    if (colon == std::string::npos) break;
    const std::string name = text.substr(at + 8, colon - at - 8);
    const std::size_t calls = text.find("calls=", colon), usec = text.find("usec=", colon);
    if (calls == std::string::npos || usec == std::string::npos) continue;
    out[name] = command_stat{std::strtod(text.c_str() + calls + 6, nullptr),
                             std::strtod(text.c_str() + usec + 5, nullptr)};
  }
  return out;
}

// Calls of `name` per pair on one node between two command_stats looks. Redis
// counts the commands a script calls too (the acquire script's SET and TIME).
double calls_per_pair(const std::map<std::string, command_stat>& a, const std::map<std::string, command_stat>& b,
                      const std::string& name, std::uint64_t pairs) {
  const auto ia = a.find(name), ib = b.find(name);
  const double before = ia == a.end() ? 0 : ia->second.calls;
  const double after = ib == b.end() ? 0 : ib->second.calls;
  return pairs > 0 ? (after - before) / static_cast<double>(pairs) : NAN;
}

// Waits (bounded) until `count` more releases than `before` have completed.
bool wait_releases(client& c, std::uint64_t before, std::uint64_t count, bench_clock::duration limit) {
  const auto deadline = bench_clock::now() + limit;
  while (c.stats().releases - before < count) {
    if (bench_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

}  // namespace

// ------------------------------------------------------------------ floors

void scenario_floor(env& e, std::size_t n) {
  e.flush_nodes();
  std::vector<record> ping, seq, par, quo, setget, settime, scr, pipe, pipe_setget, pipe_scr, pipe_time;
  for (int rep = 0; rep < e.size.repeats; ++rep) {
    raw_nodes rn(e.ports(n));
    const std::vector<summary> pings = ping_per_node(rn, e.size.ping_count, seconds(2));
    record p("floor.ping");
    p.set_int("nodes", static_cast<std::int64_t>(n));
    std::vector<double> p50s, p99s;
    for (std::size_t i = 0; i < pings.size(); ++i) {
      p.set("node" + std::to_string(i) + "_p50_us", pings[i].p50);
      p50s.push_back(pings[i].p50);
      p99s.push_back(pings[i].p99);
    }
    p.set("p50_us", median(p50s));
    p.set("p99_us", median(p99s));
    p.set("slowest_node_p50_us", *std::max_element(p50s.begin(), p50s.end()));
    ping.push_back(p);

    auto measured = [&](const char* name, std::vector<record>& into,
                        const std::function<floor_result()>& fn) {
      cpu_meter m(e.pids(n));
      floor_result f = fn();
      record r = floor_record(name, n, f);
      add_cpu(r, "", m, f.pairs);
      into.push_back(r);
    };
    measured("floor.sequential", seq, [&] { return sequential_floor(rn, e.size.floor_time, kUnbounded); });
    measured("floor.parallel", par,
             [&] { return parallel_floor(rn, floor_acquire::set_nx, e.size.floor_time, kUnbounded); });
    measured("floor.quorum", quo, [&] { return quorum_floor(rn, n / 2 + 1, e.size.floor_time, kUnbounded); });
    measured("floor.parallel_set_get", setget, [&] {
      return parallel_floor(rn, floor_acquire::library_set_get, e.size.floor_time, kUnbounded);
    });
    measured("floor.parallel_set_get_time", settime, [&] {
      return parallel_floor(rn, floor_acquire::set_get_time, e.size.floor_time, kUnbounded);
    });
    measured("floor.parallel_script", scr, [&] {
      return parallel_floor(rn, floor_acquire::library_script, e.size.floor_time, kUnbounded);
    });
    measured("floor.pipelined", pipe, [&] { return pipelined_floor(rn, 64, e.size.floor_time, kUnbounded); });
    pipe.back().set_int("batch", 64);
    measured("floor.pipelined_set_get", pipe_setget, [&] {
      return pipelined_floor(rn, 64, e.size.floor_time, kUnbounded, floor_acquire::library_set_get);
    });
    pipe_setget.back().set_int("batch", 64);
    measured("floor.pipelined_script", pipe_scr, [&] {
      return pipelined_floor(rn, 64, e.size.floor_time, kUnbounded, floor_acquire::library_script);
    });
    pipe_scr.back().set_int("batch", 64);
    measured("floor.pipelined_set_get_time", pipe_time, [&] {
      return pipelined_floor(rn, 64, e.size.floor_time, kUnbounded, floor_acquire::set_get_time);
    });
    pipe_time.back().set_int("batch", 64);
  }
  e.out->emit(record::median_of(ping, {"p50_us"}));
  for (auto* runs : {&seq, &par, &quo, &setget, &settime, &scr})
    e.out->emit(record::median_of(*runs, {"pair_p50_us", "pairs_per_s"}));
  double parallel_p50 = NAN, pipelined = NAN;
  for (const record& r : e.out->all()) {
    if (r.scenario() == "floor.parallel") parallel_p50 = r.num("pair_p50_us");
  }
  for (auto* runs : {&pipe, &pipe_setget, &pipe_scr, &pipe_time}) {
    e.out->emit(record::median_of(*runs, {"pairs_per_s"}));
    if (runs == &pipe) pipelined = e.out->all().back().num("pairs_per_s");
  }
  e.out->note("  floor: parallel pair p50 %.0f us, pipelined %.0f pairs/s", parallel_p50, pipelined);
}

// ------------------------------------------------------------------ latency vs node count

void scenario_latency(env& e, const std::vector<std::size_t>& node_counts, const char* name) {
  for (std::size_t n : node_counts) {
    e.flush_nodes();
    auto c = make_client(e, e.uris(n));
    raw_nodes rn(e.ports(n));
    std::vector<record> runs;
    for (int rep = 0; rep < e.size.repeats; ++rep) {
      floor_result f;
      pair_result l;
      record r(name);
      auto run_floor = [&] {
        cpu_meter m(e.pids(n));
        f = parallel_floor(rn, floor_acquire::set_nx, e.size.latency_time, kUnbounded);
        add_cpu(r, "floor_", m, f.pairs);
        floor_result q = quorum_floor(rn, n / 2 + 1, e.size.latency_time, kUnbounded);
        r.set_summary("quorum_floor_pair", q.pair.summarize());
      };
      auto run_lib = [&] {
        cpu_meter m(e.pids(n));
        l = sync_pairs(*c, bench_acquire_options(), e.size.latency_time, kUnbounded);
        add_cpu(r, "lib_", m, l.pairs);
        // The same pairs from callbacks on the loop thread: no thread hand-off.
        chain_config cfg;
        cfg.inflight = 1;
        cfg.duration = e.size.latency_time;
        chain_result a = run_chains({c.get()}, cfg);
        r.set_summary("lib_async_pair", a.pair.summarize());
      };
      // Alternate the order so neither side always runs on a warmer machine.
      if (rep % 2 == 0) {
        run_floor();
        run_lib();
      } else {
        run_lib();
        run_floor();
      }
      r.set_int("nodes", static_cast<std::int64_t>(n));
      const summary fs = f.pair.summarize();
      const summary ls = l.pair.summarize();
      r.set_summary("floor_pair", fs);
      r.set("floor_pairs_per_s", per_second(f.pairs, f.seconds));
      r.set_int("floor_errors", static_cast<std::int64_t>(f.errors));
      r.set_summary("lib_pair", ls);
      r.set_summary("lib_acquire", l.acquire.summarize());
      r.set_summary("lib_release", l.release.summarize());
      r.set("lib_pairs_per_s", per_second(l.pairs, l.seconds));
      r.set_int("lib_errors", static_cast<std::int64_t>(l.errors));
      r.set("ratio_p50", fs.p50 > 0 ? ls.p50 / fs.p50 : NAN);
      r.set("ratio_p99", fs.p99 > 0 ? ls.p99 / fs.p99 : NAN);
      runs.push_back(r);
    }
    record m = record::median_of(runs, {"floor_pair_p50_us", "lib_pair_p50_us", "ratio_p50"});
    // Ratios of the medians (the per-run ratios are kept in ratio_p50_runs).
    m.set("ratio_p50", m.num("lib_pair_p50_us") / m.num("floor_pair_p50_us"));
    m.set("ratio_p99", m.num("lib_pair_p99_us") / m.num("floor_pair_p99_us"));
    m.set("async_ratio_p50", m.num("lib_async_pair_p50_us") / m.num("floor_pair_p50_us"));
    m.set("ratio_vs_quorum_floor_p50", m.num("lib_pair_p50_us") / m.num("quorum_floor_pair_p50_us"));
    m.set("lib_server_cpu_us_per_pair_per_node", m.num("lib_server_cpu_us_per_pair") / static_cast<double>(n));
    e.out->emit(m);
    const record& r = e.out->all().back();
    e.out->note("  %s N=%zu: floor p50 %.0f us, library p50 %.0f us (%.2fx), p99 %.0f / %.0f us (%.2fx); "
                "server CPU %.1f us/pair (floor %.1f), client CPU %.1f us/pair",
                name, n, r.num("floor_pair_p50_us"), r.num("lib_pair_p50_us"), r.num("ratio_p50"),
                r.num("floor_pair_p99_us"), r.num("lib_pair_p99_us"), r.num("ratio_p99"),
                r.num("lib_server_cpu_us_per_pair"), r.num("floor_server_cpu_us_per_pair"),
                r.num("lib_client_cpu_us_per_pair"));
  }
}

// ------------------------------------------------------------------ blocking API (issue 14, target 1)

namespace {

// A client whose blocking calls spin and linger as the library's defaults say
// (`tuned`), or hand off only (spin and linger off, via the library's
// REDLOCK_SYNC_SPIN_US / REDLOCK_SYNC_LINGER_US, read when a client is made).
std::unique_ptr<client> make_blocking_client(const env& e, std::size_t n, bool tuned) {
  const char* spin = std::getenv("REDLOCK_SYNC_SPIN_US");
  const char* linger = std::getenv("REDLOCK_SYNC_LINGER_US");
  const std::string keep_spin = spin != nullptr ? spin : "", keep_linger = linger != nullptr ? linger : "";
  if (!tuned) {
    setenv("REDLOCK_SYNC_SPIN_US", "0", 1);
    setenv("REDLOCK_SYNC_LINGER_US", "0", 1);
  }
  auto c = make_client(e, e.uris(n));
  auto restore = [](const char* name, const char* was, const std::string& value) {
    if (was != nullptr) {
      setenv(name, value.c_str(), 1);
    } else {
      unsetenv(name);
    }
  };
  restore("REDLOCK_SYNC_SPIN_US", spin, keep_spin);
  restore("REDLOCK_SYNC_LINGER_US", linger, keep_linger);
  return c;
}

struct threaded_pairs {
  latencies pair;
  std::uint64_t pairs = 0, errors = 0;
  double seconds = 0;
};

// `threads` threads at once, each running `one(pairs, errors, latencies)` until it returns.
template <class One>
threaded_pairs run_threads(int threads, One one) {
  threaded_pairs out;
  std::mutex mu;
  std::vector<std::thread> ts;
  const auto start = bench_clock::now();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      latencies mine;
      std::uint64_t pairs = 0, errors = 0;
      one(t, mine, pairs, errors);
      std::lock_guard<std::mutex> g(mu);
      out.pair.append(mine);
      out.pairs += pairs;
      out.errors += errors;
    });
  }
  for (auto& th : ts) th.join();
  out.seconds = to_seconds(bench_clock::now() - start);
  return out;
}

}  // namespace

void scenario_blocking(env& e, std::size_t n) {
  e.flush_nodes();
  auto tuned = make_blocking_client(e, n, true);
  auto handoff = make_blocking_client(e, n, false);
  std::vector<int> thread_counts = {1, 4, 16};
  // REDLOCK_BENCH_BLOCKING_THREADS=1 (say): only that many callers (quick tuning runs).
  if (const char* only = std::getenv("REDLOCK_BENCH_BLOCKING_THREADS")) thread_counts = {std::max(1, std::atoi(only))};
  // Raw contexts for the floor threads: one set per thread.
  std::vector<std::unique_ptr<raw_nodes>> rn;
  for (int t = 0; t < thread_counts.back(); ++t) rn.push_back(std::make_unique<raw_nodes>(e.ports(n)));
  std::map<int, std::vector<record>> runs;
  for (int rep = 0; rep < e.size.repeats; ++rep) {
    for (int threads : thread_counts) {
      record r("blocking");
      r.set_int("nodes", static_cast<std::int64_t>(n));
      r.set_int("threads", threads);
      auto floor = [&] {
        cpu_meter m(e.pids(n));
        threaded_pairs f = run_threads(threads, [&](int t, latencies& lat, std::uint64_t& pairs, std::uint64_t& errors) {
          floor_result one = parallel_floor(*rn[static_cast<std::size_t>(t)], floor_acquire::set_nx,
                                            e.size.latency_time, kUnbounded);
          lat = one.pair;
          pairs = one.pairs;
          errors = one.errors;
        });
        add_cpu(r, "floor_", m, f.pairs);
        r.set_summary("floor_pair", f.pair.summarize());
        r.set("floor_pairs_per_s", per_second(f.pairs, f.seconds));
        r.set_int("floor_errors", static_cast<std::int64_t>(f.errors));
      };
      auto lib = [&](client& c, const std::string& prefix) {
        cpu_meter m(e.pids(n));
        threaded_pairs l = run_threads(threads, [&](int, latencies& lat, std::uint64_t& pairs, std::uint64_t& errors) {
          pair_result one = sync_pairs(c, bench_acquire_options(), e.size.latency_time, kUnbounded);
          lat = one.pair;
          pairs = one.pairs;
          errors = one.errors;
        });
        add_cpu(r, prefix, m, l.pairs);
        r.set_summary(prefix + "pair", l.pair.summarize());
        r.set(prefix + "pairs_per_s", per_second(l.pairs, l.seconds));
        r.set_int(prefix + "errors", static_cast<std::int64_t>(l.errors));
      };
      // Rotate the order so no variant always runs on a warmer machine.
      std::vector<std::function<void()>> order = {floor, [&] { lib(*tuned, "lib_"); },
                                                  [&] { lib(*handoff, "handoff_"); }};
      if (threads == 1) {
        // The same pairs from callbacks on the loop thread: no hand-off at all.
        order.push_back([&] {
          chain_config cfg;
          cfg.inflight = 1;
          cfg.duration = e.size.latency_time;
          chain_result a = run_chains({tuned.get()}, cfg);
          r.set_summary("async_pair", a.pair.summarize());
        });
      }
      std::rotate(order.begin(), order.begin() + (rep % 3), order.end());
      for (auto& fn : order) fn();
      runs[threads].push_back(r);
    }
  }
  for (int threads : thread_counts) {
    record m = record::median_of(runs[threads], {"floor_pair_p50_us", "lib_pair_p50_us", "handoff_pair_p50_us"});
    m.set("ratio_p50", m.num("lib_pair_p50_us") / m.num("floor_pair_p50_us"));
    m.set("ratio_p99", m.num("lib_pair_p99_us") / m.num("floor_pair_p99_us"));
    m.set("handoff_ratio_p50", m.num("handoff_pair_p50_us") / m.num("floor_pair_p50_us"));
    m.set("handoff_ratio_p99", m.num("handoff_pair_p99_us") / m.num("floor_pair_p99_us"));
    m.set("ratio_pairs_per_s", m.num("lib_pairs_per_s") / m.num("floor_pairs_per_s"));
    m.set("async_ratio_p50", m.num("async_pair_p50_us") / m.num("floor_pair_p50_us"));
    m.set("handoff_ratio_pairs_per_s", m.num("handoff_pairs_per_s") / m.num("floor_pairs_per_s"));
    // Client + servers: what spinning costs the machine per pair.
    m.set("total_cpu_us_per_pair", m.num("lib_client_cpu_us_per_pair") + m.num("lib_server_cpu_us_per_pair"));
    m.set("handoff_total_cpu_us_per_pair",
          m.num("handoff_client_cpu_us_per_pair") + m.num("handoff_server_cpu_us_per_pair"));
    m.set("floor_total_cpu_us_per_pair",
          m.num("floor_client_cpu_us_per_pair") + m.num("floor_server_cpu_us_per_pair"));
    e.out->emit(m);
    const record& r = e.out->all().back();
    e.out->note(
        "  blocking %2d caller(s): floor p50/p99 %.0f/%.0f us %.0f pairs/s; library %.0f/%.0f us (%.2fx/%.2fx) "
        "%.0f pairs/s (%.2fx); hand-off only %.0f/%.0f us (%.2fx) %.0f pairs/s; async %.0f us; cpu/pair client+servers "
        "floor %.0f+%.0f lib %.0f+%.0f hand-off %.0f+%.0f; others %.2f cores",
        threads, r.num("floor_pair_p50_us"), r.num("floor_pair_p99_us"), r.num("floor_pairs_per_s"),
        r.num("lib_pair_p50_us"), r.num("lib_pair_p99_us"), r.num("ratio_p50"), r.num("ratio_p99"),
        r.num("lib_pairs_per_s"), r.num("ratio_pairs_per_s"), r.num("handoff_pair_p50_us"),
        r.num("handoff_pair_p99_us"), r.num("handoff_ratio_p50"), r.num("handoff_pairs_per_s"),
        r.num("async_pair_p50_us"),
        r.num("floor_client_cpu_us_per_pair"), r.num("floor_server_cpu_us_per_pair"),
        r.num("lib_client_cpu_us_per_pair"), r.num("lib_server_cpu_us_per_pair"),
        r.num("handoff_client_cpu_us_per_pair"), r.num("handoff_server_cpu_us_per_pair"),
        r.num("lib_others_busy_cores"));
  }
}

// ------------------------------------------------------------------ throughput vs in flight

void scenario_throughput(env& e, std::size_t n, const std::vector<int>& inflight) {
  e.flush_nodes();
  auto c = make_client(e, e.uris(n));
  raw_nodes rn(e.ports(n));
  std::map<int, std::vector<record>> runs;
  for (int rep = 0; rep < e.size.repeats; ++rep) {
    // The raw floor at the same batch (1 = the parallel floor) and at 64 (the target's).
    std::map<int, double> floor_pps, floor_client_cpu, floor_server_cpu;
    for (int k : inflight) {
      cpu_meter m(e.pids(n));
      floor_result f = k == 1 ? parallel_floor(rn, floor_acquire::set_nx, e.size.floor_time, kUnbounded)
                              : pipelined_floor(rn, k, e.size.floor_time, kUnbounded);
      floor_pps[k] = per_second(f.pairs, f.seconds);
      floor_client_cpu[k] = m.own_us_per(f.pairs);
      floor_server_cpu[k] = m.servers_us_per(f.pairs);
    }
    if (floor_pps.count(64) == 0) {
      floor_result f = pipelined_floor(rn, 64, e.size.floor_time, kUnbounded);
      floor_pps[64] = per_second(f.pairs, f.seconds);
    }
    for (int k : inflight) {
      chain_config cfg;
      cfg.inflight = k;
      cfg.duration = e.size.throughput_time;
      const auto st0 = command_stats((*e.cluster)[0]);
      cpu_meter m(e.pids(n));
      chain_result res = run_chains({c.get()}, cfg);
      record r("throughput");
      add_cpu(r, "", m, res.pairs);
      // Which acquire the library sent (node 1 of n): a sampled acquire carries one
      // TIME (pipelined behind the SET), the plain SET NX PX GET none. EVALSHA per
      // pair is 1 (the release) plus any script acquires, EVAL the bodies sent.
      const auto st1 = command_stats((*e.cluster)[0]);
      r.set("node0_time_calls_per_pair", calls_per_pair(st0, st1, "time", res.pairs));
      r.set("node0_evalsha_calls_per_pair", calls_per_pair(st0, st1, "evalsha", res.pairs));
      r.set("node0_eval_calls_per_pair", calls_per_pair(st0, st1, "eval", res.pairs));
      r.set("floor_client_cpu_us_per_pair", floor_client_cpu[k]);
      r.set("floor_server_cpu_us_per_pair", floor_server_cpu[k]);
      r.set_int("nodes", static_cast<std::int64_t>(n));
      r.set_int("inflight", k);
      r.set_int("pairs", static_cast<std::int64_t>(res.pairs));
      r.set_int("errors", static_cast<std::int64_t>(res.errors));
      r.set_int("node_timeouts", static_cast<std::int64_t>(res.node_timeouts));
      r.set("seconds", res.seconds);
      const double pps = per_second(res.pairs, res.seconds);
      r.set("pairs_per_s", pps);
      r.set_summary("pair", res.pair.summarize());
      r.set("floor_same_batch_pairs_per_s", floor_pps[k]);
      r.set("floor_pipelined64_pairs_per_s", floor_pps[64]);
      r.set("ratio_vs_same_batch", floor_pps[k] > 0 ? pps / floor_pps[k] : NAN);
      r.set("ratio_vs_pipelined64", floor_pps[64] > 0 ? pps / floor_pps[64] : NAN);
      runs[k].push_back(r);
    }
  }
  for (int k : inflight) {
    record m = record::median_of(runs[k], {"pairs_per_s", "floor_same_batch_pairs_per_s"});
    m.set("ratio_vs_same_batch", m.num("pairs_per_s") / m.num("floor_same_batch_pairs_per_s"));
    m.set("ratio_vs_pipelined64", m.num("pairs_per_s") / m.num("floor_pipelined64_pairs_per_s"));
    // What the ratio would be if CPU were the only limit (a dedicated, saturated
    // machine): floor CPU per pair over library CPU per pair, client and servers.
    m.set("cpu_bound_ratio_vs_same_batch",
          (m.num("floor_client_cpu_us_per_pair") + m.num("floor_server_cpu_us_per_pair")) /
              (m.num("client_cpu_us_per_pair") + m.num("server_cpu_us_per_pair")));
    e.out->emit(m);
    const record& r = e.out->all().back();
    e.out->note(
        "  throughput %3d in flight: %.0f pairs/s (p99 %.0f us); floor same batch %.0f, pipelined-64 %.0f "
        "(%.2fx)",
        k, r.num("pairs_per_s"), r.num("pair_p99_us"), r.num("floor_same_batch_pairs_per_s"),
        r.num("floor_pipelined64_pairs_per_s"), r.num("ratio_vs_pipelined64"));
  }
}

// ------------------------------------------------------------------ contention

void scenario_contention(env& e, std::size_t n) {
  e.flush_nodes();
  constexpr int kClients = 4, kInflight = 64, kKeys = 4;
  std::vector<std::unique_ptr<client>> clients;
  std::vector<client*> ptrs;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(make_client(e, e.uris(n)));
    ptrs.push_back(clients.back().get());
  }
  chain_config cfg;
  cfg.inflight = kInflight;
  cfg.keys = kKeys;
  cfg.duration = e.size.contention_time;
  chain_result res = run_chains(ptrs, cfg);
  record r("contention");
  r.set_int("nodes", static_cast<std::int64_t>(n));
  r.set_int("clients", kClients);
  r.set_int("inflight", kInflight);
  r.set_int("keys", kKeys);
  r.set("seconds", res.seconds);
  r.set_int("attempts", static_cast<std::int64_t>(res.attempts));
  r.set_int("acquired", static_cast<std::int64_t>(res.acquired));
  r.set_int("contended", static_cast<std::int64_t>(res.contended));
  r.set_int("errors", static_cast<std::int64_t>(res.errors));
  r.set_int("node_timeouts", static_cast<std::int64_t>(res.node_timeouts));
  for (const auto& [why, times] : res.error_reasons)
    r.set_int("error: " + why, static_cast<std::int64_t>(times));
  r.set("attempts_per_s", per_second(res.attempts, res.seconds));
  r.set("acquired_per_s", per_second(res.acquired, res.seconds));
  r.set("contended_fraction",
        res.attempts > 0 ? static_cast<double>(res.contended) / static_cast<double>(res.attempts) : 0);
  r.set_summary("pair", res.pair.summarize());
  e.out->emit(r);
  e.out->note("  contention: %.0f attempts/s, %.0f acquired/s, %.1f%% contended, %llu errors",
              r.num("attempts_per_s"), r.num("acquired_per_s"), 100 * r.num("contended_fraction"),
              static_cast<unsigned long long>(res.errors));
}

// ------------------------------------------------------------------ a paused node, a slow node

namespace {
record fault_record(const char* name, std::size_t n, pair_result& base, pair_result& bad,
                    milliseconds timeout) {
  record r(name);
  r.set_int("nodes", static_cast<std::int64_t>(n));
  r.set_int("command_timeout_ms", timeout.count());
  const summary b = base.acquire.summarize();
  const summary f = bad.acquire.summarize();
  r.set_summary("base_acquire", b);
  r.set_summary("fault_acquire", f);
  r.set_summary("base_pair", base.pair.summarize());
  r.set_summary("fault_pair", bad.pair.summarize());
  r.set_int("base_errors", static_cast<std::int64_t>(base.errors));
  r.set_int("fault_errors", static_cast<std::int64_t>(bad.errors));
  r.set("p50_ratio", b.p50 > 0 ? f.p50 / b.p50 : NAN);
  r.set("p99_delta_us", f.p99 - b.p99);
  return r;
}

// Copies the base_/fault_ figures of `cpu` into `r`: CPU per pair (see add_cpu) of
// this process (the client, and the delay proxy's thread for the slow node), of the
// servers, other tenants' load, and the share of acquires that sampled TIME.
void add_fault_cpu(record& r, const record& cpu) {
  for (const char* phase : {"base_", "fault_"}) {
    for (const char* what :
         {"client_cpu_us_per_pair", "server_cpu_us_per_pair", "others_busy_cores", "node0_time_calls_per_pair"}) {
      const std::string key = std::string(phase) + what;
      r.set(key, cpu.num(key));
    }
  }
}

// Medians over the runs, with the ratio and delta recomputed from the medians.
void emit_fault(env& e, const std::vector<record>& runs) {
  record m = record::median_of(runs, {"base_acquire_p50_us", "fault_acquire_p50_us", "fault_acquire_p99_us"});
  m.set("p50_ratio", m.num("fault_acquire_p50_us") / m.num("base_acquire_p50_us"));
  m.set("p99_delta_us", m.num("fault_acquire_p99_us") - m.num("base_acquire_p99_us"));
  if (!std::isnan(m.num("raw_quorum_base_acquire_p50_us"))) {
    m.set("raw_quorum_p50_ratio",
          m.num("raw_quorum_fault_acquire_p50_us") / m.num("raw_quorum_base_acquire_p50_us"));
  }
  e.out->emit(m);
}
}  // namespace

void scenario_paused(env& e, std::size_t n) {
  e.flush_nodes();
  const milliseconds timeout = e.size.command_timeout;
  auto c = make_client(e, e.uris(n), timeout);
  // The same effect without a library: a raw client that decides at the quorum, on
  // all n nodes and on the n - 1 that stay up (the quorum stays n/2 + 1).
  raw_nodes all(e.ports(n)), rest(e.ports(n - 1));
  std::vector<record> runs;
  for (int rep = 0; rep < e.size.repeats; ++rep) {
    floor_result raw_base = quorum_floor(all, n / 2 + 1, e.size.fault_time, kUnbounded);
    floor_result raw_less = quorum_floor(rest, n / 2 + 1, e.size.fault_time, kUnbounded);
    auto st0 = command_stats((*e.cluster)[0]);
    cpu_meter mb(e.pids(n));
    pair_result base = sync_pairs(*c, bench_acquire_options(), e.size.fault_time, kUnbounded);
    record cpu("cpu");
    add_cpu(cpu, "base_", mb, base.pairs);
    auto st1 = command_stats((*e.cluster)[0]);
    cpu.set("base_node0_time_calls_per_pair", calls_per_pair(st0, st1, "time", base.pairs));
    pair_result bad;
    {
      pause_guard paused((*e.cluster)[n - 1]);
      cpu_meter mf(e.pids(n));
      st0 = command_stats((*e.cluster)[0]);
      bad = sync_pairs(*c, bench_acquire_options(), e.size.fault_time, kUnbounded);
      add_cpu(cpu, "fault_", mf, bad.pairs);
      st1 = command_stats((*e.cluster)[0]);
      cpu.set("fault_node0_time_calls_per_pair", calls_per_pair(st0, st1, "time", bad.pairs));
    }
    record r = fault_record("fault.paused", n, base, bad, timeout);
    add_fault_cpu(r, cpu);
    const summary rb = raw_base.acquire.summarize(), rl = raw_less.acquire.summarize();
    r.set_summary("raw_quorum_base_acquire", rb);
    r.set_summary("raw_quorum_fault_acquire", rl);
    runs.push_back(r);
    // Let the client reconnect to the resumed node (backoff <= 1 s) before the next run.
    std::this_thread::sleep_for(milliseconds(e.size.quick ? 300 : 1500));
    (void)sync_pairs(*c, bench_acquire_options(), milliseconds(100), 1000);
  }
  emit_fault(e, runs);
  const record& r = e.out->all().back();
  e.out->note(
      "  paused node: acquire p50 %.0f -> %.0f us (%.2fx), p99 %.0f -> %.0f us, errors %.0f; raw quorum "
      "client, 5 -> 4 nodes: p50 %.0f -> %.0f us (%.2fx)",
      r.num("base_acquire_p50_us"), r.num("fault_acquire_p50_us"), r.num("p50_ratio"),
      r.num("base_acquire_p99_us"), r.num("fault_acquire_p99_us"), r.num("fault_errors"),
      r.num("raw_quorum_base_acquire_p50_us"), r.num("raw_quorum_fault_acquire_p50_us"),
      r.num("raw_quorum_p50_ratio"));
}

// ------------------------------------------------------------------ watchdog

void scenario_watchdog(env& e, std::size_t n) {
  for (const auto& [ttl, window] : e.size.watchdog_runs) {
    e.flush_nodes();
    auto c = make_client(e, e.uris(n));
    // The same extensions per second at every TTL: fewer locks at a shorter one.
    const std::size_t count = std::max<std::size_t>(
        1, ttl >= milliseconds(30000)
               ? e.size.watchdog_locks
               : static_cast<std::size_t>(static_cast<double>(e.size.watchdog_locks) *
                                          std::chrono::duration<double>(ttl).count() / 30.0));
    record r("watchdog");
    r.set_int("nodes", static_cast<std::int64_t>(n));
    r.set_int("locks", static_cast<std::int64_t>(count));
    r.set_int("ttl_ms", ttl.count());
    const double interval_s = std::chrono::duration<double>(ttl).count() / 3;
    r.set("extend_interval_s", interval_s);

    // The client at rest, no lock held.
    const auto idle = e.size.quick ? milliseconds(200) : milliseconds(1000);
    double cpu0 = process_cpu_seconds();
    auto t0 = bench_clock::now();
    std::this_thread::sleep_for(idle);
    r.set("idle_cpu_percent", 100 * (process_cpu_seconds() - cpu0) / to_seconds(bench_clock::now() - t0));

    // Why locks were lost, if any: the report's error and what each node said.
    // The report carries what the last failed extension saw (node statuses and
    // details); the first one is kept whole.
    struct loss_tally {
      std::mutex mu;
      std::map<std::string, std::int64_t> counts;
      std::string first;
    };
    auto losses = std::make_shared<loss_tally>();
    acquire_options o = bench_acquire_options();
    o.ttl = ttl;
    o.auto_extend = true;
    o.on_lost = [losses](const lease&, const report& why) {
      std::lock_guard<std::mutex> g(losses->mu);
      if (losses->first.empty()) losses->first = why.message();
      ++losses->counts["lost_error_" + why.error.message()];
      for (const node_result& nr : why.nodes) {
        ++losses->counts[std::string("lost_node_") + to_string(nr.status)];
        if (!nr.detail.empty()) ++losses->counts["lost_detail_" + nr.detail];
      }
    };
    const client_stats sa = c->stats();
    const std::int64_t heap0 = heap_in_use_bytes(), rss0 = rss_bytes();
    hold_result held = acquire_many(*c, count, 64, o);
    const std::int64_t heap1 = heap_in_use_bytes(), rss1 = rss_bytes();
    const auto ok = static_cast<std::int64_t>(count - held.failures);
    r.set_int("acquire_failures", static_cast<std::int64_t>(held.failures));
    for (const auto& [why, times] : held.failure_reasons) {
      r.set_int("acquire_error_" + why, static_cast<std::int64_t>(times));
    }
    r.set("acquire_seconds", held.seconds);
    r.set("heap_bytes_per_lock", ok > 0 ? static_cast<double>(heap1 - heap0) / static_cast<double>(ok) : NAN);
    r.set("rss_bytes_per_lock", ok > 0 ? static_cast<double>(rss1 - rss0) / static_cast<double>(ok) : NAN);

    const client_stats s0 = c->stats();
    cpu_meter window_meter(e.pids(n));
    cpu0 = process_cpu_seconds();
    t0 = bench_clock::now();
    // Extensions per bin over the window (the client's extends counter, read at
    // every bin's end): 1 s bins, or a tenth of a shorter window (--quick).
    const bench_clock::duration bin = window >= seconds(10) ? bench_clock::duration(seconds(1)) : window / 10;
    std::vector<double> histogram;
    {
      std::uint64_t last = s0.extends;
      for (bench_clock::time_point end = t0 + bin; end <= t0 + window + bin / 2; end += bin) {
        std::this_thread::sleep_until(end);
        const std::uint64_t now_extends = c->stats().extends;
        histogram.push_back(static_cast<double>(now_extends - last));
        last = now_extends;
      }
    }
    const double cpu = process_cpu_seconds() - cpu0;
    const double secs = to_seconds(bench_clock::now() - t0);
    const client_stats s1 = c->stats();
    const std::uint64_t extends = s1.extends - s0.extends;
    r.set_int("reconnects", static_cast<std::int64_t>(s1.reconnects - s0.reconnects));
    r.set("server_cpu_us_per_extend", window_meter.servers_us_per(extends));
    r.set("others_busy_cores", window_meter.other_busy_cores());
    r.set_int("command_timeout_ms", e.size.command_timeout.count());
    std::int64_t owned = 0;
    for (const lock& l : held.locks) owned += l.owns_lock() ? 1 : 0;
    r.set("window_s", secs);
    r.set("cpu_seconds", cpu);
    r.set("cpu_percent", 100 * cpu / secs);
    r.set_int("extends", static_cast<std::int64_t>(extends));
    r.set("extends_per_s", per_second(extends, secs));
    r.set("expected_extends_per_s", static_cast<double>(ok) / interval_s);
    const double per_extend = extends > 0 ? cpu / static_cast<double>(extends) : NAN;
    r.set("cpu_us_per_extend", per_extend * 1e6);
    // The spread of the extensions over the window: a flat histogram has max/mean
    // close to 1; locks extended in step make it interval / (their spread).
    r.set("histogram_bin_s", to_seconds(bin));
    r.set_list("extends_per_bin", histogram);
    {
      double sum = 0, top = 0;
      for (double v : histogram) {
        sum += v;
        top = std::max(top, v);
      }
      const double mean = histogram.empty() ? NAN : sum / static_cast<double>(histogram.size());
      r.set("extends_per_bin_mean", mean);
      r.set("extends_per_bin_max", top);
      r.set("histogram_max_over_mean", mean > 0 ? top / mean : NAN);
    }
    // At steady state every lock extends once per interval.
    r.set("steady_cpu_percent", 100 * per_extend * static_cast<double>(ok) / interval_s);
    r.set_int("locks_lost", static_cast<std::int64_t>(s1.locks_lost - s0.locks_lost));
    // Locks can be lost before the window too, while the others are still being
    // acquired (at a short TTL the first extensions start during the acquisition).
    r.set_int("locks_lost_before_window", static_cast<std::int64_t>(s0.locks_lost - sa.locks_lost));
    r.set_int("acquire_reconnects", static_cast<std::int64_t>(s0.reconnects - sa.reconnects));
    r.set_int("still_owned", owned);
    {
      std::lock_guard<std::mutex> g(losses->mu);
      for (const auto& [what, times] : losses->counts) r.set_int(what, times);
      if (!losses->first.empty()) r.set_str("first_lost_report", losses->first);
    }

    const std::uint64_t rel0 = c->stats().releases;
    t0 = bench_clock::now();
    held.locks.clear();  // each handle's destructor releases without blocking
    const bool released = wait_releases(*c, rel0, static_cast<std::uint64_t>(ok), seconds(60));
    r.set("release_all_seconds", released ? to_seconds(bench_clock::now() - t0) : NAN);
    e.out->emit(r);
    e.out->note(
        "  watchdog %zu locks, ttl %lld ms: %.2f%% of a core measured (%.2f%% steady), %.1f us/extend, "
        "%.0f heap bytes/lock, %.0f extends/s (expected %.0f), extensions per %.1f s bin max/mean %.2f, "
        "acquired in %.2f s, lost %lld (+%lld before the window), still owned %lld",
        count, static_cast<long long>(ttl.count()), r.num("cpu_percent"), r.num("steady_cpu_percent"),
        r.num("cpu_us_per_extend"), r.num("heap_bytes_per_lock"), r.num("extends_per_s"),
        r.num("expected_extends_per_s"), r.num("histogram_bin_s"), r.num("histogram_max_over_mean"),
        r.num("acquire_seconds"), static_cast<long long>(r.num("locks_lost")),
        static_cast<long long>(r.num("locks_lost_before_window")), static_cast<long long>(r.num("still_owned")));
  }
}

// ------------------------------------------------------------------ memory

void scenario_memory(env& e, std::size_t n) {
  e.flush_nodes();
  record r("memory");
  r.set_int("nodes", static_cast<std::int64_t>(n));
  {
    // Completed work must give its memory back: heap before and after many pairs.
    auto c = make_client(e, e.uris(n));
    (void)sync_pairs(*c, bench_acquire_options(), milliseconds(100), 1000);
    std::this_thread::sleep_for(milliseconds(100));
    const std::int64_t heap0 = heap_in_use_bytes();
    std::uint64_t pairs = 0;
    {
      // The samples this keeps are freed before the second look.
      pair_result p = sync_pairs(*c, bench_acquire_options(), seconds(30), e.size.memory_ops);
      pairs = p.pairs;
    }
    std::this_thread::sleep_for(milliseconds(200));  // late replies and rollbacks settle
    const std::int64_t heap1 = heap_in_use_bytes();
    r.set_int("retained_pairs", static_cast<std::int64_t>(pairs));
    r.set("retained_heap_bytes_per_pair",
          pairs > 0 ? static_cast<double>(heap1 - heap0) / static_cast<double>(pairs) : NAN);
  }
  {
    // Held locks without the watchdog.
    auto c = make_client(e, e.uris(n));
    const std::size_t count = e.size.memory_locks;
    const std::int64_t heap0 = heap_in_use_bytes(), rss0 = rss_bytes();
    hold_result held = acquire_many(*c, count, 64, bench_acquire_options());
    const std::int64_t heap1 = heap_in_use_bytes(), rss1 = rss_bytes();
    const auto ok = static_cast<double>(count - held.failures);
    r.set_int("held_locks", static_cast<std::int64_t>(count - held.failures));
    r.set("held_heap_bytes_per_lock", ok > 0 ? static_cast<double>(heap1 - heap0) / ok : NAN);
    r.set("held_rss_bytes_per_lock", ok > 0 ? static_cast<double>(rss1 - rss0) / ok : NAN);
    const std::uint64_t rel0 = c->stats().releases;
    held.locks.clear();
    wait_releases(*c, rel0, count - held.failures, seconds(60));
  }
  {
    // In-flight acquires: every node paused, so nothing completes while we look.
    // A long command timeout keeps them in flight; resuming lets them finish.
    auto c = make_client(e, e.uris(n), milliseconds(5000));
    const std::size_t ops = e.size.memory_ops;
    struct counters {
      std::atomic<std::uint64_t> done{0}, acquired{0};
    };
    // Shared with the callbacks: they may outlive this scope if a node never answers.
    auto k = std::make_shared<counters>();
    std::atomic<std::uint64_t>& done = k->done;
    std::atomic<std::uint64_t>& acquired = k->acquired;
    const std::int64_t heap0 = heap_in_use_bytes(), rss0 = rss_bytes();
    std::int64_t heap1 = 0, rss1 = 0;
    {
      std::vector<std::unique_ptr<pause_guard>> paused;
      for (std::size_t i = 0; i < n; ++i) paused.push_back(std::make_unique<pause_guard>((*e.cluster)[i]));
      const std::string prefix = "bench:mem:" + unique_key_suffix() + ":";
      for (std::size_t i = 0; i < ops; ++i) {
        c->acquire_async(prefix + std::to_string(i), bench_acquire_options(), [k](acquire_result a) {
          if (a) k->acquired.fetch_add(1);
          k->done.fetch_add(1);  // `a.lock` releases as it goes out of scope
        });
      }
      // Two looks, 200 ms apart: the larger is taken (all requests queued by then).
      for (int look = 0; look < 2; ++look) {
        std::this_thread::sleep_for(milliseconds(e.size.quick ? 100 : 200));
        heap1 = std::max(heap1, heap_in_use_bytes());
        rss1 = std::max(rss1, rss_bytes());
      }
      r.set_int("inflight_done_while_paused", static_cast<std::int64_t>(done.load()));
    }
    sleep_unless(seconds(30), [&] { return done.load() >= ops; });
    r.set_int("inflight_ops", static_cast<std::int64_t>(ops));
    r.set_int("inflight_completed", static_cast<std::int64_t>(done.load()));
    r.set_int("inflight_acquired", static_cast<std::int64_t>(acquired.load()));
    r.set("inflight_heap_bytes_per_op", static_cast<double>(heap1 - heap0) / static_cast<double>(ops));
    r.set("inflight_rss_bytes_per_op", static_cast<double>(rss1 - rss0) / static_cast<double>(ops));
    if (done.load() < ops)
      throw std::runtime_error("memory: in-flight acquires did not complete after resume");
  }
  r.set_int("peak_rss_bytes", peak_rss_bytes());
  e.out->emit(r);
  e.out->note(
      "  memory: %.0f heap bytes per held lock, %.0f per in-flight acquire, %.0f retained per completed "
      "pair, peak RSS %.1f MiB",
      r.num("held_heap_bytes_per_lock"), r.num("inflight_heap_bytes_per_op"),
      r.num("retained_heap_bytes_per_pair"), r.num("peak_rss_bytes") / 1048576.0);
}


// TLS against plain TCP in the same run: n TLS nodes (a second cluster, the same
// redis-server with --tls-port and a test certificate, verification on) and the
// run's first n plain nodes. Sequential acquire + release pair latency, and
// pipelined throughput with `inflight` chains, each side's medians and the ratios.
void scenario_tls(env& e, std::size_t n, int inflight) {
  const test::tls_certs& certs = test::tls_certs::get();
  test::node_config cfg;
  cfg.tls = true;
  cfg.tls_cert_file = certs.server_cert;
  cfg.tls_key_file = certs.server_key;
  cfg.tls_ca_file = certs.ca_file;
  test::redis_cluster tls_nodes(static_cast<int>(n), cfg);
  tls_options tls;
  tls.ca_file = certs.ca_file;
  e.flush_nodes();
  auto plain = make_client(e, e.uris(n));
  auto secure = make_client(e, tls_nodes.uris(), milliseconds(0), tls);
  std::vector<record> runs;
  for (int rep = 0; rep < e.size.repeats; ++rep) {
    record r("tls");
    pair_result lp, lt;
    chain_result tp, tt;
    chain_config cc;
    cc.inflight = inflight;
    cc.duration = e.size.throughput_time;
    auto run_plain = [&] {
      lp = sync_pairs(*plain, bench_acquire_options(), e.size.latency_time, kUnbounded);
      tp = run_chains({plain.get()}, cc);
    };
    auto run_tls = [&] {
      lt = sync_pairs(*secure, bench_acquire_options(), e.size.latency_time, kUnbounded);
      tt = run_chains({secure.get()}, cc);
    };
    // Alternate the order so neither side always runs on a warmer machine.
    if (rep % 2 == 0) {
      run_plain();
      run_tls();
    } else {
      run_tls();
      run_plain();
    }
    const summary ps = lp.pair.summarize();
    const summary ts = lt.pair.summarize();
    r.set_int("nodes", static_cast<std::int64_t>(n));
    r.set_int("inflight", inflight);
    r.set_summary("plain_pair", ps);
    r.set_summary("tls_pair", ts);
    r.set("plain_pairs_per_s", per_second(tp.pairs, tp.seconds));
    r.set("tls_pairs_per_s", per_second(tt.pairs, tt.seconds));
    r.set_int("errors", static_cast<std::int64_t>(lp.errors + lt.errors + tp.errors + tt.errors));
    runs.push_back(r);
  }
  record m = record::median_of(runs, {"plain_pair_p50_us", "tls_pair_p50_us", "plain_pairs_per_s", "tls_pairs_per_s"});
  m.set("latency_ratio_p50", m.num("tls_pair_p50_us") / m.num("plain_pair_p50_us"));
  m.set("latency_ratio_p99", m.num("tls_pair_p99_us") / m.num("plain_pair_p99_us"));
  m.set("throughput_ratio", m.num("tls_pairs_per_s") / m.num("plain_pairs_per_s"));
  e.out->emit(m);
  const record& r = e.out->all().back();
  e.out->note("  tls N=%zu: pair p50 %.0f us TLS vs %.0f us plain (%.2fx), p99 %.0f / %.0f us (%.2fx); "
              "%d in flight: %.0f vs %.0f pairs/s (%.2fx)",
              n, r.num("tls_pair_p50_us"), r.num("plain_pair_p50_us"), r.num("latency_ratio_p50"),
              r.num("tls_pair_p99_us"), r.num("plain_pair_p99_us"), r.num("latency_ratio_p99"), inflight,
              r.num("tls_pairs_per_s"), r.num("plain_pairs_per_s"), r.num("throughput_ratio"));
}


// ------------------------------------------------------------------ observer cost

std::vector<std::pair<std::string, observer_factory>>& observer_variants() {
  static std::vector<std::pair<std::string, observer_factory>> v = {
      {"none", nullptr},
      {"noop", [] { return std::make_shared<observer>(); }},
      {"metrics", [] { return std::make_shared<redlock::metrics>(); }},
  };
  return v;
}

void scenario_observers(env& e, std::size_t n, int inflight) {
  // One client per variant, all alive at once; each repeat measures every variant
  // in a rotated order (no variant always runs first on a cold machine).
  const auto& variants = observer_variants();
  std::vector<std::unique_ptr<client>> clients;
  for (const auto& [name, make] : variants) {
    std::vector<std::shared_ptr<observer>> obs;
    if (make) obs.push_back(make());
    clients.push_back(make_client(e, e.uris(n), milliseconds(0), {}, std::move(obs)));
  }
  std::vector<std::vector<record>> runs(variants.size());
  for (int rep = 0; rep < e.size.repeats; ++rep) {
    for (std::size_t k = 0; k < variants.size(); ++k) {
      const std::size_t v = (k + static_cast<std::size_t>(rep)) % variants.size();
      e.flush_nodes();
      record r("observers");
      r.set_str("variant", variants[v].first);
      r.set_int("nodes", static_cast<std::int64_t>(n));
      {
        cpu_meter m(e.pids(n));
        pair_result l = sync_pairs(*clients[v], bench_acquire_options(), e.size.latency_time, kUnbounded);
        r.set_summary("sync_pair", l.pair.summarize());
        r.set("sync_client_cpu_us_per_pair", m.own_us_per(l.pairs));
        r.set_int("sync_errors", static_cast<std::int64_t>(l.errors));
      }
      {
        chain_config cfg;
        cfg.inflight = inflight;
        cfg.duration = e.size.throughput_time;
        cpu_meter m(e.pids(n));
        chain_result a = run_chains({clients[v].get()}, cfg);
        r.set_summary("loaded_pair", a.pair.summarize());
        r.set("loaded_pairs_per_s", per_second(a.pairs, a.seconds));
        r.set("loaded_client_cpu_us_per_pair", m.own_us_per(a.pairs));
        r.set_int("loaded_errors", static_cast<std::int64_t>(a.errors));
      }
      runs[v].push_back(r);
    }
  }
  std::vector<record> medians;
  for (auto& rs : runs) medians.push_back(record::median_of(rs, {"sync_pair_p50_us", "loaded_client_cpu_us_per_pair"}));
  const record& base = medians.front();
  for (std::size_t v = 0; v < medians.size(); ++v) {
    record& m = medians[v];
    m.set_int("inflight", inflight);
    for (const char* k : {"sync_pair_p50_us", "sync_pair_p99_us", "sync_client_cpu_us_per_pair",
                          "loaded_pair_p50_us", "loaded_pairs_per_s", "loaded_client_cpu_us_per_pair"}) {
      m.set(std::string("ratio_") + k, m.num(k) / base.num(k));
    }
    e.out->emit(m);
    e.out->note("  observers=%s: sync pair p50 %.0f us (%.3fx), client CPU %.1f us/pair (%.3fx); "
                "%d in flight: %.0f pairs/s (%.3fx), client CPU %.1f us/pair (%.3fx)",
                variants[v].first.c_str(), m.num("sync_pair_p50_us"), m.num("ratio_sync_pair_p50_us"),
                m.num("sync_client_cpu_us_per_pair"), m.num("ratio_sync_client_cpu_us_per_pair"), inflight,
                m.num("loaded_pairs_per_s"), m.num("ratio_loaded_pairs_per_s"),
                m.num("loaded_client_cpu_us_per_pair"), m.num("ratio_loaded_client_cpu_us_per_pair"));
  }
}

}  // namespace redlock::bench
