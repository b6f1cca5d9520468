// What a protected resource needs to check fencing tokens.
//
// A lock acquired with acquire_options::fencing carries lock::fence(): a 64-bit
// token strictly greater than that of every earlier holder of the same resource
// whose fenced acquisition completed (docs/fencing.md has the argument and its
// assumptions). The lock alone cannot stop a paused holder that resumes after
// its lock expired; the resource can, by refusing writes with an older token.
#pragma once

namespace redlock {

// A Lua script for a resource stored in Redis. EVAL it with
//   KEYS[1] = the resource key, KEYS[2] = the key holding the highest token seen,
//   ARGV[1] = the writer's fencing token (decimal), ARGV[2] = the value to write.
// Writes ARGV[2] to KEYS[1] and records the token only if the token is >= the
// highest seen; returns 1 when written, 0 when refused (a stale writer), and an
// error reply when ARGV[1] is not a number. Tokens compare exactly up to 2^53.
inline constexpr const char fenced_write_script[] =
    "local tok = tonumber(ARGV[1])\n"
    "if tok == nil then return redis.error_reply('ERR fencing token is not a number') end\n"
    "local seen = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
    "if tok < seen then return 0 end\n"
    "redis.call('SET', KEYS[2], ARGV[1])\n"
    "redis.call('SET', KEYS[1], ARGV[2])\n"
    "return 1\n";

}  // namespace redlock
