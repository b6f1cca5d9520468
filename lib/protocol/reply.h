// Turning one node's reply into a vote. Pure: tested with hand-built replies.
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pure/decision.h"
#include "protocol/scripts.h"

namespace redlock::detail {

struct classified {
  vote v;
  std::string detail;                   // error text (first line, bounded)
  std::optional<std::uint64_t> fence;   // acquire_fenced: the node's counter
  std::optional<std::string> value;     // inspect: the key's value
  std::int64_t pttl = -2;               // inspect: PTTL
  std::optional<std::size_t> blocked_by;  // acquire_many refused: the 1-based index of the held key
};

// Classifies the reply of `script` (non-null; NOSCRIPT already handled).
classified classify_reply(script_id script, const redisReply* r);

// Classifies an error text: auth_error (NOAUTH, WRONGPASS: permanent auth_failed),
// server_error with permanent permission_denied (NOPERM, or a script refused a
// command by the ACL; or EVAL/EVALSHA unknown to the server: scripts renamed or
// disabled, named so in the detail), server_error with permanent wrong_type (WRONGTYPE), or a
// plain server_error. The detail is the text's first line, at most 200 bytes,
// without control characters.
classified classify_error(std::string_view text);
// True for the answer of a server that does not know EVAL or EVALSHA (scripts
// renamed or disabled).
bool is_scripts_unknown(std::string_view text) noexcept;
// True for an ACL's refusal of the EVAL command itself (NOPERM naming 'eval': a
// user without @scripting). Not for a script refused a key or a command inside it
// (the plain SET on that key is refused as well), nor for EVALSHA alone (below).
bool is_scripts_refused_by_acl(std::string_view text) noexcept;
// True for a refusal of EVALSHA alone (an ACL's NOPERM naming 'evalsha', or EVALSHA
// renamed: "unknown command 'EVALSHA'"): the request is sent again with its body, as
// EVAL, which the server may run (if it does not, that refusal is the one that counts).
bool is_evalsha_unavailable(std::string_view text) noexcept;
// Why a node whose server refused scripts must not vote on an acquire.
inline constexpr const char* kScriptsUnknownExclusion =
    "the server does not run scripts (EVAL unknown, or refused by the user's ACL): a lock taken there could be "
    "neither released nor extended";

// Server text made fit for a report: its first line, at most `max` bytes, with
// every byte that is not printable ASCII (controls, DEL, bytes >= 0x80) replaced
// by '?', so a server can never put terminal escapes in a message.
std::string printable_line(std::string_view text, std::size_t max = 200);

// True for an ACL refusal of an authenticated user (NOPERM, or a script's
// command refused by the ACL), as opposed to an authentication refusal.
bool is_permission_error(std::string_view text);

// The reply to TIME ({seconds, microseconds} as strings) in microseconds; nullopt
// for anything else (an error, a malformed or out-of-range value).
std::optional<std::int64_t> parse_time_reply(const redisReply* r);

}  // namespace redlock::detail
