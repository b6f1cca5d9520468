// The retry schedule: pure, tested without sleeping.
#pragma once

#include <chrono>
#include <cstdint>

#include "redlock/options.h"

namespace redlock::detail {

// Delay before attempt `next_attempt` (2 for the first retry): uniform in [d/2, d]
// with d = min(max_delay, base_delay * 2^(next_attempt - 2)); `random` picks the point.
std::chrono::milliseconds retry_delay(const retry_policy& p, int next_attempt, std::uint64_t random) noexcept;

// A reconnect's delay (a connection's, a cluster node's rediscovery) after
// `failures` failed attempts in a row (1: the first): d = min_backoff doubled per
// further failure, capped at max_backoff (at least max_backoff when `permanent`),
// both taken as at least 1 ms; the delay is d/2 + random % (d/2 + 1).
std::chrono::milliseconds reconnect_delay(std::chrono::milliseconds min_backoff, std::chrono::milliseconds max_backoff,
                                          int failures, bool permanent, std::uint64_t random) noexcept;

// Checks a policy; "" if fine, else the problem.
const char* check_retry(const retry_policy& p) noexcept;

// A small fast PRNG for jitter (not for tokens).
class jitter_rng {
 public:
  explicit jitter_rng(std::uint64_t seed) noexcept : s_(seed ? seed : 0x9e3779b97f4a7c15ULL) {}
  std::uint64_t next() noexcept {
    // splitmix64
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t s_;
};

}  // namespace redlock::detail
