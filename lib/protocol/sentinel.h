// What Redis Sentinel and a server's ROLE say about who is master, parsed: the
// reply of SENTINEL GET-MASTER-ADDR-BY-NAME, a +switch-master message, and ROLE.
// No I/O; a reply is read, never kept.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pure/uri.h"

namespace redlock::detail {

// SENTINEL GET-MASTER-ADDR-BY-NAME: [ip, port] (the port as a string), or nil when
// the sentinel monitors no master of that name (then `known` is false). Nothing
// when the reply has another shape or the port is out of 1..65535.
struct master_addr {
  bool known = false;
  host_port address;
};
std::optional<master_addr> parse_master_addr(const redisReply* reply);

// SENTINEL SENTINELS <name>: the other sentinels monitoring that master, each a flat
// [field, value, ...] array ("ip", "port", "flags", ...), at most `max` of them. A
// sentinel whose flags say it is down ("s_down", "o_down", "disconnected") or whose
// ip/port do not parse is left out; the shape wrong (not an array of arrays of an
// even length): nothing.
std::optional<std::vector<host_port>> parse_sentinels(const redisReply* reply, std::size_t max);

// SENTINEL MASTER <name>: a flat [field, value, ...] array; its "failover-timeout"
// (milliseconds, 1..2^40). Nothing for another shape or a value out of range.
std::optional<std::uint64_t> parse_failover_timeout(const redisReply* reply);

// The payload of a +switch-master message (channel "+switch-master"):
// "<name> <old-ip> <old-port> <new-ip> <new-port>". Nothing when malformed.
struct switch_master {
  std::string name;
  host_port from;
  host_port to;
};
std::optional<switch_master> parse_switch_master(std::string_view payload);

// ROLE: ["master", offset, [[ip, port, offset], ...]], ["slave", ip, port, state,
// offset] (state "connect", "connecting", "sync" or "connected"), or ["sentinel",
// [names]]. Nothing for another shape.
struct server_role {
  enum class kind { master, replica, sentinel };
  kind type = kind::master;
  long long offset = 0;               // master: its offset; replica: the offset it has
  std::vector<host_port> replicas;     // master: the replicas it lists
  host_port master;                    // replica: the master it follows
  bool link_up = false;               // replica: state "connected"
};
std::optional<server_role> parse_role(const redisReply* reply);

}  // namespace redlock::detail
