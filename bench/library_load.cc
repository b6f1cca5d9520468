#include "library_load.h"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "raw_floor.h"

namespace redlock::bench {

namespace {

// Waits for `n` count_down() calls; aborts if they do not come within `limit`.
class completion {
 public:
  explicit completion(int n) : left_(n) {}
  void count_down() {
    std::lock_guard<std::mutex> g(mu_);
    if (--left_ == 0) cv_.notify_all();
  }
  void wait(bench_clock::duration limit, const char* what) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, limit, [&] { return left_ == 0; })) {
      std::fprintf(stderr, "bench_e2e: %s: %d callbacks missing after the time limit\n", what, left_);
      std::abort();
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

constexpr std::uint64_t kMaxErrorsPerChain = 1000;
// Extra time granted after the nominal duration for in-flight work to finish.
constexpr auto kGrace = std::chrono::seconds(30);

class chain_runner {
 public:
  chain_runner(const std::vector<client*>& clients, const chain_config& cfg)
      : cfg_(cfg), prefix_("bench:chain:" + unique_key_suffix() + ":"), done_(cfg.inflight) {
    chains_.resize(static_cast<std::size_t>(cfg.inflight));
    for (std::size_t i = 0; i < chains_.size(); ++i) {
      chains_[i].id = i;
      chains_[i].c = clients[i % clients.size()];
    }
  }

  chain_result run() {
    start_ = bench_clock::now();
    deadline_ = start_ + cfg_.duration;
    for (chain& ch : chains_) next(ch);
    done_.wait(cfg_.duration + kGrace, "run_chains");
    chain_result out;
    bench_clock::time_point last = start_;
    for (chain& ch : chains_) {
      out.pair.append(ch.lat);
      out.attempts += ch.attempts;
      out.acquired += ch.acquired;
      out.contended += ch.contended;
      out.errors += ch.errors;
      out.pairs += ch.pairs;
      for (const auto& [why, times] : ch.reasons) out.error_reasons[why] += times;
      out.node_timeouts += ch.node_timeouts;
      if (ch.ended > last) last = ch.ended;
    }
    out.seconds = to_seconds(last - start_);
    return out;
  }

 private:
  struct chain {
    std::size_t id = 0;
    client* c = nullptr;
    std::uint64_t seq = 0;
    bench_clock::time_point t0, ended;
    latencies lat;
    std::uint64_t attempts = 0, acquired = 0, contended = 0, errors = 0, pairs = 0;
    std::map<std::string, std::uint64_t> reasons;
    std::uint64_t node_timeouts = 0;
  };

  // Starts the chain's next acquire, or ends the chain.
  void next(chain& ch) {
    const auto now = bench_clock::now();
    if (now >= deadline_ || ch.errors > kMaxErrorsPerChain ||
        started_.fetch_add(1, std::memory_order_relaxed) >= cfg_.max_attempts) {
      ch.ended = now;
      done_.count_down();
      return;
    }
    std::string key = cfg_.keys == 0
                          ? prefix_ + std::to_string(ch.id) + ":" + std::to_string(ch.seq++)
                          : prefix_ + "k" + std::to_string(ch.id % static_cast<std::size_t>(cfg_.keys));
    ch.t0 = now;
    ++ch.attempts;
    ch.c->acquire_async(std::move(key), cfg_.options,
                        [this, &ch](acquire_result r) { on_acquired(ch, std::move(r)); });
  }

  void on_acquired(chain& ch, acquire_result r) {
    ch.node_timeouts += static_cast<std::uint64_t>(r.report.count(node_status::timeout));
    if (r) {
      ++ch.acquired;
      r.lock.release_async([this, &ch](report rep) { on_released(ch, rep); });
      return;
    }
    if (r.report.error == errc::contended) {
      ++ch.contended;
    } else {
      ++ch.errors;
      ++ch.reasons["acquire: " + r.report.message()];
    }
    next(ch);
  }

  void on_released(chain& ch, const report& rep) {
    ch.node_timeouts += static_cast<std::uint64_t>(rep.count(node_status::timeout));
    if (rep.error) {
      ++ch.errors;
      ++ch.reasons["release: " + rep.message()];
    }
    ++ch.pairs;
    ch.lat.add(bench_clock::now() - ch.t0);
    next(ch);
  }

  const chain_config cfg_;
  const std::string prefix_;
  std::vector<chain> chains_;
  bench_clock::time_point start_, deadline_;
  std::atomic<std::uint64_t> started_{0};
  completion done_;
};

}  // namespace

acquire_options bench_acquire_options() {
  acquire_options o;
  o.ttl = std::chrono::milliseconds(30000);
  o.retry = retry_policy::once();
  return o;
}

pair_result sync_pairs(client& c, const acquire_options& o, bench_clock::duration duration,
                       std::uint64_t max_pairs) {
  pair_result out;
  const std::string prefix = "bench:sync:" + unique_key_suffix() + ":";
  const auto start = bench_clock::now();
  const auto deadline = start + duration;
  for (std::uint64_t i = 0; i < max_pairs; ++i) {
    const auto t0 = bench_clock::now();
    if (t0 >= deadline) break;
    acquire_result a = c.acquire(prefix + std::to_string(i), o);
    const auto t1 = bench_clock::now();
    if (!a) {
      ++out.errors;
      continue;
    }
    report r = a.lock.release();
    const auto t2 = bench_clock::now();
    if (r.error) ++out.errors;
    out.acquire.add(t1 - t0);
    out.release.add(t2 - t1);
    out.pair.add(t2 - t0);
    ++out.pairs;
  }
  out.seconds = to_seconds(bench_clock::now() - start);
  return out;
}

chain_result run_chains(const std::vector<client*>& clients, const chain_config& cfg) {
  chain_runner runner(clients, cfg);
  return runner.run();
}

hold_result acquire_many(client& c, std::size_t count, int inflight, const acquire_options& o) {
  struct state {
    std::string prefix = "bench:hold:" + unique_key_suffix() + ":";
    std::vector<lock> locks;
    std::atomic<std::size_t> next{0};
    std::atomic<std::uint64_t> failures{0};
    std::map<std::string, std::uint64_t> reasons;  // loop thread only
    std::size_t count = 0;
    acquire_options options;
    client* c = nullptr;
    std::unique_ptr<completion> done;

    void step() {
      const std::size_t i = next.fetch_add(1);
      if (i >= count) {
        done->count_down();
        return;
      }
      c->acquire_async(prefix + std::to_string(i), options, [this, i](acquire_result r) {
        if (r) {
          locks[i] = std::move(r.lock);
        } else {
          failures.fetch_add(1);
          ++reasons[r.report.error.message()];
        }
        step();
      });
    }
  };
  state s;
  s.locks.resize(count);
  s.count = count;
  s.options = o;
  s.c = &c;
  s.done = std::make_unique<completion>(inflight);
  const auto start = bench_clock::now();
  for (int k = 0; k < inflight; ++k) s.step();
  s.done->wait(std::chrono::seconds(120), "acquire_many");
  hold_result out;
  out.seconds = to_seconds(bench_clock::now() - start);
  out.locks = std::move(s.locks);
  out.failures = s.failures.load();
  out.failure_reasons = std::move(s.reasons);
  return out;
}

}  // namespace redlock::bench
