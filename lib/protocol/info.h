// What a node's text says: fields of an INFO reply, what its eviction policy may
// evict (and the warning that says so), which error lines are authentication
// refusals, and which operation a script's request belongs to. Pure: no I/O.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/scripts.h"
#include "redlock/observer.h"

namespace redlock::detail {

// The value of field `name` in an INFO reply ("" if absent).
std::string info_field(std::string_view info, std::string_view name);

// The `count` replicas a master's INFO replication lists (connected_slaves), each
// named by its address, "ip:port" from its slaveK line (the address the replica
// announced or connected from, and its listening port: stable across its
// reconnects), or "#k" where line k is missing or unreadable (then the names are
// only a count). Sorted.
std::vector<std::string> info_replicas(std::string_view info, int count);

// What a node's maxmemory-policy may evict when memory runs out.
enum class eviction_risk {
  none,           // noeviction, or unknown (INFO not permitted / not read yet)
  keys_with_ttl,  // volatile-*: keys with a TTL, i.e. every lock key; never a fence counter
  any_key,        // allkeys-* (and policies this client does not know): lock keys and fence counters
};
eviction_risk eviction_risk_of(std::string_view policy);
// The warning_code::eviction_policy message: node (redacted), policy, what it can
// evict, maxmemory ("" if unknown). One line.
std::string eviction_warning_text(std::string_view node, std::string_view policy, std::string_view maxmemory);

// The operation kind a request of this script belongs to (for on_node_slow).
operation_kind kind_of(script_id s) noexcept;

// The first line of a server's error text, printable and bounded (reply.h's
// printable_line).
std::string first_line(const char* s, std::size_t n);
// An authentication refusal. (An ACL refusal of an authenticated user, NOPERM, is
// not one: see is_permission_error.)
bool is_auth_error(std::string_view e);

}  // namespace redlock::detail
