// The command line of the `redlock` tool: what was asked for, parsed and validated
// without touching the network or the file system, and the help texts, all from
// one table of commands and options. Pure; docs/cli.md documents the same contract.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace redlock::cli {

enum class command { acquire, release, extend, run, status, bench, monitor, elect, leader };

// The CLI's default --max-ttl: 10 minutes. A shell lock guards a cron job or a
// deploy step, so it needs longer TTLs than the library's 60 s default (docs show
// --ttl 5m); a restarted node is kept out of acquires for this long.
constexpr std::chrono::milliseconds default_max_ttl() { return std::chrono::minutes(10); }

// The exit status when the lock is held by another owner (EX_TEMPFAIL), unless
// --conflict-exit-code says otherwise.
inline constexpr int default_conflict_exit_code = 75;

// "acquire", "release", ...
const char* to_string(command c) noexcept;

// TLS settings for every rediss:// node (client_options::tls), from the --tls-*
// options, else the REDLOCK_TLS_* variables.
struct tls_settings {
  std::string ca_file;      // --tls-ca
  std::string ca_dir;       // --tls-ca-dir
  std::string cert_file;    // --tls-cert
  std::string key_file;     // --tls-key
  std::string server_name;  // --tls-server-name
  bool insecure = false;    // --tls-insecure
};

// Everything one invocation asks for. Fields that do not apply to the command keep
// their defaults.
struct invocation {
  command cmd = command::status;
  std::string resource;  // acquire, release, extend, run, status; elect, leader: the ROLE
  std::string identity;  // elect: --id, the candidate's identity
  // release, extend: TOKEN, --token, else $REDLOCK_TOKEN; empty when token_from_stdin.
  std::string token;
  bool token_from_stdin = false;  // TOKEN or --token is "-": read it from stdin

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
  // The password for node URIs without one: read from password_file (--password-file)
  // when that is set, else $REDLOCK_PASSWORD ("" = none).
  std::string password_file;
  std::string password;
  tls_settings tls;

