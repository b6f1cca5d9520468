#include "args.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "duration.h"

namespace redlock::cli {
namespace {

using std::chrono::milliseconds;

// Which commands an option applies to: one bit per command.
using command_set = unsigned;
constexpr command_set bit(command c) { return 1u << static_cast<unsigned>(c); }
constexpr command_set all_commands = bit(command::acquire) | bit(command::release) | bit(command::extend) |
                                     bit(command::run) | bit(command::status) | bit(command::bench);
constexpr command_set locking = bit(command::acquire) | bit(command::run);

struct command_name {
  const char* name;
  command cmd;
};
constexpr command_name commands[] = {
    {"acquire", command::acquire}, {"release", command::release}, {"extend", command::extend},
    {"run", command::run},         {"status", command::status},   {"bench", command::bench},
};

// What the scan has seen besides the values stored in the invocation.
struct seen {
  bool ttl = false;
  bool nodes = false;
  bool max_ttl = false;
  bool double_dash = false;
};

using handler = bool (*)(const std::string& value, invocation& inv, seen& s, std::string& error);

struct option_spec {
  const char* name;  // with its dashes
  bool takes_value;
  command_set applies_to;
  handler apply;
};

bool duration_option(const char* name, const std::string& value, bool allow_zero, milliseconds& out,
                     std::string& error) {
  const auto d = parse_duration(value);
  if (!d) {
    error = std::string(name) + ": bad duration \"" + value +
            "\" (use milliseconds or a whole number with a unit: 250ms, 30s, 2m)";
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

constexpr option_spec options[] = {
    {"--nodes", true, all_commands,
     [](const std::string& v, invocation& inv, seen& s, std::string& e) {
       s.nodes = true;
       if (split_nodes(v, inv.nodes, e)) return true;
       e = "--nodes: " + e;
       return false;
     }},
    {"--node-timeout", true, all_commands,
     [](const std::string& v, invocation& inv, seen&, std::string& e) {
       return duration_option("--node-timeout", v, false, inv.node_timeout, e);
     }},
    {"--connect-timeout", true, all_commands,
     [](const std::string& v, invocation& inv, seen&, std::string& e) {
       return duration_option("--connect-timeout", v, false, inv.connect_timeout, e);
     }},
    {"--drift-factor", true, all_commands,
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
    {"--max-ttl", true, all_commands,
     [](const std::string& v, invocation& inv, seen& s, std::string& e) {
       s.max_ttl = true;
       return duration_option("--max-ttl", v, false, inv.max_ttl, e);
     }},
    {"--json", false, all_commands,
     [](const std::string&, invocation& inv, seen&, std::string&) {
       inv.json = true;
       return true;
     }},
    {"--quiet", false, all_commands,
     [](const std::string&, invocation& inv, seen&, std::string&) {
       inv.quiet = true;
       return true;
     }},
    {"-q", false, all_commands,
     [](const std::string&, invocation& inv, seen&, std::string&) {
       inv.quiet = true;
       return true;
     }},
    {"--ttl", true, locking | bit(command::extend) | bit(command::bench),
     [](const std::string& v, invocation& inv, seen& s, std::string& e) {
       s.ttl = true;
       return duration_option("--ttl", v, true, inv.ttl, e);  // 0 gets the TTL message below
     }},
    {"--wait", true, locking,
     [](const std::string& v, invocation& inv, seen&, std::string& e) {
       return duration_option("--wait", v, true, inv.wait, e);
     }},
    {"--retry-delay", true, locking,
     [](const std::string& v, invocation& inv, seen&, std::string& e) {
       return duration_option("--retry-delay", v, false, inv.retry_delay, e);
     }},
    {"--fencing", false, locking,
     [](const std::string&, invocation& inv, seen&, std::string&) {
       inv.fencing = true;
       return true;
     }},
    {"--kill-after", true, bit(command::run),
     [](const std::string& v, invocation& inv, seen&, std::string& e) {
       return duration_option("--kill-after", v, true, inv.kill_after, e);
     }},
    {"--clients", true, bit(command::bench),
     [](const std::string& v, invocation& inv, seen&, std::string& e) {
       return count_option("--clients", v, max_clients, inv.clients, e);
     }},
    {"--resources", true, bit(command::bench),
     [](const std::string& v, invocation& inv, seen&, std::string& e) {
       return count_option("--resources", v, max_resources, inv.resources, e);
     }},
    {"--duration", true, bit(command::bench),
     [](const std::string& v, invocation& inv, seen&, std::string& e) {
       return duration_option("--duration", v, false, inv.duration, e);
     }},
};

const option_spec* find_option(std::string_view name) {
  for (const auto& o : options) {
    if (name == o.name) return &o;
  }
  return nullptr;
}

parse_result fail(std::string message) {
  parse_result r;
  r.what = parse_result::kind::error;
  r.error = std::move(message);
  return r;
}

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
      return "no arguments";
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
      return 0;
    default:
      return 1;
  }
}

}  // namespace

const char* to_string(command c) noexcept {
  for (const auto& n : commands) {
    if (n.cmd == c) return n.name;
  }
  return "?";
}

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
  if (args.empty()) return fail("missing command; try \"redlock --help\"");
  const std::string& first = args[0];
  if (first == "-h" || first == "--help" || first == "help")
    return parse_result{parse_result::kind::help, {}, {}};
  if (first == "--version") return parse_result{parse_result::kind::version, {}, {}};

