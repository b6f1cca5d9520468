// `redlock run`: hold a lock for exactly as long as a command runs.
//
// The main thread waits on one event pipe for everything: the acquire completing,
// signals (forwarded_signals() go to the command, the other caught ones are
// ignored), SIGCHLD, and the watchdog's on_lost callback (which runs on the
// library's loop thread and only posts).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <system_error>

#include "commands.h"
#include "common.h"
#include "warnings.h"

extern char** environ;

namespace redlock::cli {
namespace {

using steady = std::chrono::steady_clock;

bool is_forwarded(int signo) {
  const std::vector<int>& f = forwarded_signals();
  return std::find(f.begin(), f.end(), signo) != f.end();
}

// On a terminal, CMD's group was stopped (^Z): stop ourselves as the shell expects
// of a foreground job, and when continued hand the terminal back and continue CMD,
// unless the lock's validity ran out meanwhile (another holder may have it now):
// then false, and CMD's processes are not continued.
bool stop_with(pid_t pgid, int tty, const std::function<std::optional<steady::time_point>()>& valid_until) {
  if (::tcgetpgrp(tty) == pgid) set_foreground(tty, ::getpgrp());
  ::raise(SIGSTOP);
  const std::optional<steady::time_point> v = valid_until();
  if (!v || steady::now() >= *v) return false;
  if (::tcgetpgrp(tty) == ::getpgrp()) set_foreground(tty, pgid);  // `fg`, not `bg`
  ::kill(-pgid, SIGCONT);
  return true;
}

}  // namespace

supervision supervise_child(pid_t pid, int tty, const event_pipe& events, std::chrono::milliseconds kill_after,
                            command_guard& guard, const std::function<std::optional<steady::time_point>()>& valid_until,
                            std::chrono::milliseconds poll) {
  supervision out;
  std::optional<int> status;  // CMD's, once reaped
  bool stopping = false;      // SIGTERM sent to the whole tree
  bool killing = false;       // SIGKILL sent, and resent until nothing is left
  steady::time_point kill_at{};
  const auto stop_all = [&] {
    if (stopping) return;
    stopping = true;
    signal_tree(pid, SIGTERM);
    signal_tree(pid, SIGCONT);  // a stopped process acts on SIGTERM only once continued
    kill_at = steady::now() + kill_after;
  };
  while (true) {
    // Also what tells the watcher we run: at least every `poll` (at most 1 s).
    if (const std::optional<steady::time_point> v = valid_until()) {
      guard.valid_until(*v);
    } else {
      guard.alive();
    }
    // Reap CMD and every orphan re-parented to us (we are a subreaper) until no
    // child is left: only then is every descendant of CMD gone.
    bool none_left = false;
    while (true) {
      int ws = 0;
      const pid_t r = ::waitpid(-1, &ws, WNOHANG | (tty >= 0 ? WUNTRACED : 0));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        none_left = r < 0 && errno == ECHILD;
        break;
      }
      if (r != pid) continue;
      if (WIFSTOPPED(ws)) {
        if (!stopping && !stop_with(pid, tty, valid_until)) {
          // Stopped past the validity: killed as they are, never to run again.
          out.expired = out.terminating = stopping = killing = true;
          signal_tree(pid, SIGKILL);
        }
        continue;
      }
      status = shell_status(ws);
    }
    if (none_left) break;
    if (status && !stopping) {
      out.strays = true;  // CMD exited, something it started runs on
      stop_all();
    }
    if (stopping && !killing && steady::now() >= kill_at) killing = true;
    if (killing) signal_tree(pid, SIGKILL);
    // SIGCHLD wakes us; the periodic check is only a safety net.
    std::chrono::milliseconds timeout = std::clamp(poll, std::chrono::milliseconds(1), std::chrono::milliseconds(1000));
    if (killing) {
      timeout = std::chrono::milliseconds(20);
    } else if (stopping) {
      timeout = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(kill_at - steady::now()),
                           std::chrono::milliseconds(0), timeout);
    }
    const std::optional<event> e = events.wait(timeout);
    if (!e) continue;
    if (is_forwarded(e->type)) {
      // To CMD's group: CMD is not in ours, so a terminal's ^C to our group (or a
      // hangup) did not reach it. On a terminal CMD's group is the foreground one.
      // After one that asks CMD to end, SIGCONT too, so a stopped CMD acts on it
      // (as a shell's `kill` does); SIGUSR1, SIGUSR2 and SIGWINCH leave it stopped.
      ::kill(-pid, e->type);
      if (is_terminating(e->type)) ::kill(-pid, SIGCONT);
    } else if (e->type == lock_lost_event && !stopping) {
      out.terminating = true;
      stop_all();
    }
  }
  if (tty >= 0 && ::tcgetpgrp(tty) == pid) set_foreground(tty, ::getpgrp());
  // Stopped alone (SIGSTOP) past the validity, we find CMD's group already stopped
  // by the watcher (command_guard), maybe before the watchdog reports the loss.
  if (const std::optional<steady::time_point> v = valid_until(); !out.expired && v && steady::now() >= *v) {
    out.expired = out.terminating = true;
  }
  out.status = status.value_or(128);
  return out;
}

std::chrono::milliseconds poll_validity_every(std::chrono::milliseconds ttl) {
  // The watchdog extends every TTL/3: the watcher learns each new validity within a
  // sixth of the TTL.
  return std::max(std::chrono::milliseconds(10), ttl / 6);
}

