// client::probe: each node's reachability, round trip, identity and guard state.
#pragma once

#include <functional>

#include "redlock/client.h"

namespace redlock::detail {

class core;

// Loop thread. Sends PING, INFO server, INFO persistence and INFO memory to every
// node (pipelined), waits for every answer, and calls done once, on the loop thread.
void probe(core& c, std::function<void(probe_result)> done);

// The fields probe reads from one INFO reply into `h` (run_id, uptime_s,
// redis_version, aof_enabled, maxmemory_policy); absent fields are left alone.
void apply_info(std::string_view info, node_health& h);

}  // namespace redlock::detail
