// The semaphore's pure parts: permit order and how an attempt's permit outcomes
// combine into one error. No I/O; unit-tested in tests/unit/permits_test.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "pure/decision.h"  // retryable(): the errors another attempt may fix

namespace redlock::detail {

// Upper bound on semaphore_options::permits.
inline constexpr std::size_t kMaxPermits = 1024;

// name + ":permit:" + decimal index.
std::string permit_resource(std::string_view name, std::size_t index);

// A uniformly random permutation of 0..k-1 (Fisher-Yates), drawing from `next`.
template <class Next>
std::vector<std::size_t> permit_order(std::size_t k, Next&& next) {
  std::vector<std::size_t> order(k);
  for (std::size_t i = 0; i < k; ++i) order[i] = i;
  for (std::size_t i = k; i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(next() % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

// The error of an attempt whose permits all failed with `errors` (one per permit
// tried, none empty): the first error that is not retryable, if any; else
// contended when every permit was contended (the semaphore is full); else
// unavailable if any permit was, else validity_exhausted. A full semaphore is
// never reported while some permit could not be decided.
std::error_code combine_permit_errors(const std::vector<std::error_code>& errors) noexcept;

// "" when the semaphore configuration is fine, else the problem.
std::string check_semaphore(std::string_view name, std::size_t permits, std::size_t batch);

}  // namespace redlock::detail
