// What a protected resource needs to check fencing tokens.
//
// A lock acquired with acquire_options::fencing carries lock::fence(): a 64-bit
// token strictly greater than that of every earlier holder of the same resource
// whose fenced acquisition completed (docs/fencing.md has the argument and its
// assumptions). The lock alone cannot stop a paused holder that resumes after
// its lock expired; the resource can, by refusing operations with an older token.
//
// For a resource stored in Redis, three Lua scripts to EVAL (or SCRIPT LOAD once and
// EVALSHA) on the resource's server, all with
//   KEYS[1] = the resource key (a string value, or absent),
//   KEYS[2] = the key holding the highest token the resource has seen (absent = 0;
//             no TTL; one per resource, shared by every script used on it),
//   ARGV[1] = the caller's fencing token, as decimal digits (std::to_string(fence)).
// Which to use (docs/fencing.md, "Checking tokens at the resource"):
//   - a blind write (the new value does not depend on the old one):
//     fenced_write_script;
//   - a read-modify-write: fenced_read_script, then fenced_write_script (or
//     fenced_compare_and_set_script) with the same token. A plain GET followed by
//     fenced_write_script does NOT protect it: a newer holder that has only read
//     has not told the resource its token yet, so a paused older holder's write is
//     still accepted and one of the two updates is lost.
//
// Common contract:
//   - Tokens compare as numbers: a token is accepted when it is >= the highest seen,
//     and an accepted token that is greater becomes the highest seen. Equal tokens
//     are accepted because, as fences strictly increase per acquisition, two holders
//     never share one: an equal token is the same holder operating again. (The
//     scripts cannot tell holders apart by anything else; if fences could repeat —
//     a lock node restarted without its data, see docs/fencing.md — two holders
//     with the same token would both be accepted.)
//   - ARGV[1] must be decimal digits and below 2^53: Lua numbers are doubles, exact
//     only up to 2^53, so a larger token gets an error reply instead of an inexact
//     comparison. (Fences start at 1 and grow by one per acquisition.)
//   - Error replies, and then nothing is changed: fewer KEYS or ARGV than the script
//     needs ("ERR fenced <script>: needs ..."), a token that is not digits
//     ("ERR fencing token is not a number ..."), a token >= 2^53 ("ERR fencing token
//     is not below 2^53 ..."), a KEYS[2] value that is not a number ("ERR the
//     highest-seen key does not hold a fencing token"), and Redis' own WRONGTYPE
//     when KEYS[2], or KEYS[1] of the read and the compare-and-set, is not a string
//     (fenced_write_script SETs KEYS[1] whatever it held).
//   - Each script writes, so it runs on a primary (not EVAL_RO). With Redis Cluster,
//     put KEYS[1] and KEYS[2] in one slot with a hash tag ("{orders:4711}" and
//     "{orders:4711}:seen").
//   - The resource must keep KEYS[2] as durably as the data it protects: a resource
//     that loses it (restart without persistence, failover to a lagging replica,
//     eviction under an allkeys-* maxmemory policy) accepts older tokens again.
//   - Each script is also valid as the body of a Lua function, so it can be wrapped
//     in a larger script ("local function f() <script> end ...").
#pragma once

// The token and highest-seen checks shared by the scripts below (in each script
// after its own argument-count check). Leaves `tok` and `seen` as numbers.
#define REDLOCK_FENCING_CHECK_TOKEN_                                                                \
  "local tok = ARGV[1]\n"                                                                           \
  "if not string.match(tok, '^%d+$') then\n"                                                        \
  "  return redis.error_reply('ERR fencing token is not a number (decimal digits expected)')\n"     \
  "end\n"                                                                                           \
  "tok = tonumber(tok)\n"                                                                           \
  "if tok >= 9007199254740992 then\n"                                                               \
  "  return redis.error_reply('ERR fencing token is not below 2^53 (Lua compares it inexactly)')\n" \
  "end\n"                                                                                           \
  "local seen = redis.call('GET', KEYS[2])\n"                                                       \
  "if seen then\n"                                                                                  \
  "  seen = tonumber(seen)\n"                                                                       \
  "  if seen == nil then\n"                                                                         \
  "    return redis.error_reply('ERR the highest-seen key does not hold a fencing token')\n"        \
  "  end\n"                                                                                         \
  "else\n"                                                                                          \
  "  seen = 0\n"                                                                                    \
  "end\n"

