// The `semaphore` scenario: acquisitions per second of a quorum semaphore
// (redlock/semaphore.h) against its number of permits K, with C contender threads
// that each hold a permit for a fixed time and release it.
#include <atomic>
#include <mutex>
#include <thread>

#include "e2e.h"
#include "library_load.h"
#include "measure.h"
#include "redlock/semaphore.h"

namespace redlock::bench {
namespace {

constexpr int kContenders = 16;
constexpr auto kHold = std::chrono::milliseconds(2);

struct run_result {
  std::uint64_t attempts = 0, acquired = 0, contended = 0, errors = 0;
  summary acquire;  // successful try_acquire latency
  double seconds = 0;
};

run_result run(const env& e, client& c, std::size_t k, std::size_t batch, bool probe,
               const std::string& name) {
  semaphore_options so;
  so.permits = k;
  so.batch = batch;
  so.probe_first = probe;
  semaphore s(c, name, so);
  acquire_options o = bench_acquire_options();
  o.retry = retry_policy::once();
  std::atomic<std::uint64_t> attempts{0}, acquired{0}, contended{0}, errors{0};
  std::mutex mu;
  latencies lat;
  const auto start = bench_clock::now();
  const auto end = start + e.size.contention_time;
  std::vector<std::thread> threads;
  for (int t = 0; t < kContenders; ++t) {
    threads.emplace_back([&] {
      latencies mine;
      while (bench_clock::now() < end) {
        const auto t0 = bench_clock::now();
        semaphore_result r = s.try_acquire(o);
        ++attempts;
        if (r) {
          mine.add(bench_clock::now() - t0);
          ++acquired;
          std::this_thread::sleep_for(kHold);
          if (r.lock.release().error) ++errors;
        } else if (r.report.error == errc::contended) {
          ++contended;
          std::this_thread::sleep_for(kHold);  // a waiter's pause before its next try
        } else {
          ++errors;
        }
      }
      std::lock_guard<std::mutex> g(mu);
      lat.append(mine);
    });
  }
  for (auto& th : threads) th.join();
  run_result out;
  out.seconds = std::chrono::duration<double>(bench_clock::now() - start).count();
  out.attempts = attempts;
  out.acquired = acquired;
  out.contended = contended;
  out.errors = errors;
  out.acquire = lat.summarize();
  return out;
}

}  // namespace

void scenario_semaphore(env& e, std::size_t n) {
  e.flush_nodes();
  client_options co;
  co.nodes = e.uris(n);
  co.command_timeout = e.size.command_timeout;
  co.clock_sample_interval = e.size.clock_sample_interval;
  client c(co);
  (void)c.ping();
  struct shape {
    std::size_t k, batch;
    bool probe;
  };
  // The default shape (batch min(K, 4), probe first) for K = 1, 2, 4, 8, then K = 8
  // with one permit per round, and with batches from the first round.
  const std::vector<shape> runs = {{1, 1, true}, {2, 2, true}, {4, 4, true},
                                   {8, 4, true}, {8, 1, true}, {8, 4, false}};
  for (const auto& [k, batch, probe] : runs) {
    run_result r = run(e, c, k, batch, probe,
                       "bench:sem:" + std::to_string(k) + ":" + std::to_string(batch) + (probe ? ":p" : ""));
    record rec("semaphore");
    rec.set_int("nodes", static_cast<std::int64_t>(n));
    rec.set_int("permits", static_cast<std::int64_t>(k));
    rec.set_int("batch", static_cast<std::int64_t>(batch));
    rec.set_int("probe_first", probe ? 1 : 0);
    rec.set_int("contenders", kContenders);
    rec.set("hold_ms", static_cast<double>(kHold.count()));
    rec.set("seconds", r.seconds);
    rec.set_int("attempts", static_cast<std::int64_t>(r.attempts));
    rec.set_int("acquired", static_cast<std::int64_t>(r.acquired));
    rec.set_int("errors", static_cast<std::int64_t>(r.errors));
    rec.set("acquired_per_s", r.seconds > 0 ? static_cast<double>(r.acquired) / r.seconds : 0);
    rec.set("contended_fraction",
            r.attempts > 0 ? static_cast<double>(r.contended) / static_cast<double>(r.attempts) : 0);
    rec.set_summary("acquire", r.acquire);
    e.out->emit(rec);
    e.out->note(
        "  semaphore k=%zu batch=%zu%s: %.0f acquired/s, %.1f%% contended, acquire p50 %.0f us, %llu errors",
        k, batch, probe ? " probe" : "", rec.num("acquired_per_s"), 100 * rec.num("contended_fraction"),
        rec.num("acquire_p50_us"), static_cast<unsigned long long>(r.errors));
  }
}

}  // namespace redlock::bench
