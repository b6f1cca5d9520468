// A reply as a plain value: what a primitive reads from a plain command's answer
// (ops/plain_round.h) without walking hiredis's reply tree. No hiredis type here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace redlock::detail {

struct resp_value {
  // string: a bulk string; status: a status reply (+text), kept apart as the
  // hiredis walk it replaced did (a script's array of GETs never holds one).
  enum class kind { nil, string, status, integer, array, other };
  kind type = kind::nil;
  std::string text;                 // string, status
  std::int64_t integer = 0;         // integer
  std::vector<resp_value> elements;  // array
};

}  // namespace redlock::detail