namespace redlock {

// A blind fenced write.
//   KEYS[1] resource, KEYS[2] highest seen; ARGV[1] token, ARGV[2] the value to write.
// If the token is >= the highest seen: records it (max) and SETs ARGV[2] to KEYS[1];
// returns 1. Otherwise changes nothing and returns 0: a newer holder has read or
// written (stop; retrying with the same token cannot succeed).
// This protects a write whose value does not depend on what the resource held;
// for a read-modify-write, read with fenced_read_script first.
inline constexpr const char fenced_write_script[] =
    "if #KEYS < 2 or #ARGV < 2 then\n"
    "  return redis.error_reply('ERR fenced write: needs KEYS resource, seen and ARGV token, value')\n"
    "end\n" REDLOCK_FENCING_CHECK_TOKEN_
    "if tok < seen then return 0 end\n"
    "if tok > seen then redis.call('SET', KEYS[2], ARGV[1]) end\n"
    "redis.call('SET', KEYS[1], ARGV[2])\n"
    "return 1\n";

// A fenced read that claims the resource for the token.
//   KEYS[1] resource, KEYS[2] highest seen; ARGV[1] token.
// If the token is >= the highest seen: records it (max), so that from now on every
// script refuses older tokens, and returns the two-element array [1, value], where
// value is KEYS[1]'s string, or nil when KEYS[1] does not exist. Otherwise changes
// nothing and returns [0, nil]: a newer holder has read or written.
// The first element tells a refusal from an absent value. (The nil is Lua's false,
// which Redis sends as a nil on RESP2 and RESP3 alike.)
// A read-modify-write is protected when the holder reads with this script and then
// writes with fenced_write_script or fenced_compare_and_set_script and the same
// token: between its read and its accepted write no other token was accepted, since
// a newer one would have raised the highest seen above it and an older one was
// already below it.
inline constexpr const char fenced_read_script[] =
    "if #KEYS < 2 or #ARGV < 1 then\n"
    "  return redis.error_reply('ERR fenced read: needs KEYS resource, seen and ARGV token')\n"
    "end\n" REDLOCK_FENCING_CHECK_TOKEN_
    "if tok < seen then return {0, false} end\n"
    "local value = redis.call('GET', KEYS[1])\n"
    "if tok > seen then redis.call('SET', KEYS[2], ARGV[1]) end\n"
    "return {1, value}\n";

// A fenced compare-and-set.
//   KEYS[1] resource, KEYS[2] highest seen; ARGV[1] token, ARGV[2] the value to
//   write, ARGV[3] the value KEYS[1] must hold now (omit ARGV[3]: KEYS[1] must not
//   exist).
// Returns 1 when written: the token was >= the highest seen (it is recorded, max)
// and KEYS[1] held ARGV[3] (or did not exist, without ARGV[3]); ARGV[2] is SET.
// Returns 0 when the token is older than the highest seen (whatever the value), and
// -1 when the token is accepted but the value differs; both change nothing.
// On -1 another write came in after the caller's read: read again (fenced) and
// recompute, or give up. On 0 stop: a newer holder has the resource.
// After a plain GET this alone prevents a lost update (the value check), and the
// token check also refuses an older holder whose expected value reappeared (A-B-A).
inline constexpr const char fenced_compare_and_set_script[] =
    "if #KEYS < 2 or #ARGV < 2 or #ARGV > 3 then\n"
    "  return redis.error_reply('ERR fenced compare-and-set: needs KEYS resource, seen and ARGV token, value"
    " and optionally the expected value')\n"
    "end\n" REDLOCK_FENCING_CHECK_TOKEN_
    "if tok < seen then return 0 end\n"
    "local value = redis.call('GET', KEYS[1])\n"
    "if #ARGV == 3 then\n"
    "  if value ~= ARGV[3] then return -1 end\n"
    "elseif value then\n"
    "  return -1\n"
    "end\n"
    "if tok > seen then redis.call('SET', KEYS[2], ARGV[1]) end\n"
    "redis.call('SET', KEYS[1], ARGV[2])\n"
    "return 1\n";

}  // namespace redlock

#undef REDLOCK_FENCING_CHECK_TOKEN_
