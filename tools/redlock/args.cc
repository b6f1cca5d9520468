#include "args.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <arpa/inet.h>

#include "duration.h"
#include "secrets.h"

namespace redlock::cli {
namespace {

using std::chrono::milliseconds;

constexpr command_set bit(command c) { return command_bit(c); }
constexpr command_set locking = bit(command::acquire) | bit(command::run);
constexpr command_set supervising = bit(command::run) | bit(command::elect);
constexpr command_set with_token = bit(command::release) | bit(command::extend);
static_assert(all_commands == (bit(command::acquire) | bit(command::release) | bit(command::extend) |
                               bit(command::run) | bit(command::status) | bit(command::bench) |
                               bit(command::monitor) | bit(command::elect) | bit(command::leader)));

// What the scan has seen besides the values stored in the invocation.
struct seen {
  bool ttl = false;
  bool bare_ttl = false;  // the last --ttl was a bare number (milliseconds)
  bool nodes = false;
  bool max_ttl = false;
  bool double_dash = false;
  bool token_option = false;
  bool password_file = false;
  bool argv_password = false;  // the --nodes just applied had a URI with a password
  // TLS options given on the command line (they win over the environment).
  bool tls_ca = false, tls_ca_dir = false, tls_cert = false, tls_key = false, tls_server_name = false;
};

using handler = bool (*)(const std::string& value, invocation& inv, seen& s, std::string& error);

struct option_spec {
  option_doc doc;
  handler apply;  // null: -h/--help, handled by the scan
};

// `also`: another accepted value, named first in the message ("forever").
bool duration_option(const char* name, const std::string& value, bool allow_zero, milliseconds& out,
                     std::string& error, const char* also = nullptr) {
  std::string why;
  const auto d = parse_duration(value, &why);
  if (!d) {
    error = std::string(name) + ": bad duration \"" + value + "\": " + why + " (use " +
            (also != nullptr ? std::string(also) + ", or " : std::string()) +
            "milliseconds or a number with a unit: 250ms, 1.5s, 2m, 1h)";
    return false;
  }
  if (!allow_zero && d->count() == 0) {
    error = std::string(name) + " must be greater than 0";
    return false;
  }
  out = *d;
  return true;
}

bool count_option(const char* name, const std::string& value, int max, int& out, std::string& error) {
  long v = 0;
  bool ok = !value.empty() && value.size() <= 9;
  for (char c : value) ok = ok && c >= '0' && c <= '9';
  if (ok) v = std::strtol(value.c_str(), nullptr, 10);
  if (!ok || v < 1 || v > max) {
    error = std::string(name) + ": \"" + value + "\" is not a whole number from 1 to " + std::to_string(max);
    return false;
  }
  out = static_cast<int>(v);
  return true;
}

// A process exit status: a whole number from 0 to 255.
bool exit_code_option(const char* name, const std::string& value, int& out, std::string& error) {
  bool ok = !value.empty() && value.size() <= 3;
  for (char c : value) ok = ok && c >= '0' && c <= '9';
  const long v = ok ? std::strtol(value.c_str(), nullptr, 10) : -1;
  if (!ok || v > 255) {
    error = std::string(name) + ": \"" + value + "\" is not a whole number from 0 to 255";
    return false;
  }
  out = static_cast<int>(v);
  return true;
}

bool path_option(const char* name, const std::string& value, std::string& out, std::string& error) {
  if (value.empty()) {
    error = std::string(name) + " needs a non-empty value";
    return false;
  }
  out = value;
  return true;
}

// The one table of options: the parser, the help, the man page and the completion
// all read it. Help lines are at most 53 columns (they start at column 24).
const std::vector<option_spec>& specs() {
  static const std::vector<option_spec> table = {
      {{"--nodes", nullptr, "URI,...", all_commands,
        "The Redis masters, comma-separated:\n"
        "redis://[user[:password]@]host[:port][/db],\n"
        "rediss://... (TLS) or unix:///path[?db=N].\n"
        "Default: $REDLOCK_NODES. A password here is\n"
        "visible to other users (ps): use --password-file."},
       [](const std::string& v, invocation& inv, seen& s, std::string& e) {
         s.nodes = true;
         if (!split_nodes(v, inv.nodes, e)) {
           e = "--nodes: " + e;
           return false;
         }
         s.argv_password = false;
         for (const auto& uri : inv.nodes) s.argv_password = s.argv_password || uri_has_password(uri);
         return true;
       }},
      {{"--password-file", nullptr, "FILE", all_commands,
        "Password for every node URI without one, read\n"
        "from FILE (one trailing newline dropped), which\n"
        "must not be readable by group or others.\n"
        "Default: $REDLOCK_PASSWORD."},
       [](const std::string& v, invocation& inv, seen& s, std::string& e) {
         s.password_file = true;
         return path_option("--password-file", v, inv.password_file, e);
       }},
      {{"--node-timeout", nullptr, "D", all_commands, "Bound on each command's round trip (default 50ms)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         return duration_option("--node-timeout", v, false, inv.node_timeout, e);
       }},
      {{"--connect-timeout", nullptr, "D", all_commands, "Bound on connecting to a node (default 200ms)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         return duration_option("--connect-timeout", v, false, inv.connect_timeout, e);
       }},
      {{"--drift-factor", nullptr, "F", all_commands, "Clock drift allowance is ttl * F + 2ms (default 0.01)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         char* end = nullptr;
         const bool starts_ok = !v.empty() && ((v[0] >= '0' && v[0] <= '9') || v[0] == '.');
         const double f = starts_ok ? std::strtod(v.c_str(), &end) : -1;
         if (!starts_ok || end != v.c_str() + v.size() || !std::isfinite(f) || f < 0 || f >= 0.5) {
           e = "--drift-factor: \"" + v + "\" is not a number in [0, 0.5)";
           return false;
         }
         inv.drift_factor = f;
         return true;
       }},
      {{"--max-ttl", nullptr, "D", all_commands,
        "Upper bound on the TTL of any lock on these nodes, by\n"
        "any client (default 10m, or $REDLOCK_MAX_TTL). A node\n"
        "that restarted is kept out of acquires for this long.\n"
        "Every client of the nodes must use a bound at least as\n"
        "long as the longest TTL any of them uses."},
       [](const std::string& v, invocation& inv, seen& s, std::string& e) {
         s.max_ttl = true;
         return duration_option("--max-ttl", v, false, inv.max_ttl, e);
       }},
      {{"--tls-ca", nullptr, "FILE", all_commands,
        "rediss://: trusted CAs, a PEM file (default: the\n"
        "system's store). Default: $REDLOCK_TLS_CA."},
       [](const std::string& v, invocation& inv, seen& s, std::string& e) {
         s.tls_ca = true;
         return path_option("--tls-ca", v, inv.tls.ca_file, e);
       }},
      {{"--tls-ca-dir", nullptr, "DIR", all_commands,
        "rediss://: a directory of hashed CA certificates.\n"
        "Default: $REDLOCK_TLS_CA_DIR."},
       [](const std::string& v, invocation& inv, seen& s, std::string& e) {
         s.tls_ca_dir = true;
         return path_option("--tls-ca-dir", v, inv.tls.ca_dir, e);
       }},
      {{"--tls-cert", nullptr, "FILE", all_commands,
        "rediss://: client certificate chain (PEM) for\n"
        "mutual TLS; needs --tls-key. Default:\n"
        "$REDLOCK_TLS_CERT."},
       [](const std::string& v, invocation& inv, seen& s, std::string& e) {
         s.tls_cert = true;
         return path_option("--tls-cert", v, inv.tls.cert_file, e);
       }},
      {{"--tls-key", nullptr, "FILE", all_commands,
        "rediss://: the client certificate's private key\n"
        "(PEM); needs --tls-cert. Default: $REDLOCK_TLS_KEY."},
       [](const std::string& v, invocation& inv, seen& s, std::string& e) {
         s.tls_key = true;
         return path_option("--tls-key", v, inv.tls.key_file, e);
       }},
      {{"--tls-server-name", nullptr, "NAME", all_commands,
        "rediss://: the name to send (SNI) and verify\n"
        "(default: the URI's host). Default:\n"
        "$REDLOCK_TLS_SERVER_NAME."},
       [](const std::string& v, invocation& inv, seen& s, std::string& e) {
         s.tls_server_name = true;
         return path_option("--tls-server-name", v, inv.tls.server_name, e);
       }},
      {{"--tls-insecure", nullptr, nullptr, all_commands,
        "rediss://: TESTS ONLY. Do not verify certificates:\n"
        "anyone on the path can read and change the locks.\n"
        "Default: on if $REDLOCK_TLS_INSECURE is 1."},
       [](const std::string&, invocation& inv, seen&, std::string&) {
         inv.tls.insecure = true;
         return true;
       }},
      {{"--json", nullptr, nullptr, all_commands, "Print one JSON object on stdout instead of text."},
       [](const std::string&, invocation& inv, seen&, std::string&) {
         inv.json = true;
         return true;
       }},
      {{"--quiet", "-q", nullptr, all_commands,
        "Print nothing on stdout except JSON; no warnings,\n"
        "and no error when the lock is held elsewhere\n"
        "(other errors are still printed)."},
       [](const std::string&, invocation& inv, seen&, std::string&) {
         inv.quiet = true;
         return true;
       }},
      {{"--help", "-h", nullptr, all_commands, "Print the help (of the command, after one)."}, nullptr},
      {{"--ttl", nullptr, "D", locking | bit(command::extend) | bit(command::bench) | bit(command::elect),
        "Time to live of the lock (acquire, extend, run; bench\n"
        "and elect default 10s). Must exceed the drift\n"
        "allowance."},
       [](const std::string& v, invocation& inv, seen& s, std::string& e) {
         s.ttl = true;
         s.bare_ttl = is_bare_number(v);
         return duration_option("--ttl", v, true, inv.ttl, e);  // 0 gets the TTL message below
       }},
      {{"--token", nullptr, "TOKEN", with_token,
        "release, extend: the token, instead of the TOKEN\n"
        "argument; \"-\" reads it from stdin. Default:\n"
        "$REDLOCK_TOKEN."},
       [](const std::string& v, invocation& inv, seen& s, std::string& e) {
         if (v.empty()) {
           e = "--token must not be empty";
           return false;
         }
         s.token_option = true;
         inv.token_from_stdin = v == "-";
         inv.token = inv.token_from_stdin ? std::string() : v;
         return true;
       }},
      {{"--wait", nullptr, "D", locking | bit(command::elect),
        "Retry for up to D while the lock is held elsewhere\n"
        "or no quorum answers (default 0: one attempt).\n"
        "--wait forever: until acquired or a signal (elect:\n"
        "the default, and the only value it takes)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         if (v == "forever") {
           inv.wait_forever = true;
           inv.wait = milliseconds(0);
           return true;
         }
         if (inv.cmd == command::elect) {
           e = "--wait: elect campaigns until elected or a signal; it takes only \"forever\", not \"" + v +
               "\"";
           return false;
         }
         inv.wait_forever = false;
         return duration_option("--wait", v, true, inv.wait, e, "forever");
       }},
      {{"--conflict-exit-code", nullptr, "N", locking,
        "acquire, run: exit with N (0 to 255) instead of 75\n"
        "when the lock is held elsewhere (also after --wait\n"
        "ran out), as flock -E does."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         return exit_code_option("--conflict-exit-code", v, inv.conflict_exit_code, e);
       }},
      {{"--retry-delay", nullptr, "D", locking | bit(command::elect),
        "Delay between attempts, jittered between D/2 and D\n"
        "(default 200ms)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         return duration_option("--retry-delay", v, false, inv.retry_delay, e);
       }},
      {{"--fencing", nullptr, nullptr, locking,
        "Also take a fencing token (JSON \"fence\",\n"
        "$REDLOCK_FENCE)."},
       [](const std::string&, invocation& inv, seen&, std::string&) {
         inv.fencing = true;
         return true;
       }},
      {{"--permits", "-n", "K", bit(command::run),
        "run: hold one of K permits of the semaphore\n"
        "RESOURCE (RESOURCE:permit:0 .. K-1), so that up\n"
        "to K commands run at once (default 1: the lock\n"
        "RESOURCE itself)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         return count_option("--permits", v, max_permits, inv.permits, e);
       }},
      {{"--id", nullptr, "ID", bit(command::elect),
        "elect: this candidate's identity, shown by\n"
        "\"redlock leader\" (e.g. host:pid; 1 to 512 bytes)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         if (v.empty() || v.size() > 512) {
           e = "--id must be 1 to 512 bytes";
           return false;
         }
         inv.identity = v;
         return true;
       }},
      {{"--kill-after", nullptr, "D", supervising,
        "run, elect: send SIGKILL this long after the SIGTERM\n"
        "that stops CMD's processes (default 10s)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         return duration_option("--kill-after", v, true, inv.kill_after, e);
       }},
      {{"--clients", nullptr, "C", bit(command::bench), "bench: concurrent clients (default 4)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         return count_option("--clients", v, max_clients, inv.clients, e);
       }},
      {{"--resources", nullptr, "R", bit(command::bench),
        "bench: distinct resources they pick from (default 100)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         return count_option("--resources", v, max_resources, inv.resources, e);
       }},
      {{"--duration", nullptr, "D", bit(command::bench), "bench: how long to run (default 5s)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         return duration_option("--duration", v, false, inv.duration, e);
       }},
      {{"--interval", nullptr, "D", bit(command::monitor), "monitor: time between two probes (default 1s)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         return duration_option("--interval", v, false, inv.interval, e);
       }},
      {{"--count", nullptr, "N", bit(command::monitor),
        "monitor: stop after N intervals (default: run until\n"
        "SIGINT or SIGTERM)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         int n = 0;
         if (!count_option("--count", v, max_count, n, e)) return false;
         inv.count = n;
         return true;
       }},
      {{"--prometheus", nullptr, "ADDR:PORT", bit(command::monitor),
        "monitor: serve GET /metrics (Prometheus text format)\n"
        "over HTTP on ADDR:PORT (a numeric address, [v6]:PORT;\n"
        "port 0 picks a free port, printed on stderr)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         std::string host;
         int port = 0;
         if (!split_listen_address(v, host, port, e)) return false;
         inv.prometheus = v;
         return true;
       }},
      {{"--http-head-timeout", nullptr, "D", bit(command::monitor),
        "monitor: close an HTTP client that has not sent its\n"
        "request head within D (default 5s)."},
       [](const std::string& v, invocation& inv, seen&, std::string& e) {
         return duration_option("--http-head-timeout", v, false, inv.http_head_timeout, e);
       }},
  };
  return table;
}

