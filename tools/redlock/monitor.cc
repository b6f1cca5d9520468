// redlock monitor: a live view of the node set (docs/cli.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <climits>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "common.h"
#include "http_server.h"
#include "monitor_view.h"

namespace redlock::cli {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

// The test lock's TTL: short, so that a key a failed release left behind (a node
// that took the SET and then stopped answering) goes away on its own soon.
constexpr milliseconds test_lock_ttl{2'000};

std::string test_resource() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "localhost");
  return std::string("redlock:monitor:") + host + ":" + std::to_string(static_cast<long>(getpid()));
}

std::int64_t unix_now_ms() {
  return duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The figures shared with the HTTP server's thread.
struct shared_view {
  std::mutex mu;
  std::optional<monitor_sample> last;
  std::uint64_t intervals = 0;
};

}  // namespace

int monitor_command(const invocation& inv) {
  ignore_sigpipe();
  event_pipe events;
  signal_capture signals(events, {SIGINT, SIGTERM});
  std::string error;
  // The library's own metrics (redlock/metrics.h) of the monitor's client, served
  // beside the monitor's per-node view on /metrics.
  auto metrics = std::make_shared<redlock::metrics>();
  auto client = make_client(inv, error, {metrics});
  if (!client) {
    print_error(error);
    return exit_code::config;
  }

  shared_view view;
  http_server server;
  if (!inv.prometheus.empty()) {
    http_server::settings hs;
    if (!split_listen_address(inv.prometheus, hs.host, hs.port, error)) {
      print_error(error);
      return exit_code::usage;
    }
    hs.head_timeout = inv.http_head_timeout;
    shared_view* v = &view;
    const bool ok = server.start(
        hs,
        [v, metrics] {
          std::string body;
          {
            std::lock_guard<std::mutex> g(v->mu);
            body = monitor_prometheus(v->last ? &*v->last : nullptr, v->intervals);
          }
          return body + metrics->render();
        },
        error);
    if (!ok) {
      print_error("monitor: " + error);
      return exit_code::config;
    }
    print_error("monitor: serving /metrics on " + server.bound_address());
  }

  const std::string resource = test_resource();
  const bool tty = !inv.json && isatty(STDOUT_FILENO) == 1;
  std::vector<rtt_window> windows(client->node_count());
  redlock::acquire_options lock_opts;
  lock_opts.ttl = std::min(test_lock_ttl, inv.max_ttl);
  lock_opts.retry = retry_policy::once();

  bool stop = false;
  const auto signalled = [&events, &stop](milliseconds wait) {
    while (!stop) {
      const std::optional<event> e = events.wait(wait);
      if (!e) return;
      if (e->type == SIGINT || e->type == SIGTERM) stop = true;
    }
  };

  for (std::uint64_t seq = 1; !stop && (inv.count == 0 || seq <= static_cast<std::uint64_t>(inv.count)); ++seq) {
    const auto tick = steady::now();
    monitor_sample s;
    s.unix_ms = unix_now_ms();
    s.seq = seq;
    s.quorum = client->quorum();

    const redlock::probe_result pr = client->probe();
    const auto probed = steady::now();
    for (std::size_t i = 0; i < pr.nodes.size(); ++i) {
      const redlock::node_health& h = pr.nodes[i];
      monitor_node n;
      n.node = h.node;
      n.status = to_string(h.status);
      n.detail = h.detail;
      n.reachable = h.status == node_status::ok;
      if (n.reachable) {
        const auto us = static_cast<std::uint64_t>(h.rtt.count());
        windows[i].add(us);
        n.rtt_us = us;
      }
      n.rtt_p50_us = windows[i].percentile(50);
      n.rtt_p99_us = windows[i].percentile(99);
      n.rtt_count = windows[i].total_count();
      n.rtt_sum_us = windows[i].total_us();
      n.quarantined = h.quarantined;
      n.quarantine_detail = h.quarantine_detail;
      if (h.quarantined_until) {
        n.quarantine_left_ms =
            std::max<std::int64_t>(0, duration_cast<milliseconds>(*h.quarantined_until - probed).count());
      }
      n.run_id = h.run_id;
      n.uptime_s = h.uptime_s;
      n.redis_version = h.redis_version;
      n.maxmemory_policy = h.maxmemory_policy;
      n.aof_enabled = h.aof_enabled;
      for (const redlock::warning& w : h.warnings) {
        if (w.code == warning_code::eviction_policy) n.eviction_risk = true;
      }
      n.members = members_of(h);
      n.master_changed_ms_ago = master_changed_ms_ago(h, probed);
      if (!n.reachable) {
        s.warnings.push_back(h.node + ": unreachable: " + n.status + (h.detail.empty() ? "" : ": " + h.detail));
      }
      if (h.quarantined) s.warnings.push_back(h.node + ": no acquire vote: " + h.quarantine_detail);
      for (const redlock::warning& w : h.warnings) s.warnings.push_back(w.message);
      s.nodes.push_back(std::move(n));
    }
    s.reachable = pr.reachable;
    s.voting = pr.voting;
    s.quorum_ok = pr.quorum_ok;
    if (!pr.quorum_ok) {
      s.warnings.push_back("no quorum: " + std::to_string(pr.voting) + " of " + counted(pr.nodes.size(), "node") +
                           " can vote, " + std::to_string(s.quorum) + " needed: acquires fail");
    }

    // The test lock: the latency an application's acquire + release sees. A
    // signal that came meanwhile is handled after the release, so no key is left.
    const auto t0 = steady::now();
    acquire_result ar = client->acquire(resource, lock_opts);
    if (ar) {
      const redlock::report rel = ar.lock.release();
      if (rel) {
        s.lock_pair_us = static_cast<std::uint64_t>(duration_cast<microseconds>(steady::now() - t0).count());
      } else {
        s.lock_error = "release: " + rel.message();
      }
    } else {
      s.lock_error = "acquire: " + ar.report.message();
    }
    if (!s.lock_error.empty()) s.warnings.push_back("test lock failed: " + s.lock_error);

    const std::string out = inv.json ? monitor_json_line(s) : tty ? monitor_screen(s, inv.interval)
                                                                  : monitor_text_line(s);
    {
      std::lock_guard<std::mutex> g(view.mu);
      view.last = s;
      view.intervals = seq;
    }
    if (!write_stdout(out)) {
      print_error("monitor: cannot write to stdout");
      return exit_code::software;
    }
    if (inv.count != 0 && seq >= static_cast<std::uint64_t>(inv.count)) break;
    // Until the next interval, or a signal (looked for even when the interval
    // has passed already).
    do {
      signalled(std::max(milliseconds(0), duration_cast<milliseconds>(tick + inv.interval - steady::now())));
    } while (!stop && steady::now() < tick + inv.interval);
  }
  server.stop();
  return exit_code::ok;
}

}  // namespace redlock::cli
