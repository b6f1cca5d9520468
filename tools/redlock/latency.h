// Latency recording for `redlock bench`: a log-linear histogram with bounded memory
// and < 0.1 % relative error, and the summary the tool prints. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace redlock::cli {

// Counts values in microseconds. Exact below 2048 us; above, 1024 buckets per power
// of two. Values above 2^41 us (about 25 days) share the last bucket; max() stays
// exact. Not thread-safe.
class latency_histogram {
 public:
  latency_histogram();
  void record(std::uint64_t us);
  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t max() const noexcept { return max_; }
  // Nearest-rank percentile for p in (0, 100]: the smallest recorded value such
  // that at least p % of the values are <= it (within the bucket precision, and
  // never above max()). 0 when empty.
  std::uint64_t percentile(double p) const;

 private:
  std::vector<std::uint64_t> buckets_;
  std::uint64_t count_ = 0;
  std::uint64_t max_ = 0;
};

struct latency_summary {
  std::uint64_t p50_us = 0, p90_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
  std::uint64_t count = 0;
};

latency_summary summarize(const latency_histogram& h);

// The bench's "floor ratio": the median acquire+release time divided by the median
// plain round trip of the slowest node a quorum needs (sort the reachable nodes'
// medians ascending, take the quorum-th). nullopt when fewer than `quorum` nodes
// have a round trip.
std::optional<double> floor_ratio(std::uint64_t pair_p50_us,
                                  const std::vector<std::optional<std::uint64_t>>& node_rtt_p50_us,
                                  std::size_t quorum);

}  // namespace redlock::cli
