// The command line of the `redlock` tool: what was asked for, parsed and validated
// without touching the network. Pure; docs/cli.md documents the same contract.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace redlock::cli {

enum class command { acquire, release, extend, run, status, bench };

// The CLI's default --max-ttl: 10 minutes. A shell lock guards a cron job or a
// deploy step, so it needs longer TTLs than the library's 60 s default (docs show
// --ttl 5m); a restarted node is kept out of acquires for this long.
constexpr std::chrono::milliseconds default_max_ttl() { return std::chrono::minutes(10); }

// "acquire", "release", ...
const char* to_string(command c) noexcept;

// Everything one invocation asks for. Fields that do not apply to the command keep
// their defaults.
struct invocation {
  command cmd = command::status;
  std::string resource;  // acquire, release, extend, run, status
  std::string token;     // release, extend

  // Common options.
  std::vector<std::string> nodes;                  // --nodes, else $REDLOCK_NODES; never empty
  std::chrono::milliseconds node_timeout{50};      // --node-timeout: per command round trip
  std::chrono::milliseconds connect_timeout{200};  // --connect-timeout: per connect
  double drift_factor = 0.01;                      // --drift-factor, in [0, 0.5)
  // --max-ttl, else $REDLOCK_MAX_TTL: the bound on any TTL on these nodes by any
  // client, and the restart quarantine (client_options::max_ttl).
  std::chrono::milliseconds max_ttl{default_max_ttl()};
  bool json = false;                               // --json
  bool quiet = false;                              // -q, --quiet

  // Lock options.
  std::chrono::milliseconds ttl{0};              // --ttl: required by acquire, extend, run
  std::chrono::milliseconds wait{0};             // --wait: total retry budget; 0 = one attempt
  std::chrono::milliseconds retry_delay{200};    // --retry-delay: > 0
  bool fencing = false;                          // --fencing
  std::chrono::milliseconds kill_after{10'000};  // --kill-after (run)

  // Bench options.
  int clients = 4;                            // --clients, in [1, max_clients]
  int resources = 100;                        // --resources, in [1, max_resources]
  std::chrono::milliseconds duration{5'000};  // --duration, > 0

  // run: the command after "--" and its arguments; never empty for run.
  std::vector<std::string> argv;
};

inline constexpr int max_clients = 1000;
inline constexpr int max_resources = 1'000'000;
inline constexpr std::chrono::milliseconds default_bench_ttl{10'000};

struct parse_result {
  enum class kind {
    ok,       // `inv` holds a valid invocation
    help,     // print help_text() on stdout, exit 0
    version,  // print the version on stdout, exit 0
    error,    // usage or configuration error: print `error`, exit 64
  };
  kind what = kind::error;
  invocation inv;
  std::string error;  // one line, without the "redlock: " prefix
};

// Parses the arguments after the program name. `nodes_env` is the value of
// REDLOCK_NODES and `max_ttl_env` that of REDLOCK_MAX_TTL, or null when unset.
parse_result parse_command_line(const std::vector<std::string>& args, const char* nodes_env,
                                const char* max_ttl_env = nullptr);

// Splits "URI,URI,..." and trims blanks around each URI. Sets `error` and returns
// false for an empty list or an empty element.
bool split_nodes(const std::string& list, std::vector<std::string>& out, std::string& error);

// True when the TTL exceeds the clock drift allowance ttl * drift_factor + 2 ms,
// which is the condition for a lock to have any validity at all.
bool ttl_exceeds_drift(std::chrono::milliseconds ttl, double drift_factor) noexcept;

// The text `redlock --help` prints (docs/cli.md quotes it verbatim).
const char* help_text() noexcept;

}  // namespace redlock::cli
