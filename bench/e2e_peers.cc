// The `peers` scenario of bench_e2e: the same pair loop run with node-redlock 5
// (beta) over ioredis, next to this library and the raw floors, in one run.
//
// Opt-in (run only when named: `bench_e2e peers`): it needs node and npm on PATH
// and, for a cold npm cache, the npm registry. Whatever of that is missing, the
// scenario says why and skips; the run's exit status is not affected.
//
// Each round measures, in a rotating order so no side always runs on a warmer
// machine:
//   floor    the parallel raw floor (single pair) and the pipelined floor (batch 64)
//   redlock  sync_pairs (one caller thread), one async chain, 64 async chains
//   node     bench/peers/node_redlock_pairs.js: one chain, 64 chains, and 64
//            chains with ioredis' enableAutoPipelining
// and the medians over the rounds are reported as ratios to the floors.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "e2e.h"
#include "library_load.h"
#include "raw_floor.h"

extern char** environ;

#ifndef REDLOCK_PEERS_DRIVER
#define REDLOCK_PEERS_DRIVER ""
#endif

namespace redlock::bench {

namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::uint64_t kUnbounded = 100'000'000;  // loops are bounded by time first
constexpr const char* kRedlockPackage = "redlock@5.0.0-beta.2";
constexpr const char* kIoredisPackage = "ioredis";
constexpr int kInflight = 64;
// Warm-up pairs of each node-redlock run, so its JIT has compiled the pair loop
// (the driver bounds the warm-up at 5 s too).
constexpr std::uint64_t kNodeWarmupPairs = 1000;

// The path of an executable `name` on PATH; "" if there is none.
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The last non-empty line of `text` (for a one-line reason), at most 300 characters.
std::string last_line(const std::string& text) {
  std::size_t end = text.find_last_not_of("\r\n \t");
  if (end == std::string::npos) return "";
  std::size_t begin = text.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  std::string line = text.substr(begin, end + 1 - begin);
  if (line.size() > 300) line = line.substr(0, 300) + "...";
  return line;
}

struct child_result {
  bool started = false;
  bool timed_out = false;
  int exit_status = -1;  // -1 unless it exited normally
  std::string out, err;  // what it wrote on stdout and stderr
};

// Runs argv[0] (a path) with argv, stdin from /dev/null and stdout/stderr into
// files in `dir`; waits at most `limit`, then kills its process group (npm
// starts children of its own). Blocks until the child has been reaped.
child_result run_bounded(const std::vector<std::string>& argv, const std::string& dir,
                         bench_clock::duration limit) {
  child_result r;
  const std::string out_path = dir + "/child.out", err_path = dir + "/child.err";
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  // Its own process group, so a timeout can end npm and whatever it started.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);  // bench_e2e ignores SIGPIPE; the child gets the default back
  posix_spawnattr_setsigdefault(&attr, &defaults);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    r.err = std::string("cannot start ") + argv[0] + ": " + std::strerror(rc);
    return r;
  }
  r.started = true;
  const auto deadline = bench_clock::now() + limit;
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (bench_clock::now() >= deadline) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  if (!r.timed_out && WIFEXITED(status)) r.exit_status = WEXITSTATUS(status);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  return r;
}

// The number after "key": in a flat JSON object; NaN if absent.
double json_number(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const std::size_t at = json.find(needle);
  if (at == std::string::npos) return NAN;
  const char* begin = json.c_str() + at + needle.size();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  return end == begin ? NAN : v;
}

// The string after "key": in a flat JSON object (no escapes expected); "" if absent.
std::string json_string(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":\"";
  const std::size_t at = json.find(needle);
  if (at == std::string::npos) return "";
  const std::size_t end = json.find('"', at + needle.size());
  return end == std::string::npos ? "" : json.substr(at + needle.size(), end - at - needle.size());
}

