// simulate: runs the deterministic simulator harness (scenario.h) from the
// command line. See `simulate --help` and docs/safety-harness.md.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include "scenario.h"

namespace {

using namespace redlock::simtest;

const char kUsage[] =
    "usage: simulate [options]\n"
    "  --seed S             the (first) seed (default 1)\n"
    "  --scenario NAME      mixed, pauses, restarts, clock, partitions, watchdog, fencing, clock_reconnect,\n"
    "                       idle_pauses, rollbacks, permissions, fence_names, cluster, or all\n"
    "                       (default: mixed for one run, all when exploring)\n"
    "  --seeds N            explore N seeds from --seed on (per scenario)\n"
    "  --seconds T          explore for T CPU seconds (seeds from --seed on, scenarios in turn)\n"
    "  --guard-off G        restart (restart_quarantine = 0), clock (clock_jump_threshold = 0) or\n"
    "                       replication (cluster shards' grants count unreplicated)\n"
    "  --faults LIST        apply only these faults of the schedule (comma-separated indices, or none)\n"
    "  --expect E           pass | violation | violation:<checker>: exit 0 when every run meets it\n"
    "  --first-failure      when exploring, stop at the first run with a violation (tools/mutants.sh)\n"
    "  --corpus FILE        replay a corpus (tests/sim/seeds.txt) and check each line's expectation\n"
    "  --twice              run each seed twice and compare the digests (determinism)\n"
    "  --digests            print one line per run, '<scenario> <seed> <guard-off> <digest>', and nothing else\n"
    "                       (with --corpus or when exploring; tools/sim-digests.sh)\n"
    "  --verbose            print the plan and every history line as it happens\n"
    "  --history            print the whole history after a run\n"
    "  --no-shrink          on a violation, do not shrink the fault schedule\n"
    "  --shrink-budget N    runs the shrinker may use (default 150)\n"
    "Exit: 0 when every run met its expectation (default: pass), 1 otherwise, 2 on bad usage.\n";

double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

struct args {
  std::uint64_t seed = 1;
  std::string scenario;
  std::int64_t seeds = 0;
  double seconds = 0;
  guard_off off = guard_off::none;
  bool faults_given = false;
  std::vector<bool> mask;
  std::string expect;
  std::string corpus;
  bool twice = false, digests = false, verbose = false, history = false, shrink = true, first_failure = false;
  int shrink_budget = 150;
};

bool parse_mask(const std::string& s, std::vector<bool>& mask) {
  mask.clear();
  if (s == "none") {
    mask.push_back(false);  // non-empty: "apply none"
    return true;
  }
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = s.find(',', at);
    const std::string part = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (part.empty()) return false;
    char* end = nullptr;
    const unsigned long v = std::strtoul(part.c_str(), &end, 10);
    if (end == nullptr || *end != '\0' || v > 100000) return false;
    if (mask.size() <= v) mask.resize(v + 1, false);
    mask[v] = true;
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return !mask.empty();
}

bool parse(int argc, char** argv, args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (k == "--help" || k == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (k == "--seed") {
      if (!value(v)) return false;
      a.seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (k == "--scenario") {
      if (!value(a.scenario)) return false;
      if (a.scenario != "all" && !known_scenario(a.scenario)) {
        std::cerr << "simulate: unknown scenario '" << a.scenario << "'\n";
        return false;
      }
    } else if (k == "--seeds") {
      if (!value(v)) return false;
      a.seeds = std::strtoll(v.c_str(), nullptr, 10);
    } else if (k == "--seconds") {
      if (!value(v)) return false;
      a.seconds = std::strtod(v.c_str(), nullptr);
    } else if (k == "--guard-off") {
      if (!value(v) || !parse_guard_off(v, a.off)) return false;
    } else if (k == "--faults") {
      if (!value(v) || !parse_mask(v, a.mask)) return false;
      a.faults_given = true;
    } else if (k == "--expect") {
      if (!value(a.expect)) return false;
      if (a.expect != "pass" && a.expect != "violation" && a.expect.rfind("violation:", 0) != 0) return false;
    } else if (k == "--corpus") {
      if (!value(a.corpus)) return false;
    } else if (k == "--twice") {
      a.twice = true;
    } else if (k == "--verbose") {
      a.verbose = true;
    } else if (k == "--history") {
      a.history = true;
    } else if (k == "--first-failure") {
      a.first_failure = true;
    } else if (k == "--digests") {
      a.digests = true;
    } else if (k == "--no-shrink") {
      a.shrink = false;
    } else if (k == "--shrink-budget") {
      if (!value(v)) return false;
      a.shrink_budget = std::atoi(v.c_str());
    } else {
      std::cerr << "simulate: unknown option '" << k << "'\n";
      return false;
    }
  }
  return true;
}

bool expectation_met(const run_result& r, const std::string& expect) {
  if (expect.empty() || expect == "pass") return r.passed();
  if (expect == "violation") return !r.passed();
  return meets(r, expect);
}

void print_digest(const run_options& o, const run_result& r) {
  std::printf("%s %" PRIu64 " %s %016" PRIx64 "\n", o.scenario.c_str(), o.seed, to_string(o.off), r.digest);
}

std::string result_line(const run_options& o, const run_result& r, double cpu) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "seed=%" PRIu64 " scenario=%s guard-off=%s result=%s digest=%016" PRIx64 " ops=%" PRIu64
                " acquired=%" PRIu64 " faults=%zu events=%" PRIu64 " virtual=%.1fs liveness=%.1fms cpu=%.0fms",
                o.seed, o.scenario.c_str(), to_string(o.off), r.verdict().c_str(), r.digest, r.operations,
                r.acquired, r.faults_applied, r.events, static_cast<double>(r.virtual_us) / 1e6,
                static_cast<double>(r.liveness_us) / 1e3, cpu * 1e3);
  return buf;
}

