// redlock_gendoc: writes the man page redlock(1) or the bash, zsh or fish
// completion script, rendered from the same tables as `redlock --help` (args.cc),
// to a file. Run at build time (tools/CMakeLists.txt); not installed.
//
//   redlock_gendoc man|bash|zsh|fish OUTPUT
#include <cstdio>
#include <cstring>
#include <string>

#include "args.h"
#include "redlock/version.h"

int main(int argc, char** argv) {
  const std::string what = argc == 3 ? argv[1] : "";
  std::string text;
  if (what == "man") {
    text = redlock::cli::man_page(REDLOCK_VERSION_STRING);
  } else if (what == "bash") {
    text = redlock::cli::bash_completion();
  } else if (what == "zsh") {
    text = redlock::cli::zsh_completion();
  } else if (what == "fish") {
    text = redlock::cli::fish_completion();
  } else {
    std::fputs("usage: redlock_gendoc man|bash|zsh|fish OUTPUT\n", stderr);
    return 64;
  }
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
