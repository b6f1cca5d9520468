// libFuzzer target: the CLI's duration parser (tools/redlock/duration.h, read-only).
// Invariants: nothing crashes; an accepted duration is within [0, max_duration];
// format_duration of it parses back to the same value.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "redlock/duration.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using redlock::cli::format_duration;
  using redlock::cli::max_duration;
  using redlock::cli::parse_duration;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto d = parse_duration(text);
  if (!d) return 0;
  if (d->count() < 0 || *d > max_duration) std::abort();
  const auto again = parse_duration(format_duration(*d));
  if (!again || *again != *d) {
    std::fprintf(stderr, "fuzz_duration: %.*s -> %lld ms does not round-trip\n", static_cast<int>(size),
                 reinterpret_cast<const char*>(data), static_cast<long long>(d->count()));
    std::abort();
  }
  return 0;
}
