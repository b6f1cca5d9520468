// The Lua scripts every node runs. Each is atomic on its node.
#pragma once

#include <string>

namespace redlock::detail {

// `ping` is not a script: a plain PING, for measuring round trips.
// `acquire_set` is the fast acquire: a plain `SET key token NX PX ttl GET` (Redis
// >= 7.0: nil = granted, a string = held by that token, WRONGTYPE = not a
// string), with kAcquire (EVAL) as the fallback for servers that reject it.
enum class script_id : unsigned {
  acquire,
  acquire_fenced,
  fence_commit,
  extend,
  release,
  inspect,
  ping,
  acquire_set,
  release_quiet,
  count
};

struct script {
  const char* body;
  const std::string& sha() const;  // SHA-1 of body, computed once
  int num_keys;
};

const script& get_script(script_id id);

// KEYS[1] lock key; ARGV[1] token, ARGV[2] ttl ms.
// {1 granted | 0 held, "0"}; WRONGTYPE error if the key is not a string. Calls
// no TIME: the clock-jump guard's sample is a plain TIME the connection pipelines
// right behind the script (connection::encode), so a user whose ACL lacks +time
// still takes locks (that node's clock is then unwatched).
inline constexpr const char kAcquire[] =
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1, '0'} end\n"
    "if redis.call('TYPE', KEYS[1])['ok'] ~= 'string' then\n"
    "  return redis.error_reply('WRONGTYPE lock key holds a non-string value')\n"
    "end\n"
    "return {0, '0'}\n";

// KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] token, ARGV[2] ttl ms.
// As kAcquire, with the node's current fence counter in the second field.
inline constexpr const char kAcquireFenced[] =
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n"
    "  return {1, redis.call('GET', KEYS[2]) or '0'}\n"
    "end\n"
    "if redis.call('TYPE', KEYS[1])['ok'] ~= 'string' then\n"
    "  return redis.error_reply('WRONGTYPE lock key holds a non-string value')\n"
    "end\n"
    "return {0, '0'}\n";

// KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] token, ARGV[2] fence F.
// Only while the lock key still holds this token: counter = max(counter, F). 1/0.
inline constexpr const char kFenceCommit[] =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "local cur = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
    "if cur == nil or cur < tonumber(ARGV[2]) then redis.call('SET', KEYS[2], ARGV[2]) end\n"
    "return 1\n";

// KEYS[1] lock key; ARGV[1] token, ARGV[2] ttl ms. 1 = extended, 0 = not owner.
inline constexpr const char kExtend[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  return redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "end\n"
    "return 0\n";

// KEYS[1] lock key; ARGV[1] token. 1 = deleted, 0 = not owner.
// A delete publishes the released token on the channel KEYS[1] .. ':released'
// (waiting acquires subscribe to it: docs/coordination.md, "Waiting without
// polling"). redis.pcall: a user whose ACL forbids PUBLISH (Redis 7's default
// acl-pubsub-default resetchannels) still releases; waiters then fall back to
// their timers.
inline constexpr const char kRelease[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  local n = redis.call('DEL', KEYS[1])\n"
    "  redis.pcall('PUBLISH', KEYS[1] .. ':released', ARGV[1])\n"
    "  return n\n"
    "end\n"
    "return 0\n";

// KEYS[1] lock key; ARGV[1] token. As kRelease without the notification: the
// rollback of a failed attempt and the redelivered deletes (operations.cc,
// cleanup). A rollback that published would wake the waiters it competes with —
// itself included — into another split vote at once; they keep their timers.
inline constexpr const char kReleaseQuiet[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  return redis.call('DEL', KEYS[1])\n"
    "end\n"
    "return 0\n";

// KEYS[1] lock key. {value or nil, pttl}. Read-only.
inline constexpr const char kInspect[] =
    "local t = redis.call('TYPE', KEYS[1])['ok']\n"
    "if t ~= 'string' and t ~= 'none' then\n"
    "  return redis.error_reply('WRONGTYPE lock key holds a non-string value')\n"
    "end\n"
    "return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}\n";

}  // namespace redlock::detail