guarded_child spawn_guarded(const std::string& path, const invocation& inv, const std::vector<std::string>& env,
                            const std::vector<int>& reset_signals) {
  guarded_child g;
  g.tty = foreground_terminal();  // before the watcher exists: it is in our group until its setsid()
  try {
    // If we die, the watcher stops CMD's group well before the lock's TTL runs
    // out (the watchdog extends it every TTL/3): SIGKILL after --kill-after or
    // TTL/3, whichever is shorter.
    // Stopped (SIGSTOP) past the validity: silent for two of supervise_child's
    // periods at least, then the same.
    const std::chrono::milliseconds period =
        std::clamp(poll_validity_every(inv.ttl), std::chrono::milliseconds(1), std::chrono::milliseconds(1000));
    g.guard = std::make_unique<command_guard>(std::min(inv.kill_after, inv.ttl / 3),
                                              std::max(2 * period, std::chrono::milliseconds(100)));
  } catch (const std::system_error& e) {
    g.child.error = e.code().value();
    return g;
  }
  spawn_options so;
  so.own_group = true;
  so.foreground_tty = g.tty;
  so.notify_fd = g.guard->fd();
  g.child = spawn(path, inv.argv, env, reset_signals, so);
  return g;
}

int run_command(const invocation& inv) {
  // Fail fast, before touching the lock, when the command cannot be run at all.
  const resolved_command cmd = resolve_command(inv.argv[0], std::getenv("PATH"));
  if (cmd.error != 0) {
    print_error("cannot run " + quote(inv.argv[0]) + ": " + std::strerror(cmd.error));
    return cmd.error == ENOENT ? exit_code::not_found : exit_code::cannot_execute;
  }

  const std::vector<int> inherited_fds = open_fds();
  lock_loss loss;
  event_pipe events;
  std::signal(SIGCHLD, SIG_DFL);  // an inherited SIG_IGN would reap the command for us
  // Caught until the lock is released: no signal but SIGKILL ends us holding it.
  signal_capture signals(events, guarded_signals({SIGCHLD}));
  std::string error;
  auto warnings = std::make_shared<warning_collector>();
  auto client = make_client(inv, error, {warnings});
  if (!client) {
    print_error(error);
    return exit_code::config;
  }

  acquire_options options = lock_options(inv);
  options.auto_extend = true;
  options.on_lost = [&loss, &events](const lease&, const report& rep) {
    loss.set(rep.message());
    events.post(event{lock_lost_event, 0});
  };
  // -n K >= 2: one permit of the semaphore RESOURCE; its handle is a lock like any.
  std::unique_ptr<semaphore> sem;
  if (inv.permits > 1) {
    semaphore_options so;
    so.permits = static_cast<std::size_t>(inv.permits);
    try {
      sem = std::make_unique<semaphore>(*client, inv.resource, so);
    } catch (const config_error& e) {
      print_error(e.what());
      return exit_code::config;
    }
  }
  interruptible_acquire waited = sem ? acquire_permit_until_signal(*sem, inv, std::move(options), events)
                                     : acquire_until_signal(*client, inv, std::move(options), events);
  if (waited.stuck) {
    print_error("internal error: acquire of " + quote(inv.resource) + " did not complete");
    std::_Exit(exit_code::software);
  }
  acquire_result& r = *waited.result;
  const std::string wanted =
      sem ? "a permit of " + quote(inv.resource) + " (" + std::to_string(inv.permits) + " permits)"
          : quote(inv.resource);
  if (waited.signal != 0) {
    print_error("interrupted by " + signal_name(waited.signal) + " while acquiring " + wanted + "; " +
                inv.argv[0] + " was not started");
    return 128 + waited.signal;  // a lock taken meanwhile is released with `r`
  }
  // Before CMD starts (delayed by --node-timeout at most).
  print_acquire_warnings(inv, *warnings, r.report, client->quorum());
  if (!r) {
    print_acquire_failure(inv, wanted, r.report);
    return acquire_exit_status(inv, r.report.error);
  }

  const lease held = r.lock.info();
  set_cloexec_except(inherited_fds);  // the command inherits our stdio and inherited fds only
  guarded_child guarded =
      spawn_guarded(cmd.path, inv,
                    lock_environment(environ, held.resource, held.token, held.fence, nodes_without_passwords(inv),
                                     sem ? std::optional<std::size_t>(waited.permit) : std::nullopt),
                    signals.captured());
  const spawn_result& child = guarded.child;
  if (child.error != 0) {
    (void)r.lock.release();
    print_error("cannot run " + quote(inv.argv[0]) + ": " + (child.exec_failed ? "" : "fork: ") +
                std::strerror(child.error));
    return child.exec_failed && (child.error == ENOENT || child.error == ENOTDIR) ? exit_code::not_found
                                                                                  : exit_code::cannot_execute;
  }

  // Wait for the command and all it started, forwarding signals, and stop them if
  // the lock is lost. The lock is released only once none of them is left.
  const supervision sup = supervise_child(
      child.pid, guarded.tty, events, inv.kill_after, *guarded.guard, [&r] { return r.lock.info().valid_until; },
      poll_validity_every(inv.ttl));
  guarded.guard->disarm();
  const int status = sup.status;
  const bool terminating = sup.terminating;

  if (const std::optional<std::string> ended = loss.why(sup)) {
    const std::string& why = *ended;
    (void)r.lock.release();  // best effort: frees the nodes that still hold our token
    print_error("lock " + quote(held.resource) + " was lost while " + inv.argv[0] + " ran (" + why + "); " +
                inv.argv[0] + (terminating ? " was stopped" : " exited") + " (status " +
                std::to_string(status) + ")");
    return exit_code::software;
  }
  if (sup.strays) {
    print_warning(inv, inv.argv[0] + " exited leaving processes running; they were stopped before the release");
  }
  const report rep = r.lock.release();
  if (!rep) {
    print_warning(
        inv, "release of " + quote(held.resource) + " failed (" + rep.message() + "); it expires by its TTL");
  }
  return status;
}

}  // namespace redlock::cli
