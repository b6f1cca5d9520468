// Durations on the command line: plain milliseconds or a number with a unit. Pure.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace redlock::cli {

// The largest duration accepted (about 31 years): far beyond any sensible TTL or
// wait, and small enough that no clock arithmetic in nanoseconds can overflow.
inline constexpr std::chrono::milliseconds max_duration{1'000'000'000'000};

// Parses a non-negative decimal integer, optionally followed by a unit: "250"
// (milliseconds), "250ms", "30s", "2m". Returns nullopt for anything else: empty
// text, a sign, spaces, fractions, exponents, other units, or a value above
// max_duration.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) noexcept;

// The shortest exact spelling that parse_duration accepts: "2m", "30s", "250ms".
std::string format_duration(std::chrono::milliseconds d);

}  // namespace redlock::cli
