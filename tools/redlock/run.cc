// `redlock run`: hold a lock for exactly as long as a command runs.
//
// The main thread waits on one event pipe for everything: the acquire completing,
// SIGINT/SIGTERM/SIGHUP (forwarded to the command), SIGCHLD, and the watchdog's
// on_lost callback (which runs on the library's loop thread and only posts).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "commands.h"
#include "common.h"

extern char** environ;

namespace redlock::cli {
namespace {

using steady = std::chrono::steady_clock;

// What the watchdog reported, written on the loop thread, read by the main thread.
struct loss_state {
  std::atomic<bool> lost{false};
  std::mutex mu;
  std::string why;  // guarded by mu
};

bool is_forwarded(int signo) { return signo == SIGINT || signo == SIGTERM || signo == SIGHUP; }

// Reaps `pid` if it has exited; the shell status then goes to `status`.
bool reap(pid_t pid, int& status) {
  int ws = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &ws, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != pid) return false;
  status = shell_status(ws);
  return true;
}

}  // namespace

int supervise_child(pid_t pid, const event_pipe& events, std::chrono::milliseconds kill_after, bool& terminating) {
  int status = 0;
  bool kill_pending = false;  // SIGKILL due at kill_at
  steady::time_point kill_at{};
  while (!reap(pid, status)) {
    // SIGCHLD wakes us; the periodic check is only a safety net.
    std::chrono::milliseconds timeout{1000};
    if (kill_pending) {
      timeout = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(kill_at - steady::now()),
                           std::chrono::milliseconds(0), timeout);
    }
    const std::optional<event> e = events.wait(timeout);
    if (kill_pending && steady::now() >= kill_at) {
      ::kill(pid, SIGKILL);
      kill_pending = false;
    }
    if (!e) continue;
    if (is_forwarded(e->type)) {
      // A terminal's ^C (SI_KERNEL) already reached the command: it is in our process
      // group. Anything sent to us alone is passed on.
      if (e->detail != SI_KERNEL) ::kill(pid, e->type);
    } else if (e->type == lock_lost_event && !terminating) {
      terminating = true;
      ::kill(pid, SIGTERM);
      kill_pending = true;
      kill_at = steady::now() + kill_after;
    }
  }
  return status;
}

int run_command(const invocation& inv) {
  // Fail fast, before touching the lock, when the command cannot be run at all.
  const resolved_command cmd = resolve_command(inv.argv[0], std::getenv("PATH"));
  if (cmd.error != 0) {
    print_error("cannot run " + quote(inv.argv[0]) + ": " + std::strerror(cmd.error));
    return cmd.error == ENOENT ? exit_code::not_found : exit_code::cannot_execute;
  }

  const std::vector<int> inherited_fds = open_fds();
  loss_state loss;
  event_pipe events;
  std::signal(SIGCHLD, SIG_DFL);  // an inherited SIG_IGN would reap the command for us
  signal_capture signals(events, {SIGINT, SIGTERM, SIGHUP, SIGCHLD});
  std::string error;
  auto client = make_client(inv, error);
  if (!client) {
    print_error(error);
    return exit_code::config;
  }

  acquire_options options = lock_options(inv);
  options.auto_extend = true;
  options.on_lost = [&loss, &events](const lease&, const report& rep) {
    {
      std::lock_guard<std::mutex> g(loss.mu);
      loss.why = rep.message();
    }
    loss.lost.store(true);
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
  if (!r) {
    print_error("cannot acquire " + wanted + ": " + r.report.message());
    return exit_status_for(r.report.error);
  }

  const lease held = r.lock.info();
  set_cloexec_except(inherited_fds);  // the command inherits our stdio and inherited fds only
  const spawn_result child =
      spawn(cmd.path, inv.argv,
            lock_environment(environ, held.resource, held.token, held.fence, nodes_without_passwords(inv),
                             sem ? std::optional<std::size_t>(waited.permit) : std::nullopt),
            signals.captured());
  if (child.error != 0) {
    (void)r.lock.release();
    print_error("cannot run " + quote(inv.argv[0]) + ": " + (child.exec_failed ? "" : "fork: ") +
                std::strerror(child.error));
    return child.exec_failed && (child.error == ENOENT || child.error == ENOTDIR) ? exit_code::not_found
                                                                                  : exit_code::cannot_execute;
  }

  // Wait for the command, forwarding signals, and stop it if the lock is lost.
  bool terminating = false;  // SIGTERM sent because the lock was lost
  const int status = supervise_child(child.pid, events, inv.kill_after, terminating);

  if (loss.lost.load()) {
    std::string why;
    {
      std::lock_guard<std::mutex> g(loss.mu);
      why = loss.why;
    }
    (void)r.lock.release();  // best effort: frees the nodes that still hold our token
    print_error("lock " + quote(held.resource) + " was lost while " + inv.argv[0] + " ran (" + why + "); " +
                inv.argv[0] + (terminating ? " was stopped" : " exited") + " (status " +
                std::to_string(status) + ")");
    return exit_code::software;
  }
  const report rep = r.lock.release();
  if (!rep) {
    print_warning(
        inv, "release of " + quote(held.resource) + " failed (" + rep.message() + "); it expires by its TTL");
  }
  return status;
}

}  // namespace redlock::cli
