// The Lua scripts every node runs. Each is atomic on its node.
#pragma once

#include <cstddef>
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
  acquire_many,  // the set scripts (lib/multi.cc): any number of KEYS (command::keys)
  extend_many,
  release_many,
  release_quiet,
  release_many_quiet,
  count
};

struct script {
  const char* body;
  const std::string& sha() const;  // SHA-1 of body, computed once
  int num_keys;                    // 0 for the set scripts: as many as command::keys holds
};

const script& get_script(script_id id);

// Every acquire form: the plain SET and the acquire scripts (a grant the guards judge;
// a refusal means another owner holds the key).
inline bool acquires(script_id id) noexcept {
  return id == script_id::acquire_set || id == script_id::acquire || id == script_id::acquire_fenced ||
         id == script_id::acquire_many;
}
// The extensions (a grant only the clock-jump guard judges).
inline bool extends(script_id id) noexcept { return id == script_id::extend || id == script_id::extend_many; }

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

// The set scripts: one lock over several keys at once (lib/multi.cc), each all or
// none on its node. KEYS = every lock key of the set (at most kMaxSetSize).

// KEYS lock keys; ARGV[1] token, ARGV[2] ttl ms. The first key (in KEYS order)
// that exists decides: a string = {0, its index} (held, nothing written), another
// type = WRONGTYPE error (nothing written). None exists: every key is set to the
// token with the TTL, {1, '0'}. Calls no TIME (as kAcquire).
inline constexpr const char kAcquireMany[] =
    "for i = 1, #KEYS do\n"
    "  local t = redis.call('TYPE', KEYS[i])['ok']\n"
    "  if t == 'string' then return {0, i} end\n"
    "  if t ~= 'none' then return redis.error_reply('WRONGTYPE lock key holds a non-string value') end\n"
    "end\n"
    "for i = 1, #KEYS do\n"
    "  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])\n"
    "end\n"
    "return {1, '0'}\n";

// KEYS lock keys; ARGV[1] token, ARGV[2] ttl ms. 1 = every key held the token and
// was re-timed; 0 = some key does not hold it (not owner: nothing changed). A
// non-string key fails the GET (WRONGTYPE) before anything changed.
inline constexpr const char kExtendMany[] =
    "for i = 1, #KEYS do\n"
    "  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end\n"
    "end\n"
    "for i = 1, #KEYS do\n"
    "  redis.call('PEXPIRE', KEYS[i], ARGV[2])\n"
    "end\n"
    "return 1\n";

// KEYS lock keys; ARGV[1] token. Deletes each string key holding the token (a key
// of another type is skipped, never an error: the others are still deleted), and
// publishes the token on each deleted key's channel, as kRelease does for one key
// (waiting acquires of any of them, single-key or set, wake up).
// 1 = deleted at least one, 0 = none held the token (not owner).
inline constexpr const char kReleaseMany[] =
    "local n = 0\n"
    "for i = 1, #KEYS do\n"
    "  if redis.call('TYPE', KEYS[i])['ok'] == 'string' and redis.call('GET', KEYS[i]) == ARGV[1] then\n"
    "    n = n + redis.call('DEL', KEYS[i])\n"
    "    redis.pcall('PUBLISH', KEYS[i] .. ':released', ARGV[1])\n"
    "  end\n"
    "end\n"
    "if n > 0 then return 1 end\n"
    "return 0\n";

// As kReleaseMany without the notifications: the rollback of a failed set attempt
// and its redelivered deletes (as kReleaseQuiet for one key).
inline constexpr const char kReleaseManyQuiet[] =
    "local n = 0\n"
    "for i = 1, #KEYS do\n"
    "  if redis.call('TYPE', KEYS[i])['ok'] == 'string' and redis.call('GET', KEYS[i]) == ARGV[1] then\n"
    "    n = n + redis.call('DEL', KEYS[i])\n"
    "  end\n"
    "end\n"
    "if n > 0 then return 1 end\n"
    "return 0\n";

// The most resources one set may hold (client::acquire_many).
inline constexpr std::size_t kMaxSetSize = 64;

}  // namespace redlock::detail
