#include "sim_node.h"

#include <locale.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "redlock/fencing.h"
#include "protocol/scripts.h"
#include "pure/sha1.h"
#include "pure/slot.h"

namespace redlock::sim {
namespace {

// ---------------------------------------------------------------------------------
// Bytes and numbers, as Redis reads them.

constexpr std::size_t kInlineMax = 64 * 1024;        // PROTO_INLINE_MAX_SIZE
constexpr long long kMaxBulk = 512LL * 1024 * 1024;  // proto-max-bulk-len
constexpr long long kUnauthMaxMultibulk = 10;        // before AUTH
constexpr long long kUnauthMaxBulk = 16384;          // before AUTH
constexpr std::int64_t kNoExpiry = -1;

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }

// Redis hands arguments to C string functions in many places: they end at a NUL.
std::string_view c_str(std::string_view s) {
  const std::size_t nul = s.find('\0');
  return nul == std::string_view::npos ? s : s.substr(0, nul);
}

// strcasecmp(arg, lower) == 0, with arg read as a C string.
bool is_option(std::string_view arg, std::string_view lower) {
  arg = c_str(arg);
  if (arg.size() != lower.size()) return false;
  for (std::size_t i = 0; i < arg.size(); ++i) {
    if (ascii_lower(arg[i]) != lower[i]) return false;
  }
  return true;
}

// Redis' string2ll: an optional '-', no leading zeros, no spaces, no '+', < 21 bytes.
bool string2ll(std::string_view s, long long& out) {
  if (s.empty() || s.size() >= 21) return false;
  if (s.size() == 1 && s[0] == '0') {
    out = 0;
    return true;
  }
  std::size_t i = 0;
  bool negative = false;
  if (s[0] == '-') {
    negative = true;
    if (++i == s.size()) return false;
  }
  if (s[i] < '1' || s[i] > '9') return false;
  unsigned long long v = static_cast<unsigned long long>(s[i++] - '0');
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    const auto d = static_cast<unsigned long long>(s[i] - '0');
    if (v > ULLONG_MAX / 10) return false;
    v *= 10;
    if (v > ULLONG_MAX - d) return false;
    v += d;
  }
  if (negative) {
    const unsigned long long limit = static_cast<unsigned long long>(LLONG_MAX) + 1;
    if (v > limit) return false;
    out = v == limit ? LLONG_MIN : -static_cast<long long>(v);
  } else {
    if (v > static_cast<unsigned long long>(LLONG_MAX)) return false;
    out = static_cast<long long>(v);
  }
  return true;
}

// Two's-complement addition, as Redis' (overflowing) C does it.
long long wrapping_add(long long a, long long b) {
  return static_cast<long long>(static_cast<unsigned long long>(a) + static_cast<unsigned long long>(b));
}

// Lua 5.1's tonumber() of a string (luaO_str2d over strtod, which Redis' Lua uses),
// read as a C string like Lua does, in the "C" locale whatever the process's is.
std::optional<double> lua_tonumber(const std::string& s) {
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
  const char* p = s.c_str();
  char* end = nullptr;
  double d = strtod_l(p, &end, c_locale);
  if (end == p) return std::nullopt;
  if (*end == 'x' || *end == 'X') d = static_cast<double>(std::strtoul(p, &end, 16));
  if (*end == '\0') return d;
  while (*end == ' ' || (*end >= '\t' && *end <= '\r')) ++end;
  if (*end != '\0') return std::nullopt;
  return d;
}

// Redis' glob (stringmatchlen, case-sensitive): * ? [abc] [^a-z] and \ escapes.
bool glob_match(std::string_view pat, std::string_view str, bool& give_up) {
  std::size_t p = 0;
  std::size_t s = 0;
  while (p < pat.size() && s < str.size()) {
    switch (pat[p]) {
      case '*': {
        while (p + 1 < pat.size() && pat[p + 1] == '*') ++p;
        if (p + 1 == pat.size()) return true;
        for (; s < str.size(); ++s) {
          if (glob_match(pat.substr(p + 1), str.substr(s), give_up)) return true;
          if (give_up) return false;
        }
        give_up = true;
        return false;
      }
      case '?':
        ++s;
        break;
      case '[': {
        ++p;
        const bool negate = p < pat.size() && pat[p] == '^';
        if (negate) ++p;
        bool match = false;
        for (;;) {
          if (p >= pat.size()) {  // unterminated: the last byte closes it
            --p;
            break;
          }
          if (pat[p] == '\\' && pat.size() - p >= 2) {
            ++p;
            if (pat[p] == str[s]) match = true;
          } else if (pat[p] == ']') {
            break;
          } else if (pat.size() - p >= 3 && pat[p + 1] == '-') {
            int lo = pat[p];
            int hi = pat[p + 2];
            if (lo > hi) std::swap(lo, hi);
            const int c = str[s];
            p += 2;
            if (c >= lo && c <= hi) match = true;
          } else if (pat[p] == str[s]) {
            match = true;
          }
          ++p;
        }
        if (negate) match = !match;
        if (!match) return false;
        ++s;
        break;
      }
      case '\\':
        if (pat.size() - p >= 2) ++p;
        [[fallthrough]];
      default:
        if (pat[p] != str[s]) return false;
        ++s;
        break;
    }
    ++p;
    if (s == str.size()) {
      while (p < pat.size() && pat[p] == '*') ++p;
      break;
    }
  }
  return p == pat.size() && s == str.size();
}

bool glob_match(std::string_view pat, std::string_view str) {
  bool give_up = false;
  return glob_match(pat, str, give_up);
}


std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// ---------------------------------------------------------------------------------
// RESP2 replies.

