// The `handover` scenario: waiting acquires, polling (the retry schedule alone,
// client_options::wait_notifications = false) against release notifications
// (docs/coordination.md, "Waiting without polling"), side by side in one run.
//
//   handover latency  one holder, one waiter: release -> the waiter's success
//                     (p50/p99), against the node round trip (PING p50).
//   fairness          48 contenders (12 per client over 4 clients, then all 48
//                     in one client) each looping acquire (waiting) -> hold
//                     10 ms -> release on one resource:
//                     acquisitions per contender (min, Jain's index), and server
//                     commands (every node's total_commands_processed) per
//                     acquisition.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "e2e.h"
#include "measure.h"
#include "record.h"
#include "redlock/redlock.h"

namespace redlock::bench {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// The polling schedule both modes share (the fallback of the notified mode).
acquire_options waiting_options() {
  acquire_options o;
  o.ttl = milliseconds(5000);
  o.retry.max_attempts = 1000000;
  o.retry.base_delay = milliseconds(50);
  o.retry.max_delay = milliseconds(200);
  o.retry.deadline = milliseconds(20000);
  return o;
}

std::unique_ptr<client> waiting_client(const env& e, std::size_t n, bool notify) {
  client_options o;
  o.nodes = e.uris(n);
  o.command_timeout = e.size.command_timeout;
  o.clock_sample_interval = e.size.clock_sample_interval;
  o.wait_notifications = notify;
  auto c = std::make_unique<client>(std::move(o));
  const auto until = bench_clock::now() + std::chrono::seconds(5);
  while (!c->ping() && bench_clock::now() < until) std::this_thread::sleep_for(milliseconds(10));
  return c;
}

long long commands_processed(const env& e, std::size_t n) {
  long long total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string info = (*e.cluster)[i].command({"INFO", "stats"});
    const auto at = info.find("total_commands_processed:");
    if (at != std::string::npos) total += std::atoll(info.c_str() + at + 25);
  }
  return total;
}

// Per command (INFO commandstats, summed over the nodes; script-internal calls
// included): the breakdown of commands_processed.
const char* const kCommandKinds[] = {"set", "time", "evalsha", "eval", "get", "del", "publish", "subscribe"};

std::vector<long long> command_calls(const env& e, std::size_t n) {
  std::vector<long long> out(std::size(kCommandKinds), 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string info = (*e.cluster)[i].command({"INFO", "commandstats"});
    for (std::size_t k = 0; k < out.size(); ++k) {
      const std::string tag = std::string("cmdstat_") + kCommandKinds[k] + ":calls=";
      const auto at = info.find(tag);
      if (at != std::string::npos) out[k] += std::atoll(info.c_str() + at + tag.size());
    }
  }
  return out;
}

double median_rtt_us(client& c) {
  latencies s;
  for (int i = 0; i < 50; ++i) {
    const auto t0 = bench_clock::now();
    if (c.ping()) s.add(bench_clock::now() - t0);
  }
  return s.summarize().p50;
}

void handover_latency(env& e, std::size_t n, bool notify, record& r) {
  auto holder = waiting_client(e, n, true);
  auto waiter = waiting_client(e, n, notify);
  const int rounds = e.size.quick ? 15 : 100;
  latencies lat;
  int failures = 0;
  for (int i = 0; i < rounds; ++i) {
    const std::string res = "bench:handover:" + std::to_string(i) + ":" + (notify ? "n" : "p");
    acquire_options once = waiting_options();
    once.retry = retry_policy::once();
    auto held = holder->acquire(res, once);
    if (!held) {
      ++failures;
      continue;
    }
    std::promise<bench_clock::time_point> got;
    auto fut = got.get_future();
    waiter->acquire_async(res, waiting_options(), [&got](acquire_result a) {
      const auto t = bench_clock::now();
      if (a) (void)a.lock.release();
      got.set_value(a ? t : bench_clock::time_point{});
    });
    // The waiter has made its attempts and waits (polling: somewhere in its schedule).
    std::this_thread::sleep_for(milliseconds(30 + (i * 7) % 40));
    const auto t0 = bench_clock::now();
    (void)held.lock.release();
    const auto t1 = fut.get();
    if (t1 == bench_clock::time_point{}) {
      ++failures;
      continue;
    }
    lat.add(t1 - t0);
  }
  const summary s = lat.summarize();
  const double rtt = median_rtt_us(*waiter);
  r.set_summary("handover", s);
  r.set("rtt_p50_us", rtt);
  r.set("handover_p50_rtts", rtt > 0 ? s.p50 / rtt : 0);
  r.set_int("handover_failures", failures);
}