const std::vector<command_doc> command_table = {
    {command::acquire, "acquire",
     "RESOURCE --ttl D [--wait D|forever] [--retry-delay D]\n"
     "[--fencing] [--conflict-exit-code N]",
     "Take the lock and print its token. The lock stays held until its\n"
     "TTL runs out or it is released.",
     "Takes the lock and prints its token (--json: resource, token,\n"
     "validity_ms, fence). The lock stays held until its TTL runs out, or\n"
     "\"redlock release\" or \"redlock extend\" is called with the token."},
    {command::release, "release", "RESOURCE [TOKEN | --token -]",
     "Release the lock on all nodes if TOKEN owns it.",
     "Releases the lock on all nodes where TOKEN holds it; exit 1 when TOKEN\n"
     "does not own it on a quorum. TOKEN comes from the argument, --token\n"
     "(\"-\": stdin), or $REDLOCK_TOKEN, so it need not be on the command line."},
    {command::extend, "extend", "RESOURCE [TOKEN | --token -] --ttl D",
     "Set the lock's TTL to --ttl from now if TOKEN owns it on a quorum.",
     "Sets the lock's TTL to --ttl from now on each node where TOKEN holds it;\n"
     "exit 1 when TOKEN does not own it on a quorum. TOKEN comes from the\n"
     "argument, --token (\"-\": stdin), or $REDLOCK_TOKEN."},
    {command::run, "run",
     "RESOURCE --ttl D [--wait D|forever] [--retry-delay D]\n"
     "[--fencing] [--conflict-exit-code N] [--kill-after D] [-n K]\n"
     "-- CMD [ARGS...]",
     "Take the lock, run CMD while extending the lock, release it when\n"
     "CMD exits, and exit with CMD's status. CMD's environment has\n"
     "REDLOCK_RESOURCE, REDLOCK_TOKEN and, with --fencing, REDLOCK_FENCE.",
     "Takes the lock, runs CMD while extending the lock every TTL/3, releases\n"
     "it when CMD and every process it started have exited, and exits with\n"
     "CMD's status. If the lock is lost, CMD's process group and the rest of\n"
     "its descendants get SIGTERM (SIGKILL --kill-after later) and the exit\n"
     "status is 70. If redlock dies, a watcher stops CMD's process group.\n"
     "SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH are\n"
     "forwarded to CMD's process group; other signals that would end redlock\n"
     "are ignored, so that only SIGKILL can end it while it holds the lock.\n"
     "CMD's environment has REDLOCK_RESOURCE, REDLOCK_TOKEN, with --fencing\n"
     "REDLOCK_FENCE, and REDLOCK_NODES without passwords; REDLOCK_PASSWORD\n"
     "is removed. With -n K, CMD holds one of K permits: REDLOCK_RESOURCE is\n"
     "the permit's resource (RESOURCE:permit:I) and REDLOCK_PERMIT is I."},
    {command::status, "status", "RESOURCE",
     "Show each node's holder token and remaining TTL, and whether a\n"
     "quorum agrees on one holder.",
     "Shows each node's holder token and remaining TTL, and whether a quorum\n"
     "agrees on one holder. Exit 0 whether the lock is held or free."},
    {command::bench, "bench", "[--clients C] [--resources R] [--duration D] [--ttl D]",
     "Measure acquire and release latency against the nodes.",
     "Measures acquire and release latency against the nodes, and compares\n"
     "it with the nodes' PING round trip (floor ratio)."},
    {command::monitor, "monitor", "[--interval D] [--count N] [--prometheus ADDR:PORT]",
     "Watch the nodes: reachability, quarantine, PING round trip, the\n"
     "round trip of a test lock, and each server's identity and settings.",
     "Every --interval, probes each node (PING, INFO) and takes and releases\n"
     "a test lock on a resource of its own (monitor:HOST:PID, TTL 2s). On a\n"
     "terminal it redraws one screen; otherwise it prints one line per\n"
     "interval, or with --json one JSON object per line. --prometheus also\n"
     "serves the figures at GET /metrics. SIGINT or SIGTERM stop it (exit 0)."},
    {command::elect, "elect",
     "ROLE --id ID [--ttl D] [--wait forever] [--retry-delay D]\n[--kill-after D] -- CMD [ARGS...]",
     "Wait to become ROLE's leader, run CMD while leading, and exit with\n"
     "CMD's status. CMD's environment has REDLOCK_ROLE, REDLOCK_TERM and\n"
     "REDLOCK_LEADER_ID.",
     "Campaigns for ROLE as ID: waits (retrying every --retry-delay) until it\n"
     "holds the fenced lock election:ROLE and has published ID, then runs CMD\n"
     "while extending the lock every TTL/3, resigns when CMD and every process\n"
     "it started have exited, and exits with CMD's status. If the leadership\n"
     "is lost, CMD's processes get SIGTERM (SIGKILL --kill-after later) and\n"
     "the exit status is 70, as with run. CMD's environment has REDLOCK_ROLE,\n"
     "REDLOCK_TERM (the term: a fencing token, greater than every earlier\n"
     "leader's), REDLOCK_LEADER_ID, and what run gives (REDLOCK_RESOURCE,\n"
     "REDLOCK_TOKEN, REDLOCK_FENCE, REDLOCK_NODES). Signals are forwarded\n"
     "to CMD's process group, or ignored, as by run."},
    {command::leader, "leader", "ROLE",
     "Show ROLE's current leader and term, without campaigning.",
     "Shows ROLE's current leader, its term and how long its lock lasts\n"
     "without an extension (--json: role, leader, term, ttl_ms; leader and\n"
     "term null when nobody leads). A leader is shown only while a quorum\n"
     "holds its lock. Exit 0 whether or not somebody leads."},
};

