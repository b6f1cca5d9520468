// bench_delay_proxy: the delay proxy of delay_proxy.h in a process of its own, so
// that the CPU it spends is neither the client's nor the servers'.
//
//   bench_delay_proxy --to HOST:PORT [--listen HOST:PORT] [--delay-ms N | --delay-us N]
//                     [--both-directions] [--max-seconds N] [--control-stdin] [--nice N]
//
// Prints "port N" (the port it listens on) on stdout once it listens, then serves
// until SIGTERM or SIGINT, until --max-seconds have passed (default 600: a
// forgotten proxy does not live on), or until its parent dies (PR_SET_PDEATHSIG).
// With --control-stdin it also reads commands from stdin, one a line:
//   delay US   set the delay (microseconds; each direction with --both-directions)
// and answers each with "ok" (or "error ...") on stdout; end of stdin ends it.
// Its timers run with a 1 ns slack (PR_SET_TIMERSLACK: the delay is not rounded
// up by the default 50 us), and --nice N (e.g. -10, as root) makes its wakeups less
// late on a loaded machine: the delay stays the delay, not the delay plus a wait
// for a core. Exit status 0 when stopped, 2 on a usage error, 1 when it cannot listen.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "delay_proxy.h"

namespace {

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_delay_proxy --to HOST:PORT [--listen HOST:PORT] [--delay-ms N | --delay-us N]\n"
               "                         [--both-directions] [--max-seconds N] [--control-stdin] [--nice N]\n");
}

bool split_host_port(const std::string& s, std::string& host, int& port) {
  const std::size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  char* end = nullptr;
  const long p = std::strtol(s.c_str() + colon + 1, &end, 10);
  if (end == s.c_str() + colon + 1 || *end != '\0' || p < 0 || p > 65535) return false;
  host = s.substr(0, colon);
  port = static_cast<int>(p);
  return true;
}

bool parse_long(const char* s, long lo, long hi, long& out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

// Handles one control line; the answer goes to stdout.
void control(redlock::bench::delay_proxy& proxy, const std::string& line) {
  long us = 0;
  if (line.rfind("delay ", 0) == 0 && parse_long(line.c_str() + 6, 0, 600'000'000, us)) {
    proxy.set_delay(std::chrono::microseconds(us));
    std::printf("ok\n");
  } else {
    std::printf("error unknown command\n");
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  // Dies with the process that started it (the benchmark), whatever the way.
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) return 1;  // the parent died before the line above

  std::string listen_host = "127.0.0.1", to_host;
  int listen_port = 0, to_port = -1;
  long delay_us = 0, max_seconds = 600;
  long nice_value = 0;
  bool both = false, control_stdin = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    long n = 0;
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--both-directions") {
      both = true;
    } else if (a == "--control-stdin") {
      control_stdin = true;
    } else if (v != nullptr && a == "--listen" && split_host_port(v, listen_host, listen_port)) {
      ++i;
    } else if (v != nullptr && a == "--to" && split_host_port(v, to_host, to_port)) {
      ++i;
    } else if (v != nullptr && a == "--delay-ms" && parse_long(v, 0, 600'000, n)) {
      delay_us = n * 1000;
      ++i;
    } else if (v != nullptr && a == "--delay-us" && parse_long(v, 0, 600'000'000, n)) {
      delay_us = n;
      ++i;
    } else if (v != nullptr && a == "--nice" && parse_long(v, -20, 19, n)) {
      nice_value = n;
      ++i;
    } else if (v != nullptr && a == "--max-seconds" && parse_long(v, 1, 86'400, n)) {
      max_seconds = n;
      ++i;
    } else {
      std::fprintf(stderr, "bench_delay_proxy: bad argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (to_port <= 0) {
    std::fprintf(stderr, "bench_delay_proxy: --to HOST:PORT is required\n");
    usage(stderr);
    return 2;
  }

  ::prctl(PR_SET_TIMERSLACK, 1UL);
  if (nice_value != 0 && ::setpriority(PRIO_PROCESS, 0, static_cast<int>(nice_value)) != 0)
    std::fprintf(stderr, "bench_delay_proxy: --nice %ld: %s (going on)\n", nice_value, std::strerror(errno));

  // SIGTERM and SIGINT are taken with sigtimedwait below; the proxy's thread,
  // started after this, inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  try {
    redlock::bench::delay_proxy proxy(listen_host, listen_port, to_host, to_port,
                                      std::chrono::microseconds(delay_us), both);
    std::printf("port %d\n", proxy.port());
    std::fflush(stdout);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(max_seconds);
    std::string pending;
    for (;;) {
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) break;
      // Wake at least every 100 ms to look for a stop signal.
      const auto slice = std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(100));
      const int slice_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(slice).count()) + 1;
      if (control_stdin) {
        pollfd p{STDIN_FILENO, POLLIN, 0};
        if (::poll(&p, 1, slice_ms) > 0) {
          char buf[512];
          const ssize_t got = ::read(STDIN_FILENO, buf, sizeof buf);
          if (got <= 0) break;  // end of stdin: the controller is gone
          pending.append(buf, static_cast<std::size_t>(got));
          for (std::size_t nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
            control(proxy, pending.substr(0, nl));
            pending.erase(0, nl + 1);
          }
        }
        timespec zero{0, 0};
        if (::sigtimedwait(&stop_signals, nullptr, &zero) > 0) break;
      } else {
        timespec ts{0, static_cast<long>(slice_ms) * 1'000'000L};
        if (::sigtimedwait(&stop_signals, nullptr, &ts) > 0) break;
      }
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "bench_delay_proxy: %s\n", ex.what());
    return 1;
  }
  return 0;
}
