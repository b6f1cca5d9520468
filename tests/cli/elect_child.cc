// The command `redlock elect` runs in tests/cli/elect_cli_test.cc: appends
// "<REDLOCK_LEADER_ID> <REDLOCK_TERM> <CLOCK_MONOTONIC ns>" to LOG every 5 ms
// while it runs (one write per line, O_APPEND: lines never interleave), and exits
// 0 once STOPFILE exists. Exits 3 after 60 s in any case (a bounded loop).
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const char* id = std::getenv("REDLOCK_LEADER_ID");
  const char* term = std::getenv("REDLOCK_TERM");
  if (id == nullptr || term == nullptr) return 2;
  const int fd = ::open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return 2;
  for (int i = 0; i < 12000; ++i) {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    const long long ns = static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
    const std::string line = std::string(id) + " " + term + " " + std::to_string(ns) + "\n";
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return 2;
    if (::access(argv[2], F_OK) == 0) return 0;
    ::usleep(5000);
  }
  return 3;
}
