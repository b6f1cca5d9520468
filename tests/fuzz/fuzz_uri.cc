// libFuzzer target: node URI parsing and redaction (lib/uri.h).
//
// Two inputs per run: the raw bytes as a URI, and a URI built around a sentinel
// password. Invariants: nothing crashes; a parsed URI's display is its redaction;
// and a password never appears in the redacted text, the display, or the error.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "pure/uri.h"

namespace {

using redlock::detail::node_address;
using redlock::detail::parse_node_uri;
using redlock::detail::redact_uri;

constexpr char kSentinel[] = "Pw9SentinelQ7";

[[noreturn]] void fail(const char* what, const std::string& uri, const std::string& text) {
  std::fprintf(stderr, "fuzz_uri: %s\n  uri:  %s\n  text: %s\n", what, uri.c_str(), text.c_str());
  std::abort();
}

// Everything the parser may print about `uri` must hide `secret`.
void check_hidden(const std::string& uri, const std::string& secret) {
  const std::string redacted = redact_uri(uri);
  if (redacted.find(secret) != std::string::npos) fail("password in redact_uri()", uri, redacted);
  node_address out;
  std::string error;
  const bool ok = parse_node_uri(uri, out, error);
  if (out.display != redacted) fail("display differs from redact_uri()", uri, out.display);
  if (!ok && error.find(secret) != std::string::npos) fail("password in the error", uri, error);
  if (ok && out.display.find(secret) != std::string::npos) fail("password in the display", uri, out.display);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  // 1. The raw input, whatever it is.
  {
    const std::string raw(reinterpret_cast<const char*>(data), size);
    node_address out;
    std::string error;
    const bool ok = parse_node_uri(raw, out, error);
    if (out.display != redact_uri(raw)) fail("display differs from redact_uri()", raw, out.display);
    if (ok && out.has_password && out.password.empty()) fail("has_password with an empty password", raw, "");
    if (ok && out.type == node_address::kind::tcp && (out.port < 1 || out.port > 65535))
      fail("port out of range", raw, std::to_string(out.port));
    if (ok && out.db < 0) fail("negative db", raw, std::to_string(out.db));
    if (ok && out.topology != node_address::deployment::standalone && out.db != 0)
      fail("a cluster or Sentinel node with a database number", raw, std::to_string(out.db));
    if (ok && (out.topology == node_address::deployment::sentinel) == out.master_name.empty())
      fail("a master name without Sentinel, or Sentinel without one", raw, out.master_name);
    for (const auto& seed : ok ? out.seeds : decltype(out.seeds){}) {
      if (out.topology == node_address::deployment::standalone) fail("seeds on a standalone node", raw, "");
      if (seed.port < 1 || seed.port > 65535 || seed.host.empty()) fail("a seed out of range", raw, seed.host);
    }
  }
  // 2. A URI with a known password: scheme, user, password, '@', the rest.
  static const char* const schemes[] = {"redis://",          "REDIS://",         "unix://",
                                        "rediss://",         "",                 "redis:/",
                                        "redis+cluster://",  "rediss+cluster://", "redis+sentinel://",
                                        "rediss+sentinel://"};
  std::string uri = schemes[in.ConsumeIntegralInRange<int>(0, 9)];
  const std::string user = in.ConsumeRandomLengthString(16);
  const std::string pw_extra = in.ConsumeRandomLengthString(16);
  const std::string rest = in.ConsumeRemainingBytesAsString();
  // The password must be a password: no '@' after it inside the user info, so
  // the rest decides where the authority ends.
  if (pw_extra.find('@') != std::string::npos) return 0;
  uri += user + ":" + kSentinel + pw_extra + "@" + rest;
  // Only meaningful when the sentinel occurs once, inside the user info.
  if (uri.find(kSentinel) != uri.rfind(kSentinel)) return 0;
  if (user.find('@') != std::string::npos || rest.find('@') != std::string::npos) return 0;
  if (user.find(':') != std::string::npos) return 0;  // the password starts after the first ':'
  if (uri.rfind("unix://", 0) == 0 || uri.rfind("UNIX://", 0) == 0) {
    if (user.find('/') != std::string::npos) return 0;  // then it is a path, not user info
  }
  check_hidden(uri, kSentinel);
  return 0;
}
