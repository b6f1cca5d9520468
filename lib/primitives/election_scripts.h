// The two scripts of leader election (election.cc), sent as plain EVALs (one
// round each, ops/plain_round.h). Their text is specified in docs/protocol.md.
#pragma once

namespace redlock::detail {

// KEYS[1] lock key, KEYS[2] record key; ARGV[1] token, ARGV[2] term, ARGV[3] identity.
// Writes the record "<term> <sha1(token)> <identity>" (no TTL) only where the node
// still holds this token. 1 = written, 0 = not owner.
inline constexpr const char kElectionPublish[] =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "redis.call('SET', KEYS[2], ARGV[2] .. ' ' .. redis.sha1hex(ARGV[1]) .. ' ' .. ARGV[3])\n"
    "return 1\n";

// KEYS[1] lock key, KEYS[2] record key. Returns {sha1 of the lock value or nil,
// record or nil, PTTL of the lock key}. Read-only.
inline constexpr const char kElectionObserve[] =
    "local v = redis.call('GET', KEYS[1])\n"
    "local h = false\n"
    "if v then h = redis.sha1hex(v) end\n"
    "return {h, redis.call('GET', KEYS[2]), redis.call('PTTL', KEYS[1])}\n";

}  // namespace redlock::detail