void print_violations(const run_options& o, const run_result& r) {
  std::size_t shown = 0;
  for (const auto& v : r.violations) {
    if (++shown > 3) {
      std::cout << "  (" << r.violations.size() - 3 << " more violations)\n";
      break;
    }
    std::cout << "VIOLATION seed " << o.seed << " scenario " << o.scenario << " guard-off " << to_string(o.off)
              << " checker " << v.checker << " at " << history::format_time(v.t_us) << "\n  " << v.summary << "\n"
              << v.detail;
  }
  std::cout << "replay: " << replay_command(o) << " --verbose\n";
}

void shrink_and_print(const run_options& o, const run_result& r, int budget) {
  const std::string checker = r.violations.front().checker;
  const double t0 = cpu_seconds();
  int used = 0;
  const std::vector<bool> mask = shrink(o, checker, budget, &used);
  run_options m = o;
  m.fault_mask = mask;
  std::cout << "shrunk (" << used << " runs, " << static_cast<int>(cpu_seconds() - t0) << " s CPU): faults still needed for "
            << checker << ":\n";
  std::size_t kept = 0;
  for (std::size_t i = 0; i < mask.size(); ++i) {
    if (!mask[i]) continue;
    ++kept;
    std::cout << "  [" << i << "] " << describe(r.p.faults[i]) << "\n";
  }
  if (kept == 0) std::cout << "  (none: the clients' own schedule finds it without faults)\n";
  if (mask.empty()) m.fault_mask.push_back(false);
  std::cout << "minimal replay: " << replay_command(m) << " --verbose\n";
}

