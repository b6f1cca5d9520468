// Unsigned decimal numbers as servers and URIs write them. Pure; no I/O.
#pragma once

#include <string_view>

namespace redlock::detail {

// `s` as a number in [0, max]: digits only (no sign, no space), at most 18 of them.
// False, leaving `out` alone, for anything else.
inline bool parse_decimal(std::string_view s, long long max, long long& out) noexcept {
  if (s.empty() || s.size() > 18) return false;
  long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > max) return false;
  out = v;
  return true;
}

}  // namespace redlock::detail