  parse_result result;
  invocation& inv = result.inv;
  const command_name* found = nullptr;
  for (const auto& n : commands) {
    if (first == n.name) found = &n;
  }
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
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      if (inv.cmd != command::run) return fail(std::string(name) + " takes no \"--\"");
      s.double_dash = true;
      inv.argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg == "-h" || arg == "--help") return parse_result{parse_result::kind::help, {}, {}};
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    const std::size_t eq = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string::npos;
    const std::string opt = arg.substr(0, eq);
    const option_spec* spec = find_option(opt);
    if (spec == nullptr) return fail("unknown option " + quoted(opt));
    if ((spec->applies_to & bit(inv.cmd)) == 0) {
      return fail("option " + opt + " does not apply to " + name);
    }
    std::string value;
    if (eq != std::string::npos) {
      if (!spec->takes_value) return fail("option " + opt + " takes no value");
      value = arg.substr(eq + 1);
    } else if (spec->takes_value) {
      if (i + 1 >= args.size()) return fail("option " + opt + " needs a value");
      value = args[++i];
    }
    std::string error;
    if (!spec->apply(value, inv, s, error)) return fail(error);
  }

  const std::size_t wanted = positional_count(inv.cmd);
  if (positional.size() > wanted) {
    return fail("unexpected argument " + quoted(positional[wanted]) + " (" + name + " takes " +
                positional_usage(inv.cmd) + ")");
  }
  if (positional.size() < wanted) {
    return fail(std::string(name) + " needs " + positional_usage(inv.cmd));
  }
  if (wanted >= 1) {
    inv.resource = positional[0];
    if (inv.resource.empty()) return fail("RESOURCE must not be empty");
  }
  if (wanted >= 2) {
    inv.token = positional[1];
    if (inv.token.empty()) return fail("TOKEN must not be empty");
  }

  if (inv.cmd == command::acquire || inv.cmd == command::extend || inv.cmd == command::run) {
    if (!s.ttl) return fail(std::string(name) + " needs --ttl");
  } else if (inv.cmd == command::bench && !s.ttl) {
    inv.ttl = default_bench_ttl;
  }
  if (!s.max_ttl && max_ttl_env != nullptr && *max_ttl_env != '\0') {
    std::string error;
    if (!duration_option("REDLOCK_MAX_TTL", max_ttl_env, false, inv.max_ttl, error)) return fail(error);
  }
  if (s.ttl || inv.cmd == command::bench) {
    if (inv.ttl.count() <= 0) return fail("--ttl must be greater than 0");
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
  }

  if (inv.cmd == command::run) {
    if (!s.double_dash || inv.argv.empty()) return fail("run needs a command after \"--\"");
    if (inv.argv[0].empty()) return fail("the command after \"--\" must not be empty");
  }

  if (!s.nodes) {
    if (nodes_env == nullptr ||
        std::string_view(nodes_env).find_first_not_of(" \t") == std::string_view::npos) {
      return fail("no nodes: give --nodes URI,URI,... or set REDLOCK_NODES");
    }
    std::string error;
    if (!split_nodes(nodes_env, inv.nodes, error)) return fail("REDLOCK_NODES: " + error);
  }

  result.what = parse_result::kind::ok;
  return result;
}

