#include "pure/token.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace redlock::detail {

void random_bytes(void* out, std::size_t n) {
  auto* p = static_cast<unsigned char*>(out);
  std::size_t got = 0;
  int failures = 0;
  while (got < n) {
    ssize_t r = getrandom(p + got, n - got, 0);
    if (r > 0) {
      got += static_cast<std::size_t>(r);
    } else if (r < 0 && errno != EINTR && ++failures > 16) {
      std::fprintf(stderr, "redlock: getrandom failed: %s\n", std::strerror(errno));
      std::abort();
    }
  }
}

std::string make_token() {
  // One getrandom call per token, straight from the kernel, and no buffer of
  // random bytes kept in the process: a cache would be copied into every child by
  // fork(), and two workers of a pre-fork server would draw the same tokens (each
  // one then owning the other's lock). About 1 us per token here (0.2 us with the
  // old 1 KiB pool), against a network round trip of tens of us per acquire.
  unsigned char raw[16];
  random_bytes(raw, sizeof raw);
  static const char digits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (std::size_t i = 0; i < sizeof raw; ++i) {
    out[2 * i] = digits[raw[i] >> 4];
    out[2 * i + 1] = digits[raw[i] & 15];
  }
  std::memset(raw, 0, sizeof raw);  // a token's bytes are not kept around
  return out;
}

}  // namespace redlock::detail
