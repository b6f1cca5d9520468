// Measurement helpers for the end-to-end benchmark: latency summaries, process CPU
// time, resident memory and heap in use.
//
// Thread-safety: every function may be called from any thread; a `latencies` object
// is used by one thread at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace redlock::bench {

using bench_clock = std::chrono::steady_clock;

// Microseconds between two time points, as a double.
inline double micros(bench_clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }
inline double to_seconds(bench_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Percentiles of a set of latencies, in microseconds. All zero when count == 0.
struct summary {
  std::size_t count = 0;
  double p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0, mean = 0;
};

// Collected latencies in microseconds.
class latencies {
 public:
  void reserve(std::size_t n) { us_.reserve(n); }
  void add(double us) { us_.push_back(us); }
  void add(bench_clock::duration d) { us_.push_back(micros(d)); }
  void append(const latencies& o) { us_.insert(us_.end(), o.us_.begin(), o.us_.end()); }
  std::size_t size() const noexcept { return us_.size(); }
  // Sorts the samples (nearest-rank percentiles).
  summary summarize();

 private:
  std::vector<double> us_;
};

// Median of `v` (mean of the two middle values for an even count); 0 when empty.
double median(std::vector<double> v);

// User + system CPU time of the whole process so far (getrusage RUSAGE_SELF), in
// seconds. Child processes (the redis servers) are not included.
double process_cpu_seconds();

// User + system CPU time of other processes (the redis servers), summed, from
// /proc/<pid>/stat, in seconds. Processes that cannot be read count as 0.
double processes_cpu_seconds(const std::vector<int>& pids);

// CPU spent by this process and by `pids` over a scope, per unit of work.
class cpu_meter {
 public:
  explicit cpu_meter(std::vector<int> pids);
  // Microseconds of CPU (this process; the servers) per unit since construction.
  double own_us_per(std::uint64_t units) const;
  double servers_us_per(std::uint64_t units) const;
  // Cores kept busy on the whole machine since construction (from /proc/stat), and
  // the part of that used by neither this process nor the servers: other tenants
  // of a shared machine. Both NaN if /proc/stat is unreadable.
  double machine_busy_cores() const;
  double other_busy_cores() const;

 private:
  std::vector<int> pids_;
  double own0_, servers0_;
  bench_clock::time_point t0_;
  double busy0_, total0_;
};

// Resident set size now, from /proc/self/statm, in bytes; -1 if unreadable.
std::int64_t rss_bytes();

// Peak resident set size of the process (getrusage ru_maxrss), in bytes.
std::int64_t peak_rss_bytes();

// Bytes handed out by malloc and not yet freed, over all arenas (mallinfo2:
// uordblks + hblkhd). Deterministic where RSS is not; used for bytes-per-object.
std::int64_t heap_in_use_bytes();

// Sleeps for `d` but wakes early when `stop()` returns true (polled every 10 ms).
template <class Stop>
void sleep_unless(bench_clock::duration d, Stop stop);

}  // namespace redlock::bench

#include <thread>

namespace redlock::bench {
template <class Stop>
void sleep_unless(bench_clock::duration d, Stop stop) {
  const auto until = bench_clock::now() + d;
  while (!stop() && bench_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}
}  // namespace redlock::bench