const option_spec* find_option(std::string_view name) {
  for (const auto& o : specs()) {
    if (name == o.doc.name || (o.doc.short_name != nullptr && name == o.doc.short_name)) return &o;
  }
  return nullptr;
}

parse_result fail(std::string message, parse_result::kind what = parse_result::kind::error) {
  parse_result r;
  r.what = what;
  r.error = std::move(message);
  return r;
}

parse_result config_fail(std::string message) { return fail(std::move(message), parse_result::kind::config_error); }

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

std::string format_factor(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", f);
  return buf;
}

// The positional arguments each command takes, for messages.
const char* positional_usage(command c) {
  switch (c) {
    case command::release:
    case command::extend:
      return "RESOURCE and TOKEN";
    case command::bench:
    case command::monitor:
      return "no arguments";
    case command::elect:
    case command::leader:
      return "ROLE";
    default:
      return "RESOURCE";
  }
}

std::size_t positional_count(command c) {
  switch (c) {
    case command::release:
    case command::extend:
      return 2;
    case command::bench:
    case command::monitor:
      return 0;
    default:
      return 1;
  }
}

const command_doc* find_command(std::string_view name) {
  for (const auto& c : command_table) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

bool set(const char* v) { return v != nullptr && *v != '\0'; }

// "redlock help [COMMAND]".
parse_result help_command(const std::vector<std::string>& args) {
  parse_result r;
  r.what = parse_result::kind::help;
  if (args.size() == 1) return r;
  if (args.size() > 2) return fail("help takes at most one COMMAND; try \"redlock --help\"");
  const command_doc* c = find_command(args[1]);
  if (c == nullptr) return fail("no help for unknown command " + quoted(args[1]) + "; try \"redlock --help\"");
  r.help_for = c->cmd;
  return r;
}

}  // namespace

