// A plain round: one command sent to every node (not a lock script: no votes, no
// quorum, no rollback), each node's answer handed to the caller as a value, and
// one report once every node answered. What the election's scripts use.
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string_view>

#include "protocol/value.h"
#include "redlock/report.h"

namespace redlock::detail {

class core;

// parse(node, value): one node's reply (not an error reply), valid during the
// call; returns whether it had the expected shape (else the node's result is a
// protocol_error). Loop thread.
using plain_parser = std::function<bool(std::size_t node, const resp_value& value)>;

// Sends `argv` to every node (pipelined on each connection, each request bounded
// by command_timeout) and calls done(report) once, on the loop thread, when every
// node answered: per node ok (parsed), server_error (an error reply, its text),
// protocol_error (an unexpected shape) or the connection's status.
void plain_round(core& c, std::initializer_list<std::string_view> argv, plain_parser parse,
                 std::function<void(report)> done);

}  // namespace redlock::detail
