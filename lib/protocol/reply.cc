#include "protocol/reply.h"

#include <algorithm>
#include <cstdlib>

#include "pure/sha1.h"

namespace redlock::detail {

const std::string& script::sha() const {
  // Computed once per script, thread-safe (static local init per index).
  static const std::string shas[] = {sha1_hex(kAcquire),    sha1_hex(kAcquireFenced), sha1_hex(kFenceCommit),
                                     sha1_hex(kExtend),     sha1_hex(kRelease),       sha1_hex(kInspect),
                                     sha1_hex(""),          sha1_hex(kAcquire),       sha1_hex(kAcquireMany),
                                     sha1_hex(kExtendMany), sha1_hex(kReleaseMany),   sha1_hex(kReleaseQuiet),
                                     sha1_hex(kReleaseManyQuiet)};
  return shas[this - &get_script(script_id::acquire)];
}

const script& get_script(script_id id) {
  static const script table[] = {{kAcquire, 1},     {kAcquireFenced, 2}, {kFenceCommit, 2}, {kExtend, 1},
                                 {kRelease, 1},     {kInspect, 1},       {"", 0},           {kAcquire, 1},
                                 {kAcquireMany, 0}, {kExtendMany, 0},    {kReleaseMany, 0}, {kReleaseQuiet, 1},
                                 {kReleaseManyQuiet, 0}};
  return table[static_cast<unsigned>(id)];
}

std::string printable_line(std::string_view text, std::size_t max) {
  std::string line(text.substr(0, std::min(text.size(), max)));
  auto nl = line.find_first_of("\r\n");
  if (nl != std::string::npos) line.resize(nl);
  for (char& ch : line) {
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e) ch = '?';
  }
  return line;
}

bool is_permission_error(std::string_view text) {
  auto starts = [&](std::string_view p) { return text.substr(0, p.size()) == p; };
  // NOPERM: a command, key or channel outside the user's ACL. The second form is
  // what Redis 7 answers when a script calls a command (or key) the ACL forbids.
  return starts("NOPERM") || starts("ERR The user executing the script can't");
}

bool is_scripts_unknown(std::string_view text) noexcept {
  auto starts = [&](std::string_view p) { return text.substr(0, p.size()) == p; };
  return starts("ERR unknown command 'EVAL'") || starts("ERR unknown command 'EVALSHA'") ||
         starts("ERR unknown command `EVAL`") || starts("ERR unknown command `EVALSHA`");
}

namespace {

// NOPERM naming `command` (lower case, as Redis 7 prints it; upper case too):
// Redis 7.2: "NOPERM User u has no permissions to run the 'eval' command";
// 7.0 and 6.2: "NOPERM this user has no permissions to run the 'eval' command...".
bool refuses_command(std::string_view text, std::string_view lower, std::string_view upper) noexcept {
  if (text.substr(0, 6) != "NOPERM") return false;
  const std::string_view line = text.substr(0, text.find_first_of("\r\n"));
  for (std::string_view cmd : {lower, upper}) {
    const std::size_t at = line.find(cmd);
    if (at != std::string_view::npos && at > 0 && line[at - 1] == '\'' &&
        line.substr(at + cmd.size(), 9) == "' command") {
      return true;
    }
  }
  return false;
}

}  // namespace

bool is_scripts_refused_by_acl(std::string_view text) noexcept { return refuses_command(text, "eval", "EVAL"); }

bool is_evalsha_unavailable(std::string_view text) noexcept {
  auto starts = [&](std::string_view p) { return text.substr(0, p.size()) == p; };
  return refuses_command(text, "evalsha", "EVALSHA") || starts("ERR unknown command 'EVALSHA'") ||
         starts("ERR unknown command `EVALSHA`");
}

classified classify_error(std::string_view text) {
  classified c;
  c.detail = printable_line(text);
  auto starts = [&](std::string_view p) { return text.substr(0, p.size()) == p; };
  if (is_permission_error(text)) {
    // Authenticated, but not allowed: a server error reply, permanent as a
    // permission problem (not an authentication refusal).
    c.v.status = node_status::server_error;
    c.v.permanent = errc::permission_denied;
  } else if (starts("NOAUTH") || starts("WRONGPASS")) {
    c.v.status = node_status::auth_error;
    c.v.permanent = errc::auth_failed;
  } else if (starts("WRONGTYPE")) {
    c.v.status = node_status::server_error;
    c.v.permanent = errc::wrong_type;
  } else if (is_scripts_unknown(text)) {
    // Scripts renamed or disabled (rename-command, a managed service's policy): every
    // release, extension and fenced acquire needs them. Named, and as permanent as
    // an ACL refusal: a retry cannot help.
    c.v.status = node_status::server_error;
    c.v.permanent = errc::permission_denied;
    c.detail = "the server does not run scripts (" + printable_line(text, 40) +
               "...: EVAL renamed or disabled); this library needs EVAL and EVALSHA";
  } else {
    c.v.status = node_status::server_error;
  }
  return c;
}

