// `redlock bench`: quorum latency against the configured nodes.
//
// First each node's plain round trip is measured with client::ping() (a PING to
// every node through the client's own loop, so the floor and the lock rounds take
// the same path). Then C chains of acquire -> release run on the library's loop
// through the async API for the given duration, each on a random one of R
// resources, with one attempt per acquire (a lock held by another chain counts as
// contended).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>

#include "commands.h"
#include "common.h"
#include "duration.h"
#include "json.h"
#include "latency.h"
#include "monitor_view.h"

namespace redlock::cli {
namespace {

using steady = std::chrono::steady_clock;
using std::chrono::microseconds;

// PING rounds for the floor: up to this many, for at most about a second (a node
// that does not answer costs --node-timeout per round).
constexpr int ping_rounds = 100;
constexpr std::chrono::seconds ping_budget{1};

std::uint64_t micros(steady::duration d) {
  return static_cast<std::uint64_t>(
      std::max<std::int64_t>(0, std::chrono::duration_cast<microseconds>(d).count()));
}

struct node_rtt {
  std::optional<std::uint64_t> p50_us;  // none if the node never answered
  std::string error;                    // why, from its last failed PING
};

// The median PING round trip of every node. (The probe before it paid for the
// connections, so these are plain round trips.)
std::vector<node_rtt> measure_node_rtts(redlock::client& c) {
  const std::size_t n = c.node_count();
  std::vector<node_rtt> out(n);
  std::vector<latency_histogram> samples(n);
  const auto record = [&](const report& rep) {
    for (std::size_t i = 0; i < n && i < rep.nodes.size(); ++i) {
      const node_result& nr = rep.nodes[i];
      if (nr.status == node_status::ok) {
        samples[i].record(static_cast<std::uint64_t>(nr.latency.count()));
      } else {
        out[i].error = to_string(nr.status);
        if (!nr.detail.empty()) out[i].error += ": " + nr.detail;
      }
    }
  };
  const auto deadline = steady::now() + ping_budget;
  for (int round = 0; round < ping_rounds && steady::now() < deadline; ++round) record(c.ping());
  for (std::size_t i = 0; i < n; ++i) {
    if (samples[i].count() > 0) out[i].p50_us = samples[i].percentile(50);
  }
  return out;
}

// The load phase. Callbacks run on the library's loop thread; chains restarted
// from the main thread (see next()) run their first call there.
class load {
 public:
  load(redlock::client& c, const invocation& inv) : client_(c), inv_(inv) {
    for (int i = 0; i < inv.resources; ++i) {
      resources_.push_back("redlock-bench:" + std::to_string(::getpid()) + ":" + std::to_string(i));
    }
    options_.ttl = inv.ttl;
    options_.retry = retry_policy::once();
    std::random_device seed;
    for (int i = 0; i < inv.clients; ++i) rngs_.emplace_back(seed());
  }

  // Runs the chains until the duration is over and every chain has stopped.
  void run() {
    start_ = steady::now();
    end_ = start_ + inv_.duration;
    running_ = inv_.clients;
    for (int i = 0; i < inv_.clients; ++i) next(i);

    const bool progress = !inv_.quiet && ::isatty(STDERR_FILENO) == 1;
    auto next_progress = start_ + std::chrono::seconds(1);
    std::unique_lock<std::mutex> lk(mu_);
    while (running_ > 0) {
      cv_.wait_for(lk, std::chrono::milliseconds(100));
      while (!deferred_.empty()) {
        const int chain = deferred_.front();
        deferred_.pop_front();
        lk.unlock();
        next(chain);
        lk.lock();
      }
      const auto now = steady::now();
      if (progress && now >= next_progress && now < end_) {
        next_progress += std::chrono::seconds(1);
        std::fprintf(stderr, "\rbench: %.1fs of %.1fs, %llu pairs   ",
                     std::chrono::duration<double>(now - start_).count(),
                     std::chrono::duration<double>(inv_.duration).count(),
                     static_cast<unsigned long long>(pair_.count()));
        std::fflush(stderr);
      }
      // Every operation is bounded by the library's timeouts; this only guards
      // against a broken promise.
      if (now > end_ + std::chrono::seconds(30)) {
        print_error("internal error: bench operations did not complete");
        std::_Exit(exit_code::software);
      }
    }
    elapsed_ = steady::now() - start_;
    if (progress) std::fprintf(stderr, "\r%60s\r", "");
  }

