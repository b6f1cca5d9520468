#include "duration.h"

#include <cstdint>

namespace redlock::cli {

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) noexcept {
  std::size_t digits = 0;
  std::uint64_t value = 0;
  constexpr auto limit = static_cast<std::uint64_t>(max_duration.count());
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    value = value * 10 + static_cast<std::uint64_t>(text[digits] - '0');
    if (value > limit) return std::nullopt;  // also stops any overflow
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  const std::string_view unit = text.substr(digits);
  std::uint64_t scale = 0;
  if (unit.empty() || unit == "ms") {
    scale = 1;
  } else if (unit == "s") {
    scale = 1000;
  } else if (unit == "m") {
    scale = 60'000;
  } else {
    return std::nullopt;
  }
  if (value > limit / scale) return std::nullopt;
  return std::chrono::milliseconds(static_cast<std::int64_t>(value * scale));
}

std::string format_duration(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace redlock::cli
