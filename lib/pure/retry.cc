#include "pure/retry.h"

#include <algorithm>

namespace redlock::detail {

std::chrono::milliseconds retry_delay(const retry_policy& p, int next_attempt, std::uint64_t random) noexcept {
  using std::chrono::milliseconds;
  if (next_attempt < 2) return milliseconds(0);
  std::int64_t d = std::max<std::int64_t>(0, p.base_delay.count());
  const std::int64_t cap = std::max<std::int64_t>(0, p.max_delay.count());
  for (int i = 2; i < next_attempt && d < cap; ++i) d = d > cap / 2 ? cap : d * 2;
  d = std::min(d, cap);
  const std::int64_t low = d / 2;
  const std::int64_t span = d - low;
  return milliseconds(low + (span > 0 ? static_cast<std::int64_t>(random % static_cast<std::uint64_t>(span + 1)) : 0));
}

std::chrono::milliseconds reconnect_delay(std::chrono::milliseconds min_backoff, std::chrono::milliseconds max_backoff,
                                          int failures, bool permanent, std::uint64_t random) noexcept {
  std::int64_t d = std::max<std::int64_t>(1, min_backoff.count());
  for (int i = 1; i < failures && d < max_backoff.count(); ++i) d *= 2;
  d = std::min<std::int64_t>(d, std::max<std::int64_t>(1, max_backoff.count()));
  if (permanent) d = std::max<std::int64_t>(d, max_backoff.count());
  return std::chrono::milliseconds(d / 2 + static_cast<std::int64_t>(random % static_cast<std::uint64_t>(d / 2 + 1)));
}

const char* check_retry(const retry_policy& p) noexcept {
  if (p.max_attempts < 1) return "retry.max_attempts must be at least 1";
  if (p.base_delay.count() < 0) return "retry.base_delay must not be negative";
  if (p.max_delay.count() < 0) return "retry.max_delay must not be negative";
  if (p.deadline.count() < 0) return "retry.deadline must not be negative";
  return "";
}

}  // namespace redlock::detail