// 48 contenders spread over `kClients` clients; fields prefixed "c<kClients>_".
void fairness(env& e, std::size_t n, bool notify, record& r, int kClients) {
  const int kPerClient = 48 / kClients;
  const std::string p = "c" + std::to_string(kClients) + "_";
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(waiting_client(e, n, notify));
  const std::string res = std::string("bench:fair:") + (notify ? "n" : "p") + std::to_string(kClients);
  const auto window = e.size.quick ? milliseconds(1500) : milliseconds(8000);
  std::vector<long long> count(static_cast<std::size_t>(kClients * kPerClient), 0);
  std::atomic<long long> failures{0};
  std::atomic<bool> stop{false};
  const long long cmds0 = commands_processed(e, n);
  const std::vector<long long> kinds0 = command_calls(e, n);
  const auto start = bench_clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients * kPerClient; ++i) {
    threads.emplace_back([&, i] {
      client& c = *clients[static_cast<std::size_t>(i / kPerClient)];
      while (!stop.load()) {
        acquire_result a = c.acquire(res, waiting_options());
        if (!a) {
          ++failures;
          continue;
        }
        std::this_thread::sleep_for(milliseconds(10));
        (void)a.lock.release();
        if (!stop.load()) ++count[static_cast<std::size_t>(i)];
      }
    });
  }
  std::this_thread::sleep_for(window);
  stop = true;
  const long long cmds1 = commands_processed(e, n);
  const std::vector<long long> kinds1 = command_calls(e, n);
  const double seconds = std::chrono::duration<double>(bench_clock::now() - start).count();
  for (auto& t : threads) t.join();
  long long total = 0, min = count[0];
  double sq = 0;
  for (long long c : count) {
    total += c;
    min = std::min(min, c);
    sq += static_cast<double>(c) * static_cast<double>(c);
  }
  r.set_int(p + "contenders", kClients * kPerClient);
  r.set(p + "fair_seconds", seconds);
  r.set_int(p + "acquired", total);
  r.set(p + "acquired_per_s", static_cast<double>(total) / seconds);
  r.set_int(p + "min_per_contender", min);
  r.set(p + "jain", sq > 0 ? static_cast<double>(total) * static_cast<double>(total) / (static_cast<double>(count.size()) * sq) : 0);
  r.set(p + "commands_per_acquisition", total > 0 ? static_cast<double>(cmds1 - cmds0) / static_cast<double>(total) : 0);
  r.set_int(p + "acquire_failures", failures.load());
  std::string breakdown;
  for (std::size_t k = 0; k < kinds0.size(); ++k) {
    const double per = total > 0 ? static_cast<double>(kinds1[k] - kinds0[k]) / static_cast<double>(total) : 0;
    r.set(p + "cmd_" + kCommandKinds[k] + "_per_acquisition", per);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.1f", breakdown.empty() ? "" : ", ", kCommandKinds[k], per);
    breakdown += buf;
  }
  r.set_str(p + "commands_breakdown", breakdown);
}

}  // namespace

void scenario_handover(env& e, std::size_t n) {
  for (bool notify : {false, true}) {
    e.flush_nodes();
    record r("handover");
    r.set_str("mode", notify ? "notify" : "polling");
    r.set_int("nodes", static_cast<std::int64_t>(n));
    handover_latency(e, n, notify, r);
    fairness(e, n, notify, r, 4);
    fairness(e, n, notify, r, 1);
    e.out->emit(r);
    e.out->note("  handover %-7s: p50 %.0f us p99 %.0f us (%.1f node RTTs)", notify ? "notify" : "polling",
                r.num("handover_p50_us"), r.num("handover_p99_us"), r.num("handover_p50_rtts"));
    for (const char* p : {"c4_", "c1_"}) {
      const std::string q = p;
      e.out->note("    48 contenders over %s client(s): %.0f acq/s, min %lld per contender, Jain %.3f, "
                  "%.1f server commands/acquisition",
                  q == "c4_" ? "4" : "1", r.num(q + "acquired_per_s"),
                  static_cast<long long>(r.num(q + "min_per_contender")), r.num(q + "jain"),
                  r.num(q + "commands_per_acquisition"));
      e.out->note("      per acquisition: %s", r.str(q + "commands_breakdown").c_str());
    }
  }
}

}  // namespace redlock::bench
