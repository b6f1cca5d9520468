#include "latency.h"

#include <algorithm>
#include <cmath>

namespace redlock::cli {
namespace {

constexpr int sub_bits = 10;                           // 1024 buckets per octave
constexpr std::uint64_t exact_limit = 2u << sub_bits;  // values below are exact
constexpr int max_octave = 41;                         // last octave: [2^41, 2^42)
constexpr std::size_t bucket_count = exact_limit + (max_octave - sub_bits) * (1u << sub_bits);

int floor_log2(std::uint64_t v) {
  int e = 0;
  while (v >>= 1) ++e;
  return e;
}

std::size_t bucket_of(std::uint64_t v) {
  if (v < exact_limit) return static_cast<std::size_t>(v);
  const int e = floor_log2(v);  // >= sub_bits + 1
  if (e > max_octave) return bucket_count - 1;
  const int shift = e - sub_bits;
  const std::uint64_t sub = (v >> shift) - (1u << sub_bits);  // in [0, 1024)
  return exact_limit + static_cast<std::size_t>(e - sub_bits - 1) * (1u << sub_bits) + sub;
}

// The largest value that falls in bucket b.
std::uint64_t bucket_high(std::size_t b) {
  if (b < exact_limit) return b;
  const std::size_t k = b - exact_limit;
  const int e = static_cast<int>(k >> sub_bits) + sub_bits + 1;
  const std::uint64_t sub = k & ((1u << sub_bits) - 1);
  const int shift = e - sub_bits;
  return (((1u << sub_bits) + sub + 1) << shift) - 1;
}

}  // namespace

latency_histogram::latency_histogram() : buckets_(bucket_count, 0) {}

void latency_histogram::record(std::uint64_t us) {
  ++buckets_[bucket_of(us)];
  ++count_;
  max_ = std::max(max_, us);
}

std::uint64_t latency_histogram::percentile(double p) const {
  if (count_ == 0) return 0;
  const double clamped = std::clamp(p, 0.0, 100.0);
  // The epsilon keeps 99.9 % of 1000 at rank 999 despite binary floating point.
  auto rank = static_cast<std::uint64_t>(std::ceil(clamped * static_cast<double>(count_) / 100.0 - 1e-9));
  rank = std::clamp<std::uint64_t>(rank, 1, count_);
  std::uint64_t seen = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    seen += buckets_[b];
    if (seen >= rank) return std::min(bucket_high(b), max_);
  }
  return max_;
}

latency_summary summarize(const latency_histogram& h) {
  latency_summary s;
  s.count = h.count();
  s.p50_us = h.percentile(50);
  s.p90_us = h.percentile(90);
  s.p99_us = h.percentile(99);
  s.p999_us = h.percentile(99.9);
  s.max_us = h.max();
  return s;
}

std::optional<double> floor_ratio(std::uint64_t pair_p50_us,
                                  const std::vector<std::optional<std::uint64_t>>& node_rtt_p50_us,
                                  std::size_t quorum) {
  std::vector<std::uint64_t> rtts;
  for (const auto& r : node_rtt_p50_us) {
    if (r) rtts.push_back(*r);
  }
  if (quorum == 0 || rtts.size() < quorum) return std::nullopt;
  std::sort(rtts.begin(), rtts.end());
  const std::uint64_t floor = std::max<std::uint64_t>(rtts[quorum - 1], 1);
  return static_cast<double>(pair_p50_us) / static_cast<double>(floor);
}

}  // namespace redlock::cli