// Why npm failed, in one line: its error code and the first line naming an error
// (e.g. "ECONNREFUSED: FetchError: request to ... failed"), else its last line.
std::string npm_reason(const std::string& text) {
  std::string code, what;
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (code.empty() && line.rfind("npm error code ", 0) == 0) code = line.substr(15);
    if (what.empty() && line.find("Error") != std::string::npos) {
      what = line.rfind("npm error ", 0) == 0 ? line.substr(10) : line;
    }
  }
  if (what.empty()) what = last_line(text);
  if (what.size() > 300) what = what.substr(0, 300) + "...";
  return code.empty() ? what : code + ": " + what;
}

std::string loadavg() { return last_line(read_file("/proc/loadavg")); }

// Where npm keeps its cache between runs: $REDLOCK_PEERS_NPM_CACHE, else
// peers-npm-cache next to this executable (the build directory), else npm's own
// default (~/.npm, returned as "").
std::string npm_cache_dir() {
  if (const char* c = std::getenv("REDLOCK_PEERS_NPM_CACHE"); c != nullptr && *c != '\0') return c;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path cache = exe.parent_path() / "peers-npm-cache";
  fs::create_directories(cache, ec);
  if (ec || ::access(cache.c_str(), W_OK) != 0) return "";
  return cache.string();
}

// The JS driver: $REDLOCK_PEERS_DRIVER, else the source tree's copy (compiled in).
std::string driver_path() {
  if (const char* d = std::getenv("REDLOCK_PEERS_DRIVER"); d != nullptr && *d != '\0') return d;
  return REDLOCK_PEERS_DRIVER;
}

// A temporary directory, removed (with its contents) on destruction.
class temp_dir {
 public:
  temp_dir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/redlock-peers-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr)
      throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
    path_ = buf.data();
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

void skip(env& e, const std::string& reason) {
  record r("peers.skipped");
  r.set_str("reason", reason);
  e.out->emit(r);
  e.out->note("  peers: skipped (%s)", reason.c_str());
}

// One figure of one round: a single-client latency or an in-flight throughput.
record figure(const char* impl, int inflight) {
  record r("peers");
  r.set_str("impl", impl);
  r.set_int("inflight", inflight);
  return r;
}

void set_meter(record& r, const cpu_meter& m, std::uint64_t pairs) {
  r.set("client_cpu_us_per_pair", m.own_us_per(pairs));
  r.set("server_cpu_us_per_pair", m.servers_us_per(pairs));
  r.set("others_busy_cores", m.other_busy_cores());
}

}  // namespace