const char* help_text() noexcept {
  return R"(redlock - take, hold, inspect and benchmark a Redlock lock from a shell

Usage:
  redlock acquire RESOURCE --ttl D [--wait D] [--retry-delay D] [--fencing]
  redlock release RESOURCE TOKEN
  redlock extend  RESOURCE TOKEN --ttl D
  redlock run     RESOURCE --ttl D [--wait D] [--retry-delay D] [--fencing]
                  [--kill-after D] -- CMD [ARGS...]
  redlock status  RESOURCE
  redlock bench   [--clients C] [--resources R] [--duration D] [--ttl D]
  redlock --help | --version

Commands:
  acquire  Take the lock and print its token. The lock stays held until its
           TTL runs out or it is released.
  release  Release the lock on all nodes if TOKEN owns it.
  extend   Set the lock's TTL to --ttl from now if TOKEN owns it on a quorum.
  run      Take the lock, run CMD while extending the lock, release it when
           CMD exits, and exit with CMD's status. CMD's environment has
           REDLOCK_RESOURCE, REDLOCK_TOKEN and, with --fencing, REDLOCK_FENCE.
  status   Show each node's holder token and remaining TTL, and whether a
           quorum agrees on one holder.
  bench    Measure acquire and release latency against the nodes.

Options go anywhere after the command and before "--", as --opt VALUE or
--opt=VALUE:
  --nodes URI,...       The Redis masters, comma-separated:
                        redis://[user[:password]@]host[:port][/db] or
                        unix:///path[?db=N]. Default: $REDLOCK_NODES.
  --node-timeout D      Bound on each command's round trip (default 50ms).
  --connect-timeout D   Bound on connecting to a node (default 200ms).
  --drift-factor F      Clock drift allowance is ttl * F + 2ms (default 0.01).
  --max-ttl D           Upper bound on the TTL of any lock on these nodes, by
                        any client (default 10m, or $REDLOCK_MAX_TTL). A node
                        that restarted is kept out of acquires for this long.
                        Every client of the nodes must use a bound at least as
                        long as the longest TTL any of them uses.
  --json                Print one JSON object on stdout instead of text.
  -q, --quiet           Print nothing on stdout except JSON; no warnings.
  --ttl D               Time to live of the lock (acquire, extend, run; bench
                        default 10s). Must exceed the drift allowance.
  --wait D              Retry for up to D while the lock is held elsewhere
                        or no quorum answers (default 0: one attempt).
  --retry-delay D       Delay between attempts, jittered between D/2 and D
                        (default 200ms).
  --fencing             Also take a fencing token (JSON "fence",
                        $REDLOCK_FENCE).
  --kill-after D        run: send SIGKILL this long after the SIGTERM that
                        follows a lost lock (default 10s).
  --clients C           bench: concurrent clients (default 4).
  --resources R         bench: distinct resources they pick from (default 100).
  --duration D          bench: how long to run (default 5s).
  -h, --help            Print this help.
  --version             Print the version.

Durations are milliseconds (250) or a whole number with a unit: 250ms, 30s, 2m.

Exit status:
  0    success
  1    release or extend refused: TOKEN does not own the lock on a quorum
  64   usage or configuration error
  69   quorum unavailable: too few nodes answered, refused authentication,
       or answered too slowly for the TTL
  70   run: the lock was lost while CMD ran; or an internal error
  75   the lock is held by another owner (after --wait, if given)
  126  run: CMD cannot be executed
  127  run: CMD not found
  128+N  interrupted by signal N before CMD started; run: CMD killed by signal N
  other  run: CMD's exit status
Errors are one line on stderr starting with "redlock: ".
)";
}

}  // namespace redlock::cli