int run_one(const args& a, run_options o, const std::string& expect, bool print_details) {
  const double t0 = cpu_seconds();
  const run_result r = run(o);
  const double cpu = cpu_seconds() - t0;
  std::cout << result_line(o, r, cpu) << "\n";
  bool ok = expectation_met(r, expect);
  if (a.twice) {
    run_options again = o;
    again.verbose = nullptr;
    const run_result r2 = run(again);
    const bool same = r2.digest == r.digest;
    std::printf("  second run: digest=%016" PRIx64 " %s\n", r2.digest, same ? "(same)" : "(DIFFERENT: not deterministic)");
    ok = ok && same;
  }
  if (a.history) {
    for (const auto& e : r.h.timeline) std::cout << r.h.format(e) << "\n";
  }
  if (!r.passed() && print_details) {
    print_violations(o, r);
    if (a.shrink && !r.p.faults.empty()) shrink_and_print(o, r, a.shrink_budget);
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  args a;
  if (!parse(argc, argv, a)) {
    std::cerr << kUsage;
    return 2;
  }
  if (!a.corpus.empty()) {
    std::vector<corpus_entry> entries;
    try {
      entries = read_corpus(a.corpus);
    } catch (const std::exception& e) {
      std::cerr << "simulate: " << e.what() << "\n";
      return 2;
    }
    int bad = 0;
    for (const auto& e : entries) {
      run_options o;
      o.seed = e.seed;
      o.scenario = e.scenario;
      o.off = e.off;
      const run_result r = run(o);
      const bool ok = meets(r, e.expect);
      if (a.digests) {
        print_digest(o, r);
        bad += ok ? 0 : 1;
        continue;
      }
      std::cout << (ok ? "ok   " : "FAIL ") << a.corpus << ":" << e.line << " " << e.scenario << " " << e.seed
                << " expect " << e.expect << ": " << r.verdict() << "\n";
      if (!ok) {
        ++bad;
        print_violations(o, r);
      }
    }
    if (a.digests) return bad == 0 ? 0 : 1;
    std::cout << entries.size() - static_cast<std::size_t>(bad) << " of " << entries.size() << " corpus runs as expected\n";
    return bad == 0 ? 0 : 1;
  }

  const bool explore = a.seeds > 0 || a.seconds > 0;
  if (!explore) {
    run_options o;
    o.seed = a.seed;
    o.scenario = a.scenario.empty() || a.scenario == "all" ? "mixed" : a.scenario;
    o.off = a.off;
    if (a.faults_given) o.fault_mask = a.mask;
    if (a.verbose) o.verbose = &std::cout;
    return run_one(a, o, a.expect, true);
  }

  std::vector<std::string> scenarios;
  if (a.scenario.empty() || a.scenario == "all") {
    scenarios = scenario_names();
  } else {
    scenarios = {a.scenario};
  }
  const double t0 = cpu_seconds();
  std::uint64_t runs = 0, ops = 0, failed = 0, met = 0;
  std::vector<std::string> findings;
  bool stop = false;
  for (std::uint64_t k = 0; !stop; ++k) {
    if (a.seeds > 0 && k >= static_cast<std::uint64_t>(a.seeds)) break;
    if (a.seeds <= 0 && cpu_seconds() - t0 >= a.seconds) break;
    for (const auto& s : scenarios) {
      run_options o;
      o.seed = a.seed + k;
      o.scenario = s;
      o.off = a.off;
      if (a.faults_given) o.fault_mask = a.mask;
      const double r0 = cpu_seconds();
      const run_result r = run(o);
      ++runs;
      ops += r.operations;
      const bool ok = expectation_met(r, a.expect);
      met += ok ? 1 : 0;
      if (!r.passed()) {
        ++failed;
        findings.push_back(replay_command(o) + "   # " + r.verdict() + ": " + r.violations.front().summary);
      }
      if (a.digests) {
        print_digest(o, r);
        continue;
      }
      if (a.verbose || !ok) std::cout << result_line(o, r, cpu_seconds() - r0) << "\n";
      if (!ok && a.expect.empty()) print_violations(o, r);
      if (a.first_failure && !r.passed()) {
        std::printf("first failure: seed=%" PRIu64 " scenario=%s checker=%s after %" PRIu64 " run(s), %.2f s CPU\n",
                    o.seed, s.c_str(), r.violations.front().checker.c_str(), runs, cpu_seconds() - t0);
        stop = true;
        break;
      }
    }
  }
  if (a.digests) return met == runs ? 0 : 1;
  const double cpu = cpu_seconds() - t0;
  std::printf("explored %" PRIu64 " runs (%zu scenario(s), seeds %" PRIu64 "..%" PRIu64 ", guard-off %s) in %.1f s CPU: "
              "%.1f runs/s, %" PRIu64 " client operations, %.0f operations per CPU-second\n",
              runs, scenarios.size(), a.seed, a.seed + (runs / scenarios.size()) - (runs > 0 ? 1 : 0), to_string(a.off),
              cpu, cpu > 0 ? static_cast<double>(runs) / cpu : 0.0, ops, cpu > 0 ? static_cast<double>(ops) / cpu : 0.0);
  std::printf("%" PRIu64 " run(s) with a violation; %" PRIu64 " of %" PRIu64 " met the expectation (%s)\n", failed, met,
              runs, a.expect.empty() ? "pass" : a.expect.c_str());
  for (const auto& f : findings) std::cout << "  " << f << "\n";
  return met == runs ? 0 : 1;
}