void scenario_peers(env& e, std::size_t n) {
  const std::string node = find_on_path("node"), npm = find_on_path("npm");
  if (node.empty() || npm.empty()) {
    skip(e, "node/npm not found");
    return;
  }
  const std::string driver = driver_path();
  if (driver.empty() || ::access(driver.c_str(), R_OK) != 0) {
    skip(e, "driver script not found: '" + driver + "' (set REDLOCK_PEERS_DRIVER)");
    return;
  }

  // node-redlock and ioredis into a temporary prefix; the cache makes reruns fast
  // (and offline once warm: --prefer-offline).
  temp_dir prefix;
  const std::string cache = npm_cache_dir();
  std::vector<std::string> install = {npm, "install", "--prefix", prefix.path(), "--no-audit", "--no-fund",
                                      "--no-update-notifier", "--prefer-offline", "--loglevel=error",
                                      "--fetch-timeout=20000", "--fetch-retries=1"};
  if (!cache.empty()) install.push_back("--cache=" + cache);
  install.push_back(kRedlockPackage);
  install.push_back(kIoredisPackage);
  e.out->note("  peers: npm install %s %s (cache %s)", kRedlockPackage, kIoredisPackage,
              cache.empty() ? "~/.npm" : cache.c_str());
  const auto i0 = bench_clock::now();
  const child_result inst = run_bounded(install, prefix.path(), seconds(90));
  const double install_s = to_seconds(bench_clock::now() - i0);
  if (!inst.started || inst.timed_out || inst.exit_status != 0) {
    std::string why = !inst.started ? inst.err
                      : inst.timed_out ? "npm install took over 90 s"
                                       : "npm install failed: " + npm_reason(inst.err + inst.out);
    skip(e, why);
    return;
  }
  const std::string modules = prefix.path() + "/node_modules";

  const std::vector<int> ports = e.ports(n);
  std::string port_list;
  for (int p : ports) port_list += (port_list.empty() ? "" : ",") + std::to_string(p);
  const auto ms = [](bench_clock::duration d) {
    return std::to_string(std::chrono::duration_cast<milliseconds>(d).count());
  };
  std::string versions;  // "redlock X, ioredis Y, node Z", from the driver
  // One run of the JS driver; its JSON line, or an exception with node's stderr.
  auto node_run = [&](int inflight, bool auto_pipelining, bench_clock::duration window) {
    const std::vector<std::string> argv = {node,         driver,          "--modules",   modules,
                                           "--ports",    port_list,       "--inflight",  std::to_string(inflight),
                                           "--duration-ms", ms(window),   "--max-pairs", std::to_string(kUnbounded),
                                           "--warmup",   std::to_string(std::max(kNodeWarmupPairs, e.size.warmup_pairs)),
                                           "--auto-pipelining", auto_pipelining ? "1" : "0"};
    const child_result c = run_bounded(argv, prefix.path(), window + seconds(30));
    const std::size_t brace = c.out.find('{');
    if (c.exit_status != 0 || brace == std::string::npos)
      throw std::runtime_error("node-redlock driver failed (" +
                               std::string(c.timed_out ? "timed out" : "status " + std::to_string(c.exit_status)) +
                               "): " + last_line(c.err));
    const std::string json = c.out.substr(brace, c.out.find('\n', brace) - brace);
    versions = "redlock " + json_string(json, "redlock_version") + ", ioredis " +
               json_string(json, "ioredis_version") + ", node " + json_string(json, "node_version");
    return json;
  };

  e.flush_nodes();
  auto acq_opts = bench_acquire_options();
  client_options o;
  o.nodes = e.uris(n);
  o.command_timeout = e.size.command_timeout;
  o.clock_sample_interval = e.size.clock_sample_interval;
  client lib(std::move(o));
  {  // warm-up: connections up, scripts loaded
    const auto deadline = bench_clock::now() + seconds(5);
    std::uint64_t ok = 0;
    while (ok < e.size.warmup_pairs && bench_clock::now() < deadline) {
      acquire_result a = lib.acquire("bench:warmup:" + unique_key_suffix(), acq_opts);
      if (a && !a.lock.release().error) ++ok;
    }
    if (ok < e.size.warmup_pairs) throw std::runtime_error("warm-up failed: the client cannot lock");
  }
  raw_nodes rn(ports);
  const std::string load0 = loadavg();

  // figure name -> one record per round
  std::map<std::string, std::vector<record>> runs;
  const std::vector<std::string> kOrder = {"floor.parallel", "floor.pipelined64", "redlock.sync",
                                           "redlock.async1", "redlock.async64",   "node-redlock.single",
                                           "node-redlock.inflight64", "node-redlock.inflight64_autopipe"};
  auto run_floor = [&] {
    {
      cpu_meter m(e.pids(n));
      floor_result f = parallel_floor(rn, floor_acquire::set_nx, e.size.latency_time, kUnbounded);
      record r = figure("floor.parallel", 1);
      set_meter(r, m, f.pairs);
      r.set_int("pairs", static_cast<std::int64_t>(f.pairs));
      r.set_int("errors", static_cast<std::int64_t>(f.errors));
      r.set_summary("pair", f.pair.summarize());
      r.set("pairs_per_s", f.seconds > 0 ? static_cast<double>(f.pairs) / f.seconds : NAN);
      runs["floor.parallel"].push_back(r);
    }
    cpu_meter m(e.pids(n));
    floor_result f = pipelined_floor(rn, kInflight, e.size.throughput_time, kUnbounded);
    record r = figure("floor.pipelined64", kInflight);
    set_meter(r, m, f.pairs);
    r.set_int("pairs", static_cast<std::int64_t>(f.pairs));
    r.set_int("errors", static_cast<std::int64_t>(f.errors));
    r.set("pairs_per_s", f.seconds > 0 ? static_cast<double>(f.pairs) / f.seconds : NAN);
    runs["floor.pipelined64"].push_back(r);
  };
  auto run_library = [&] {
    {
      cpu_meter m(e.pids(n));
      pair_result l = sync_pairs(lib, acq_opts, e.size.latency_time, kUnbounded);
      record r = figure("redlock.sync", 1);
      set_meter(r, m, l.pairs);
      r.set_int("pairs", static_cast<std::int64_t>(l.pairs));
      r.set_int("errors", static_cast<std::int64_t>(l.errors));
      r.set_summary("pair", l.pair.summarize());
      r.set("pairs_per_s", l.seconds > 0 ? static_cast<double>(l.pairs) / l.seconds : NAN);
      runs["redlock.sync"].push_back(r);
    }
    for (int k : {1, kInflight}) {
      chain_config cfg;
      cfg.inflight = k;
      cfg.duration = k == 1 ? e.size.latency_time : e.size.throughput_time;
      cpu_meter m(e.pids(n));
      chain_result a = run_chains({&lib}, cfg);
      const std::string name = k == 1 ? "redlock.async1" : "redlock.async64";
      record r = figure(name.c_str(), k);
      set_meter(r, m, a.pairs);
      r.set_int("pairs", static_cast<std::int64_t>(a.pairs));
      r.set_int("errors", static_cast<std::int64_t>(a.errors));
      r.set_summary("pair", a.pair.summarize());
      r.set("pairs_per_s", a.seconds > 0 ? static_cast<double>(a.pairs) / a.seconds : NAN);
      runs[name].push_back(r);
    }
  };
  auto run_node = [&] {
    // One chain; 64 chains; 64 chains with ioredis' auto-pipelining.
    const std::vector<std::pair<std::string, bool>> variants = {{"node-redlock.single", false},
                                                                {"node-redlock.inflight64", false},
                                                                {"node-redlock.inflight64_autopipe", true}};
    for (const auto& [name, autopipe] : variants) {
      const int k = name == "node-redlock.single" ? 1 : kInflight;
      cpu_meter m(e.pids(n));
      const std::string json = node_run(k, autopipe, k == 1 ? e.size.latency_time : e.size.throughput_time);
      const double pairs = json_number(json, "pairs");
      const double warmup = json_number(json, "warmup_pairs");
      if (std::isnan(pairs) || std::isnan(warmup)) throw std::runtime_error("node-redlock driver: bad output: " + json);
      record r = figure(name.c_str(), k);
      // The driver's own CPU (process.cpuUsage over the measured window); the
      // servers' over the whole child run, so per pair of the warm-up too.
      r.set("client_cpu_us_per_pair", json_number(json, "cpu_us_per_pair"));
      r.set("server_cpu_us_per_pair",
            m.servers_us_per(static_cast<std::uint64_t>(pairs + warmup)));
      r.set("others_busy_cores_incl_node", m.other_busy_cores());
      r.set_int("pairs", static_cast<std::int64_t>(pairs));
      r.set_int("errors", static_cast<std::int64_t>(json_number(json, "errors")));
      r.set("pair_p50_us", json_number(json, "pair_p50_us"));
      r.set("pair_p99_us", json_number(json, "pair_p99_us"));
      r.set("pairs_per_s", json_number(json, "pairs_per_s"));
      r.set_int("auto_pipelining", autopipe ? 1 : 0);
      r.set_str("versions", versions);
      runs[name].push_back(r);
    }
  };

  const int rounds = e.size.quick ? e.size.repeats : std::max(3, e.size.repeats);
  const std::vector<std::function<void()>> sides = {run_floor, run_library, run_node};
  for (int round = 0; round < rounds; ++round) {
    // Rotate the order: floor, library, node; library, node, floor; ...
    for (std::size_t i = 0; i < sides.size(); ++i) sides[(i + static_cast<std::size_t>(round)) % sides.size()]();
    e.flush_nodes();
  }

  std::map<std::string, record> med;
  for (const auto& name : kOrder) {
    record m = record::median_of(runs.at(name), {"pair_p50_us", "pairs_per_s"});
    m.set_int("nodes", static_cast<std::int64_t>(n));
    med.emplace(name, m);
  }
  const double floor_p50 = med.at("floor.parallel").num("pair_p50_us");
  const double floor_p99 = med.at("floor.parallel").num("pair_p99_us");
  const double floor_pps = med.at("floor.pipelined64").num("pairs_per_s");
  const auto cpu_per_pair = [](const record& r) {
    return r.num("client_cpu_us_per_pair") + r.num("server_cpu_us_per_pair");
  };
  const double floor_cpu = cpu_per_pair(med.at("floor.pipelined64"));
  for (const auto& name : kOrder) {
    record& m = med.at(name);
    if (m.num("inflight") == 1) {
      m.set("ratio_p50_vs_parallel_floor", m.num("pair_p50_us") / floor_p50);
      m.set("ratio_p99_vs_parallel_floor", m.num("pair_p99_us") / floor_p99);
    } else {
      m.set("ratio_vs_pipelined64_floor", m.num("pairs_per_s") / floor_pps);
      // The ratio if CPU were the only limit (a dedicated, saturated machine):
      // the floor's CPU per pair (client + servers) over this one's.
      m.set("cpu_bound_ratio_vs_pipelined64_floor", floor_cpu / cpu_per_pair(m));
    }
    e.out->emit(m);
  }
  std::vector<double> others;
  for (const auto& name : kOrder) {
    for (const record& r : runs.at(name)) {
      if (!std::isnan(r.num("others_busy_cores"))) others.push_back(r.num("others_busy_cores"));
    }
  }
  record summary_rec("peers.run");
  summary_rec.set_int("rounds", rounds);
  summary_rec.set_str("versions", versions);
  summary_rec.set("npm_install_seconds", install_s);
  summary_rec.set("others_busy_cores_median", median(others));
  summary_rec.set_str("loadavg_start", load0);
  summary_rec.set_str("loadavg_end", loadavg());
  e.out->emit(summary_rec);

  // The table.
  auto row = [&](const char* label, const char* single, const char* multi) {
    char a[96] = "", b[96] = "";
    if (single != nullptr) {
      const record& s = med.at(single);
      std::snprintf(a, sizeof a, "%8.0f %8.0f %6.2fx %8.1f", s.num("pair_p50_us"), s.num("pair_p99_us"),
                    s.num("pair_p50_us") / floor_p50, s.num("client_cpu_us_per_pair"));
    } else {
      std::snprintf(a, sizeof a, "%8s %8s %7s %8s", "-", "-", "-", "-");
    }
    if (multi != nullptr) {
      const record& t = med.at(multi);
      std::snprintf(b, sizeof b, "%9.0f %6.2fx %8.1f %8.1f %6.2fx", t.num("pairs_per_s"),
                    t.num("pairs_per_s") / floor_pps, t.num("client_cpu_us_per_pair"),
                    t.num("server_cpu_us_per_pair"), floor_cpu / cpu_per_pair(t));
    } else {
      std::snprintf(b, sizeof b, "%9s %7s %8s %8s %7s", "-", "-", "-", "-", "-");
    }
    e.out->note("  %-28s %s | %s", label, a, b);
  };
  e.out->note("  peers: %zu nodes, median of %d rounds; %s; others busy %.2f cores; loadavg %s -> %s", n, rounds,
              versions.c_str(), median(others), load0.c_str(), loadavg().c_str());
  e.out->note("  %-28s %8s %8s %7s %8s | %9s %7s %8s %8s %7s", "", "p50 us", "p99 us", "x floor", "cpu/pair",
              "pairs/s@64", "x floor", "cpu/pair", "srv cpu", "cpu-x");
  row("raw floor (parallel/pipe64)", "floor.parallel", "floor.pipelined64");
  row("redlock (sync / async 64)", "redlock.sync", "redlock.async64");
  row("redlock (async, 1 chain)", "redlock.async1", nullptr);
  row("node-redlock 5 beta/ioredis", "node-redlock.single", "node-redlock.inflight64");
  row("  + ioredis auto-pipelining", nullptr, "node-redlock.inflight64_autopipe");
}

}  // namespace redlock::bench