  steady::duration elapsed() const { return elapsed_; }
  const latency_histogram& acquire_latency() const { return acquire_; }
  const latency_histogram& release_latency() const { return release_; }
  const latency_histogram& pair_latency() const { return pair_; }
  std::uint64_t acquired() const { return acquired_; }
  std::uint64_t contended() const { return contended_; }
  std::uint64_t errors() const { return errors_; }
  const std::optional<report>& last_error() const { return last_error_; }

 private:
  // Starts the chain's next acquire, or stops the chain when time is up. A
  // callback that would nest inside a call on the same thread (an operation that
  // completed without waiting) hands the chain to the main thread instead, so the
  // stack never grows.
  void next(int chain) {
    if (nesting_ > 0) {
      std::lock_guard<std::mutex> g(mu_);
      deferred_.push_back(chain);
      cv_.notify_one();
      return;
    }
    if (steady::now() >= end_) {
      std::lock_guard<std::mutex> g(mu_);
      --running_;
      cv_.notify_one();
      return;
    }
    std::uniform_int_distribution<std::size_t> pick(0, resources_.size() - 1);
    const std::string& resource = resources_[pick(rngs_[static_cast<std::size_t>(chain)])];
    const auto t0 = steady::now();
    ++nesting_;
    client_.acquire_async(resource, options_,
                          [this, chain, t0](acquire_result r) { on_acquired(chain, t0, std::move(r)); });
    --nesting_;
  }

  void on_acquired(int chain, steady::time_point t0, acquire_result r) {
    const auto t1 = steady::now();
    if (!r) {
      {
        std::lock_guard<std::mutex> g(mu_);
        if (r.report.error == errc::contended) {
          ++contended_;
        } else {
          ++errors_;
          last_error_ = r.report;
        }
      }
      next(chain);
      return;
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      ++acquired_;
      acquire_.record(micros(t1 - t0));
    }
    ++nesting_;
    client_.release_async(r.lock.detach(), [this, chain, t0, t1](report rep) {
      const auto t2 = steady::now();
      {
        std::lock_guard<std::mutex> g(mu_);
        if (rep) {
          release_.record(micros(t2 - t1));
          pair_.record(micros(t2 - t0));
        } else {
          ++errors_;
          last_error_ = rep;
        }
      }
      next(chain);
    });
    --nesting_;
  }

  redlock::client& client_;
  const invocation& inv_;
  std::vector<std::string> resources_;
  acquire_options options_;
  std::vector<std::mt19937_64> rngs_;  // per chain; a chain runs one operation at a time
  steady::time_point start_, end_;
  steady::duration elapsed_{};
  static thread_local int nesting_;  // library calls in progress on this thread

  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  int running_ = 0;
  std::deque<int> deferred_;
  latency_histogram acquire_, release_, pair_;
  std::uint64_t acquired_ = 0, contended_ = 0, errors_ = 0;
  std::optional<report> last_error_;
};

thread_local int load::nesting_ = 0;

void write_summary(json_writer& j, const latency_summary& s) {
  j.begin_object();
  j.key("p50_us").number(s.p50_us).key("p90_us").number(s.p90_us).key("p99_us").number(s.p99_us);
  j.key("p999_us").number(s.p999_us).key("max_us").number(s.max_us);
  j.end_object();
}

std::string table_row(const char* name, const latency_summary& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%-9s %9llu %9llu %9llu %9llu %9llu %10llu\n", name,
                static_cast<unsigned long long>(s.p50_us), static_cast<unsigned long long>(s.p90_us),
                static_cast<unsigned long long>(s.p99_us), static_cast<unsigned long long>(s.p999_us),
                static_cast<unsigned long long>(s.max_us), static_cast<unsigned long long>(s.count));
  return buf;
}

}  // namespace

