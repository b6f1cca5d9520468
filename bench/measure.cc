#include "measure.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>

namespace redlock::bench {

namespace {
double at_rank(const std::vector<double>& sorted, double q) {
  // Nearest rank: the smallest sample with at least q of the samples at or below it.
  const auto n = static_cast<double>(sorted.size());
  auto rank = static_cast<std::size_t>(std::max(1.0, std::ceil(q * n)));
  return sorted[std::min(rank, sorted.size()) - 1];
}
}  // namespace

summary latencies::summarize() {
  summary s;
  s.count = us_.size();
  if (us_.empty()) return s;
  std::sort(us_.begin(), us_.end());
  s.p50 = at_rank(us_, 0.50);
  s.p90 = at_rank(us_, 0.90);
  s.p99 = at_rank(us_, 0.99);
  s.p999 = at_rank(us_, 0.999);
  s.max = us_.back();
  s.mean = std::accumulate(us_.begin(), us_.end(), 0.0) / static_cast<double>(us_.size());
  return s;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto tv = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return tv(ru.ru_utime) + tv(ru.ru_stime);
}

double processes_cpu_seconds(const std::vector<int>& pids) {
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  double total = 0;
  for (int pid : pids) {
    const std::string path = "/proc/" + std::to_string(pid) + "/stat";
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) continue;
    char buf[1024];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    // Fields after the command name (which may hold spaces) start after the last ')'.
    const char* p = std::strrchr(buf, ')');
    if (p == nullptr) continue;
    unsigned long long utime = 0, stime = 0;
    // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) == 2) {
      total += static_cast<double>(utime + stime) / ticks;
    }
  }
  return total;
}

namespace {
// Busy and total jiffies of all CPUs, from the first line of /proc/stat; -1 if unreadable.
void machine_jiffies(double& busy, double& total) {
  busy = total = -1;
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return;
  unsigned long long v[8] = {};
  const int got = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                              &v[4], &v[5], &v[6], &v[7]);
  std::fclose(f);
  if (got != 8) return;
  // user nice system idle iowait irq softirq steal
  busy = static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
  total = busy + static_cast<double>(v[3] + v[4]);
}
}  // namespace

cpu_meter::cpu_meter(std::vector<int> pids)
    : pids_(std::move(pids)),
      own0_(process_cpu_seconds()),
      servers0_(processes_cpu_seconds(pids_)),
      t0_(bench_clock::now()) {
  machine_jiffies(busy0_, total0_);
}

double cpu_meter::machine_busy_cores() const {
  double busy = 0, total = 0;
  machine_jiffies(busy, total);
  if (busy0_ < 0 || busy < 0 || total <= total0_) return std::nan("");
  const double cpus = static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
  return (busy - busy0_) / (total - total0_) * cpus;
}

double cpu_meter::other_busy_cores() const {
  const double secs = to_seconds(bench_clock::now() - t0_);
  if (secs <= 0) return std::nan("");
  const double ours = (process_cpu_seconds() - own0_) + (processes_cpu_seconds(pids_) - servers0_);
  return std::max(0.0, machine_busy_cores() - ours / secs);
}

double cpu_meter::own_us_per(std::uint64_t units) const {
  return units > 0 ? (process_cpu_seconds() - own0_) * 1e6 / static_cast<double>(units) : 0;
}

double cpu_meter::servers_us_per(std::uint64_t units) const {
  return units > 0 ? (processes_cpu_seconds(pids_) - servers0_) * 1e6 / static_cast<double>(units) : 0;
}

std::int64_t rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (got != 2) return -1;
  return static_cast<std::int64_t>(resident) * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
}

std::int64_t peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<std::int64_t>(ru.ru_maxrss) * 1024;
}

std::int64_t heap_in_use_bytes() {
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<std::int64_t>(mi.uordblks + mi.hblkhd);
}

}  // namespace redlock::bench
