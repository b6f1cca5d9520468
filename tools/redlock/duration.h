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

// Parses a non-negative decimal number with an optional unit: "250" (a bare whole
// number is milliseconds), "250ms", "30s", "2m", "1h", and fractions with a unit:
// "1.5s", "0.25m" (digits on both sides of the point). The result must be a whole
// number of milliseconds ("1.0005s" is refused, never rounded). Returns nullopt for
// anything else: empty text, a sign, spaces, a bare fraction ("1.5"), exponents,
// other units, or a value above max_duration; `why`, when given, then says what is
// wrong in a few words.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text, std::string* why = nullptr);

// True for a bare whole number (milliseconds without a unit): "250".
bool is_bare_number(std::string_view text) noexcept;

// The shortest exact spelling that parse_duration accepts: "1h", "2m", "30s", "250ms".
std::string format_duration(std::chrono::milliseconds d);

}  // namespace redlock::cli
