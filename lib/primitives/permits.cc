#include "primitives/permits.h"

#include "redlock/error.h"

namespace redlock::detail {

std::string permit_resource(std::string_view name, std::size_t index) {
  std::string r(name);
  r += ":permit:";
  r += std::to_string(index);
  return r;
}

std::error_code combine_permit_errors(const std::vector<std::error_code>& errors) noexcept {
  bool all_contended = !errors.empty();
  bool unavailable = false;
  for (const auto& e : errors) {
    if (!retryable(e)) return e;
    all_contended = all_contended && e == errc::contended;
    unavailable = unavailable || e == errc::unavailable;
  }
  if (errors.empty()) return make_error_code(errc::unavailable);
  if (all_contended) return make_error_code(errc::contended);
  return make_error_code(unavailable ? errc::unavailable : errc::validity_exhausted);
}

std::string check_semaphore(std::string_view name, std::size_t permits, std::size_t batch) {
  if (name.empty()) return "semaphore name must not be empty";
  if (permits < 1 || permits > kMaxPermits) {
    return "semaphore permits must be in [1, " + std::to_string(kMaxPermits) + "], got " +
           std::to_string(permits);
  }
  if (batch > permits) {
    return "semaphore batch (" + std::to_string(batch) + ") must not exceed permits (" +
           std::to_string(permits) + ")";
  }
  return "";
}

}  // namespace redlock::detail