environment environment::of_process() {
  environment e;
  e.nodes = std::getenv("REDLOCK_NODES");
  e.max_ttl = std::getenv("REDLOCK_MAX_TTL");
  e.password = std::getenv("REDLOCK_PASSWORD");
  e.token = std::getenv("REDLOCK_TOKEN");
  e.tls_ca = std::getenv("REDLOCK_TLS_CA");
  e.tls_ca_dir = std::getenv("REDLOCK_TLS_CA_DIR");
  e.tls_cert = std::getenv("REDLOCK_TLS_CERT");
  e.tls_key = std::getenv("REDLOCK_TLS_KEY");
  e.tls_server_name = std::getenv("REDLOCK_TLS_SERVER_NAME");
  e.tls_insecure = std::getenv("REDLOCK_TLS_INSECURE");
  return e;
}

const char* to_string(command c) noexcept {
  for (const auto& n : command_table) {
    if (n.cmd == c) return n.name;
  }
  return "?";
}

const std::vector<option_doc>& option_docs() {
  static const std::vector<option_doc> docs = [] {
    std::vector<option_doc> d;
    for (const auto& s : specs()) d.push_back(s.doc);
    return d;
  }();
  return docs;
}

const std::vector<command_doc>& command_docs() { return command_table; }

bool split_nodes(const std::string& list, std::vector<std::string>& out, std::string& error) {
  out.clear();
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = list.find(',', begin);
    std::string item = list.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? std::string() : item.substr(first, last - first + 1);
    if (item.empty()) {
      error = list.find_first_not_of(" \t,") == std::string::npos ? "empty node list"
                                                                  : "empty URI in the node list";
      out.clear();
      return false;
    }
    out.push_back(std::move(item));
    if (comma == std::string::npos) return true;
    begin = comma + 1;
  }
}

