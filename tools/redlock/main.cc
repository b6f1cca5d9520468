// The `redlock` command-line tool. See docs/cli.md or `redlock --help`.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "common.h"
#include "process.h"

int main(int argc, char** argv) {
  using namespace redlock::cli;
  // A node that closes its connection must not kill the tool with SIGPIPE: writes
  // fail with EPIPE instead. (run gives its command the inherited disposition.)
  ignore_sigpipe();

  const std::vector<std::string> args(argv + 1, argv + argc);
  const parse_result parsed = parse_command_line(args, std::getenv("REDLOCK_NODES"), std::getenv("REDLOCK_MAX_TTL"));
  switch (parsed.what) {
    case parse_result::kind::help:
      return write_stdout(help_text()) ? exit_code::ok : exit_code::software;
    case parse_result::kind::version:
      return write_stdout(std::string("redlock ") + REDLOCK_VERSION_STRING + "\n") ? exit_code::ok
                                                                                   : exit_code::software;
    case parse_result::kind::error:
      print_error(parsed.error);
      return exit_code::usage;
    case parse_result::kind::ok:
      break;
  }

  const invocation& inv = parsed.inv;
  try {
    switch (inv.cmd) {
      case command::acquire:
        return acquire_command(inv);
      case command::release:
        return release_command(inv);
      case command::extend:
        return extend_command(inv);
      case command::run:
        return run_command(inv);
      case command::status:
        return status_command(inv);
      case command::bench:
        return bench_command(inv);
    }
  } catch (const std::exception& e) {
    print_error(std::string("internal error: ") + e.what());
  }
  return exit_code::software;
}
