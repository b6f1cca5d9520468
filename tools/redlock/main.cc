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
#include "secrets.h"

int main(int argc, char** argv) {
  using namespace redlock::cli;
  // A node that closes its connection must not kill the tool with SIGPIPE: writes
  // fail with EPIPE instead. (run gives its command the inherited disposition.)
  ignore_sigpipe();

  const std::vector<std::string> args(argv + 1, argv + argc);
  parse_result parsed = parse_command_line(args, environment::of_process());
  // A password given on the command line is in ps already; from now on at least
  // it is not (Linux shows argv's memory, which this overwrites).
  std::vector<std::size_t> secret_argv;
  for (std::size_t i : parsed.secret_args) secret_argv.push_back(i + 1);
  scrub_argv(argc, argv, secret_argv);
  switch (parsed.what) {
    case parse_result::kind::help: {
      const std::string text = parsed.help_for ? help_text(*parsed.help_for) : help_text();
      return write_stdout(text) ? exit_code::ok : exit_code::software;
    }
    case parse_result::kind::version:
      return write_stdout(std::string("redlock ") + REDLOCK_VERSION_STRING + "\n") ? exit_code::ok
                                                                                   : exit_code::software;
    case parse_result::kind::error:
      print_error(parsed.error);
      return exit_code::usage;
    case parse_result::kind::config_error:
      print_error(parsed.error);
      return exit_code::config;
    case parse_result::kind::ok:
      break;
  }

  invocation& inv = parsed.inv;
  for (const std::string& w : parsed.warnings) print_warning(inv, w);
  if (const int status = load_secrets(inv); status != exit_code::ok) return status;
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
      case command::elect:
        return elect_command(inv);
      case command::leader:
        return leader_command(inv);
      case command::monitor:
        return monitor_command(inv);
    }
  } catch (const std::exception& e) {
    print_error(std::string("internal error: ") + e.what());
  }
  return exit_code::software;
}