namespace {

bool is_int(const redisReply* r, long long v) { return r->type == REDIS_REPLY_INTEGER && r->integer == v; }

classified protocol(const char* what) {
  classified c;
  c.v.status = node_status::protocol_error;
  c.detail = what;
  return c;
}

bool parse_u64(const redisReply* r, std::uint64_t& out) {
  if (r->type == REDIS_REPLY_INTEGER && r->integer >= 0) {
    out = static_cast<std::uint64_t>(r->integer);
    return true;
  }
  if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 20) return false;
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < r->len; ++i) {
    char ch = r->str[i];
    if (ch < '0' || ch > '9') return false;
    std::uint64_t next = v * 10 + static_cast<std::uint64_t>(ch - '0');
    if (next / 10 != v) return false;
    v = next;
  }
  out = v;
  return true;
}

// Server time from its two TIME fields; nullopt when malformed or out of range.
std::optional<std::int64_t> server_time(const redisReply* sec_r, const redisReply* usec_r) {
  std::uint64_t sec = 0, usec = 0;
  if (!parse_u64(sec_r, sec) || !parse_u64(usec_r, usec) || usec >= 1000000 || sec > (std::uint64_t{1} << 40)) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(sec * 1000000 + usec);
}

}  // namespace

std::optional<std::int64_t> parse_time_reply(const redisReply* r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return std::nullopt;
  return server_time(r->element[0], r->element[1]);
}

classified classify_reply(script_id script, const redisReply* r) {
  if (r->type == REDIS_REPLY_ERROR) return classify_error(std::string_view(r->str, r->len));
  classified c;
  switch (script) {
    case script_id::acquire:
    case script_id::acquire_fenced: {
      // {1 | 0, counter}
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return protocol("unexpected reply to acquire");
      if (is_int(r->element[0], 1)) {
        std::uint64_t f = 0;
        if (!parse_u64(r->element[1], f)) return protocol("fence counter is not a non-negative integer");
        c.v.status = node_status::ok;
        if (script == script_id::acquire_fenced) c.fence = f;
      } else if (is_int(r->element[0], 0)) {
        c.v.status = node_status::held;
      } else {
        return protocol("unexpected reply to acquire");
      }
      return c;
    }
    case script_id::acquire_many:
      // {1, '0'} | {0, index of the held key}
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        return protocol("unexpected reply to a set acquire");
      if (is_int(r->element[0], 1)) {
        c.v.status = node_status::ok;
      } else if (is_int(r->element[0], 0) && r->element[1]->type == REDIS_REPLY_INTEGER &&
                 r->element[1]->integer >= 1) {
        c.v.status = node_status::held;
        c.blocked_by = static_cast<std::size_t>(r->element[1]->integer);
      } else {
        return protocol("unexpected reply to a set acquire");
      }
      return c;
    case script_id::fence_commit:
    case script_id::extend:
    case script_id::release:
    case script_id::extend_many:
    case script_id::release_many:
    case script_id::release_quiet:
    case script_id::release_many_quiet:
      if (is_int(r, 1)) {
        c.v.status = node_status::ok;
      } else if (is_int(r, 0)) {
        c.v.status = node_status::not_owner;
      } else {
        return protocol("unexpected reply to an ownership-checked script");
      }
      return c;
    case script_id::inspect: {
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[1]->type != REDIS_REPLY_INTEGER) {
        return protocol("unexpected reply to inspect");
      }
      const redisReply* v = r->element[0];
      if (v->type == REDIS_REPLY_STRING) {
        c.value = std::string(v->str, v->len);
      } else if (v->type != REDIS_REPLY_NIL) {
        return protocol("unexpected value type in inspect");
      }
      c.pttl = r->element[1]->integer;
      c.v.status = node_status::ok;
      return c;
    }
    case script_id::acquire_set:
      if (r->type == REDIS_REPLY_NIL) {
        c.v.status = node_status::ok;
      } else if (r->type == REDIS_REPLY_STRING) {
        c.v.status = node_status::held;
        c.value = std::string(r->str, r->len);  // the holder's token (waiting: lib/notify.h)
      } else if (r->type == REDIS_REPLY_ARRAY) {
        return classify_reply(script_id::acquire, r);  // the EVAL fallback's reply
      } else {
        return protocol("unexpected reply to SET NX PX GET");
      }
      return c;
    case script_id::ping:
      if (r->type != REDIS_REPLY_STATUS || std::string_view(r->str, r->len) != "PONG") {
        return protocol("unexpected reply to PING");
      }
      c.v.status = node_status::ok;
      return c;
    case script_id::count: break;
  }
  return protocol("unknown script");
}

}  // namespace redlock::detail
