// What the commands share: exit codes, the one-line error, the client built from
// the command line, and an acquire that a signal can interrupt.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "args.h"
#include "monitor_view.h"
#include "process.h"
#include "redlock/redlock.h"

namespace redlock::cli {

// Exit statuses (sysexits.h values where one fits).
namespace exit_code {
inline constexpr int ok = 0;
inline constexpr int refused = 1;           // release/extend: not the owner
inline constexpr int usage = 64;            // EX_USAGE: a bad command line
inline constexpr int unavailable = 69;      // EX_UNAVAILABLE: no quorum answered
inline constexpr int software = 70;         // EX_SOFTWARE: lock lost during run; internal error
inline constexpr int temp_fail = 75;        // EX_TEMPFAIL: held by another owner
inline constexpr int no_permission = 77;    // EX_NOPERM: credentials, ACL or TLS verification refused
inline constexpr int config = 78;           // EX_CONFIG: bad configuration (URI, nodes, files, conflicts)
inline constexpr int cannot_execute = 126;  // run: CMD found but not executable
inline constexpr int not_found = 127;       // run: CMD not found
}  // namespace exit_code

// The exit status for a failed operation's error code (0 for success).
int exit_status_for(std::error_code ec) noexcept;

// acquire, run: the exit status for a failed acquire, as exit_status_for() except
// that a lock held elsewhere (contended) gives --conflict-exit-code.
int acquire_exit_status(const invocation& inv, std::error_code ec) noexcept;
// acquire, run: prints "cannot acquire WHAT: ..." for a failed acquire, except a
// lock held elsewhere with -q (the expected outcome for N-1 of N cron hosts).
void print_acquire_failure(const invocation& inv, const std::string& what, const redlock::report& rep);

// `text` with control characters escaped (\n, \x1b, ...), for any text output that
// may carry user input such as a resource name.
std::string printable(std::string_view text);
// Writes "redlock: <message>" as exactly one line on stderr, through printable().
void print_error(std::string_view message);
// As print_error with "warning: " in front; nothing with --quiet.
void print_warning(const invocation& inv, std::string_view message);
// Writes `text` to stdout and flushes. False (errno set) if that failed.
bool write_stdout(const std::string& text);
// `s` in double quotes, for messages.
std::string quote(std::string_view s);
// "SIGTERM", "SIGINT", ... or "signal N".
std::string signal_name(int signo);

// Reads the password file (--password-file) and a token from stdin (--token -),
// and puts the password into the node URIs that have none. On failure prints the
// error and returns its exit status (78 for the password file, 64 for the token);
// 0 on success.
int load_secrets(invocation& inv);

// REDLOCK_NODES for run's command: the invocation's nodes without passwords.
std::string nodes_without_passwords(const invocation& inv);

// The client for the invocation's nodes, timeouts and TLS settings. On a
// configuration error (bad URI, bad option, unusable TLS files) returns null and
// sets `error`: exit status 78.
// `observers`: see client_options::observers (the monitor's metrics adapter).
std::unique_ptr<redlock::client> make_client(const invocation& inv, std::string& error,
                                             std::vector<std::shared_ptr<redlock::observer>> observers = {});

// --wait forever waits in rounds of this length: repeated acquires, each with a
// bounded retry budget (the library has no unbounded one), so that the wait for
// each stays bounded (and guarded against a library that never answers), and
// a signal ends it between or during rounds alike.
inline constexpr std::chrono::milliseconds wait_forever_round{10'000};

// The longest one acquire attempt (or campaign attempt) can take by the library's
// timeouts (--connect-timeout, --node-timeout), also after a cancel, which waits
// for the attempt in flight: how long the tool waits for the library's answer
// before it calls that an internal error.
std::chrono::milliseconds attempt_bound(const invocation& inv);

// acquire_options for --ttl, --wait, --retry-delay and --fencing (with --wait
// forever: for one round).
redlock::acquire_options lock_options(const invocation& inv);

// Application events on the event pipe (signals use positive numbers).
inline constexpr int acquire_done_event = -1;
inline constexpr int lock_lost_event = -2;

struct interruptible_acquire {
  std::optional<redlock::acquire_result> result;  // empty only when stuck
  int signal = 0;          // the SIGHUP/SIGINT/SIGTERM/SIGQUIT that interrupted the wait, if any
  bool stuck = false;      // the library did not answer within a generous bound
  std::size_t permit = 0;  // acquire_permit_until_signal: the permit's index
};

// Acquires asynchronously and waits on `events`. SIGHUP, SIGINT, SIGTERM or
// SIGQUIT (is_terminating; the caller routes them to `events` with a
// signal_capture) cancel the attempt; the result then says which signal came, and
// any lock taken meanwhile is in `result` to be released. Other events are
// ignored. With --wait forever, a round that ends contended or unavailable is
// followed by another, until one acquires, fails otherwise, or a signal comes.
interruptible_acquire acquire_until_signal(redlock::client& c, const invocation& inv,
                                           redlock::acquire_options options, const event_pipe& events);
// As acquire_until_signal, for one permit of `sem` (run -n K); `permit` says which.
interruptible_acquire acquire_permit_until_signal(redlock::semaphore& sem, const invocation& inv,
                                                  redlock::acquire_options options, const event_pipe& events);

// A cluster or Sentinel node's servers as the probe saw them (empty for a plain node),
// and how long before `at` the client saw its master change: what monitor and status show.
std::vector<monitor_member> members_of(const redlock::node_health& h);
std::optional<std::int64_t> master_changed_ms_ago(const redlock::node_health& h,
                                                  std::chrono::steady_clock::time_point at);

}  // namespace redlock::cli
