// redlock_gendoc: writes the man page redlock(1) or the bash completion script,
// rendered from the same tables as `redlock --help` (args.cc), to a file. Run at
// build time (tools/CMakeLists.txt); not installed.
//
//   redlock_gendoc man|bash OUTPUT
#include <cstdio>
#include <cstring>
#include <string>

#include "args.h"
#include "redlock/version.h"

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "man") != 0 && std::strcmp(argv[1], "bash") != 0)) {
    std::fputs("usage: redlock_gendoc man|bash OUTPUT\n", stderr);
    return 64;
  }
  const std::string text = std::strcmp(argv[1], "man") == 0 ? redlock::cli::man_page(REDLOCK_VERSION_STRING)
                                                             : redlock::cli::bash_completion();
  std::FILE* f = std::fopen(argv[2], "w");
  if (f == nullptr) {
    std::perror(argv[2]);
    return 73;
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) {
    std::perror(argv[2]);
    return 74;
  }
  return 0;
}