int bench_command(const invocation& inv) {
  std::string error;
  auto client = make_client(inv, error);
  if (!client) {
    print_error(error);
    return exit_code::config;
  }
  const std::vector<std::string> names = client->node_names();

  // Connect, and check that a quorum answers before measuring anything.
  const report probe = client->ping();
  if (!probe) {
    print_error("bench: " + probe.message());
    return exit_status_for(probe.error);
  }
  const std::vector<node_rtt> rtts = measure_node_rtts(*client);

  load l(*client, inv);
  l.run();

  const latency_summary acq = summarize(l.acquire_latency());
  const latency_summary rel = summarize(l.release_latency());
  const latency_summary pair = summarize(l.pair_latency());
  const double seconds = std::chrono::duration<double>(l.elapsed()).count();
  const double pairs_per_s = seconds > 0 ? static_cast<double>(pair.count) / seconds : 0;
  std::vector<std::optional<std::uint64_t>> rtt_p50;
  for (const auto& r : rtts) rtt_p50.push_back(r.p50_us);
  // NaN (printed as null or "-") when nothing was acquired or too few nodes answered PING.
  const double ratio = pair.count > 0
                           ? floor_ratio(pair.p50_us, rtt_p50, client->quorum()).value_or(std::nan(""))
                           : std::nan("");

  std::string out;
  if (inv.json) {
    json_writer j;
    j.begin_object();
    j.key("nodes").number(static_cast<std::uint64_t>(names.size()));
    j.key("clients").number(static_cast<std::int64_t>(inv.clients));
    j.key("resources").number(static_cast<std::int64_t>(inv.resources));
    j.key("duration_s").number(seconds, 3);
    j.key("acquire");
    write_summary(j, acq);
    j.key("release");
    write_summary(j, rel);
    j.key("pair");
    write_summary(j, pair);
    j.key("pairs_per_s").number(pairs_per_s, 1);
    j.key("acquired")
        .number(l.acquired())
        .key("contended")
        .number(l.contended())
        .key("errors")
        .number(l.errors());
    j.key("node_rtt_us").begin_array();
    for (const auto& r : rtt_p50) {
      if (r) {
        j.number(*r);
      } else {
        j.null();
      }
    }
    j.end_array();
    j.key("floor_ratio").number(ratio, 2);
    out = j.end_object().str() + "\n";
  } else if (!inv.quiet) {
    char buf[256];
    std::snprintf(buf, sizeof buf, " (quorum %zu), %s, %s, %.1fs, ttl %s\n\n", client->quorum(),
                  counted(static_cast<std::size_t>(inv.clients), "client").c_str(),
                  counted(static_cast<std::size_t>(inv.resources), "resource").c_str(), seconds,
                  format_duration(inv.ttl).c_str());
    out += "redlock bench: " + counted(names.size(), "node") + buf;
    out += "latency      p50 us    p90 us    p99 us  p99.9 us    max us      count\n";
    out += table_row("acquire", acq);
    out += table_row("release", rel);
    out += table_row("pair", pair);
    const std::uint64_t attempts = l.acquired() + l.contended() + l.errors();
    std::snprintf(
        buf, sizeof buf,
        "\npairs/s      %.1f\nacquired     %llu\ncontended    %llu (%.1f%% of attempts)\nerrors       "
        "%llu\n\n",
        pairs_per_s, static_cast<unsigned long long>(l.acquired()),
        static_cast<unsigned long long>(l.contended()),
        attempts > 0 ? 100.0 * static_cast<double>(l.contended()) / static_cast<double>(attempts) : 0.0,
        static_cast<unsigned long long>(l.errors()));
    out += buf;
    std::size_t width = 4;
    for (const auto& n : names) width = std::max(width, n.size());
    std::snprintf(buf, sizeof buf, "%-*s  %s\n", static_cast<int>(width), "node", "PING p50 us");
    out += buf;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::string rtt = i < rtts.size() && rtts[i].p50_us
                                  ? std::to_string(*rtts[i].p50_us)
                                  : "-  (" + (i < rtts.size() ? rtts[i].error : "") + ")";
      std::snprintf(buf, sizeof buf, "%-*s  %s\n", static_cast<int>(width), names[i].c_str(), rtt.c_str());
      out += buf;
    }
    if (!std::isnan(ratio)) {
      std::snprintf(
          buf, sizeof buf,
          "\nfloor ratio  %.2f (median acquire+release / median PING of the slowest node in a quorum)\n",
          ratio);
    } else {
      std::snprintf(buf, sizeof buf,
                    "\nfloor ratio  - (too few nodes answered PING, or nothing was acquired)\n");
    }
    out += buf;
  }
  write_stdout(out);

  if (l.acquired() == 0 && l.last_error()) {
    print_error("bench: no lock was acquired: " + l.last_error()->message());
    return exit_status_for(l.last_error()->error);
  }
  return exit_code::ok;
}

}  // namespace redlock::cli
