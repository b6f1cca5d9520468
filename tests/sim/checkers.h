// Checkers over a simulated run's history (history.h). Each returns what it found
// wrong; an empty result is a pass. They are pure: the runner (scenario.h) gives
// them what they need from the world.
//
//  mutual_exclusion  No two holds of one resource were believed at one instant:
//                    their belief intervals (history.h: from the acquire's callback
//                    until the earliest of the reported validity end, a release call,
//                    the loss) never overlap, not by one microsecond.
//  fence_order       Per resource, a fenced hold whose acquire was called after
//                    another fenced hold's acquire succeeded has a strictly greater
//                    fence (while no node has lost its data: docs/fencing.md's
//                    assumption; pairs whose later acquire was called after the
//                    first data-losing restart are not checked).
//  fenced_resource   The fenced resource accepted writes in non-decreasing fence order
//                    and refused exactly those below the highest it had seen.
//  keys_left         Once the faults healed and every TTL passed, the nodes hold no
//                    key but fence counters (":fence").
//  callbacks         Every asynchronous call's callback ran exactly once, never
//                    inside the call; on_lost ran at most once per hold, and exactly
//                    when the handle reports lost().
//  liveness          After healing, an uncontended acquire succeeds within the stated
//                    bound (checked by the runner).
//  api               No call failed with an error the harness's correct use of the
//                    API cannot cause (invalid_argument, would_deadlock, ...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "history.h"

namespace redlock::simtest {

struct violation {
  std::string checker;  // one of the names above
  std::string summary;  // one line
  std::string detail;   // several lines: the records involved and the history around them
  std::int64_t t_us = 0;  // when it happened (virtual time)
};

std::vector<violation> check_mutual_exclusion(const history& h);
// `data_lost_at_us`: the first restart of a node without persistence (-1: none).
std::vector<violation> check_fence_order(const history& h, std::int64_t data_lost_at_us);
std::vector<violation> check_fenced_resource(const history& h);
// keys[i]: "key (value, pttl)" descriptions of every key node i still holds, and
// the key names themselves in names[i].
std::vector<violation> check_keys_left(const std::vector<std::vector<std::string>>& names,
                                       const std::vector<std::vector<std::string>>& described, std::int64_t t_us);
std::vector<violation> check_callbacks(const history& h);

}  // namespace redlock::simtest
