// The reports of the operations: a round's (every node's result, named) and a
// report without a round (a call refused or cut short before anything was sent:
// every node pending). The one place either is built; ops/support.h declares them.
#include <chrono>

#include "engine/core.h"
#include "ops/round.h"
#include "ops/support.h"

namespace redlock::detail {

using clock_tp = std::chrono::steady_clock::time_point;
using std::chrono::duration_cast;
using std::chrono::microseconds;

report round_report(const core& c, const round& r, std::error_code ec, clock_tp call_start, clock_tp now,
                    int attempts) {
  report rep;
  rep.error = ec;
  rep.nodes = r.results;
  for (std::size_t i = 0; i < rep.nodes.size(); ++i) rep.nodes[i].node = c.nodes()[i].display;
  rep.attempts = attempts;
  rep.elapsed = duration_cast<microseconds>(now - call_start);
  return rep;
}

report empty_report(const core& c, std::error_code ec, const char* detail) {
  report rep;
  rep.error = ec;
  rep.attempts = 1;
  for (const auto& n : c.nodes()) rep.nodes.push_back(node_result{n.display, node_status::pending, detail, {}});
  return rep;
}

}  // namespace redlock::detail