  // Lock options.
  std::chrono::milliseconds ttl{0};              // --ttl: required by acquire, extend, run
  std::chrono::milliseconds wait{0};             // --wait: total retry budget; 0 = one attempt
  // --wait forever: retry (while contended or unavailable) until acquired or a
  // signal; `wait` is then 0. elect always waits so, and takes no other --wait.
  bool wait_forever = false;
  // --conflict-exit-code (acquire, run): the exit status when the lock is held
  // elsewhere (errc::contended, also after --wait ran out). In [0, 255].
  int conflict_exit_code = default_conflict_exit_code;
  std::chrono::milliseconds retry_delay{200};    // --retry-delay: > 0
  bool fencing = false;                          // --fencing
  std::chrono::milliseconds kill_after{10'000};  // --kill-after (run)
  // -n, --permits (run): 1 = the lock RESOURCE itself; K >= 2 = one of K permits of
  // the semaphore RESOURCE (redlock/semaphore.h). In [1, max_permits].
  int permits = 1;

  // Bench options.
  int clients = 4;                            // --clients, in [1, max_clients]
  int resources = 100;                        // --resources, in [1, max_resources]
  std::chrono::milliseconds duration{5'000};  // --duration, > 0

  // Monitor options.
  std::chrono::milliseconds interval{1'000};       // --interval, > 0
  long count = 0;                                  // --count: intervals to run; 0 = until a signal
  std::string prometheus;                          // --prometheus ADDR:PORT ("" = no HTTP server)
  std::chrono::milliseconds http_head_timeout{5'000};  // --http-head-timeout, > 0

  // run, elect: the command after "--" and its arguments; never empty for them.
  std::vector<std::string> argv;
};

inline constexpr int max_clients = 1000;
inline constexpr int max_permits = 1024;  // as redlock::semaphore_options::permits
inline constexpr int max_resources = 1'000'000;
inline constexpr int max_count = 999'999'999;

// Splits --prometheus's "ADDR:PORT" (ADDR a numeric IPv4 address, or an IPv6
// address in brackets; PORT 0..65535, 0 = any free port). False with `error` set
// when it is not one.
bool split_listen_address(const std::string& value, std::string& host, int& port, std::string& error);
inline constexpr std::chrono::milliseconds default_bench_ttl{10'000};
inline constexpr std::chrono::milliseconds default_elect_ttl{10'000};

// The environment variables the tool reads; null = unset.
struct environment {
  const char* nodes = nullptr;            // REDLOCK_NODES
  const char* max_ttl = nullptr;          // REDLOCK_MAX_TTL
  const char* password = nullptr;         // REDLOCK_PASSWORD
  const char* token = nullptr;            // REDLOCK_TOKEN
  const char* tls_ca = nullptr;           // REDLOCK_TLS_CA
  const char* tls_ca_dir = nullptr;       // REDLOCK_TLS_CA_DIR
  const char* tls_cert = nullptr;         // REDLOCK_TLS_CERT
  const char* tls_key = nullptr;          // REDLOCK_TLS_KEY
  const char* tls_server_name = nullptr;  // REDLOCK_TLS_SERVER_NAME
  const char* tls_insecure = nullptr;     // REDLOCK_TLS_INSECURE: "1" on, "0" or "" off

  // The variables of this process (std::getenv).
  static environment of_process();
};

struct parse_result {
  enum class kind {
    ok,            // `inv` holds a valid invocation
    help,          // print help_text(help_for) on stdout, exit 0
    version,       // print the version on stdout, exit 0
    error,         // command-line usage error: print `error`, exit 64
    config_error,  // bad configuration (nodes, environment, conflicting options): exit 78
  };
  kind what = kind::error;
  invocation inv;
  std::string error;  // one line, without the "redlock: " prefix
  std::optional<command> help_for;  // help: that command's help; none = the tool's
  // Lines to print as "redlock: warning: ..." (unless --quiet), in order.
  std::vector<std::string> warnings;
  // Indexes into the arguments of those that hold a node list with a password (the
  // caller scrubs them from its argv; see secrets.h).
  std::vector<std::size_t> secret_args;
};

// Parses the arguments after the program name.
parse_result parse_command_line(const std::vector<std::string>& args, const environment& env);
// The same with only REDLOCK_NODES and REDLOCK_MAX_TTL set (tests).
parse_result parse_command_line(const std::vector<std::string>& args, const char* nodes_env,
                                const char* max_ttl_env = nullptr);

// Splits "URI,URI,..." and trims blanks around each URI. Sets `error` and returns
// false for an empty list or an empty element.
bool split_nodes(const std::string& list, std::vector<std::string>& out, std::string& error);

// True when the TTL exceeds the clock drift allowance ttl * drift_factor + 2 ms,
// which is the condition for a lock to have any validity at all.
bool ttl_exceeds_drift(std::chrono::milliseconds ttl, double drift_factor) noexcept;

// --- the help, man page and completion, from the same tables ---

using command_set = unsigned;
constexpr command_set command_bit(command c) { return 1u << static_cast<unsigned>(c); }
inline constexpr command_set all_commands = 0x1ff;

struct option_doc {
  const char* name;        // "--ttl"
  const char* short_name;  // "-q", or null
  const char* metavar;     // "D", or null for a flag
  command_set commands;    // the commands that take it (all_commands: a global option)
  const char* help;        // lines separated by '\n'
};

struct command_doc {
  command cmd;
  const char* name;
  const char* synopsis;  // after "redlock NAME", lines separated by '\n'
  const char* summary;   // for the command list, lines separated by '\n'
  const char* details;   // for its own help, lines separated by '\n'; may be ""
};

const std::vector<option_doc>& option_docs();
const std::vector<command_doc>& command_docs();
// Text sections shared by the help and the man page: lines separated by '\n',
// each section's own lines indented by two spaces.
const char* durations_text() noexcept;
const char* environment_text() noexcept;
const char* exit_status_text() noexcept;
// The man page's EXAMPLES: paragraphs separated by blank lines; command lines start
// with "$ ", file contents are indented by two spaces.
const char* examples_text() noexcept;

// The text `redlock --help` prints (docs/cli.md quotes it verbatim).
std::string help_text();
// The text `redlock help CMD` and `redlock CMD --help` print.
std::string help_text(command c);
// The man page redlock(1), troff, from the same tables.
std::string man_page(const std::string& version);
// A bash completion script for the tool, from the same tables.
std::string bash_completion();
// A zsh completion function (the file _redlock on $fpath), from the same tables.
std::string zsh_completion();
// A fish completion script (redlock.fish), from the same tables.
std::string fish_completion();

}  // namespace redlock::cli
