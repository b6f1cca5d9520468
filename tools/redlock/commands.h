// The commands of the `redlock` tool. Each takes a validated invocation, does its
// work, prints its result (text or --json) and any error, and returns the exit
// status.
#pragma once

#include <sys/types.h>

#include <chrono>

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

// run.cc: waits for the child `pid` to exit and returns its shell status. Waits on
// `events`: SIGINT, SIGTERM and SIGHUP are forwarded (unless a terminal sent them
// to the whole group); the first lock_lost_event sends SIGTERM, sets
// `terminating`, and SIGKILL follows `kill_after` later.
int supervise_child(pid_t pid, const event_pipe& events, std::chrono::milliseconds kill_after, bool& terminating);

}  // namespace redlock::cli
