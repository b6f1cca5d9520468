// The commands of the `redlock` tool. Each takes a validated invocation, does its
// work, prints its result (text or --json) and any error, and returns the exit
// status.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "args.h"
#include "process.h"

namespace redlock::cli {

int acquire_command(const invocation& inv);
int release_command(const invocation& inv);
int extend_command(const invocation& inv);
int status_command(const invocation& inv);
int run_command(const invocation& inv);    // run.cc
int bench_command(const invocation& inv);  // bench.cc
int monitor_command(const invocation& inv);  // monitor.cc
int elect_command(const invocation& inv);    // elect.cc
int leader_command(const invocation& inv);   // elect.cc

// How a command's supervision ended.
struct supervision {
  int status = 128;          // CMD's shell status
  bool terminating = false;  // the lock was lost: CMD's processes were told to stop
  bool strays = false;       // CMD exited leaving processes running, which were stopped
  // On a terminal: stopped (^Z) until past the lock's validity, CMD's processes were
  // SIGKILLed when continued instead of running on (terminating too). The lock is lost.
  bool expired = false;
};

// A lock's (or leadership's) loss as its callback reports it on the client's loop
// thread, read by the supervising thread once CMD's supervision has ended.
class lock_loss {
 public:
  void set(std::string why) {
    {
      std::lock_guard<std::mutex> g(mu_);
      why_ = std::move(why);
    }
    lost_.store(true);
  }
  // Why the lock ended while CMD ran: its loss, or (sup.expired) its validity
  // running out while stopped on a terminal; nullopt if it did not end.
  std::optional<std::string> why(const supervision& sup) const {
    if (lost_.load()) {
      std::lock_guard<std::mutex> g(mu_);
      return why_;
    }
    if (sup.expired) return std::string("its validity ran out while it was stopped");
    return std::nullopt;
  }

 private:
  std::atomic<bool> lost_{false};
  mutable std::mutex mu_;
  std::string why_;  // guarded by mu_
};

// run.cc: supervises the child `pid` (spawned in a process group of its own,
// this process a child subreaper: command_guard) until it and every descendant is
// gone, reaping each. Waits on `events`: forwarded_signals() go to CMD's group
// (SIGCONT after the terminating ones), other signals are ignored. The first
// lock_lost_event, or CMD exiting while processes it started still run, sends
// SIGTERM to the group and to every descendant outside it, and SIGKILL (repeated
// until none is left) `kill_after` later. `tty`: the
// terminal whose foreground CMD's group is (spawn_options::foreground_tty), or -1.
// Every `poll` at most, the lock's validity end (`valid_until()`, the lease's) is
// passed on to `guard`, so that its watcher, if we die, kills no later than that.
supervision supervise_child(pid_t pid, int tty, const event_pipe& events, std::chrono::milliseconds kill_after,
                            command_guard& guard,
                            const std::function<std::optional<std::chrono::steady_clock::time_point>()>& valid_until,
                            std::chrono::milliseconds poll);

// CMD started for supervise_child: a command_guard (so this process is a subreaper
// and a watcher is armed), then `path` spawned in its own process group, the
// terminal's foreground group when we run in the foreground of one.
struct guarded_child {
  std::unique_ptr<command_guard> guard;  // null when it could not be set up (child.error)
  spawn_result child;
  int tty = -1;
};
// How often supervise_child passes the lock's validity on (run.cc).
std::chrono::milliseconds poll_validity_every(std::chrono::milliseconds ttl);
guarded_child spawn_guarded(const std::string& path, const invocation& inv, const std::vector<std::string>& env,
                            const std::vector<int>& reset_signals);

}  // namespace redlock::cli