bool ttl_exceeds_drift(milliseconds ttl, double drift_factor) noexcept {
  const double ttl_ms = static_cast<double>(ttl.count());
  return ttl_ms > ttl_ms * drift_factor + 2.0;
}

parse_result parse_command_line(const std::vector<std::string>& args, const char* nodes_env,
                                const char* max_ttl_env) {
  environment env;
  env.nodes = nodes_env;
  env.max_ttl = max_ttl_env;
  return parse_command_line(args, env);
}

parse_result parse_command_line(const std::vector<std::string>& args, const environment& env) {
  if (args.empty()) return fail("missing command; try \"redlock --help\"");
  const std::string& first = args[0];
  if (first == "-h" || first == "--help") return parse_result{parse_result::kind::help, {}, {}, {}, {}, {}};
  if (first == "help") return help_command(args);
  if (first == "--version" || first == "-V") return parse_result{parse_result::kind::version, {}, {}, {}, {}, {}};

  parse_result result;
  invocation& inv = result.inv;
  const command_doc* found = find_command(first);
  if (found == nullptr) {
    if (!first.empty() && first[0] == '-') {
      return fail("expected a command before " + quoted(first) + "; try \"redlock --help\"");
    }
    return fail("unknown command " + quoted(first) + "; try \"redlock --help\"");
  }
  inv.cmd = found->cmd;
  const char* name = found->name;

  seen s;
  std::vector<std::string> positional;
  // The arguments holding a --nodes value with a password: every one, not only the
  // last (an earlier --nodes stays in argv, so in /proc/PID/cmdline, too).
  std::vector<std::size_t> password_args;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      if (inv.cmd != command::run && inv.cmd != command::elect) return fail(std::string(name) + " takes no \"--\"");
      s.double_dash = true;
      inv.argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    const std::size_t eq = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string::npos;
    const std::string opt = arg.substr(0, eq);
    const option_spec* spec = find_option(opt);
    if (spec == nullptr) return fail("unknown option " + quoted(opt));
    if (spec->apply == nullptr) {
      result.what = parse_result::kind::help;
      result.help_for = inv.cmd;
      return result;
    }
    if ((spec->doc.commands & bit(inv.cmd)) == 0) {
      return fail("option " + opt + " does not apply to " + name);
    }
    std::string value;
    std::size_t value_index = i;
    if (eq != std::string::npos) {
      if (spec->doc.metavar == nullptr) return fail("option " + opt + " takes no value");
      value = arg.substr(eq + 1);
    } else if (spec->doc.metavar != nullptr) {
      if (i + 1 >= args.size()) return fail("option " + opt + " needs a value");
      value = args[++i];
      value_index = i;
    }
    std::string error;
    if (!spec->apply(value, inv, s, error)) {
      if (spec->doc.name == std::string_view("--nodes")) return config_fail(error);
      return fail(error);
    }
    if (spec->doc.name == std::string_view("--nodes") && s.argv_password) password_args.push_back(value_index);
  }
  if (!password_args.empty()) {
    result.secret_args = password_args;
    result.warnings.push_back(
        "a password in --nodes is visible to other users of this machine (ps, /proc); use "
        "--password-file FILE or REDLOCK_PASSWORD instead");
  }

  const std::size_t wanted = positional_count(inv.cmd);
  const bool token_elsewhere = s.token_option || (wanted == 2 && set(env.token));
  const std::size_t needed = wanted == 2 && token_elsewhere ? 1 : wanted;
  if (positional.size() > wanted) {
    return fail("unexpected argument " + quoted(positional[wanted]) + " (" + name + " takes " +
                positional_usage(inv.cmd) + ")");
  }
  if (positional.size() < needed) {
    if (wanted == 2 && positional.size() == 1) {
      return fail(std::string(name) + " needs TOKEN (an argument, --token TOKEN, --token - for stdin, or "
                                      "REDLOCK_TOKEN)");
    }
    return fail(std::string(name) + " needs " + positional_usage(inv.cmd));
  }
  if (wanted >= 1) {
    inv.resource = positional[0];
    if (inv.resource.empty()) {
      return fail(inv.cmd == command::elect || inv.cmd == command::leader ? "ROLE must not be empty"
                                                                          : "RESOURCE must not be empty");
    }
  }
  if (wanted >= 2) {
    if (positional.size() == 2) {
      if (s.token_option) return config_fail("conflicting options: TOKEN given both as an argument and with --token");
      inv.token_from_stdin = positional[1] == "-";
      inv.token = inv.token_from_stdin ? std::string() : positional[1];
      if (positional[1].empty()) return fail("TOKEN must not be empty");
    } else if (!s.token_option) {
      inv.token = env.token;  // set(env.token), or `needed` would have failed
    }
  }

  if (inv.cmd == command::acquire || inv.cmd == command::extend || inv.cmd == command::run) {
    if (!s.ttl) return fail(std::string(name) + " needs --ttl");
  } else if (inv.cmd == command::bench && !s.ttl) {
    inv.ttl = default_bench_ttl;
  } else if (inv.cmd == command::elect && !s.ttl) {
    inv.ttl = default_elect_ttl;
  }
  if (!s.max_ttl && set(env.max_ttl)) {
    std::string error;
    if (!duration_option("REDLOCK_MAX_TTL", env.max_ttl, false, inv.max_ttl, error)) return config_fail(error);
  }
  if (s.ttl || inv.cmd == command::bench || inv.cmd == command::elect) {
    if (inv.ttl.count() <= 0) return fail("--ttl must be greater than 0");
    // A bare number is milliseconds. run and elect hold the lock while CMD runs:
    // there "--ttl 30" is all but surely 30 seconds, and 30 ms cannot hold a lock
    // across extensions, so the unit is asked for.
    const bool supervises = inv.cmd == command::run || inv.cmd == command::elect;
    const std::string bare = std::to_string(inv.ttl.count());
    if (s.bare_ttl && inv.ttl < std::chrono::seconds(1) && supervises) {
      return fail("--ttl " + bare + " would be " + bare + " milliseconds: did you mean " + bare + "s? (" +
                  name + " refuses a bare --ttl below 1000; give the unit)");
    }
    if (inv.ttl > inv.max_ttl) {
      return fail("--ttl " + format_duration(inv.ttl) + " exceeds --max-ttl " + format_duration(inv.max_ttl) +
                  " (the bound every client of these nodes must share; raise --max-ttl or REDLOCK_MAX_TTL "
                  "on all of them)");
    }
    if (!ttl_exceeds_drift(inv.ttl, inv.drift_factor)) {
      return fail("--ttl " + format_duration(inv.ttl) +
                  " is too short: it must exceed the clock drift allowance (ttl * " +
                  format_factor(inv.drift_factor) + " + 2ms)");
    }
    if (s.bare_ttl && inv.ttl < std::chrono::seconds(1)) {
      result.warnings.push_back("--ttl " + bare + " is " + bare + " milliseconds; did you mean " + bare +
                                "s? (write " + bare + "ms to say milliseconds)");
    }
  }

  if (inv.cmd == command::elect && inv.identity.empty()) return fail("elect needs --id ID");
  if (inv.cmd == command::run || inv.cmd == command::elect) {
    if (!s.double_dash || inv.argv.empty()) return fail(std::string(name) + " needs a command after \"--\"");
    if (inv.argv[0].empty()) return fail("the command after \"--\" must not be empty");
  }

  if (!s.nodes) {
    if (env.nodes == nullptr || std::string_view(env.nodes).find_first_not_of(" \t") == std::string_view::npos) {
      return config_fail("no nodes: give --nodes URI,URI,... or set REDLOCK_NODES");
    }
    std::string error;
    if (!split_nodes(env.nodes, inv.nodes, error)) return config_fail("REDLOCK_NODES: " + error);
  }

  if (!s.password_file && set(env.password)) inv.password = env.password;

  // TLS: each option wins over its variable.
  if (!s.tls_ca && set(env.tls_ca)) inv.tls.ca_file = env.tls_ca;
  if (!s.tls_ca_dir && set(env.tls_ca_dir)) inv.tls.ca_dir = env.tls_ca_dir;
  if (!s.tls_cert && set(env.tls_cert)) inv.tls.cert_file = env.tls_cert;
  if (!s.tls_key && set(env.tls_key)) inv.tls.key_file = env.tls_key;
  if (!s.tls_server_name && set(env.tls_server_name)) inv.tls.server_name = env.tls_server_name;
  if (!inv.tls.insecure && env.tls_insecure != nullptr) {
    const std::string_view v = env.tls_insecure;
    if (v == "1") {
      inv.tls.insecure = true;
    } else if (!v.empty() && v != "0") {
      return config_fail("REDLOCK_TLS_INSECURE must be 1 or 0, not " + quoted(std::string(v)));
    }
  }
  if (inv.tls.cert_file.empty() != inv.tls.key_file.empty()) {
    return config_fail(inv.tls.cert_file.empty()
                           ? "conflicting options: a TLS key (--tls-key, REDLOCK_TLS_KEY) needs its certificate "
                             "(--tls-cert, REDLOCK_TLS_CERT)"
                           : "conflicting options: a TLS certificate (--tls-cert, REDLOCK_TLS_CERT) needs its "
                             "key (--tls-key, REDLOCK_TLS_KEY)");
  }
  if (inv.tls.insecure) {
    result.warnings.push_back(
        "TLS certificates are not verified (--tls-insecure, REDLOCK_TLS_INSECURE): anyone on the network "
        "path can read and change the locks; for tests only");
  }

  result.what = parse_result::kind::ok;
  return result;
}

bool split_listen_address(const std::string& value, std::string& host, int& port, std::string& error) {
  const std::size_t colon = value.rfind(':');
  const auto bad = [&](const std::string& why) {
    error = "--prometheus: \"" + value + "\": " + why;
    return false;
  };
  if (colon == std::string::npos) return bad("expected ADDR:PORT, e.g. 127.0.0.1:9464");
  host = value.substr(0, colon);
  const std::string p = value.substr(colon + 1);
  bool digits = !p.empty() && p.size() <= 5;
  for (char c : p) digits = digits && c >= '0' && c <= '9';
  if (!digits || std::atol(p.c_str()) > 65535) return bad("the port must be a number from 0 to 65535");
  port = static_cast<int>(std::atol(p.c_str()));
  unsigned char buf[sizeof(struct in6_addr)];
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (inet_pton(AF_INET6, host.c_str(), buf) == 1) return true;
    return bad("not a numeric IPv6 address");
  }
  if (inet_pton(AF_INET, host.c_str(), buf) == 1) return true;
  return bad("ADDR must be a numeric IPv4 address or [IPv6] (no host names: the tool binds only what it is given)");
}

}  // namespace redlock::cli
