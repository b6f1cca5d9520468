// The checks of a client's arguments, before anything runs: the options a client
// is built with (every node URI parsed, no server named twice, each setting in its
// range), and the arguments of an acquire, a set acquire, an extend or a release.
// Pure: each returns the problem, or throws config_error for the options; none
// sends, schedules or reads a clock. The error texts are the public API's
// (client.h, the reports' first node detail).
//
// Any thread (each reads only its arguments and the core's fixed options).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "pure/uri.h"
#include "redlock/options.h"
#include "redlock/report.h"

namespace redlock::detail {

class core;

// The nodes of `o`, parsed, in order. Throws config_error naming the first
// problem: no nodes, a URI that does not parse, two URIs that name one server, or
// a setting out of its range.
std::vector<node_address> validate_options(const client_options& o);

// "" if the acquire arguments are fine, else the problem.
std::string check_acquire(const core& c, std::string_view resource, const acquire_options& o);
// "" if a set acquire's arguments are fine, else the problem.
std::string check_acquire_many(const core& c, const std::vector<std::string>& resources,
                               const acquire_options& o);
// "" if lease `l` names what to extend or release, else the problem: a resource
// (or a set's resources, which must be a valid set) and a token.
std::string check_lease(const lease& l);
// "" if an extend of `l` to `ttl` may be attempted, else the problem.
std::string check_extend(const core& c, const lease& l, std::chrono::milliseconds ttl);

}  // namespace redlock::detail
