// The commands of the `redlock` tool. Each takes a validated invocation, does its
// work, prints its result (text or --json) and any error, and returns the exit
// status.
#pragma once

#include "args.h"

namespace redlock::cli {

int acquire_command(const invocation& inv);
int release_command(const invocation& inv);
int extend_command(const invocation& inv);
int status_command(const invocation& inv);
int run_command(const invocation& inv);    // run.cc
int bench_command(const invocation& inv);  // bench.cc
int monitor_command(const invocation& inv);  // monitor.cc

}  // namespace redlock::cli
