#include "scenario.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <tuple>
#include <stdexcept>
#include <cstdlib>

#include "redlock/client.h"
#include "redlock/testing.h"
#include "testing/world_impl.h"

namespace redlock::simtest {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using testing::sim_rng;

// ------------------------------------------------------------------ names

const char* to_string(guard_off g) {
  switch (g) {
    case guard_off::none:
      return "none";
    case guard_off::restart:
      return "restart";
    case guard_off::clock:
      return "clock";
    case guard_off::replication:
      return "replication";
  }
  return "?";
}

bool parse_guard_off(const std::string& s, guard_off& out) {
  if (s == "none") {
    out = guard_off::none;
  } else if (s == "restart") {
    out = guard_off::restart;
  } else if (s == "clock") {
    out = guard_off::clock;
  } else if (s == "replication") {
    out = guard_off::replication;
  } else {
    return false;
  }
  return true;
}

namespace {

const char* kind_name(fault::kind k) {
  switch (k) {
    case fault::kind::latency:
      return "latency";
    case fault::kind::black_hole:
      return "black_hole";
    case fault::kind::partition:
      return "partition";
    case fault::kind::drop_replies:
      return "drop_replies";
    case fault::kind::reset:
      return "reset";
    case fault::kind::pause_node:
      return "pause_node";
    case fault::kind::crash:
      return "crash";
    case fault::kind::restart:
      return "restart";
    case fault::kind::clock_jump:
      return "clock_jump";
    case fault::kind::clock_drift:
      return "clock_drift";
    case fault::kind::pause_client:
      return "pause_client";
    case fault::kind::jump_reset:
      return "jump_reset";
    case fault::kind::deny:
      return "deny";
    case fault::kind::failover:
      return "failover";
  }
  return "?";
}

// Cluster nodes are a development preview (lib/api/validate.cc) that the first
// client of the process reads from the environment: switched on before main(), so
// that any scenario can run first. It changes nothing for redis:// nodes.
const bool kClusterPreview = ::setenv("REDLOCK_PREVIEW_CLUSTER", "1", 1) == 0;

std::string ms_text(std::int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(us) / 1000.0);
  return buf;
}

const char* errc_name(std::error_code ec) {
  if (!ec) return "ok";
  if (ec.category() != redlock::category()) return "foreign_error";
  return redlock::to_string(static_cast<errc>(ec.value()));
}

// Errors the harness's use of the API can never cause: finding one is a finding.
bool unexpected_error(std::error_code ec) {
  return ec == errc::invalid_argument || ec == errc::would_deadlock || ec == errc::auth_failed ||
         ec == errc::wrong_type || ec == errc::permission_denied || ec == errc::extension_limit ||
         (ec && ec.category() != redlock::category());
}

}  // namespace

std::string describe(const fault& f) {
  std::string out = history::format_time(f.at_us) + " " + kind_name(f.what);
  switch (f.what) {
    case fault::kind::partition:
      out += " c" + std::to_string(f.client) + " x node" + std::to_string(f.node);
      break;
    case fault::kind::pause_client:
      out += " c" + std::to_string(f.client);
      break;
    default:
      out += " node" + std::to_string(f.node);
      break;
  }
  if (f.what == fault::kind::latency) out += " up to " + ms_text(f.amount) + " one way";
  if (f.what == fault::kind::clock_jump || f.what == fault::kind::jump_reset) {
    out += " by " + std::to_string(f.amount) + " ms";
  }
  if (f.what == fault::kind::failover) {
    out += "'s shard: replication stalls for " + ms_text(f.amount) + ", then its master stops and its replica is "
           "promoted with what it had; the old master rejoins as a replica " +
           ms_text(f.dur_us) + " after the stall began";
    return out;
  }
  if (f.what == fault::kind::clock_drift) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " rate %+.4f", f.rate);
    out += buf;
  }
  if (f.dur_us > 0) out += " for " + ms_text(f.dur_us);
  return out;
}

std::string plan::describe() const {
  std::string out = "plan: scenario " + scenario + ", seed " + std::to_string(seed) + ", guard off: " +
                    to_string(off) + "\n  " + std::to_string(nodes) + " nodes (persistent:";
  for (std::size_t i = 0; i < persistent.size(); ++i) out += persistent[i] ? " y" : " n";
 out += ")";
  for (std::size_t k = 0; k < clusters.size(); ++k) {
    out += k == 0 ? "\n  Redlock nodes are clusters:" : ";";
    out += " [" + std::to_string(k) + "]";
    for (const auto& sh : clusters[k]) {
      out += " node" + std::to_string(sh[0]) + ">";
      for (std::size_t j = 1; j < sh.size(); ++j) out += "node" + std::to_string(sh[j]);
    }
  }
  if (!clusters.empty()) out += "\n ";
  out += ", " + std::to_string(clients) + " clients, " + std::to_string(resources) + " resource(s), max_ttl " +
         std::to_string(max_ttl_ms) + " ms, schedule " + ms_text(run_us) + ", latency " +
         std::to_string(min_latency_us) + "-" + std::to_string(max_latency_us) + " us\n";
  if (late_join_us >= 0) {
    out += "  c" + std::to_string(clients - 1) + " joins at " + history::format_time(late_join_us) +
           " (restart_guard_first_sight)\n";
  }
  for (std::size_t c = 0; c < profiles.size(); ++c) {
    const auto& p = profiles[c];
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "  c%zu: ttl %" PRId64 "-%" PRId64
                  " ms, watchdog %.2f, fencing %.2f, extend %.2f, write %.2f, cancel %.2f, long hold %.2f, "
                  "gc pause %.2f, think <= %s, step <= %s, attempts %d\n",
                  c, p.ttl_min_ms, p.ttl_max_ms, p.auto_extend, p.fencing, p.explicit_extend, p.write, p.cancel,
                  p.long_hold, p.gc_pause, ms_text(p.think_max_us).c_str(), ms_text(p.step_max_us).c_str(), p.retry_attempts);
    out += buf;
  }
  if (check_orphans) out += "  checks: orphan keys gone within " + ms_text(orphan_bound_us) + " of a healthy node\n";
  if (check_no_reset) out += "  checks: no connection reset (every pause shorter than the stall bound)\n";
  if (reserved_name) out += "  resource 1 is named after resource 0's fence counter (refused by the API)\n";
  out += "  faults (" + std::to_string(faults.size()) + "):\n";
  for (std::size_t i = 0; i < faults.size(); ++i) {
    out += "    [" + std::to_string(i) + "] " + simtest::describe(faults[i]) + "\n";
  }
  return out;
}

// ------------------------------------------------------------------ plans

const std::vector<std::string>& scenario_names() {
  // The last five each aim at one defect class of the hardening issue
  // (docs/verification-mutants.md, tools/mutants.sh).
  static const std::vector<std::string> names = {"mixed",           "pauses",      "restarts",  "clock",
                                                 "partitions",      "watchdog",    "fencing",   "clock_reconnect",
                                                 "idle_pauses",     "rollbacks",   "permissions", "fence_names",
                                                 "cluster"};
  return names;
}

