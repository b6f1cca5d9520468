// Reading the fields of a reply that describes topology (protocol/cluster.h,
// protocol/sentinel.h): text, and integers that servers send as integers or as
// strings of digits. No I/O.
#pragma once

#include <hiredis/hiredis.h>

#include <string_view>

#include "pure/decimal.h"

namespace redlock::detail {

inline bool is_text(const redisReply* r) noexcept {
  return r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

// A string or status reply's text; empty for any other reply.
inline std::string_view text(const redisReply* r) noexcept {
  return is_text(r) ? std::string_view(r->str, r->len) : std::string_view{};
}

// An integer reply in [0, max], or a string of digits that is one (Sentinel and some
// proxies send ports as strings).
inline bool integer(const redisReply* r, long long max, long long& out) noexcept {
  if (r == nullptr) return false;
  if (r->type == REDIS_REPLY_INTEGER) {
    if (r->integer < 0 || r->integer > max) return false;
    out = r->integer;
    return true;
  }
  return is_text(r) && parse_decimal(text(r), max, out);
}

}  // namespace redlock::detail