void put_number(std::string& out, long long v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void put_crlf(std::string& out) { out.append("\r\n", 2); }

void reply_status(std::string& out, std::string_view s) {
  out.push_back('+');
  out.append(s);
  put_crlf(out);
}

// `msg` without the leading '-': "ERR ..." or "WRONGTYPE ...". Like Redis'
// addReplyError*, a CR or LF inside becomes a space.
void reply_error(std::string& out, std::string_view msg) {
  out.push_back('-');
  const std::size_t at = out.size();
  out.append(msg);
  for (std::size_t i = at; i < out.size(); ++i) {
    if (out[i] == '\r' || out[i] == '\n') out[i] = ' ';
  }
  put_crlf(out);
}

// addReplyErrorFormat: also trims CR and LF from the end first.
void reply_error_format(std::string& out, std::string_view msg) {
  while (!msg.empty() && (msg.back() == '\r' || msg.back() == '\n')) msg.remove_suffix(1);
  reply_error(out, msg);
}

void reply_int(std::string& out, long long v) {
  out.push_back(':');
  put_number(out, v);
  put_crlf(out);
}

void reply_bulk(std::string& out, std::string_view s) {
  out.push_back('$');
  put_number(out, static_cast<long long>(s.size()));
  put_crlf(out);
  out.append(s);
  put_crlf(out);
}

void reply_bulk_number(std::string& out, long long v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  reply_bulk(out, std::string_view(buf, static_cast<std::size_t>(r.ptr - buf)));
}

void reply_nil(std::string& out) { out.append("$-1\r\n", 5); }

void reply_array(std::string& out, std::size_t n) {
  out.push_back('*');
  put_number(out, static_cast<long long>(n));
  put_crlf(out);
}

const char kWrongType[] = "WRONGTYPE Operation against a key holding the wrong kind of value";
const char kNotInteger[] = "ERR value is not an integer or out of range";
const char kSyntax[] = "ERR syntax error";
const char kNoScript[] = "NOSCRIPT No matching script. Please use EVAL.";

// ---------------------------------------------------------------------------------
// The command table.

enum class cmd : std::uint8_t {
  get,
  set,
  del,
  exists,
  type,
  pttl,
  pexpire,
  incr,
  keys,
  dbsize,
  flushall,
  flushdb,
  select,
  auth,
  ping,
  echo,
  info,
  time,
  eval,
  evalsha,
  script,
  script_flush,
  script_load,
  script_exists,
  script_kill,
  lpush,
  rpush,
  llen,
  lrange,
  wait,
  asking,
  cluster,
  cluster_shards,
  cluster_myid,
  count
};

struct command_spec {
  std::string_view name;      // lower case, as in Redis' arity errors ("script|load")
  std::string_view injected;  // upper-case top-level name (inject_error's key)
  int arity;                  // > 0 exactly, < 0 at least -arity (argv[0] included)
  cmd id;
};

constexpr command_spec kCommands[] = {
    {"get", "GET", 2, cmd::get},
    {"set", "SET", -3, cmd::set},
    {"del", "DEL", -2, cmd::del},
    {"exists", "EXISTS", -2, cmd::exists},
    {"type", "TYPE", 2, cmd::type},
    {"pttl", "PTTL", 2, cmd::pttl},
    {"pexpire", "PEXPIRE", -3, cmd::pexpire},
    {"incr", "INCR", 2, cmd::incr},
    {"keys", "KEYS", 2, cmd::keys},
    {"dbsize", "DBSIZE", 1, cmd::dbsize},
    {"flushall", "FLUSHALL", -1, cmd::flushall},
    {"flushdb", "FLUSHDB", -1, cmd::flushdb},
    {"select", "SELECT", 2, cmd::select},
    {"auth", "AUTH", -2, cmd::auth},
    {"ping", "PING", -1, cmd::ping},
    {"echo", "ECHO", 2, cmd::echo},
    {"info", "INFO", -1, cmd::info},
    {"time", "TIME", 1, cmd::time},
    {"eval", "EVAL", -3, cmd::eval},
    {"evalsha", "EVALSHA", -3, cmd::evalsha},
    {"script", "SCRIPT", -2, cmd::script},
    {"lpush", "LPUSH", -3, cmd::lpush},
    {"rpush", "RPUSH", -3, cmd::rpush},
    {"llen", "LLEN", 2, cmd::llen},
    {"lrange", "LRANGE", 4, cmd::lrange},
    {"wait", "WAIT", 3, cmd::wait},
    {"asking", "ASKING", 1, cmd::asking},
    {"cluster", "CLUSTER", -2, cmd::cluster},
};

// CLUSTER's subcommands (the ones the library sends).
constexpr command_spec kClusterSubcommands[] = {
    {"cluster|shards", "CLUSTER", 2, cmd::cluster_shards},
    {"cluster|myid", "CLUSTER", 2, cmd::cluster_myid},
};

// SCRIPT's subcommands (SCRIPT is a container: it never runs by itself).
constexpr command_spec kScriptSubcommands[] = {
    {"script|flush", "SCRIPT", -2, cmd::script_flush},
    {"script|load", "SCRIPT", 3, cmd::script_load},
    {"script|exists", "SCRIPT", -3, cmd::script_exists},
    {"script|kill", "SCRIPT", 2, cmd::script_kill},
};

bool equals_lower(std::string_view arg, std::string_view lower) {
  if (arg.size() != lower.size()) return false;
  for (std::size_t i = 0; i < arg.size(); ++i) {
    if (ascii_lower(arg[i]) != lower[i]) return false;
  }
  return true;
}

const command_spec* find_command(std::string_view name) {
  if (name.empty() || name.size() > 8) return nullptr;
  for (const command_spec& c : kCommands) {
    if (equals_lower(name, c.name)) return &c;
  }
  return nullptr;
}

const command_spec* find_script_subcommand(std::string_view name) {
  for (const command_spec& c : kScriptSubcommands) {
    if (equals_lower(name, c.name.substr(7))) return &c;
  }
  return nullptr;
}

const command_spec* find_cluster_subcommand(std::string_view name) {
  for (const command_spec& c : kClusterSubcommands) {
    if (equals_lower(name, c.name.substr(8))) return &c;
  }
  return nullptr;
}

// Commands that write (Redis' CMD_WRITE), and the scripts, which may.
bool writes(cmd id) {
  switch (id) {
    case cmd::set:
    case cmd::del:
    case cmd::pexpire:
    case cmd::incr:
    case cmd::flushall:
    case cmd::flushdb:
    case cmd::lpush:
    case cmd::rpush:
    case cmd::eval:
    case cmd::evalsha:
      return true;
    default:
      return false;
  }
}

// The keys of a request (Redis' key specs for the commands the node has): up to
// `max` of them into `out`; returns how many.
std::size_t keys_of(cmd id, const std::string_view* a, std::size_t argc, std::vector<std::string_view>& out) {
  out.clear();
  switch (id) {
    case cmd::get:
    case cmd::set:
    case cmd::type:
    case cmd::pttl:
    case cmd::pexpire:
    case cmd::incr:
    case cmd::lpush:
    case cmd::rpush:
    case cmd::llen:
    case cmd::lrange:
      out.push_back(a[1]);
      break;
    case cmd::del:
    case cmd::exists:
      for (std::size_t j = 1; j < argc; ++j) out.push_back(a[j]);
      break;
    case cmd::eval:
    case cmd::evalsha: {
      long long nk = 0;
      if (!string2ll(a[2], nk) || nk < 0 || nk > static_cast<long long>(argc - 3)) break;
      for (std::size_t j = 0; j < static_cast<std::size_t>(nk); ++j) out.push_back(a[3 + j]);
      break;
    }
    default:
      break;
  }
  return out.size();
}

bool same_entry(const node::entry& x, const node::entry& y) {
  return x.type == y.type && x.expire_ms == y.expire_ms && x.str == y.str && x.list == y.list;
}

const char kReadOnly[] = "READONLY You can't write against a read only replica.";

const command_spec* spec_of(cmd id) {
  for (const command_spec& c : kCommands) {
    if (c.id == id) return &c;
  }
  for (const command_spec& c : kClusterSubcommands) {
    if (c.id == id) return &c;
  }
  for (const command_spec& c : kScriptSubcommands) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------
// The scripts the simulator knows. Each body's SHA-1 is pinned here: a script
// edited in lib/scripts.h or fencing.h no longer matches and is refused (tests
// fail loudly) until its twin below is updated with it.

enum class script_id : std::uint8_t {
  acquire,
  acquire_fenced,
  fence_commit,
  extend,
  release,
  inspect,
  fenced_write,
  fenced_read,
  fenced_cas,
  acquire_many,
  extend_many,
  release_many,
  release_quiet,
  release_many_quiet,
  count
};

struct known_script {
  script_id id;
  std::string_view body;
  std::string_view pinned_sha;
};

constexpr known_script kKnownScripts[] = {
    {script_id::acquire, detail::kAcquire, "2fb25dbccc67a6e8d5acba647f434430ddd9ff4f"},
    {script_id::acquire_fenced, detail::kAcquireFenced, "4d35cf7d34b2ff46b1c7628082df196c88168338"},
    {script_id::fence_commit, detail::kFenceCommit, "54892506457a538485c5311e0d1ef619c1883298"},
    {script_id::extend, detail::kExtend, "3a32323a05c08607e6bc7842cfeea9552d0b61f5"},
    {script_id::release, detail::kRelease, "4b54351cbac3734d94de56a92bcd5cef0b956183"},
    {script_id::inspect, detail::kInspect, "21e37b3a4237d9a2cae56a4fa1a747c421a0dcff"},
    {script_id::fenced_write, redlock::fenced_write_script, "f28b7d96ed38652a20d3c2bf051a691ee7c9593b"},
    {script_id::fenced_read, redlock::fenced_read_script, "8f49c3a5093e09cc78141f74a6b1e888ea8fa596"},
    {script_id::fenced_cas, redlock::fenced_compare_and_set_script,
     "c344db41c4c1ddbfe708bee09c5e7ffc6619f9c2"},
    {script_id::acquire_many, detail::kAcquireMany, "013ecbe290ea4d05bf1badddfb787997542a975f"},
    {script_id::extend_many, detail::kExtendMany, "9d0f048c74a7982b8f76c183975ef78cf8e24bf8"},
    {script_id::release_many, detail::kReleaseMany, "5f376d293183f49a33e18edd39b7679c0b5ff889"},
    {script_id::release_quiet, detail::kReleaseQuiet, "c89cee65b7ab260d98c281f3c3eb6fa7c992cdd2"},
    {script_id::release_many_quiet, detail::kReleaseManyQuiet, "42191ca471fda62e886b2ad2f21f413ab86685c7"},
};

// Whether each pinned SHA-1 is still the SHA-1 of its body.
const std::array<bool, static_cast<std::size_t>(script_id::count)>& script_enabled() {
  static const auto enabled = [] {
    std::array<bool, static_cast<std::size_t>(script_id::count)> e{};
    for (const known_script& k : kKnownScripts)
      e[static_cast<std::size_t>(k.id)] = detail::sha1_hex(k.body) == k.pinned_sha;
    return e;
  }();
  return enabled;
}

const known_script* script_by_body(std::string_view body) {
  for (const known_script& k : kKnownScripts) {
    if (k.body.size() == body.size() && k.body == body && script_enabled()[static_cast<std::size_t>(k.id)])
      return &k;
  }
  return nullptr;
}

// `sha` is 40 bytes; compared without case, as Redis does.
const known_script* script_by_sha(std::string_view sha) {
  for (const known_script& k : kKnownScripts) {
    if (equals_lower(sha, k.pinned_sha) && script_enabled()[static_cast<std::size_t>(k.id)]) return &k;
  }
  return nullptr;
}

std::string unsupported_script(std::string_view body) {
  return "ERR redlock::sim does not support this script (sha1 " + detail::sha1_hex(body) +
         "): it runs only the scripts of lib/scripts.h and redlock/fencing.h";
}

// Inline requests: Redis' sdssplitargs (quotes, escapes). False on unbalanced quotes.
bool split_inline(std::string_view line, std::vector<std::string>& out, std::size_t& argc) {
  auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  // A C string: it ends at a NUL (the caller found none before the newline).
  auto at = [&](std::size_t i) -> char { return i < line.size() ? line[i] : '\0'; };
  argc = 0;
  std::size_t p = 0;
  for (;;) {
    while (at(p) != '\0' && is_space(at(p))) ++p;
    if (at(p) == '\0') return true;
    if (out.size() <= argc) out.emplace_back();
    std::string& cur = out[argc];
    cur.clear();
    bool in_dq = false;
    bool in_sq = false;
    bool done = false;
    while (!done) {
      const char c = at(p);
      if (in_dq) {
        if (c == '\\' && at(p + 1) == 'x' && hex(at(p + 2)) >= 0 && hex(at(p + 3)) >= 0) {
          cur.push_back(static_cast<char>(hex(at(p + 2)) * 16 + hex(at(p + 3))));
          p += 3;
        } else if (c == '\\' && at(p + 1) != '\0') {
          ++p;
          switch (at(p)) {
            case 'n':
              cur.push_back('\n');
              break;
            case 'r':
              cur.push_back('\r');
              break;
            case 't':
              cur.push_back('\t');
              break;
            case 'b':
              cur.push_back('\b');
              break;
            case 'a':
              cur.push_back('\a');
              break;
            default:
              cur.push_back(at(p));
              break;
          }
        } else if (c == '"') {
          if (at(p + 1) != '\0' && !is_space(at(p + 1))) return false;
          done = true;
        } else if (c == '\0') {
          return false;
        } else {
          cur.push_back(c);
        }
      } else if (in_sq) {
        if (c == '\\' && at(p + 1) == '\'') {
          ++p;
          cur.push_back('\'');
        } else if (c == '\'') {
          if (at(p + 1) != '\0' && !is_space(at(p + 1))) return false;
          done = true;
        } else if (c == '\0') {
          return false;
        } else {
          cur.push_back(c);
        }
      } else {
        switch (c) {
          case ' ':
          case '\n':
          case '\r':
          case '\t':
          case '\0':
            done = true;
            break;
          case '"':
            in_dq = true;
            break;
          case '\'':
            in_sq = true;
            break;
          default:
            cur.push_back(c);
            break;
        }
      }
      if (at(p) != '\0') ++p;
    }
    ++argc;
  }
}

// The first '\r' (or `what`) at or after `from`, as strchr finds it: a NUL byte
// first ends the search (npos).
std::size_t find_before_nul(std::string_view buf, std::size_t from, char what) {
  for (std::size_t i = from; i < buf.size(); ++i) {
    if (buf[i] == what) return i;
    if (buf[i] == '\0') return std::string_view::npos;
  }
  return std::string_view::npos;
}

}  // namespace

// ---------------------------------------------------------------------------------
// One command's execution.

struct node::exec {
  node& n;
  session& s;
  database& db;
  std::int64_t now_us;
  std::int64_t now_ms;
  std::string& out;

  exec(node& owner, session& sess, std::int64_t now, std::string& o)
      : n(owner),
        s(sess),
        db(owner.dbs_[static_cast<std::size_t>(sess.db_)]),
        now_us(now),
        now_ms(now / 1000),
        out(o) {}

  bool expired(const entry& e) const { return e.expire_ms != kNoExpiry && now_ms > e.expire_ms; }

  // lookupKey: the key's entry, or null; an expired key is removed first.
  entry* lookup(std::string_view key) {
    n.key_.assign(key.data(), key.size());
    auto it = db.find(n.key_);
    if (it == db.end()) return nullptr;
    if (expired(it->second)) {
      db.erase(it);
      return nullptr;
    }
    return &it->second;
  }

  // The entry for a write (created empty if absent, after removing an expired one).
  entry& create(std::string_view key) {
    n.key_.assign(key.data(), key.size());
    return db[n.key_];
  }

  bool remove(std::string_view key) {
    n.key_.assign(key.data(), key.size());
    return db.erase(n.key_) != 0;
  }

  void dispatch(cmd id, const std::string_view* a, std::size_t argc);

  void get(const std::string_view* a);
  void set(const std::string_view* a, std::size_t argc);
  void del(const std::string_view* a, std::size_t argc);
  void exists(const std::string_view* a, std::size_t argc);
  void type(const std::string_view* a);
  void pttl(const std::string_view* a);
  void pexpire(const std::string_view* a, std::size_t argc);
  void incr(const std::string_view* a);
  void keys(const std::string_view* a);
  void flush(const std::string_view* a, std::size_t argc, bool all);
  void select(const std::string_view* a);
  void auth(const std::string_view* a, std::size_t argc);
  void info(const std::string_view* a, std::size_t argc);
  void eval(const std::string_view* a, std::size_t argc, bool by_sha);
  void script_exists(const std::string_view* a, std::size_t argc);
  void push(const std::string_view* a, std::size_t argc, bool left);
  void llen(const std::string_view* a);
  void lrange(const std::string_view* a);
  void wait(const std::string_view* a);
  void cluster_shards();
};

void node::exec::dispatch(cmd id, const std::string_view* a, std::size_t argc) {
  ++n.calls_[static_cast<std::size_t>(id)];
  switch (id) {
    case cmd::get:
      return get(a);
    case cmd::set:
      return set(a, argc);
    case cmd::del:
      return del(a, argc);
    case cmd::exists:
      return exists(a, argc);
    case cmd::type:
      return type(a);
    case cmd::pttl:
      return pttl(a);
    case cmd::pexpire:
      return pexpire(a, argc);
    case cmd::incr:
      return incr(a);
    case cmd::keys:
      return keys(a);
    case cmd::dbsize:
      return reply_int(out, static_cast<long long>(db.size()));
    case cmd::flushall:
      return flush(a, argc, true);
    case cmd::flushdb:
      return flush(a, argc, false);
    case cmd::select:
      return select(a);
    case cmd::auth:
      return auth(a, argc);
    case cmd::ping:
      if (argc > 2) return reply_error(out, "ERR wrong number of arguments for 'ping' command");
      return argc == 1 ? reply_status(out, "PONG") : reply_bulk(out, a[1]);
    case cmd::echo:
      return reply_bulk(out, a[1]);
    case cmd::info:
      return info(a, argc);
    case cmd::time:
      reply_array(out, 2);
      reply_bulk_number(out, now_us / 1000000);
      return reply_bulk_number(out, now_us % 1000000);
    case cmd::eval:
      return eval(a, argc, false);
    case cmd::evalsha:
      return eval(a, argc, true);
    case cmd::script:
      return;  // a container: never dispatched
    case cmd::script_flush:
      if (argc != 2 && !(argc == 3 && (is_option(a[2], "sync") || is_option(a[2], "async")))) {
        return reply_error(out, "ERR SCRIPT FLUSH only support SYNC|ASYNC option");
      }
      n.flush_scripts();
      return reply_status(out, "OK");
    case cmd::script_load: {
      const known_script* k = script_by_body(a[2]);
      if (k == nullptr) return reply_error(out, unsupported_script(a[2]));
      n.scripts_.set(static_cast<std::size_t>(k->id));
      return reply_bulk(out, k->pinned_sha);
    }
    case cmd::script_exists:
      return script_exists(a, argc);
    case cmd::script_kill:
      return reply_error(out, "NOTBUSY No scripts in execution right now.");
    case cmd::lpush:
      return push(a, argc, true);
    case cmd::rpush:
      return push(a, argc, false);
    case cmd::llen:
      return llen(a);
    case cmd::lrange:
      return lrange(a);
    case cmd::wait:
      return wait(a);
    case cmd::asking:
      if (!n.cluster_enabled()) return reply_error(out, "ERR This instance has cluster support disabled");
      return reply_status(out, "OK");
    case cmd::cluster:
      return;  // a container: never dispatched
    case cmd::cluster_shards:
      if (!n.cluster_enabled()) return reply_error(out, "ERR This instance has cluster support disabled");
      return cluster_shards();
    case cmd::cluster_myid:
      if (!n.cluster_enabled()) return reply_error(out, "ERR This instance has cluster support disabled");
      return reply_bulk(out, n.my_id_);
    case cmd::count:
      return;
  }
}

void node::exec::get(const std::string_view* a) {
  const entry* e = lookup(a[1]);
  if (e == nullptr) return reply_nil(out);
  if (e->type != kind::string) return reply_error(out, kWrongType);
  reply_bulk(out, e->str);
}

void node::exec::set(const std::string_view* a, std::size_t argc) {
  enum : unsigned { nx = 1, xx = 2, get_old = 4, keepttl = 8, ex = 16, px = 32, exat = 64, pxat = 128 };
  unsigned flags = 0;
  std::string_view expire;
  bool has_expire = false;
  // parseExtendedStringArgumentsOrReply: the same conditions, in the same order.
  for (std::size_t j = 3; j < argc; ++j) {
    const std::string_view opt = a[j];
    const bool has_next = j + 1 < argc;
    if (is_option(opt, "nx") && !(flags & xx)) {
      flags |= nx;
    } else if (is_option(opt, "xx") && !(flags & nx)) {
      flags |= xx;
    } else if (is_option(opt, "get")) {
      flags |= get_old;
    } else if (is_option(opt, "keepttl") && !(flags & (ex | exat | px | pxat))) {
      flags |= keepttl;
    } else if (is_option(opt, "ex") && !(flags & (keepttl | exat | px | pxat)) && has_next) {
      flags |= ex;
      expire = a[++j];
      has_expire = true;
    } else if (is_option(opt, "px") && !(flags & (keepttl | ex | exat | pxat)) && has_next) {
      flags |= px;
      expire = a[++j];
      has_expire = true;
    } else if (is_option(opt, "exat") && !(flags & (keepttl | ex | px | pxat)) && has_next) {
      flags |= exat;
      expire = a[++j];
      has_expire = true;
    } else if (is_option(opt, "pxat") && !(flags & (keepttl | ex | exat | px)) && has_next) {
      flags |= pxat;
      expire = a[++j];
      has_expire = true;
    } else {
      return reply_error(out, kSyntax);
    }
  }
  long long when = 0;
  if (has_expire) {
    // getExpireMillisecondsOrReply
    if (!string2ll(expire, when)) return reply_error(out, kNotInteger);
    const bool seconds = (flags & (ex | exat)) != 0;
    if (when <= 0 || (seconds && when > LLONG_MAX / 1000)) {
      return reply_error(out, "ERR invalid expire time in 'set' command");
    }
    if (seconds) when *= 1000;
    if (flags & (ex | px)) when = wrapping_add(when, now_ms);
    if (when <= 0) return reply_error(out, "ERR invalid expire time in 'set' command");
  }
  if (flags & get_old) {
    const entry* old = lookup(a[1]);
    if (old == nullptr) {
      reply_nil(out);
    } else if (old->type != kind::string) {
      return reply_error(out, kWrongType);
    } else {
      reply_bulk(out, old->str);
    }
  }
  entry* found = lookup(a[1]);
  if (((flags & nx) && found != nullptr) || ((flags & xx) && found == nullptr)) {
    if (!(flags & get_old)) reply_nil(out);
    return;
  }
  entry& e = found != nullptr ? *found : create(a[1]);
  const std::int64_t kept = e.expire_ms;
  e.type = kind::string;
  e.str.assign(a[2].data(), a[2].size());
  e.list.clear();
  e.expire_ms = (flags & keepttl) ? kept : kNoExpiry;
  if (has_expire) e.expire_ms = when;
  if (!(flags & get_old)) reply_status(out, "OK");
}

void node::exec::del(const std::string_view* a, std::size_t argc) {
  long long removed = 0;
  for (std::size_t j = 1; j < argc; ++j) {
    if (lookup(a[j]) != nullptr && remove(a[j])) ++removed;
  }
  reply_int(out, removed);
}

void node::exec::exists(const std::string_view* a, std::size_t argc) {
  long long found = 0;
  for (std::size_t j = 1; j < argc; ++j) {
    if (lookup(a[j]) != nullptr) ++found;
  }
  reply_int(out, found);
}

void node::exec::type(const std::string_view* a) {
  const entry* e = lookup(a[1]);
  reply_status(out, e == nullptr ? "none" : e->type == kind::string ? "string" : "list");
}

void node::exec::pttl(const std::string_view* a) {
  const entry* e = lookup(a[1]);
  if (e == nullptr) return reply_int(out, -2);
  if (e->expire_ms == kNoExpiry) return reply_int(out, -1);
  reply_int(out, std::max<long long>(e->expire_ms - now_ms, 0));
}

void node::exec::pexpire(const std::string_view* a, std::size_t argc) {
  enum : unsigned { nx = 1, xx = 2, gt = 4, lt = 8 };
  unsigned flags = 0;
  for (std::size_t j = 3; j < argc; ++j) {
    if (is_option(a[j], "nx")) {
      flags |= nx;
    } else if (is_option(a[j], "xx")) {
      flags |= xx;
    } else if (is_option(a[j], "gt")) {
      flags |= gt;
    } else if (is_option(a[j], "lt")) {
      flags |= lt;
    } else {
      return reply_error_format(out, "ERR Unsupported option " + std::string(c_str(a[j])));
    }
  }
  if ((flags & nx) && (flags & (xx | gt | lt))) {
    return reply_error(out, "ERR NX and XX, GT or LT options at the same time are not compatible");
  }
  if ((flags & gt) && (flags & lt)) {
    return reply_error(out, "ERR GT and LT options at the same time are not compatible");
  }
  long long when = 0;
  if (!string2ll(a[2], when)) return reply_error(out, kNotInteger);
  if (when > LLONG_MAX - now_ms) return reply_error(out, "ERR invalid expire time in 'pexpire' command");
  when += now_ms;
  entry* e = lookup(a[1]);
  if (e == nullptr) return reply_int(out, 0);
  const std::int64_t current = e->expire_ms;
  if ((flags & nx) && current != kNoExpiry) return reply_int(out, 0);
  if ((flags & xx) && current == kNoExpiry) return reply_int(out, 0);
  if ((flags & gt) && (when <= current || current == kNoExpiry)) return reply_int(out, 0);
  if ((flags & lt) && current != kNoExpiry && when >= current) return reply_int(out, 0);
  if (when <= now_ms) {  // checkAlreadyExpired: deleted now
    remove(a[1]);
  } else {
    e->expire_ms = when;
  }
  reply_int(out, 1);
}

void node::exec::incr(const std::string_view* a) {
  entry* e = lookup(a[1]);
  long long v = 0;
  if (e != nullptr) {
    if (e->type != kind::string) return reply_error(out, kWrongType);
    if (!string2ll(e->str, v)) return reply_error(out, kNotInteger);
  }
  if (v > 0 && 1 > LLONG_MAX - v) return reply_error(out, "ERR increment or decrement would overflow");
  ++v;
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  if (e == nullptr) e = &create(a[1]);
  e->str.assign(buf, r.ptr);
  reply_int(out, v);
}

void node::exec::keys(const std::string_view* a) {
  std::vector<const std::string*> found;
  const bool all = a[1] == "*";
  for (const auto& [key, e] : db) {
    if (expired(e)) continue;
    if (all || glob_match(a[1], key)) found.push_back(&key);
  }
  std::sort(found.begin(), found.end(), [](const std::string* x, const std::string* y) { return *x < *y; });
  reply_array(out, found.size());
  for (const std::string* k : found) reply_bulk(out, *k);
}

void node::exec::flush(const std::string_view* a, std::size_t argc, bool all) {
  if (argc > 2 || (argc == 2 && !is_option(a[1], "sync") && !is_option(a[1], "async"))) {
    return reply_error(out, kSyntax);
  }
  if (all) {
    for (database& d : n.dbs_) d.clear();
  } else {
    db.clear();
  }
  reply_status(out, "OK");
}

void node::exec::select(const std::string_view* a) {
  long long id = 0;
  if (!string2ll(a[1], id)) return reply_error(out, kNotInteger);
  if (id < INT_MIN || id > INT_MAX) {
    return reply_error(out, "ERR value is out of range, value must between -2147483648 and 2147483647");
  }
  if (id < 0 || id >= static_cast<long long>(n.dbs_.size()))
    return reply_error(out, "ERR DB index is out of range");
  s.db_ = static_cast<int>(id);
  reply_status(out, "OK");
}

void node::exec::auth(const std::string_view* a, std::size_t argc) {
  if (argc > 3) return reply_error(out, kSyntax);
  const node_config& c = n.cfg_;
  const bool acl_user = !c.username.empty() && c.username != "default";
  const bool default_nopass = !acl_user && c.password.empty();
  if (argc == 2 && default_nopass) {
    return reply_error(out,
                       "ERR AUTH <password> called without any password configured for the default user. "
                       "Are you sure your configuration is correct?");
  }
  const std::string_view user = argc == 2 ? std::string_view("default") : a[1];
  const std::string_view pass = argc == 2 ? a[1] : a[2];
  bool ok = false;
  if (user == "default") {
    ok = !acl_user && (default_nopass || pass == c.password);
  } else if (acl_user && user == c.username) {
    ok = c.password.empty() || pass == c.password;
  }
  if (!ok) return reply_error(out, "WRONGPASS invalid username-password pair or user is disabled.");
  s.authenticated_ = true;
  reply_status(out, "OK");
}

void node::exec::info(const std::string_view* a, std::size_t argc) {
  bool server = argc == 1;
  bool memory = argc == 1;
  bool keyspace = argc == 1;
  // Only when asked by name: the bare INFO the diff test pins has three sections.
  bool replication = false;
  for (std::size_t j = 1; j < argc; ++j) {
    if (equals_lower(a[j], "replication")) {
      replication = true;
    } else if (equals_lower(a[j], "server")) {
      server = true;
    } else if (equals_lower(a[j], "memory")) {
      memory = true;
    } else if (equals_lower(a[j], "keyspace")) {
      keyspace = true;
    } else if (equals_lower(a[j], "default") || equals_lower(a[j], "all") ||
               equals_lower(a[j], "everything")) {
      server = memory = keyspace = true;
    }
  }
  std::string text;
  if (server) {
    const std::int64_t uptime = now_us / 1000000 - n.start_us_ / 1000000;
    std::uint64_t pid_state = n.seed_;
    const std::uint64_t pid = 1000 + splitmix64(pid_state) % 60000 + n.restarts_;
    text +=
        "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n"
        "redis_build_id:0000000000000000\r\nredis_mode:";
    text += n.cluster_enabled() ? "cluster" : "standalone";
    text +=
        "\r\nos:Linux redlock-sim x86_64\r\n"
        "arch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\n"
        "atomicvar_api:c11-builtin\r\ngcc_version:12.2.0\r\nprocess_id:";
    text += std::to_string(pid);
    text += "\r\nprocess_supervised:no\r\nrun_id:";
    text += n.run_id_;
    text += "\r\ntcp_port:";
    text += std::to_string(n.cfg_.tcp_port);
    text += "\r\nserver_time_usec:";
    text += std::to_string(now_us);
    text += "\r\nuptime_in_seconds:";
    text += std::to_string(uptime);
    text += "\r\nuptime_in_days:";
    text += std::to_string(uptime / 86400);
    text += "\r\nhz:10\r\nconfigured_hz:10\r\nlru_clock:";
    text += std::to_string((now_ms / 1000) & ((1 << 24) - 1));
    text += "\r\nexecutable:/usr/bin/redis-server\r\nconfig_file:\r\nio_threads_active:0\r\n";
  }
  if (memory) {
    // Only the fields the library reads, in the real section's order (Redis
    // orders sections itself, whatever the order asked in).
    if (server) text += "\r\n";
    text += "# Memory\r\nmaxmemory:0\r\nmaxmemory_human:0B\r\nmaxmemory_policy:";
    text += n.cfg_.maxmemory_policy;
    text += "\r\n";
  }
  if (replication) {
    if (server || memory) text += "\r\n";
    text += "# Replication\r\n";
    if (n.replica()) {
      text += "role:slave\r\nmaster_host:" + n.master_host_ + "\r\nmaster_port:" + std::to_string(n.master_port_) +
              "\r\nmaster_link_status:up\r\nmaster_last_io_seconds_ago:0\r\nmaster_sync_in_progress:0\r\n"
              "slave_read_repl_offset:" + std::to_string(n.repl_offset_) + "\r\nslave_repl_offset:" +
              std::to_string(n.repl_offset_) + "\r\nslave_priority:100\r\nslave_read_only:1\r\n"
              "replica_announced:1\r\nconnected_slaves:0\r\n";
    } else {
      text += "role:master\r\nconnected_slaves:" + std::to_string(n.replicas_.size()) + "\r\n";
      for (std::size_t i = 0; i < n.replicas_.size(); ++i) {
        const auto& r = n.replicas_[i];
        text += "slave" + std::to_string(i) + ":ip=" + r.host + ",port=" + std::to_string(r.port) +
                ",state=online,offset=" + std::to_string(r.acked) + ",lag=0\r\n";
      }
    }
    text += "master_failover_state:no-failover\r\nmaster_repl_offset:" + std::to_string(n.repl_offset_) +
            "\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:1\r\n";
  }
  if (keyspace) {
    if (server || memory || replication) text += "\r\n";
    text += "# Keyspace\r\n";
    for (std::size_t i = 0; i < n.dbs_.size(); ++i) {
      const database& d = n.dbs_[i];
      if (d.empty()) continue;
      const auto expires =
          std::count_if(d.begin(), d.end(), [](const auto& kv) { return kv.second.expire_ms != kNoExpiry; });
      text += "db" + std::to_string(i) + ":keys=" + std::to_string(d.size()) +
              ",expires=" + std::to_string(expires) + ",avg_ttl=0\r\n";
    }
  }
  reply_bulk(out, text);
}

void node::exec::wait(const std::string_view* a) {
  if (n.replica()) {
    return reply_error(out,
                       "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a "
                       "replica is configured to be writable (which is not the default) writes to replicas are just "
                       "local and are not propagated.");
  }
  long long want = 0, timeout = 0;
  if (!string2ll(a[1], want)) return reply_error(out, kNotInteger);
  if (!string2ll(a[2], timeout)) return reply_error(out, "ERR timeout is not an integer or out of range");
  if (timeout < 0) return reply_error(out, "ERR timeout is negative");
  const long long have = n.acked(s.woff_);
  if (have >= want) return reply_int(out, have);
  s.blocked_ = true;
  s.wait_replicas_ = want;
  s.wait_offset_ = s.woff_;
  s.wait_deadline_us_ = timeout > 0 ? now_us + timeout * 1000 : -1;
}

void node::exec::cluster_shards() {
  reply_array(out, n.shards_.size());
  for (const cluster_shard& sh : n.shards_) {
    reply_array(out, 4);
    reply_bulk(out, "slots");
    reply_array(out, 2 * sh.slots.size());
    for (const auto& [lo, hi] : sh.slots) {
      reply_int(out, lo);
      reply_int(out, hi);
    }
    reply_bulk(out, "nodes");
    reply_array(out, sh.members.size());
    for (const cluster_member& m : sh.members) {
      const bool me = m.id == n.my_id_;
      reply_array(out, 14);
      reply_bulk(out, "id");
      reply_bulk(out, m.id);
      reply_bulk(out, "port");
      reply_int(out, m.port);
      reply_bulk(out, "ip");
      reply_bulk(out, m.host);
      reply_bulk(out, "endpoint");
      reply_bulk(out, m.host);
      reply_bulk(out, "role");
      reply_bulk(out, m.master ? "master" : "replica");
      reply_bulk(out, "replication-offset");
      reply_int(out, me ? static_cast<long long>(n.repl_offset_) : 0);
      reply_bulk(out, "health");
      reply_bulk(out, m.failed ? "failed" : "online");
    }
  }
}

void node::exec::script_exists(const std::string_view* a, std::size_t argc) {
  reply_array(out, argc - 2);
  for (std::size_t j = 2; j < argc; ++j) {
    const known_script* k = a[j].size() == 40 ? script_by_sha(a[j]) : nullptr;
    reply_int(out, k != nullptr && n.scripts_.test(static_cast<std::size_t>(k->id)) ? 1 : 0);
  }
}

void node::exec::push(const std::string_view* a, std::size_t argc, bool left) {
  entry* e = lookup(a[1]);
  if (e != nullptr && e->type != kind::list) return reply_error(out, kWrongType);
  if (e == nullptr) {
    e = &create(a[1]);
    e->type = kind::list;
  }
  for (std::size_t j = 2; j < argc; ++j) {
    if (left) {
      e->list.emplace(e->list.begin(), a[j]);
    } else {
      e->list.emplace_back(a[j]);
    }
  }
  reply_int(out, static_cast<long long>(e->list.size()));
}

void node::exec::llen(const std::string_view* a) {
  const entry* e = lookup(a[1]);
  if (e == nullptr) return reply_int(out, 0);
  if (e->type != kind::list) return reply_error(out, kWrongType);
  reply_int(out, static_cast<long long>(e->list.size()));
}

void node::exec::lrange(const std::string_view* a) {
  long long start = 0;
  long long stop = 0;
  if (!string2ll(a[2], start) || !string2ll(a[3], stop)) return reply_error(out, kNotInteger);
  const entry* e = lookup(a[1]);
  if (e == nullptr) return reply_array(out, 0);
  if (e->type != kind::list) return reply_error(out, kWrongType);
  const auto len = static_cast<long long>(e->list.size());
  if (start < 0) start += len;
  if (stop < 0) stop += len;
  if (start < 0) start = 0;
  if (start > stop || start >= len) return reply_array(out, 0);
  if (stop >= len) stop = len - 1;
  reply_array(out, static_cast<std::size_t>(stop - start + 1));
  for (long long i = start; i <= stop; ++i) reply_bulk(out, e->list[static_cast<std::size_t>(i)]);
}

// ---------------------------------------------------------------------------------
// Scripts: the native twin of each known body, line by line. A redis.call() runs
// the command's own implementation above (so a script sees exactly what a client
// sees) and turns its reply into a Lua value; an error reply from it, or a Lua
// runtime error, ends the script with Redis' error format.

struct node::script_run {
  exec& x;
  const known_script& script;
  const std::string_view* keys;
  std::size_t num_keys;
  const std::string_view* args;
  std::size_t num_args;

  // KEYS[i] and ARGV[i] (1-based); nullopt is Lua's nil.
  std::optional<std::string_view> key(std::size_t i) const {
    return i <= num_keys ? std::optional<std::string_view>(keys[i - 1]) : std::nullopt;
  }
  std::optional<std::string_view> arg(std::size_t i) const {
    return i <= num_args ? std::optional<std::string_view>(args[i - 1]) : std::nullopt;
  }

  // A redis.call() result as Lua sees it.
  struct value {
    char type = 0;     // '+' status table, ':' number, '$' string, '0' false (nil reply)
    std::string text;  // status or string
    long long number = 0;
    bool is_string() const { return type == '$'; }
    bool truthy() const { return type != '0'; }
    // Lua's `value == s` with value a call result and s a string or nil.
    bool equals(std::optional<std::string_view> s) const { return is_string() && s && text == *s; }
  };

  void fail(int line, std::string_view error) {
    std::string msg(error);
    msg += " script: ";
    msg += script.pinned_sha;
    msg += ", on @user_script:";
    msg += std::to_string(line);
    msg += '.';
    reply_error(x.out, msg);
  }
  void lua_error(int line, std::string_view what) {
    fail(line, "ERR user_script:" + std::to_string(line) + ": " + std::string(what));
  }
  // redis.error_reply(msg)
  void error_reply(std::string_view msg) { reply_error(x.out, msg); }

  // redis.call(name, args...) on line `line`. False (the script's error reply
  // written) if it raised an error.
  bool call(int line, cmd id, std::initializer_list<std::optional<std::string_view>> call_args, value& v) {
    std::string_view argv[8];
    std::size_t argc = 0;
    argv[argc++] = spec_of(id)->name;
    for (const auto& a : call_args) {
      if (!a) {
        fail(line, "ERR Lua redis lib command arguments must be strings or integers");
        return false;
      }
      argv[argc++] = *a;
    }
    std::string& reply = x.n.scratch_;
    reply.clear();
    if (x.n.replica() && writes(id)) {
      fail(line, kReadOnly);
      return false;
    }
    exec sub(x.n, x.s, x.now_us, reply);
    sub.dispatch(id, argv, argc);
    switch (reply[0]) {
      case '-':
        fail(line, std::string_view(reply).substr(1, reply.size() - 3));
        return false;
      case '+':
        v.type = '+';
        v.text.assign(reply, 1, reply.size() - 3);
        return true;
      case ':':
        v.type = ':';
        v.number = std::strtoll(reply.c_str() + 1, nullptr, 10);
        return true;
      default:
        if (reply.compare(0, 3, "$-1") == 0) {
          v.type = '0';
          v.text.clear();
        } else {
          const std::size_t nl = reply.find('\r');
          v.type = '$';
          v.text.assign(reply, nl + 2, reply.size() - nl - 4);
        }
        return true;
    }
  }

  void reply_pair(long long first, std::string_view second) {
    reply_array(x.out, 2);
    reply_int(x.out, first);
    reply_bulk(x.out, second);
  }

  void run() {
    switch (script.id) {
      case script_id::acquire:
        return acquire(false);
      case script_id::acquire_fenced:
        return acquire(true);
      case script_id::fence_commit:
        return fence_commit();
      case script_id::extend:
        return owner_then(cmd::pexpire);
      case script_id::release:
      case script_id::release_quiet:
        return owner_then(cmd::del);
      case script_id::inspect:
        return inspect();
      case script_id::fenced_write:
      case script_id::fenced_read:
      case script_id::fenced_cas:
        return fenced();
      case script_id::acquire_many:
        return acquire_many();
      case script_id::extend_many:
        return extend_many();
      case script_id::release_many:
      case script_id::release_many_quiet:
        return release_many();
      case script_id::count:
        return;
    }
  }

  // kAcquire / kAcquireFenced
  void acquire(bool fenced_counter) {
    value v;
    if (!call(1, cmd::set, {key(1), arg(1), "NX", "PX", arg(2)}, v)) return;
    if (v.truthy()) {
      if (!fenced_counter) return reply_pair(1, "0");
      if (!call(2, cmd::get, {key(2)}, v)) return;
      return reply_pair(1, v.is_string() ? std::string_view(v.text) : "0");
    }
    if (!call(fenced_counter ? 4 : 2, cmd::type, {key(1)}, v)) return;
    if (v.text != "string") return error_reply("WRONGTYPE lock key holds a non-string value");
    reply_pair(0, "0");
  }

  // kAcquireMany: the first existing key decides; none: SET every key.
  void acquire_many() {
    value v;
    for (std::size_t i = 1; i <= num_keys; ++i) {
      if (!call(2, cmd::type, {key(i)}, v)) return;
      if (v.text == "string") {
        reply_array(x.out, 2);
        reply_int(x.out, 0);
        return reply_int(x.out, static_cast<long long>(i));
      }
      if (v.text != "none") return error_reply("WRONGTYPE lock key holds a non-string value");
    }
    for (std::size_t i = 1; i <= num_keys; ++i) {
      if (!call(7, cmd::set, {key(i), arg(1), "PX", arg(2)}, v)) return;
    }
    reply_pair(1, "0");
  }

  // kExtendMany: every key must hold the token, then PEXPIRE each.
  void extend_many() {
    value v;
    for (std::size_t i = 1; i <= num_keys; ++i) {
      if (!call(2, cmd::get, {key(i)}, v)) return;
      if (!v.equals(arg(1))) return reply_int(x.out, 0);
    }
    for (std::size_t i = 1; i <= num_keys; ++i) {
      if (!call(5, cmd::pexpire, {key(i), arg(2)}, v)) return;
    }
    reply_int(x.out, 1);
  }

  // kReleaseMany / kReleaseManyQuiet: DEL each string key holding the token (the
  // PUBLISH, line 5, reaches no subscriber here, as for kRelease below).
  void release_many() {
    long long deleted = 0;
    value v;
    for (std::size_t i = 1; i <= num_keys; ++i) {
      if (!call(3, cmd::type, {key(i)}, v)) return;
      if (v.text != "string") continue;
      if (!call(3, cmd::get, {key(i)}, v)) return;
      if (!v.equals(arg(1))) continue;
      if (!call(4, cmd::del, {key(i)}, v)) return;
      deleted += v.number;
    }
    reply_int(x.out, deleted > 0 ? 1 : 0);
  }

  // kFenceCommit
  void fence_commit() {
    value v;
    if (!call(1, cmd::get, {key(1)}, v)) return;
    if (!v.equals(arg(1))) return reply_int(x.out, 0);
    if (!call(2, cmd::get, {key(2)}, v)) return;
    const std::optional<double> cur = lua_tonumber(v.is_string() ? v.text : std::string("0"));
    bool raise = !cur;
    if (cur) {
      const std::optional<double> f = arg(2) ? lua_tonumber(std::string(*arg(2))) : std::nullopt;
      if (!f) return lua_error(3, "attempt to compare number with nil");
      raise = *cur < *f;
    }
    if (raise && !call(3, cmd::set, {key(2), arg(2)}, v)) return;
    reply_int(x.out, 1);
  }

  // kExtend (PEXPIRE) and kRelease (DEL): line 2 only for the owner. The release's
  // PUBLISH (line 3, redis.pcall: never an error) reaches no subscriber here: the
  // simulator refuses SUBSCRIBE, and waiters fall back to their timers.
  void owner_then(cmd action) {
    value v;
    if (!call(1, cmd::get, {key(1)}, v)) return;
    if (!v.equals(arg(1))) return reply_int(x.out, 0);
    if (action == cmd::pexpire) {
      if (!call(2, cmd::pexpire, {key(1), arg(2)}, v)) return;
    } else if (!call(2, cmd::del, {key(1)}, v)) {
      return;
    }
    reply_int(x.out, v.number);
  }

  // kInspect
  void inspect() {
    value t;
    if (!call(1, cmd::type, {key(1)}, t)) return;
    if (t.text != "string" && t.text != "none")
      return error_reply("WRONGTYPE lock key holds a non-string value");
    value got;
    value ttl;
    if (!call(5, cmd::get, {key(1)}, got) || !call(5, cmd::pttl, {key(1)}, ttl)) return;
    reply_array(x.out, 2);
    if (got.is_string()) {
      reply_bulk(x.out, got.text);
    } else {
      reply_nil(x.out);
    }
    reply_int(x.out, ttl.number);
  }

  // fenced_write_script, fenced_read_script, fenced_compare_and_set_script.
  void fenced() {
    const script_id id = script.id;
    if (id == script_id::fenced_write && (num_keys < 2 || num_args < 2)) {
      return error_reply("ERR fenced write: needs KEYS resource, seen and ARGV token, value");
    }
    if (id == script_id::fenced_read && (num_keys < 2 || num_args < 1)) {
      return error_reply("ERR fenced read: needs KEYS resource, seen and ARGV token");
    }
    if (id == script_id::fenced_cas && (num_keys < 2 || num_args < 2 || num_args > 3)) {
      return error_reply(
          "ERR fenced compare-and-set: needs KEYS resource, seen and ARGV token, value and optionally the "
          "expected value");
    }
    // REDLOCK_FENCING_CHECK_TOKEN_ (lines 4-20)
    const std::string_view tok_text = *arg(1);
    const bool digits = !tok_text.empty() && std::all_of(tok_text.begin(), tok_text.end(),
                                                         [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) return error_reply("ERR fencing token is not a number (decimal digits expected)");
    const double tok = *lua_tonumber(std::string(tok_text));
    if (tok >= 9007199254740992.0)
      return error_reply("ERR fencing token is not below 2^53 (Lua compares it inexactly)");
    value v;
    if (!call(12, cmd::get, {key(2)}, v)) return;
    double seen = 0;
    if (v.is_string()) {
      const std::optional<double> s = lua_tonumber(v.text);
      if (!s) return error_reply("ERR the highest-seen key does not hold a fencing token");
      seen = *s;
    }
    if (id == script_id::fenced_write) {
      if (tok < seen) return reply_int(x.out, 0);
      if (tok > seen && !call(22, cmd::set, {key(2), arg(1)}, v)) return;
      if (!call(23, cmd::set, {key(1), arg(2)}, v)) return;
      return reply_int(x.out, 1);
    }
    if (id == script_id::fenced_read) {
      if (tok < seen) {
        reply_array(x.out, 2);
        reply_int(x.out, 0);
        return reply_nil(x.out);
      }
      value current;
      if (!call(22, cmd::get, {key(1)}, current)) return;
      if (tok > seen && !call(23, cmd::set, {key(2), arg(1)}, v)) return;
      reply_array(x.out, 2);
      reply_int(x.out, 1);
      return current.is_string() ? reply_bulk(x.out, current.text) : reply_nil(x.out);
    }
    // compare-and-set
    if (tok < seen) return reply_int(x.out, 0);
    value current;
    if (!call(22, cmd::get, {key(1)}, current)) return;
    if (num_args == 3 ? !current.equals(arg(3)) : current.truthy()) return reply_int(x.out, -1);
    if (tok > seen && !call(28, cmd::set, {key(2), arg(1)}, v)) return;
    if (!call(29, cmd::set, {key(1), arg(2)}, v)) return;
    reply_int(x.out, 1);
  }
};

void node::exec::eval(const std::string_view* a, std::size_t argc, bool by_sha) {
  if (by_sha && a[1].size() != 40) return reply_error(out, kNoScript);
  long long num_keys = 0;
  if (!string2ll(a[2], num_keys)) return reply_error(out, kNotInteger);
  if (num_keys > static_cast<long long>(argc - 3)) {
    return reply_error(out, "ERR Number of keys can't be greater than number of args");
  }
  if (num_keys < 0) return reply_error(out, "ERR Number of keys can't be negative");
  const known_script* k = nullptr;
  if (by_sha) {
    k = script_by_sha(a[1]);
    if (k == nullptr || !n.scripts_.test(static_cast<std::size_t>(k->id))) return reply_error(out, kNoScript);
  } else {
    k = script_by_body(a[1]);
    if (k == nullptr) return reply_error(out, unsupported_script(a[1]));
    n.scripts_.set(static_cast<std::size_t>(k->id));
  }
  const auto nk = static_cast<std::size_t>(num_keys);
  script_run r{*this, *k, a + 3, nk, a + 3 + nk, argc - 3 - nk};
  r.run();
}

// ---------------------------------------------------------------------------------
// The node.

node::node(node_config cfg, std::uint64_t run_id_seed, std::int64_t now_us)
    : cfg_(std::move(cfg)),
      seed_(run_id_seed),
      life_(std::make_shared<const int>(0)),
      start_us_(now_us),
      calls_(static_cast<std::size_t>(cmd::count), 0) {
  if (cfg_.username == "default") cfg_.username.clear();
  new_run_id();
}

node::~node() = default;

void node::new_run_id() {
  std::uint64_t state = seed_ ^ (restarts_ * 0xD1B54A32D192ED03ull);
  static const char hex[] = "0123456789abcdef";
  run_id_.assign(40, '0');
  std::uint64_t bits = 0;
  for (std::size_t i = 0; i < 40; ++i) {
    if (i % 16 == 0) bits = splitmix64(state);
    run_id_[i] = hex[bits & 15];
    bits >>= 4;
  }
}

bool node::owns(const session& s) const noexcept {
  return !s.closed_ && !s.life_.owner_before(life_) && !life_.owner_before(s.life_);
}

std::unique_ptr<node::session> node::open_session() const {
  const bool open = cfg_.username.empty() && cfg_.password.empty();
  return std::unique_ptr<session>(new session(life_, open));
}

void node::restart(std::int64_t now_us) {
  life_ = std::make_shared<const int>(0);
  ++restarts_;
  start_us_ = now_us;
  if (cfg_.persist == persistence::none) {
    for (database& d : dbs_) d.clear();
  } else if (cfg_.loading_us > 0) {
    loading_until_us_ = now_us + cfg_.loading_us;
  }
  scripts_.reset();
  new_run_id();
}

void node::flush_scripts() noexcept { scripts_.reset(); }

void node::expire_all(std::int64_t now_us) {
  const std::int64_t now_ms = now_us / 1000;
  for (database& d : dbs_) {
    for (auto it = d.begin(); it != d.end();) {
      if (it->second.expire_ms != kNoExpiry && now_ms > it->second.expire_ms) {
        it = d.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void node::inject_error(std::string command, std::string error_line) {
  for (char& c : command) c = ascii_upper(c);
  if (!error_line.empty() && error_line[0] == '-') error_line.erase(0, 1);
  if (error_line.empty()) {
    injected_.erase(command);
  } else {
    injected_[command] = std::move(error_line);
  }
}

std::uint64_t node::calls(std::string_view command) const {
  for (std::size_t i = 0; i < static_cast<std::size_t>(cmd::count); ++i) {
    const command_spec* spec = spec_of(static_cast<cmd>(i));
    if (spec != nullptr && equals_lower(command, spec->name)) return calls_[i];
  }
  return 0;
}

std::optional<std::string> node::get(const std::string& key, std::int64_t now_us, int db) const {
  const database& d = dbs_.at(static_cast<std::size_t>(db));
  const auto it = d.find(key);
  if (it == d.end() || it->second.type != kind::string) return std::nullopt;
  const std::int64_t when = it->second.expire_ms;
  if (when != kNoExpiry && now_us / 1000 > when) return std::nullopt;
  return it->second.str;
}

std::int64_t node::pttl(const std::string& key, std::int64_t now_us, int db) const {
  const database& d = dbs_.at(static_cast<std::size_t>(db));
  const auto it = d.find(key);
  if (it == d.end()) return -2;
  const std::int64_t when = it->second.expire_ms;
  if (when == kNoExpiry) return -1;
  if (now_us / 1000 > when) return -2;
  return when - now_us / 1000;
}

void node::set(const std::string& key, std::string value, std::optional<std::int64_t> px_ms,
               std::int64_t now_us, int db) {
  entry& e = dbs_.at(static_cast<std::size_t>(db))[key];
  e.type = kind::string;
  e.str = std::move(value);
  e.list.clear();
  e.expire_ms = px_ms ? now_us / 1000 + *px_ms : kNoExpiry;
}

bool node::del(const std::string& key, int db) {
  return dbs_.at(static_cast<std::size_t>(db)).erase(key) != 0;
}

std::vector<std::string> node::keys(std::int64_t now_us, int db) const {
  std::vector<std::string> out;
  for (const auto& [key, e] : dbs_.at(static_cast<std::size_t>(db))) {
    if (e.expire_ms == kNoExpiry || now_us / 1000 <= e.expire_ms) out.push_back(key);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One request from buf[pos...] into argv_ (processMultibulkBuffer /
// processInlineBuffer). On `command` and `empty`, pos moves past it.
node::parsed node::parse(session& s, std::string_view buf, std::size_t& pos, std::string& error) {
  argv_.clear();
  if (buf[pos] != '*') {
    const std::size_t nl = find_before_nul(buf, pos, '\n');
    if (nl == std::string_view::npos) {
      if (buf.size() - pos > kInlineMax) {
        error = "Protocol error: too big inline request";
        return parsed::error;
      }
      return parsed::need_more;
    }
    std::size_t end = nl;
    if (end != pos && buf[end - 1] == '\r') --end;
    std::size_t argc = 0;
    if (!split_inline(buf.substr(pos, end - pos), inline_args_, argc)) {
      error = "Protocol error: unbalanced quotes in request";
      return parsed::error;
    }
    pos = nl + 1;
    for (std::size_t i = 0; i < argc; ++i) argv_.emplace_back(inline_args_[i]);
    return argc == 0 ? parsed::empty : parsed::command;
  }
  std::size_t p = pos;
  std::size_t cr = find_before_nul(buf, p, '\r');
  if (cr == std::string_view::npos) {
    if (buf.size() - p > kInlineMax) {
      error = "Protocol error: too big mbulk count string";
      return parsed::error;
    }
    return parsed::need_more;
  }
  if (cr + 1 >= buf.size()) return parsed::need_more;  // the '\n' has not arrived
  long long count = 0;
  if (!string2ll(buf.substr(p + 1, cr - p - 1), count) || count > INT_MAX) {
    error = "Protocol error: invalid multibulk length";
    return parsed::error;
  }
  if (count > kUnauthMaxMultibulk && !s.authenticated_) {
    error = "Protocol error: unauthenticated multibulk length";
    return parsed::error;
  }
  p = cr + 2;
  if (count <= 0) {
    pos = p;
    return parsed::empty;
  }
  for (long long i = 0; i < count; ++i) {
    cr = find_before_nul(buf, p, '\r');
    if (cr == std::string_view::npos) {
      if (buf.size() - p > kInlineMax) {
        error = "Protocol error: too big bulk count string";
        return parsed::error;
      }
      return parsed::need_more;
    }
    if (cr + 1 >= buf.size()) return parsed::need_more;
    if (buf[p] != '$') {
      error = "Protocol error: expected '$', got '";
      error += buf[p];
      error += "'";
      return parsed::error;
    }
    long long len = 0;
    if (!string2ll(buf.substr(p + 1, cr - p - 1), len) || len < 0 || len > kMaxBulk) {
      error = "Protocol error: invalid bulk length";
      return parsed::error;
    }
    if (len > kUnauthMaxBulk && !s.authenticated_) {
      error = "Protocol error: unauthenticated bulk length";
      return parsed::error;
    }
    p = cr + 2;
    const auto n = static_cast<std::size_t>(len);
    // The two bytes after the argument are skipped unread, as Redis does.
    if (buf.size() - p < n + 2) return parsed::need_more;
    argv_.emplace_back(buf.data() + p, n);
    p += n + 2;
  }
  pos = p;
  return parsed::command;
}

// Runs every complete request in buf[pos...]; false after a protocol error.
bool node::consume(session& s, std::string_view buf, std::size_t& pos, std::int64_t now_us,
                   std::string& out) {
  std::string error;
  while (pos < buf.size()) {
    switch (parse(s, buf, pos, error)) {
      case parsed::command:
        run(s, argv_.size(), now_us, out);
        if (s.blocked_) return true;  // the rest waits behind the WAIT (unblock)
        break;
      case parsed::empty:
        break;
      case parsed::need_more:
        return true;
      case parsed::error:
        reply_error(out, "ERR " + error);
        s.closed_ = true;
        s.in_.clear();
        return false;
    }
  }
  return true;
}

bool node::feed(session& s, const char* data, std::size_t n, std::int64_t now_us, std::string& out) {
  if (!owns(s)) return false;
  if (s.blocked_) {
    s.in_.append(data, n);
    return true;
  }
  std::size_t pos = 0;
  if (s.in_.empty()) {
    const std::string_view buf(data, n);
    if (!consume(s, buf, pos, now_us, out)) return false;
    s.in_.assign(buf.substr(pos));
    return true;
  }
  s.in_.append(data, n);
  // consume() reads s.in_ through views: nothing it runs touches s.in_.
  std::string pending;
  pending.swap(s.in_);
  if (!consume(s, pending, pos, now_us, out)) return false;
  pending.erase(0, pos);
  s.in_.swap(pending);
  return true;
}

std::string node::execute(session& s, const std::vector<std::string>& argv, std::int64_t now_us) {
  std::string out;
  if (!owns(s) || argv.empty()) return out;
  argv_.assign(argv.begin(), argv.end());
  run(s, argv_.size(), now_us, out);
  return out;
}

// processCommand: existence, arity, authentication, injected errors, loading,
// then the command. argv_ holds the request.
void node::run(session& s, std::size_t argc, std::int64_t now_us, std::string& out) {
  const std::string_view* a = argv_.data();
  const command_spec* spec = find_command(a[0]);
  if (spec != nullptr && (spec->id == cmd::script || spec->id == cmd::cluster) && argc >= 2) {
    const bool script = spec->id == cmd::script;
    spec = script ? find_script_subcommand(a[1]) : find_cluster_subcommand(a[1]);
    if (spec == nullptr) {
      std::string msg = "ERR unknown subcommand '";
      msg += c_str(a[1]).substr(0, 128);
      msg += script ? "'. Try SCRIPT HELP." : "'. Try CLUSTER HELP.";
      return reply_error(out, msg);
    }
  }
  if (spec == nullptr) {
    std::string args;
    for (std::size_t i = 1; i < argc && args.size() < 128; ++i) {
      args += '\'';
      args += c_str(a[i]).substr(0, 128 - args.size() + 1);
      args += "' ";
    }
    std::string msg = "ERR unknown command '";
    msg += c_str(a[0]).substr(0, 128);
    msg += "', with args beginning with: ";
    msg += args;
    return reply_error(out, msg);
  }
  const auto n = static_cast<long long>(argc);
  if ((spec->arity > 0 && spec->arity != n) || n < -spec->arity) {
    return reply_error(out, "ERR wrong number of arguments for '" + std::string(spec->name) + "' command");
  }
  if (!s.authenticated_ && spec->id != cmd::auth) return reply_error(out, "NOAUTH Authentication required.");
  if (!injected_.empty()) {
    auto it = injected_.find(std::string(spec->injected));
    if (it == injected_.end()) it = injected_.find(std::string());
    if (it != injected_.end()) return reply_error(out, it->second);
  }
  // Loading the AOF after a restart: only the commands with Redis' CMD_LOADING flag run.
  const bool loading_command = spec->id == cmd::auth || spec->id == cmd::select || spec->id == cmd::info ||
                               spec->id == cmd::time || spec->id == cmd::echo;
  if (cluster_enabled()) {
    const std::string moved = redirect_of(static_cast<int>(spec->id), argc);
    if (!moved.empty()) return reply_error(out, moved);
  }
  if (replica() && writes(spec->id) && spec->id != cmd::eval && spec->id != cmd::evalsha) {
    return reply_error(out, kReadOnly);
  }
  if (now_us < loading_until_us_ && !loading_command) {
    return reply_error(out, "LOADING Redis is loading the dataset in memory");
  }
  exec x(*this, s, now_us, out);
  if (replicas_.empty() || replica() || !writes(spec->id)) {
    x.dispatch(spec->id, a, argc);
    s.woff_ = repl_offset_;
    return;
  }
  // A master's write: each key's state before, then what changed is recorded.
  std::vector<std::string_view> keys;
  keys_of(spec->id, a, argc, keys);
  std::vector<std::string> names;
  std::vector<std::optional<entry>> before;
  database& d = dbs_[static_cast<std::size_t>(s.db_)];
  for (std::string_view k : keys) {
    std::string name(k);
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    const auto it = d.find(name);
    before.push_back(it == d.end() ? std::nullopt : std::optional<entry>(it->second));
    names.push_back(std::move(name));
  }
  const std::size_t reply_at = out.size();
  x.dispatch(spec->id, a, argc);
  if (spec->id == cmd::flushall || spec->id == cmd::flushdb) {
    if (out.compare(reply_at, 1, "+") == 0) {
      replicated_write w;
      w.op = spec->id == cmd::flushall ? replicated_write::what::flush_all : replicated_write::what::flush_db;
      w.db = s.db_;
      w.offset = ++repl_offset_;
      backlog_.push_back(std::move(w));
    }
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto it = d.find(names[i]);
    const bool now_there = it != d.end();
    if (!now_there && !before[i]) continue;
    if (now_there && before[i] && same_entry(it->second, *before[i])) continue;
    replicated_write w;
    w.db = s.db_;
    w.key = names[i];
    w.op = now_there ? replicated_write::what::put : replicated_write::what::remove;
    if (now_there) w.value = it->second;
    w.offset = ++repl_offset_;
    backlog_.push_back(std::move(w));
  }
  s.woff_ = repl_offset_;
}

std::string node::redirect_of(int id, std::size_t argc) const {
  std::vector<std::string_view> keys;
  if (keys_of(static_cast<cmd>(id), argv_.data(), argc, keys) == 0) return {};
  const int slot = detail::key_slot(keys[0]);
  for (std::size_t i = 1; i < keys.size(); ++i) {
    if (detail::key_slot(keys[i]) != slot) return "CROSSSLOT Keys in request don't hash to the same slot";
  }
  const int owner = slot_owner_.empty() ? -1 : slot_owner_[static_cast<std::size_t>(slot)];
  if (owner < 0) return "CLUSTERDOWN Hash slot not served";
  const cluster_member& m = shards_[static_cast<std::size_t>(owner)].members.front();
  if (m.id == my_id_ && !replica()) return {};
  return "MOVED " + std::to_string(slot) + " " + m.host + ":" + std::to_string(m.port);
}

long long node::acked(std::uint64_t offset) const noexcept {
  long long k = 0;
  for (const auto& r : replicas_) k += r.acked >= offset ? 1 : 0;
  return k;
}

void node::set_cluster(std::string my_id, std::vector<cluster_shard> shards) {
  my_id_ = std::move(my_id);
  shards_ = std::move(shards);
  slot_owner_.assign(detail::kClusterSlots, -1);
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    const auto& sh = shards_[i];
    if (sh.members.empty() || !sh.members.front().master) continue;
    for (const auto& [lo, hi] : sh.slots) {
      for (int x = std::max(lo, 0); x <= std::min(hi, detail::kClusterSlots - 1); ++x) {
        slot_owner_[static_cast<std::size_t>(x)] = static_cast<std::int16_t>(i);
      }
    }
  }
}

void node::follow(std::string master_host, int master_port) {
  master_host_ = std::move(master_host);
  master_port_ = master_port;
  replicas_.clear();
  backlog_.clear();
}

void node::promote() {
  master_host_.clear();
  master_port_ = 0;
}

void node::attach_replica(std::string id, std::string host, int port) {
  detach_replica(id);
  // Attached after a full sync: it has everything up to the current offset.
  replicas_.push_back(replica_state{std::move(id), std::move(host), port, repl_offset_});
}

void node::detach_replica(const std::string& id) {
  replicas_.erase(std::remove_if(replicas_.begin(), replicas_.end(),
                                 [&](const replica_state& r) { return r.id == id; }),
                  replicas_.end());
}

void node::ack(const std::string& id, std::uint64_t offset) {
  for (auto& r : replicas_) {
    if (r.id == id) r.acked = std::max(r.acked, offset);
  }
}

std::vector<node::replicated_write> node::take_writes() {
  std::vector<replicated_write> out;
  out.swap(backlog_);
  return out;
}

void node::apply(const replicated_write& w) {
  database& d = dbs_.at(static_cast<std::size_t>(w.db));
  switch (w.op) {
    case replicated_write::what::put:
      d[w.key] = w.value;
      break;
    case replicated_write::what::remove:
      d.erase(w.key);
      break;
    case replicated_write::what::flush_db:
      d.clear();
      break;
    case replicated_write::what::flush_all:
      for (database& x : dbs_) x.clear();
      break;
  }
  repl_offset_ = std::max(repl_offset_, w.offset);
}

void node::load(const node& master) {
  dbs_ = master.dbs_;
  repl_offset_ = master.repl_offset_;
}

bool node::unblock(session& s, std::int64_t now_us, std::string& out) {
  if (!owns(s)) return false;
  if (!s.blocked_) return true;
  const long long have = acked(s.wait_offset_);
  if (have < s.wait_replicas_ && (s.wait_deadline_us_ < 0 || now_us < s.wait_deadline_us_)) return true;
  s.blocked_ = false;
  s.wait_deadline_us_ = -1;
  reply_int(out, have);
  return feed(s, "", 0, now_us, out);
}

}  // namespace redlock::sim