bool known_scenario(const std::string& name) {
  const auto& n = scenario_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

namespace {

constexpr std::int64_t kSecond = 1'000'000;

struct mix {
  double per_second = 1.0;
  std::map<fault::kind, int> weights;  // ordered: the draw is deterministic
  double persistent = 0.5;            // probability per node
  double auto_extend = 0.3, fencing = 0.3, long_hold = 0.1, write = 0.5, gc_pause = 0.02;
  double late_join = 0.3;  // probability that the last client joins late
  // The defect-class scenarios (plan's check_* and reserved_name):
  bool check_orphans = false, check_no_reset = false, reserved_name = false;
  bool long_ttls = false;    // TTLs 3-10 s (max_ttl 10 s): room to see a key outlive its rollback
  bool idle_clients = false;  // think 1.5-5 s: connections idle longer than the stall bound
  bool one_resource = false;
  // Clock steps forward only: several steps of one node between two of a client's
  // samples (a client cut off from it meanwhile) then add up beyond the allowance,
  // where a step back and a step forward could net to a size between the drift
  // allowance and the guard's threshold, which no guarantee covers.
  bool forward_jumps = false;
  bool clusters = false;  // three Redis Clusters (1-2 shards, a replica per master)
};

mix mix_of(const std::string& s) {
  using k = fault::kind;
  mix m;
  if (s == "mixed") {
    m.weights = {{k::latency, 2},    {k::black_hole, 2}, {k::partition, 2},  {k::drop_replies, 1},
                 {k::reset, 1},      {k::pause_node, 2}, {k::crash, 2},      {k::restart, 1},
                 {k::clock_jump, 1}, {k::clock_drift, 1}, {k::pause_client, 2}};
    m.per_second = 1.0;
    m.late_join = 0;  // it has clock jumps
  } else if (s == "pauses") {
    m.weights = {{k::pause_node, 3}, {k::pause_client, 3}, {k::latency, 1}};
  } else if (s == "restarts") {
    m.weights = {{k::crash, 3}, {k::restart, 3}, {k::reset, 1}};
    m.per_second = 0.8;
    m.persistent = 0.25;
  } else if (s == "clock") {
    m.weights = {{k::clock_jump, 3}, {k::clock_drift, 2}, {k::latency, 1}};
    m.per_second = 0.6;
    m.late_join = 0;
  } else if (s == "partitions") {
    m.weights = {{k::black_hole, 2}, {k::partition, 3}, {k::drop_replies, 2}, {k::reset, 1}, {k::latency, 1}};
  } else if (s == "watchdog") {
    m.weights = {{k::pause_client, 2}, {k::pause_node, 2}, {k::partition, 2}, {k::latency, 2},
                 {k::drop_replies, 1}, {k::black_hole, 1}};
    m.per_second = 0.8;
    m.auto_extend = 1.0;
    m.long_hold = 0.5;
    m.gc_pause = 0.05;
  } else if (s == "fencing") {
    m.weights = {{k::pause_client, 4}, {k::restart, 1}, {k::crash, 1}, {k::pause_node, 1}, {k::latency, 1}};
    m.persistent = 1.0;  // fences need nodes that keep their counters (docs/fencing.md)
    m.fencing = 1.0;
    m.write = 0.8;
    m.gc_pause = 0.1;
  } else if (s == "clock_reconnect") {
    // Clock steps that come with broken connections (a VM resumed or migrated), and
    // steps during partitions and black holes: the guard must compare across the
    // reconnect.
    m.weights = {{k::jump_reset, 3}, {k::clock_jump, 1}, {k::partition, 2}, {k::black_hole, 1},
                 {k::reset, 1},      {k::latency, 1}};
    m.per_second = 0.8;
    m.late_join = 0;
    m.forward_jumps = true;
  } else if (s == "idle_pauses") {
    // Node pauses longer than command_timeout but shorter than the stall bound,
    // meeting connections idle for longer than the stall bound.
    m.weights = {{k::pause_node, 1}};
    m.per_second = 0.7;
    m.gc_pause = 0;
    m.check_no_reset = true;
    m.idle_clients = true;
  } else if (s == "rollbacks") {
    // Contended acquires whose minority grants must be rolled back across resets,
    // crashes, restarts (script caches emptied: NOSCRIPT resends) and lost replies.
    m.weights = {{k::reset, 3}, {k::crash, 2}, {k::restart, 2}, {k::drop_replies, 2}, {k::latency, 2}};
    m.per_second = 0.8;
    m.fencing = 0.5;
    m.gc_pause = 0;
    m.check_orphans = true;
    m.long_ttls = true;
    m.one_resource = true;
  } else if (s == "permissions") {
    // A minority of nodes refuses the lock commands (NOPERM) for a while, among
    // ordinary faults: an operation may fail permanently only when the permanent
    // errors alone rule out a quorum (the api checker: permission_denied is never
    // the harness's fault).
    m.weights = {{k::deny, 3}, {k::partition, 2}, {k::pause_node, 1}, {k::reset, 1}, {k::latency, 2}};
    m.per_second = 0.8;
    m.auto_extend = 0.5;
  } else if (s == "fence_names") {
    // Resource "res0" fenced, and "res0:fence" (its counter's name) beside it.
    m.weights = {{k::pause_client, 1}, {k::latency, 1}, {k::restart, 1}};
    m.per_second = 0.4;
    m.persistent = 1.0;
    m.fencing = 1.0;
    m.reserved_name = true;
  } else if (s == "cluster") {
    // Three Redis Clusters as the Redlock nodes; shards fail over (after their
    // replication stalled: the unreplicated grants are lost) among network and
    // process faults; late joiners never saw the maps before the failovers (no
    // master change to quarantine): only the replication confirmation (WAIT)
    // keeps the grants a promoted replica lacks from counting.
    m.weights = {{k::failover, 4}, {k::latency, 1}, {k::black_hole, 1}, {k::partition, 1}, {k::pause_node, 1},
                 {k::pause_client, 1}, {k::reset, 1}};
    m.per_second = 0.5;
    m.persistent = 0;
    m.late_join = 1.0;
    m.clusters = true;
  } else {
    throw std::invalid_argument("unknown scenario '" + s + "'");
  }
  return m;
}

fault::kind draw_kind(sim_rng& r, const mix& m) {
  int total = 0;
  for (const auto& [kind, w] : m.weights) total += w;
  std::int64_t x = r.between(0, total - 1);
  for (const auto& [kind, w] : m.weights) {
    if (x < w) return kind;
    x -= w;
  }
  return m.weights.begin()->first;
}

}  // namespace

plan make_plan(std::uint64_t seed, const std::string& scenario, guard_off off) {
  const mix m = mix_of(scenario);
  sim_rng r(seed ^ 0x5eed'0f'91a4ull);
  plan p;
  p.scenario = scenario;
  p.seed = seed;
  p.off = off;
  p.nodes = r.chance(0.5) ? 3 : 5;
  p.clients = static_cast<std::size_t>(r.between(2, 4));
  p.resources = static_cast<std::size_t>(r.between(1, 2));
  if (m.one_resource) p.resources = 1;
  if (m.reserved_name) p.resources = 2;
  if (m.one_resource && p.clients < 3) p.clients = 3;  // contention
  p.check_orphans = m.check_orphans;
  p.check_no_reset = m.check_no_reset;
  p.reserved_name = m.reserved_name;
  if (m.clusters) {
    // Drawn here, before everything else that depends on the node count.
    p.nodes = 0;
    for (int k = 0; k < 3; ++k) {
      std::vector<std::vector<std::size_t>> shards;
      const std::int64_t n = r.between(1, 2);
      for (std::int64_t j = 0; j < n; ++j) {
        shards.push_back({p.nodes, p.nodes + 1});
        p.nodes += 2;
      }
      p.clusters.push_back(std::move(shards));
    }
    if (p.clients < 3) p.clients = 3;  // room for a late joiner
  }
  for (std::size_t i = 0; i < p.nodes; ++i) p.persistent.push_back(r.chance(m.persistent));
  p.max_ttl_ms = m.long_ttls ? 10'000 : 2000;
  p.run_us = r.between(15, 25) * 1'000'000;
  p.min_latency_us = 100;
  p.max_latency_us = r.between(300, 2000);
  for (std::size_t c = 0; c < p.clients; ++c) {
    client_profile cp;
    cp.ttl_min_ms = r.between(200, 800);
    cp.ttl_max_ms = r.between(cp.ttl_min_ms, p.max_ttl_ms);
    cp.auto_extend = m.auto_extend;
    cp.fencing = m.fencing;
    cp.explicit_extend = 0.15;
    cp.write = m.write;
    cp.cancel = 0.03;
    cp.long_hold = m.long_hold;
    cp.gc_pause = m.gc_pause;
    cp.think_max_us = r.between(20, 200) * 1000;
    cp.step_max_us = r.between(20, 150) * 1000;
    cp.retry_attempts = r.chance(0.5) ? 1 : 3;
    if (m.long_ttls) {
      cp.ttl_min_ms = r.between(3000, 5000);
      cp.ttl_max_ms = r.between(cp.ttl_min_ms, p.max_ttl_ms);
    }
    if (m.idle_clients) cp.think_max_us = r.between(1500, 5000) * 1000;
    p.profiles.push_back(cp);
  }
  const auto count = static_cast<std::int64_t>(m.per_second * static_cast<double>(p.run_us) / 1e6);
  for (std::int64_t i = 0; i < count; ++i) {
    fault f;
    f.what = draw_kind(r, m);
    f.node = static_cast<std::size_t>(r.between(0, static_cast<std::int64_t>(p.nodes) - 1));
    f.client = static_cast<std::size_t>(r.between(0, static_cast<std::int64_t>(p.clients) - 1));
    // Denials only on a minority: nodes 0 .. (n-1)/2 - 1.
    if (f.what == fault::kind::deny) f.node %= (p.nodes - 1) / 2;
    switch (f.what) {
      case fault::kind::latency:
        f.dur_us = r.between(500, 5000) * 1000;
        f.amount = r.between(1000, 80'000);
        break;
      case fault::kind::black_hole:
        f.dur_us = r.between(100, 3000) * 1000;
        break;
      case fault::kind::partition:
        f.dur_us = r.between(100, 5000) * 1000;
        break;
      case fault::kind::drop_replies:
        f.dur_us = r.between(10, 300) * 1000;
        break;
      case fault::kind::pause_node:
        // idle_pauses: longer than command_timeout (50 ms), and with the network's
        // delays well below the stall bound (1 s).
        f.dur_us = m.check_no_reset ? r.between(60, 700) * 1000 : r.between(10, 4000) * 1000;
        break;
      case fault::kind::deny:
        f.dur_us = r.between(500, 5000) * 1000;
        break;
      case fault::kind::crash:
        f.dur_us = r.between(50, 3000) * 1000;
        break;
      case fault::kind::jump_reset:
      case fault::kind::clock_jump: {
        // Jumps the guard must see (beyond 2 x threshold + the samples' dating), or
        // ones too small to matter (well within the drift allowance). Jumps in
        // between are outside the guarantee's assumptions (docs/safety.md). Jumps
        // on one node are drawn independently: two opposite ones close together
        // (a step and its correction) are possible, and their net step may be
        // small for a client whose two TIME samples straddle both.
        const std::int64_t x = r.between(0, 9);
        if (x < 7) {
          f.amount = r.between(2500, 10'000);
        } else if (x < 9) {
          f.amount = -r.between(2500, 10'000);
        } else {
          f.amount = r.chance(0.5) ? 1 : -1;  // within the drift allowance (2 ms + 1 % of the TTL)
        }
        if (m.forward_jumps && f.amount < -1) f.amount = -f.amount;
        break;
      }
      case fault::kind::clock_drift: {
        f.dur_us = r.between(1000, 10'000) * 1000;
        f.rate = (r.unit() - 0.5) * 0.01;  // within +-0.5 %, below the 1 % drift factor
        break;
      }
      case fault::kind::pause_client:
        f.dur_us = r.between(10, 3000) * 1000;
        break;
      case fault::kind::failover:
        f.node -= f.node % 2;  // an original shard master (even: each shard is master, replica)
        f.amount = r.between(50, 1500) * 1000;
        f.dur_us = f.amount + r.between(300, 4000) * 1000;
        break;
      case fault::kind::reset:
      case fault::kind::restart:
        break;
    }
    const std::int64_t latest = std::max<std::int64_t>(300'000, p.run_us - f.dur_us);
    f.at_us = r.between(300'000, latest);
    p.faults.push_back(f);
  }
  std::stable_sort(p.faults.begin(), p.faults.end(),
                   [](const fault& a, const fault& b) { return a.at_us < b.at_us; });
  if (m.check_no_reset) {
    // Pauses of one node never overlap (two would add up past the stall bound).
    std::vector<std::int64_t> free_at(p.nodes, 0);
    std::vector<fault> kept;
    for (const fault& f : p.faults) {
      if (f.what == fault::kind::pause_node) {
        if (f.at_us < free_at[f.node]) continue;
        free_at[f.node] = f.at_us + f.dur_us + 100'000;
      }
      kept.push_back(f);
    }
    p.faults = std::move(kept);
  }
  if (p.clients >= 3 && r.chance(m.late_join)) p.late_join_us = r.between(1, p.run_us / kSecond - 3) * kSecond;
  return p;
}

// ------------------------------------------------------------------ the run

namespace {

constexpr std::int64_t kMs = 1000;
constexpr std::int64_t kSec = 1'000'000;

std::int64_t to_us(std::chrono::steady_clock::time_point t, std::chrono::steady_clock::time_point origin) {
  return std::chrono::duration_cast<microseconds>(t - origin).count();
}

class runner {
 public:
  explicit runner(const run_options& o)
      : o_(o), p_(make_plan(o.seed, o.scenario, o.off)), rng_(o.seed ^ 0xac70'4511'd00dull) {}

  run_result go();

 private:
  struct hold_state {
    redlock::lock handle;
    bool has_handle = false;
    bool detached = false;
    redlock::lease lease;  // detached: the caller's lease
    bool released = false;  // a release call was made (or the handle given up)
    bool open = false;      // the belief may still change
    std::int64_t obs_t = 0, obs_until = 0;
    bool obs_alive = false;
  };
  struct actor {
    int client = 0, resource = 0;
    enum class state { idle, acquiring, holding, stopped } st = state::idle;
    int hold = -1;
    std::int64_t hold_until_us = 0;
    std::uint32_t acquire_op = 0;
    std::uint64_t acquire_id = 0;  // the library's id, for cancel()
  };

  std::int64_t now() const { return w_->elapsed().count(); }
  testing::world::impl& wi() { return w_->internals(); }
  std::string resource_name(int r) const {
    // reserved_name: resource 1 is named as resource 0's fence counter.
    if (p_.reserved_name && r == 1) return "res0:fence";
    return "res" + std::to_string(r);
  }
  bool reserved(int r) const { return p_.reserved_name && r == 1; }

  void note(int client, int resource, std::string text) {
    h_.note(now(), client, resource, std::move(text));
    if (o_.verbose != nullptr) *o_.verbose << h_.format(h_.timeline.back()) << "\n";
  }
  void finding(std::string checker, std::string summary, std::string detail = {}) {
    violation v;
    v.checker = std::move(checker);
    v.summary = std::move(summary);
    v.detail = std::move(detail);
    v.t_us = now();
    extra_.push_back(std::move(v));
  }

  // Runs `fn` as a turn of `client`'s process, `delay` from now.
  template <class F>
  void later(int client, std::int64_t delay_us, F fn) {
    auto cl = wi().clients[static_cast<std::size_t>(client)];
    testing::world::impl* w = &wi();
    wi().at(now() + std::max<std::int64_t>(0, delay_us), [w, cl, fn = std::move(fn)]() mutable {
      w->for_client(cl, std::move(fn));
    });
  }

  std::uint32_t new_op(op_kind k, int client, int resource, int hold) {
    op_record r;
    r.id = static_cast<std::uint32_t>(h_.ops.size());
    r.kind = k;
    r.client = client;
    r.resource = resource;
    r.hold = hold;
    r.call_us = now();
    h_.ops.push_back(r);
    ++operations_;
    return r.id;
  }
  // Marks a completion; false if it was not the first (the caller then does nothing more).
  bool complete(std::uint32_t op, std::error_code ec) {
    op_record& r = h_.ops[op];
    ++r.completions;
    if (in_call_) r.inside_call = true;
    if (r.completions > 1) return false;
    r.done_us = now();
    r.result = errc_name(ec);
    // The documented refusal of a reserved name (docs/safety.md, 11) is the API
    // working: the harness asked for it on purpose.
    const bool refused_reserved = r.kind == op_kind::acquire && reserved(r.resource) && ec == errc::invalid_argument;
    if (unexpected_error(ec) && !refused_reserved) {
      finding("api", std::string(to_string(r.kind)) + " #" + std::to_string(op) + " of c" +
                         std::to_string(r.client) + " failed with " + errc_name(ec));
    }
    return true;
  }

  // --- beliefs ---
  void add_belief(hold_record& hr, std::int64_t from, std::int64_t to) {
    if (from >= to) return;
    if (!hr.belief.empty() && hr.belief.back().to >= from) {
      hr.belief.back().to = std::max(hr.belief.back().to, to);
      return;
    }
    hr.belief.push_back(interval{from, to});
  }
  void observe(int hold) {
    hold_state& hs = holds_[static_cast<std::size_t>(hold)];
    if (!hs.open) return;
    hold_record& hr = h_.holds[static_cast<std::size_t>(hold)];
    const std::int64_t t = now();
    bool alive = !hs.released;
    std::int64_t until = hs.obs_until;
    if (hs.has_handle) {
      if (hs.handle.lost()) alive = false;
      const auto l = hs.handle.info();
      if (l.valid_until) until = to_us(*l.valid_until, origin_);
    } else if (hs.detached && hs.lease.valid_until) {
      until = to_us(*hs.lease.valid_until, origin_);
    }
    if (alive == hs.obs_alive && until == hs.obs_until) return;
    if (hs.obs_alive) add_belief(hr, hs.obs_t, std::min(t, hs.obs_until));
    hs.obs_t = t;
    hs.obs_alive = alive;
    hs.obs_until = until;
    if (!alive) {
      hs.open = false;
      hr.ended = true;
    }
  }
  void observe_client(std::size_t client) {
    auto& open = open_holds_[client];
    for (int hold : open) observe(hold);
    open.erase(std::remove_if(open.begin(), open.end(),
                              [this](int hold) { return !holds_[static_cast<std::size_t>(hold)].open; }),
               open.end());
  }
  void close_belief(int hold) {
    hold_state& hs = holds_[static_cast<std::size_t>(hold)];
    if (!hs.open) return;
    hold_record& hr = h_.holds[static_cast<std::size_t>(hold)];
    if (hs.obs_alive) add_belief(hr, hs.obs_t, std::min(now(), hs.obs_until));
    hs.open = false;
    hs.obs_alive = false;
    hr.ended = true;
  }

  // --- the actors ---
  void think(actor& a);
  void on_acquired(actor& a, std::uint32_t op, acquire_result r, bool watchdog);
  void hold_step(actor& a);
  void write(actor& a);
  void explicit_extend(actor& a);
  void finish_hold(actor& a);
  void give_up_handle(int hold, std::string why);
  void schedule_next(actor& a, bool failed = false);

  // --- faults ---
  void apply(std::size_t index, bool begin);
  void schedule_faults();
  bool node_healthy(std::size_t n) const {
    if (crashes_[n] > 0 || drops_[n] > 0 || pauses_[n] > 0 || black_holes_[n] > 0) return false;
    for (const auto& [cut, count] : cuts_) {
      if (cut.second == n && count > 0) return false;
    }
    return true;
  }
  // Called after every change of a node's faults: its healthy period starts now
  // (a reset or a restart too: connections come back after it).
  void node_changed(std::size_t n) { healthy_since_[n] = now(); }
  void sample_orphans();

  client_options options_for(std::size_t client) const {
    client_options co;
    co.max_ttl = milliseconds(p_.max_ttl_ms);
    if (p_.off == guard_off::restart) co.restart_quarantine = milliseconds(0);
    if (p_.off == guard_off::clock) co.clock_jump_threshold = milliseconds(0);
    if (p_.late_join_us >= 0 && client + 1 == p_.clients) co.restart_guard_first_sight = true;
    return co;
  }
  // The client's Redlock nodes: the world's nodes, or one redis+cluster:// URI per
  // cluster (every member a seed). guard_off::replication: the preview switch the
  // engine reads as each client is made (lib/engine/core.cc).
  std::unique_ptr<redlock::client> make_client(std::size_t client) {
    if (p_.clusters.empty()) return w_->make_client(options_for(client));
    std::vector<std::string> uris;
    for (const auto& shards : p_.clusters) {
      std::string uri = "redis+cluster://node" + std::to_string(shards[0][0]) + ":6379";
      char sep = '?';
      for (const auto& sh : shards) {
        for (std::size_t i : sh) {
          if (i == shards[0][0]) continue;
          uri += sep;
          uri += "seed=node" + std::to_string(i) + ":6379";
          sep = '&';
        }
      }
      uris.push_back(std::move(uri));
    }
    const char* name = "REDLOCK_PREVIEW_CONFIRM_REPLICATION";
    const char* was = std::getenv(name);
    const std::optional<std::string> saved = was == nullptr ? std::nullopt : std::optional<std::string>(was);
    if (p_.off == guard_off::replication) ::setenv(name, "0", 1);
    auto c = wi().make_client(options_for(client), std::move(uris));
    if (p_.off == guard_off::replication) {
      if (saved) {
        ::setenv(name, saved->c_str(), 1);
      } else {
        ::unsetenv(name);
      }
    }
    return c;
  }
  void join(std::size_t client) {
    clients_[client] = make_client(client);
    note(static_cast<int>(client), -1, "joins (a new process: restart_guard_first_sight)");
    for (auto& a : actors_) {
      if (static_cast<std::size_t>(a->client) == client && !stopping_) schedule_next(*a);
    }
  }

  // --- phases ---
  void stop_actors();
  void liveness();
  void check_keys();
  void teardown();

  run_options o_;
  plan p_;
  sim_rng rng_;
  std::unique_ptr<testing::world> w_;
  std::vector<std::unique_ptr<redlock::client>> clients_;
  std::vector<std::unique_ptr<actor>> actors_;
  std::vector<hold_state> holds_;
  std::vector<std::vector<int>> open_holds_;  // per client
  history h_;
  std::vector<violation> extra_;
  std::chrono::steady_clock::time_point origin_;
  bool stopping_ = false;
  bool in_call_ = false;
  std::uint64_t operations_ = 0;
  std::uint64_t acquired_ = 0;
  std::size_t faults_applied_ = 0;
  std::int64_t data_lost_at_ = -1;
  std::int64_t liveness_us_ = 0;
  std::vector<std::int64_t> back_jump_ms_;  // per node, total
  // Active fault counts, so overlapping faults of a kind end together.
  std::vector<int> black_holes_, drops_, pauses_, crashes_, denies_;
  std::vector<std::vector<std::int64_t>> latencies_;
  std::map<std::pair<std::size_t, std::size_t>, int> cuts_;
  std::vector<bool> begun_;  // per fault: its beginning was applied
  // The fenced resource: per resource, the highest fence it accepted.
  std::map<int, std::uint64_t> fenced_highest_;
  // Failovers done, by fault index: the old master, which rejoins at the fault's end.
  std::map<std::size_t, std::size_t> failed_master_;
  // check_orphans: per node, since when it is healthy; per (node, key, value) of
  // a key no successful acquire owns, when it was first seen; the known tokens.
  std::vector<std::int64_t> healthy_since_;
  std::map<std::tuple<std::size_t, std::string, std::string>, std::int64_t> orphans_;
  std::set<std::tuple<std::size_t, std::string, std::string>> orphans_reported_;
  bool sampling_ = false;
};

void runner::schedule_next(actor& a, bool failed) {
  if (a.st == actor::state::stopped) return;
  const auto& prof = p_.profiles[static_cast<std::size_t>(a.client)];
  actor* ap = &a;
  later(a.client, rng_.between(0, prof.think_max_us * (failed ? 3 : 1)), [this, ap] { think(*ap); });
}

void runner::think(actor& a) {
  if (a.st != actor::state::idle) return;
  if (stopping_) {
    a.st = actor::state::stopped;
    return;
  }
  const auto& prof = p_.profiles[static_cast<std::size_t>(a.client)];
  acquire_options ao;
  ao.ttl = milliseconds(rng_.between(prof.ttl_min_ms, prof.ttl_max_ms));
  ao.fencing = rng_.chance(prof.fencing);
  ao.auto_extend = rng_.chance(prof.auto_extend);
  if (prof.retry_attempts > 1) {
    ao.retry.max_attempts = prof.retry_attempts;
    ao.retry.base_delay = milliseconds(rng_.between(10, 100));
    ao.retry.max_delay = milliseconds(200);
  } else {
    ao.retry = retry_policy::once();
  }
  const std::uint32_t op = new_op(op_kind::acquire, a.client, a.resource, -1);
  // on_lost: recorded against the hold, which exists by the time it can run.
  auto lost_for = std::make_shared<int>(-1);
  ao.on_lost = [this, lost_for](const lease& l, const report& r) {
    const int hold = *lost_for;
    if (hold < 0) {
      finding("callbacks", "on_lost ran for an acquire that never reported success");
      return;
    }
    hold_record& hr = h_.holds[static_cast<std::size_t>(hold)];
    ++hr.on_lost_calls;
    if (hr.on_lost_us < 0) hr.on_lost_us = now();
    note(hr.client, hr.resource,
         "on_lost hold #" + std::to_string(hold) + ": " + errc_name(r.error) +
             (l.valid_until ? " valid_until " + history::format_time(to_us(*l.valid_until, origin_)) : ""));
  };
  a.st = actor::state::acquiring;
  a.acquire_op = op;
  char buf[96];
  std::snprintf(buf, sizeof buf, "acquire #%u ttl %lld ms%s%s attempts %d", op,
                static_cast<long long>(ao.ttl.count()), ao.fencing ? " fenced" : "",
                ao.auto_extend ? " watchdog" : "", ao.retry.max_attempts);
  note(a.client, a.resource, buf);
  const bool watchdog = ao.auto_extend;
  actor* ap = &a;
  in_call_ = true;
  a.acquire_id = clients_[static_cast<std::size_t>(a.client)]->acquire_async(
      resource_name(a.resource), std::move(ao), [this, ap, op, watchdog, lost_for](acquire_result r) {
        if (!complete(op, r.report.error)) return;
        if (r) *lost_for = static_cast<int>(holds_.size());
        on_acquired(*ap, op, std::move(r), watchdog);
      });
  in_call_ = false;
  if (rng_.chance(prof.cancel)) {
    const std::uint64_t id = a.acquire_id;
    later(a.client, rng_.between(0, 30 * kMs), [this, ap, op, id] {
      if (h_.ops[op].completions > 0) return;
      note(ap->client, ap->resource, "cancel acquire #" + std::to_string(op));
      clients_[static_cast<std::size_t>(ap->client)]->cancel(id);
    });
  }
}

void runner::on_acquired(actor& a, std::uint32_t op, acquire_result r, bool watchdog) {
  if (!r) {
    note(a.client, a.resource,
         "acquire #" + std::to_string(op) + " " + errc_name(r.report.error) + " after " +
             std::to_string(r.report.attempts) + " attempt(s)");
    a.st = actor::state::idle;
    schedule_next(a, true);
    return;
  }
  ++acquired_;
  const int hold = static_cast<int>(holds_.size());
  h_.ops[op].hold = hold;
  hold_record hr;
  hr.id = hold;
  hr.client = a.client;
  hr.resource = a.resource;
  hr.acquire_op = op;
  hr.auto_extend = watchdog;
  hr.invoke_us = h_.ops[op].call_us;
  hr.complete_us = now();
  const lease l = r.lock.info();
  hr.token = l.token;
  hr.fence = r.lock.fence();
  h_.holds.push_back(hr);
  hold_state hs;
  hs.handle = std::move(r.lock);
  hs.has_handle = true;
  hs.open = true;
  hs.obs_t = now();
  hs.obs_alive = true;
  hs.obs_until = l.valid_until ? to_us(*l.valid_until, origin_) : now();
  holds_.push_back(std::move(hs));
  open_holds_[static_cast<std::size_t>(a.client)].push_back(hold);
  char buf[160];
  std::snprintf(buf, sizeof buf, "acquire #%u ok: hold #%d token %.8s%s valid until %s (%d attempt(s))", op, hold,
                l.token.c_str(), hr.fence ? (" fence " + std::to_string(*hr.fence)).c_str() : "",
                history::format_time(hs.obs_until).c_str(), r.report.attempts);
  note(a.client, a.resource, buf);
  a.st = actor::state::holding;
  a.hold = hold;
  const auto& prof = p_.profiles[static_cast<std::size_t>(a.client)];
  const std::int64_t ttl_us = (hs.obs_until - now()) + 1;
  a.hold_until_us = now() + (rng_.chance(prof.long_hold) ? rng_.between(ttl_us, 4 * ttl_us + 1)
                                                         : rng_.between(0, ttl_us / 2 + 1));
  if (stopping_) {
    finish_hold(a);
    return;
  }
  actor* ap = &a;
  later(a.client, rng_.between(0, prof.step_max_us), [this, ap] { hold_step(*ap); });
}

void runner::hold_step(actor& a) {
  if (a.st != actor::state::holding) return;
  hold_state& hs = holds_[static_cast<std::size_t>(a.hold)];
  const auto& prof = p_.profiles[static_cast<std::size_t>(a.client)];
  if (stopping_ || now() >= a.hold_until_us || (hs.has_handle && !hs.handle.owns_lock())) {
    finish_hold(a);
    return;
  }
  if (hs.has_handle && hs.handle.fence() && rng_.chance(prof.write)) write(a);
  if (hs.has_handle && rng_.chance(prof.explicit_extend)) explicit_extend(a);
  actor* ap = &a;
  later(a.client, rng_.between(1 * kMs, prof.step_max_us), [this, ap] { hold_step(*ap); });
}

void runner::write(actor& a) {
  hold_state& hs = holds_[static_cast<std::size_t>(a.hold)];
  if (!hs.handle.owns_lock()) return;
  write_record w;
  w.hold = a.hold;
  w.client = a.client;
  w.resource = a.resource;
  w.fence = *hs.handle.fence();
  w.checked_us = now();
  // The holder computes, then sends (a pause of its process lands in between).
  const int client = a.client;
  const auto& prof = p_.profiles[static_cast<std::size_t>(client)];
  if (rng_.chance(prof.gc_pause)) {
    const std::int64_t ttl_us = prof.ttl_max_ms * kMs;
    const std::int64_t d = rng_.between(ttl_us / 2, 3 * ttl_us);
    w_->pause_client(*clients_[static_cast<std::size_t>(client)], microseconds(d));
    note(client, a.resource,
         "hold #" + std::to_string(a.hold) + ": checked owns_lock(), then its process pauses for " + ms_text(d) +
             " before the fenced write");
  }
  later(client, rng_.between(0, 20 * kMs), [this, w]() mutable {
    w.sent_us = now();
    wi().at(now() + rng_.between(100, 2 * kMs), [this, w]() mutable {
      w.arrived_us = now();
      auto it = fenced_highest_.find(w.resource);
      w.accepted = it == fenced_highest_.end() || w.fence >= it->second;
      if (w.accepted) fenced_highest_[w.resource] = std::max(w.fence, it == fenced_highest_.end() ? std::uint64_t{0} : it->second);
      h_.writes.push_back(w);
      note(w.client, w.resource,
           std::string("fenced write of hold #") + std::to_string(w.hold) + " fence " + std::to_string(w.fence) +
               (w.accepted ? " accepted" : " refused") + " (checked " + history::format_time(w.checked_us) +
               ", sent " + history::format_time(w.sent_us) + ")");
    });
  });
}

void runner::explicit_extend(actor& a) {
  hold_state& hs = holds_[static_cast<std::size_t>(a.hold)];
  const auto& prof = p_.profiles[static_cast<std::size_t>(a.client)];
  const milliseconds ttl(rng_.between(prof.ttl_min_ms, prof.ttl_max_ms));
  const int hold = a.hold;
  const std::uint32_t op = new_op(op_kind::extend, a.client, a.resource, hold);
  note(a.client, a.resource,
       "extend #" + std::to_string(op) + " hold #" + std::to_string(hold) + " to " + std::to_string(ttl.count()) +
           " ms");
  const int client = a.client, resource = a.resource;
  in_call_ = true;
  clients_[static_cast<std::size_t>(client)]->extend_async(hs.handle.info(), ttl, [this, op, client, resource](report r) {
    if (!complete(op, r.error)) return;
    note(client, resource,
         "extend #" + std::to_string(op) + " " + errc_name(r.error) +
             (r ? " validity " + std::to_string(r.validity.count()) + " ms" : std::string()));
  });
  in_call_ = false;
}

void runner::give_up_handle(int hold, std::string why) {
  hold_state& hs = holds_[static_cast<std::size_t>(hold)];
  hold_record& hr = h_.holds[static_cast<std::size_t>(hold)];
  if (!hs.has_handle) return;
  hr.lost = hs.handle.lost();
  hs.released = true;
  if (hr.release_call_us < 0) hr.release_call_us = now();
  note(hr.client, hr.resource, "hold #" + std::to_string(hold) + ": " + why);
  observe(hold);
  close_belief(hold);
  { redlock::lock gone = std::move(hs.handle); }  // the destructor releases, best effort
  hs.has_handle = false;
}

void runner::finish_hold(actor& a) {
  const int hold = a.hold;
  hold_state& hs = holds_[static_cast<std::size_t>(hold)];
  hold_record& hr = h_.holds[static_cast<std::size_t>(hold)];
  a.st = actor::state::idle;
  a.hold = -1;
  const int client = a.client, resource = a.resource;
  const std::int64_t how = rng_.between(0, 99);
  if (!hs.has_handle) {
    schedule_next(a);
    return;
  }
  if (hs.handle.lost()) {
    give_up_handle(hold, "lost: handle dropped");
  } else if (how < 60) {
    const std::uint32_t op = new_op(op_kind::release, client, resource, hold);
    hs.released = true;
    hr.release_call_us = now();
    note(client, resource, "release #" + std::to_string(op) + " hold #" + std::to_string(hold) + " (lock::release_async)");
    in_call_ = true;
    hs.handle.release_async([this, op, client, resource](report r) {
      if (!complete(op, r.error)) return;
      note(client, resource, "release #" + std::to_string(op) + " " + errc_name(r.error));
    });
    in_call_ = false;
    observe(hold);
  } else if (how < 75) {
    const std::uint32_t op = new_op(op_kind::release, client, resource, hold);
    hs.released = true;
    hr.release_call_us = now();
    note(client, resource,
         "release #" + std::to_string(op) + " hold #" + std::to_string(hold) + " (client::release_async of the lease)");
    in_call_ = true;
    clients_[static_cast<std::size_t>(client)]->release_async(hs.handle.info(), [this, op, client, resource](report r) {
      if (!complete(op, r.error)) return;
      note(client, resource, "release #" + std::to_string(op) + " " + errc_name(r.error));
    });
    in_call_ = false;
    observe(hold);
    // Then the handle goes (its destructor releases again: not_owner, or the keys
    // the first release could not reach); it would otherwise keep its watchdog.
    hr.lost = hs.handle.lost();
    { redlock::lock gone = std::move(hs.handle); }
    hs.has_handle = false;
    close_belief(hold);
  } else if (how < 90) {
    give_up_handle(hold, "handle destroyed (its destructor releases)");
  } else {
    hr.lost = hs.handle.lost();
    hs.lease = hs.handle.detach();
    hs.has_handle = false;
    hs.detached = true;
    note(client, resource,
         "hold #" + std::to_string(hold) + " detached, lease valid until " +
             (hs.lease.valid_until ? history::format_time(to_us(*hs.lease.valid_until, origin_)) : std::string("?")));
    observe(hold);
    if (rng_.chance(0.5)) {
      const std::int64_t delay = rng_.between(0, 300 * kMs);
      later(client, delay, [this, hold, client, resource] {
        hold_state& s = holds_[static_cast<std::size_t>(hold)];
        hold_record& r = h_.holds[static_cast<std::size_t>(hold)];
        const std::uint32_t op = new_op(op_kind::release, client, resource, hold);
        s.released = true;
        if (r.release_call_us < 0) r.release_call_us = now();
        note(client, resource,
             "release #" + std::to_string(op) + " hold #" + std::to_string(hold) + " (client::release_async, detached)");
        in_call_ = true;
        clients_[static_cast<std::size_t>(client)]->release_async(s.lease, [this, op, client, resource](report rep) {
          if (!complete(op, rep.error)) return;
          note(client, resource, "release #" + std::to_string(op) + " " + errc_name(rep.error));
        });
        in_call_ = false;
        observe(hold);
      });
    }
  }
  schedule_next(a);
}

// --- faults ---

void runner::apply(std::size_t index, bool begin) {
  const fault& f = p_.faults[index];
  // A fault whose beginning was skipped (its client had not joined yet) has no end.
  if (!begin && !begun_[index]) return;
  if (begin) begun_[index] = true;
  const std::size_t n = f.node;
  const std::string what = std::string(kind_name(f.what));
  auto note_fault = [&](const std::string& text, bool loses = false) {
    fault_record fr;
    fr.t_us = now();
    fr.text = text;
    fr.loses_data = loses;
    h_.faults.push_back(fr);
    note(-1, -1, "fault [" + std::to_string(index) + "] " + text);
  };
  const std::string node_name = "node" + std::to_string(n);
  if (!healthy_since_.empty()) node_changed(n);
  switch (f.what) {
    case fault::kind::latency: {
      auto& v = latencies_[n];
      if (begin) {
        v.push_back(f.amount);
      } else {
        v.erase(std::find(v.begin(), v.end(), f.amount));
      }
      const std::int64_t top = v.empty() ? p_.max_latency_us : *std::max_element(v.begin(), v.end());
      const std::int64_t low = v.empty() ? p_.min_latency_us : top / 4;
      w_->set_node_latency(n, low, top);
      note_fault(node_name + " latency " + std::to_string(low) + "-" + std::to_string(top) + " us");
      break;
    }
    case fault::kind::black_hole:
      black_holes_[n] += begin ? 1 : -1;
      w_->black_hole_node(n, black_holes_[n] > 0);
      note_fault(node_name + (begin ? " black hole on" : " black hole off"));
      break;
    case fault::kind::partition: {
      if (!clients_[f.client]) {
        begun_[index] = false;
        note_fault("c" + std::to_string(f.client) + " x " + node_name + " cut skipped (not joined yet)");
        break;
      }
      int& c = cuts_[{f.client, n}];
      c += begin ? 1 : -1;
      w_->partition(*clients_[f.client], n, c > 0);
      note_fault("c" + std::to_string(f.client) + " x " + node_name + (begin ? " cut" : " healed"));
      break;
    }
    case fault::kind::drop_replies:
      drops_[n] += begin ? 1 : -1;
      w_->drop_replies(n, drops_[n] > 0);
      note_fault(node_name + (begin ? " drops replies" : " replies again (connections that lost some reset)"));
      break;
    case fault::kind::reset:
      w_->reset_connections(n);
      note_fault(node_name + " connections reset");
      break;
    case fault::kind::pause_node:
      pauses_[n] += begin ? 1 : -1;
      if (pauses_[n] > 0) {
        w_->pause_node(n);
      } else {
        w_->resume_node(n);
      }
      note_fault(node_name + (begin ? " paused" : " resumed"));
      break;
    case fault::kind::crash:
      crashes_[n] += begin ? 1 : -1;
      if (begin) {
        w_->crash_node(n);
        note_fault(node_name + " crashed");
      } else if (crashes_[n] == 0) {
        w_->restart_node(n);
        pauses_[n] = 0;
        const bool loses = !p_.persistent[n];
        if (loses && data_lost_at_ < 0) data_lost_at_ = now();
        note_fault(node_name + " restarted" + (loses ? " empty" : " with its data"), loses);
      }
      break;
    case fault::kind::restart:
      if (crashes_[n] > 0) {
        note_fault(node_name + " restart skipped (down)");
        break;
      }
      w_->restart_node(n);
      pauses_[n] = 0;
      if (!p_.persistent[n] && data_lost_at_ < 0) data_lost_at_ = now();
      note_fault(node_name + " restarted" + (p_.persistent[n] ? " with its data" : " empty"), !p_.persistent[n]);
      break;
    case fault::kind::clock_jump:
      w_->jump_node_clock(n, milliseconds(f.amount));
      if (f.amount < 0) back_jump_ms_[n] += -f.amount;
      note_fault(node_name + " clock jumped " + std::to_string(f.amount) + " ms");
      break;
    case fault::kind::clock_drift: {
      w_->set_node_clock_rate(n, begin ? f.rate : 0.0);
      char buf[64];
      std::snprintf(buf, sizeof buf, " clock rate %+.4f", begin ? f.rate : 0.0);
      note_fault(node_name + buf);
      break;
    }
    case fault::kind::jump_reset:
      w_->jump_node_clock(n, milliseconds(f.amount));
      if (f.amount < 0) back_jump_ms_[n] += -f.amount;
      w_->reset_connections(n);
      note_fault(node_name + " clock jumped " + std::to_string(f.amount) + " ms, connections reset");
      break;
    case fault::kind::deny: {
      denies_[n] += begin ? 1 : -1;
      const bool on = denies_[n] > 0;
      for (const char* cmd : {"SET", "EVAL", "EVALSHA"}) {
        std::string lower(cmd);
        for (char& ch : lower) ch = static_cast<char>(ch - 'A' + 'a');
        w_->inject_error(n, cmd,
                         on ? "NOPERM User default has no permissions to run the '" + lower + "' command" : std::string());
      }
      note_fault(node_name + (on ? " refuses the lock commands (NOPERM)" : " permits the lock commands again"));
      break;
    }
    case fault::kind::failover: {
      const auto where = wi().cluster_of(n);
      if (!where) break;
      if (!begin) {
        const auto it = failed_master_.find(index);
        if (it == failed_master_.end()) break;
        wi().rejoin(it->second);
        note_fault("node" + std::to_string(it->second) + " rejoins its shard as a replica (empty, then a full sync)");
        failed_master_.erase(it);
        break;
      }
      const auto& shard = wi().clusters[where->first].shards[where->second];
      const std::size_t master = shard.front();
      std::vector<std::size_t> replicas;
      for (std::size_t j = 1; j < shard.size(); ++j) {
        const std::size_t r = shard[j];
        if (!wi().clusters[where->first].failed[r] && w_->node_up(r)) replicas.push_back(r);
      }
      if (replicas.empty()) {
        begun_[index] = false;
        note_fault("node" + std::to_string(master) + " failover skipped (its shard has no replica up)");
        break;
      }
      for (std::size_t r : replicas) wi().nodes[r].repl_stalled = true;
      note_fault("node" + std::to_string(master) + " replication stalls (its replica keeps what it has)");
      wi().at(now() + f.amount, [this, index, master, replicas] {
        for (std::size_t r : replicas) wi().nodes[r].repl_stalled = false;
        if (!wi().failover(master)) {
          note(-1, -1, "fault [" + std::to_string(index) + "] failover of node" + std::to_string(master) +
                           " impossible now: replication resumes");
          return;
        }
        failed_master_[index] = master;
        fault_record fr;
        fr.t_us = now();
        fr.text = "node" + std::to_string(master) + " fails over to node" + std::to_string(replicas.front());
        h_.faults.push_back(fr);
        note(-1, -1, "fault [" + std::to_string(index) + "] " + fr.text +
                         " (promoted with what it had received; every map shows it)");
      });
      break;
    }
    case fault::kind::pause_client:
      if (!clients_[f.client]) {
        begun_[index] = false;
        note_fault("c" + std::to_string(f.client) + " pause skipped (not joined yet)");
        break;
      }
      w_->pause_client(*clients_[f.client], microseconds(f.dur_us));
      note_fault("c" + std::to_string(f.client) + " paused for " + ms_text(f.dur_us));
      break;
  }
  if (begin && begun_[index]) ++faults_applied_;
}

void runner::sample_orphans() {
  if (!sampling_) return;
  std::set<std::string> known;  // tokens of the acquires that succeeded
  for (const auto& hr : h_.holds) known.insert(hr.token);
  std::set<std::tuple<std::size_t, std::string, std::string>> seen;
  const std::int64_t t = now();
  for (std::size_t n = 0; n < p_.nodes; ++n) {
    if (!w_->node_up(n)) continue;
    for (const auto& k : w_->keys_at(n)) {
      const std::string suffix = ":fence";
      if (k.size() >= suffix.size() && k.compare(k.size() - suffix.size(), suffix.size(), suffix) == 0) continue;
      const auto st = w_->key_at(n, k);
      if (!st || known.count(st->value) > 0) continue;
      const auto id = std::make_tuple(n, k, st->value);
      seen.insert(id);
      const std::int64_t first = orphans_.emplace(id, t).first->second;
      if (!node_healthy(n) || orphans_reported_.count(id) > 0) continue;
      const std::int64_t from = std::max(first, healthy_since_[n]);
      if (t - from < p_.orphan_bound_us) continue;
      orphans_reported_.insert(id);
      finding("orphan_keys",
              "node" + std::to_string(n) + " still holds " + k + " = " + st->value.substr(0, 8) +
                  ".. (no successful acquire's token; pttl " + std::to_string(st->pttl_ms) + " ms), seen since " +
                  history::format_time(first) + ", node healthy since " + history::format_time(healthy_since_[n]) +
                  ": a failed attempt's grant was not rolled back within " + ms_text(p_.orphan_bound_us),
              "");
    }
  }
  for (auto it = orphans_.begin(); it != orphans_.end();) {
    it = seen.count(it->first) > 0 ? std::next(it) : orphans_.erase(it);
  }
  wi().at(t + 100 * kMs, [this] { sample_orphans(); });
}

void runner::schedule_faults() {
  begun_.assign(p_.faults.size(), false);
  for (std::size_t i = 0; i < p_.faults.size(); ++i) {
    if (!o_.fault_mask.empty() && (i >= o_.fault_mask.size() || !o_.fault_mask[i])) continue;
    const fault& f = p_.faults[i];
    wi().at(f.at_us, [this, i] { apply(i, true); });
    const bool lasting = f.what != fault::kind::reset && f.what != fault::kind::restart &&
                         f.what != fault::kind::clock_jump && f.what != fault::kind::pause_client &&
                         f.what != fault::kind::jump_reset;
    if (lasting) wi().at(f.at_us + f.dur_us, [this, i] { apply(i, false); });
  }
}

// --- phases ---

void runner::stop_actors() {
  stopping_ = true;
  note(-1, -1, "schedule over: every fault has healed; actors release and stop");
  for (auto& ap : actors_) {
    actor* a = ap.get();
    if (a->st == actor::state::holding) later(a->client, 0, [this, a] { hold_step(*a); });
    if (a->st == actor::state::idle) a->st = actor::state::stopped;
  }
  // Bounded: acquires in flight finish within their retries.
  w_->run_until(
      [this] {
        for (auto& a : actors_) {
          if (a->st != actor::state::stopped && a->st != actor::state::idle) return false;
        }
        return true;
      },
      microseconds(30 * kSec));
  for (auto& ap : actors_) {
    if (ap->st != actor::state::idle && ap->st != actor::state::stopped) {
      finding("liveness", "c" + std::to_string(ap->client) + " r" + std::to_string(ap->resource) +
                              ": an operation still had not completed 30 s after every fault healed");
    }
  }
}

void runner::check_keys() {
  std::vector<std::vector<std::string>> names(p_.nodes), described(p_.nodes);
  for (std::size_t i = 0; i < p_.nodes; ++i) {
    names[i] = w_->keys_at(i);
    for (const auto& k : names[i]) {
      auto st = w_->key_at(i, k);
      described[i].push_back(k + (st ? " = " + st->value.substr(0, 8) + ".. pttl " + std::to_string(st->pttl_ms) + " ms"
                                     : std::string(" (not a string)")));
    }
  }
  for (auto& v : check_keys_left(names, described, now())) extra_.push_back(std::move(v));
}

void runner::liveness() {
  // Uncontended: one client at a time, each resource. Quarantines a guard started
  // during the schedule may still run (a jump first seen now starts one now):
  // the bound is max_ttl plus retries and timeouts.
  const std::int64_t bound_us = p_.max_ttl_ms * kMs + 2 * kSec;
  note(-1, -1, "liveness: each client acquires each resource, uncontended, within " + ms_text(bound_us));
  for (std::size_t c = 0; c < clients_.size(); ++c) {
    if (!clients_[c]) continue;
    for (std::size_t r = 0; r < p_.resources; ++r) {
      acquire_options ao;
      ao.ttl = milliseconds(std::min<std::int64_t>(1000, p_.max_ttl_ms));
      ao.retry.max_attempts = 1000;
      ao.retry.base_delay = milliseconds(50);
      ao.retry.max_delay = milliseconds(200);
      ao.retry.deadline = milliseconds(bound_us / kMs);
      const std::uint32_t op = new_op(op_kind::acquire, static_cast<int>(c), static_cast<int>(r), -1);
      const std::int64_t start = now();
      auto got = std::make_shared<std::optional<acquire_result>>();
      in_call_ = true;
      clients_[c]->acquire_async(resource_name(static_cast<int>(r)), ao, [this, op, got](acquire_result res) {
        if (!complete(op, res.report.error)) return;
        *got = std::move(res);
      });
      in_call_ = false;
      w_->run_until([&] { return got->has_value(); }, microseconds(bound_us + 5 * kSec));
      const std::int64_t took = now() - start;
      if (reserved(static_cast<int>(r)) && got->has_value() && (*got)->report.error == errc::invalid_argument) {
        note(static_cast<int>(c), static_cast<int>(r), "liveness: the reserved name is refused (invalid_argument)");
        continue;
      }
      if (!got->has_value() || !**got) {
        finding("liveness",
                "c" + std::to_string(c) + " could not acquire r" + std::to_string(r) + " uncontended within " +
                    ms_text(bound_us) + " after the faults healed: " +
                    (got->has_value() ? (*got)->report.message() : std::string("no answer")));
        continue;
      }
      liveness_us_ = std::max(liveness_us_, took);
      note(static_cast<int>(c), static_cast<int>(r), "liveness acquire ok in " + ms_text(took));
      if (took > bound_us) {
        finding("liveness", "c" + std::to_string(c) + " acquired r" + std::to_string(r) + " only after " +
                                ms_text(took) + " (bound " + ms_text(bound_us) + ")");
      }
      redlock::lock l = std::move((*got)->lock);
      const std::uint32_t rop = new_op(op_kind::release, static_cast<int>(c), static_cast<int>(r), -1);
      auto released = std::make_shared<std::optional<report>>();
      in_call_ = true;
      l.release_async([this, rop, released](report rep) {
        if (!complete(rop, rep.error)) return;
        *released = std::move(rep);
      });
      in_call_ = false;
      w_->run_until([&] { return released->has_value(); }, microseconds(5 * kSec));
      if (!released->has_value() || !**released) {
        finding("liveness", "c" + std::to_string(c) + ": the uncontended release of r" + std::to_string(r) +
                                " failed: " + (released->has_value() ? (*released)->message() : "no answer"));
      }
    }
  }
}

void runner::teardown() {
  // Close what is still believed (detached leases left to expire, kept handles).
  for (std::size_t i = 0; i < holds_.size(); ++i) {
    hold_state& hs = holds_[i];
    if (hs.has_handle) h_.holds[i].lost = hs.handle.lost();
    observe(static_cast<int>(i));
    close_belief(static_cast<int>(i));
  }
  for (auto& hs : holds_) {
    redlock::lock gone = std::move(hs.handle);
    hs.has_handle = false;
  }
  for (auto& c : clients_) c.reset();  // cancels what is left; every callback runs
  note(-1, -1, "clients destroyed");
}

run_result runner::go() {
  testing::world_options wo;
  wo.nodes = p_.nodes;
  wo.seed = o_.seed ^ 0x0dd5'eed5'0000'0001ull;
  wo.min_latency_us = p_.min_latency_us;
  wo.max_latency_us = p_.max_latency_us;
  wo.persistent_nodes = p_.persistent;
  w_ = std::make_unique<testing::world>(wo);
  for (const auto& shards : p_.clusters) wi().add_cluster(shards);
  origin_ = w_->now();
  if (o_.verbose != nullptr) *o_.verbose << p_.describe();
  black_holes_.assign(p_.nodes, 0);
  drops_.assign(p_.nodes, 0);
  pauses_.assign(p_.nodes, 0);
  crashes_.assign(p_.nodes, 0);
  denies_.assign(p_.nodes, 0);
  latencies_.assign(p_.nodes, {});
  back_jump_ms_.assign(p_.nodes, 0);
  open_holds_.assign(p_.clients, {});
  for (std::size_t c = 0; c < p_.clients; ++c) {
    if (c + 1 == p_.clients && p_.late_join_us >= 0) {
      clients_.emplace_back();  // joins later (join())
    } else {
      clients_.push_back(make_client(c));
    }
  }
  wi().on_client_turn = [this](std::size_t client) {
    if (client < open_holds_.size() && !open_holds_[client].empty()) observe_client(client);
  };
  for (std::size_t c = 0; c < p_.clients; ++c) {
    for (std::size_t r = 0; r < p_.resources; ++r) {
      auto a = std::make_unique<actor>();
      a->client = static_cast<int>(c);
      a->resource = static_cast<int>(r);
      actors_.push_back(std::move(a));
    }
  }
  schedule_faults();
  if (p_.check_orphans) {
    healthy_since_.assign(p_.nodes, 0);
    sampling_ = true;
    wi().at(100 * kMs, [this] { sample_orphans(); });
  }
  for (auto& a : actors_) {
    if (clients_[static_cast<std::size_t>(a->client)]) schedule_next(*a);
  }
  if (p_.late_join_us >= 0) wi().at(p_.late_join_us, [this] { join(p_.clients - 1); });

  w_->advance(microseconds(p_.run_us + 1));
  stop_actors();
  // Every TTL passes (also on a node whose clock was stepped back), and every
  // rollback or redelivered delete gives up (TTL + drift after its start).
  std::int64_t back = 0;
  for (auto b : back_jump_ms_) back = std::max(back, b);
  w_->advance(microseconds(2 * p_.max_ttl_ms * kMs + back * kMs + 2 * kSec));
  sampling_ = false;
  note(-1, -1, "quiet: every TTL has passed");
  check_keys();
  liveness();
  if (p_.check_no_reset) {
    for (std::size_t c = 0; c < clients_.size(); ++c) {
      if (!clients_[c]) continue;
      const auto n = clients_[c]->stats().reconnects;
      if (n == 0) continue;
      finding("spurious_reset", "c" + std::to_string(c) + " re-established " + std::to_string(n) +
                                    " connection(s), although every node pause was shorter than the stall bound "
                                    "(1 s) and nothing else broke a connection");
    }
  }
  wi().on_client_turn = nullptr;
  teardown();

  run_result out;
  out.p = p_;
  for (auto& v : check_mutual_exclusion(h_)) out.violations.push_back(std::move(v));
  for (auto& v : check_fence_order(h_, data_lost_at_)) out.violations.push_back(std::move(v));
  for (auto& v : check_fenced_resource(h_)) out.violations.push_back(std::move(v));
  for (auto& v : check_callbacks(h_)) out.violations.push_back(std::move(v));
  for (auto& v : extra_) out.violations.push_back(std::move(v));
  std::stable_sort(out.violations.begin(), out.violations.end(),
                   [](const violation& a, const violation& b) { return a.t_us < b.t_us; });
  out.digest = h_.digest();
  out.operations = operations_;
  out.acquired = acquired_;
  out.events = w_->events_run();
  out.virtual_us = now();
  out.liveness_us = liveness_us_;
  out.faults_applied = faults_applied_;
  out.h = std::move(h_);
  w_.reset();
  return out;
}

}  // namespace

std::string run_result::verdict() const { return violations.empty() ? "pass" : "violation:" + violations.front().checker; }

run_result run(const run_options& o) {
  runner r(o);
  return r.go();
}

std::string replay_command(const run_options& o) {
  std::string cmd = "tools/simulate --seed " + std::to_string(o.seed) + " --scenario " + o.scenario;
  if (o.off != guard_off::none) cmd += std::string(" --guard-off ") + to_string(o.off);
  if (!o.fault_mask.empty()) {
    std::string list;
    for (std::size_t i = 0; i < o.fault_mask.size(); ++i) {
      if (!o.fault_mask[i]) continue;
      list += (list.empty() ? "" : ",") + std::to_string(i);
    }
    cmd += " --faults " + (list.empty() ? std::string("none") : list);
  }
  return cmd;
}

std::vector<bool> shrink(const run_options& o, const std::string& checker, int budget, int* runs_used) {
  const plan p = make_plan(o.seed, o.scenario, o.off);
  std::vector<bool> keep = o.fault_mask.empty() ? std::vector<bool>(p.faults.size(), true) : o.fault_mask;
  keep.resize(p.faults.size(), false);
  int runs = 0;
  auto fails = [&](const std::vector<bool>& mask) {
    ++runs;
    run_options t = o;
    t.verbose = nullptr;
    t.fault_mask = mask;
    const run_result r = run(t);
    for (const auto& v : r.violations) {
      if (v.checker == checker) return true;
    }
    return false;
  };
  // ddmin-style: remove chunks, halving the chunk size when nothing can go.
  auto kept = [&] {
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < keep.size(); ++i) {
      if (keep[i]) idx.push_back(i);
    }
    return idx;
  };
  std::size_t chunk = std::max<std::size_t>(1, kept().size() / 2);
  while (runs < budget) {
    const auto idx = kept();
    if (idx.empty()) break;
    bool removed = false;
    for (std::size_t start = 0; start < idx.size() && runs < budget; start += chunk) {
      std::vector<bool> trial = keep;
      for (std::size_t j = start; j < std::min(idx.size(), start + chunk); ++j) trial[idx[j]] = false;
      if (fails(trial)) {
        keep = trial;
        removed = true;
        break;
      }
    }
    if (removed) continue;
    if (chunk == 1) break;
    chunk = std::max<std::size_t>(1, chunk / 2);
  }
  if (runs_used != nullptr) *runs_used = runs;
  return keep;
}

std::vector<corpus_entry> read_corpus(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the corpus " + path);
  std::vector<corpus_entry> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.empty()) continue;
    auto bad = [&](const std::string& why) {
      return std::runtime_error(path + ":" + std::to_string(number) + ": " + why);
    };
    if (w.size() < 3 || w.size() > 4) throw bad("expected: <scenario> <seed> <expect> [guard-off=<restart|clock|replication>]");
    corpus_entry e;
    e.line = number;
    e.scenario = w[0];
    if (!known_scenario(e.scenario)) throw bad("unknown scenario '" + e.scenario + "'");
    try {
      std::size_t used = 0;
      e.seed = std::stoull(w[1], &used);
      if (used != w[1].size()) throw bad("bad seed '" + w[1] + "'");
    } catch (const std::logic_error&) {
      throw bad("bad seed '" + w[1] + "'");
    }
    e.expect = w[2];
    if (e.expect != "pass" && e.expect.rfind("violation:", 0) != 0) throw bad("bad expectation '" + e.expect + "'");
    if (w.size() == 4) {
      const std::string prefix = "guard-off=";
      if (w[3].rfind(prefix, 0) != 0 || !parse_guard_off(w[3].substr(prefix.size()), e.off)) {
        throw bad("bad option '" + w[3] + "'");
      }
    }
    out.push_back(e);
  }
  return out;
}

bool meets(const run_result& r, const std::string& expect) {
  if (expect == "pass") return r.passed();
  const std::string checker = expect.substr(expect.find(':') + 1);
  for (const auto& v : r.violations) {
    if (v.checker == checker) return true;
  }
  return false;
}

}  // namespace redlock::simtest
