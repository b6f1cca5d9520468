#include "duration.h"

#include <cstdint>

namespace redlock::cli {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::optional<std::chrono::milliseconds> refuse(std::string* why, const char* problem) {
  if (why != nullptr) *why = problem;
  return std::nullopt;
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text, std::string* why) {
  constexpr auto limit = static_cast<std::uint64_t>(max_duration.count());
  std::size_t at = 0;
  std::uint64_t whole = 0;
  while (at < text.size() && is_digit(text[at])) {
    whole = whole * 10 + static_cast<std::uint64_t>(text[at] - '0');
    if (whole > limit) return refuse(why, "too large");  // also stops any overflow
    ++at;
  }
  if (at == 0) return refuse(why, "not a number");
  // The fraction, as digits after the point with trailing zeros dropped.
  std::uint64_t fraction = 0;
  std::uint64_t denominator = 1;
  bool has_point = false;
  if (at < text.size() && text[at] == '.') {
    has_point = true;
    ++at;
    const std::size_t begin = at;
    while (at < text.size() && is_digit(text[at])) ++at;
    if (at == begin) return refuse(why, "no digits after the point");
    std::string_view digits = text.substr(begin, at - begin);
    while (!digits.empty() && digits.back() == '0') digits.remove_suffix(1);
    // Nine significant fraction digits are finer than a millisecond of any unit.
    if (digits.size() > 9) return refuse(why, "finer than a millisecond");
    for (char c : digits) {
      fraction = fraction * 10 + static_cast<std::uint64_t>(c - '0');
      denominator *= 10;
    }
  }
  const std::string_view unit = text.substr(at);
  std::uint64_t scale = 0;
  if (unit.empty()) {
    if (has_point) return refuse(why, "a fraction needs a unit");
    scale = 1;
  } else if (unit == "ms") {
    scale = 1;
  } else if (unit == "s") {
    scale = 1000;
  } else if (unit == "m") {
    scale = 60'000;
  } else if (unit == "h") {
    scale = 3'600'000;
  } else {
    return refuse(why, "unknown unit");
  }
  if (whole > limit / scale) return refuse(why, "too large");
  // fraction < 10^9 and scale <= 3.6e6: the product fits easily in 64 bits.
  const std::uint64_t fraction_ms = fraction * scale;
  if (fraction_ms % denominator != 0) return refuse(why, "finer than a millisecond");
  const std::uint64_t total = whole * scale + fraction_ms / denominator;
  if (total > limit) return refuse(why, "too large");
  return std::chrono::milliseconds(static_cast<std::int64_t>(total));
}

bool is_bare_number(std::string_view text) noexcept {
  if (text.empty()) return false;
  for (char c : text) {
    if (!is_digit(c)) return false;
  }
  return true;
}

std::string format_duration(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace redlock::cli
