// libFuzzer target: the request-head parser and router of `redlock monitor
// --prometheus` (tools/redlock/http.h), which faces the network when bound to a
// public address.
//
// The first byte picks a cap on the head (so heads over it are cheap to reach);
// the rest is what a client sent. The parse runs with that cap and with the
// server's (max_http_head). Invariants: nothing crashes; the head ends at the first
// empty line, a line ending in LF with an optional CR before it (RFC 9112 2.2), as
// a separate byte-at-a-time scan finds it (regression: tests/fuzz/regressions/http/
// lf-then-crlf, "GET / HTTP/1.1\n\r\n" waited for more forever); incomplete below
// the cap, too_large at or over it; a complete head's method is A-Z only, its
// target visible ASCII, and its request line exactly "METHOD TARGET
// HTTP/1.<digit>"; the result depends on the head only (cutting the input after the head
// or adding bytes after it changes nothing); the response's status line and
// Content-Length match what the route promises.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "redlock/http.h"

namespace {

using redlock::cli::http_head;
using redlock::cli::max_http_head;
using redlock::cli::parse_http_head;
using state = http_head::state;

[[noreturn]] void fail(const char* what, std::string_view input) {
  std::fprintf(stderr, "fuzz_http: %s\n  input (%zu bytes): ", what, input.size());
  for (unsigned char c : input) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      std::fputc(c, stderr);
    } else {
      std::fprintf(stderr, "\\x%02x", c);
    }
  }
  std::fputc('\n', stderr);
  std::abort();
}

// The length of the head, empty line included, found one byte at a time; npos
// while there is no empty line.
std::size_t reference_head_length(std::string_view s) {
  bool line_empty = true;  // nothing but at most one CR since the line began
  bool cr = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\n') {
      if (line_empty) return i + 1;
      line_empty = true;
      cr = false;
    } else if (c == '\r' && line_empty && !cr) {
      cr = true;
    } else {
      line_empty = false;
    }
  }
  return std::string_view::npos;
}

bool same(const http_head& a, const http_head& b) {
  return a.st == b.st && a.method == b.method && a.target == b.target;
}

void check(std::string_view in, std::size_t cap) {
  const http_head h = parse_http_head(in, cap);
  const std::size_t len = reference_head_length(in);
  if (redlock::cli::http_head_length(in) != len) fail("http_head_length is not where the head ends", in);
  if (len == std::string_view::npos || len > cap) {
    const state want = in.size() >= cap ? state::too_large : state::incomplete;
    if (h.st != want)
      fail(want == state::too_large ? "not too_large at the cap" : "not incomplete below the cap", in);
    return;
  }
  if (h.st != state::complete && h.st != state::bad)
    fail("a head that ended is neither complete nor bad", in);
  if (h.st == state::complete) {
    if (h.method.empty() || h.target.empty()) fail("complete with an empty method or target", in);
    for (char c : h.method) {
      if (c < 'A' || c > 'Z') fail("a method outside A-Z", in);
    }
    for (char c : h.target) {
      if (c <= ' ' || c >= 0x7f) fail("a target with a blank, a control character or a non-ASCII byte", in);
    }
    std::string_view line = in.substr(0, in.find('\n'));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string start = h.method + " " + h.target + " HTTP/1.";
    if (line.size() != start.size() + 1 || line.substr(0, start.size()) != start || line.back() < '0' ||
        line.back() > '9') {
      fail("the request line is not METHOD TARGET HTTP/1.<digit>", in);
    }
  }
  // The head alone decides: without what followed it, or with more after it.
  const std::string head(in.substr(0, len));
  if (!same(parse_http_head(head, cap), h)) fail("the bytes after the head changed the result", in);
  if (!same(parse_http_head(head + "GET /x HTTP/1.1\r\n\r\n", cap), h))
    fail("appended bytes changed the result", in);
  // ... and it had not ended one byte earlier.
  const http_head shorter = parse_http_head(std::string_view(head).substr(0, len - 1), cap);
  if (shorter.st != state::incomplete) fail("the head without its last byte is not incomplete", in);
}

void check_route(std::string_view in) {
  const http_head h = parse_http_head(in);
  const std::string r =
      redlock::cli::http_route(h, "/metrics", "text/plain", [] { return std::string("m 1\n"); });
  int want = 0;
  switch (h.st) {
    case state::too_large:
      want = 431;
      break;
    case state::bad:
    case state::incomplete:
      want = 400;
      break;
    case state::complete: {
      const std::string_view target = std::string_view(h.target).substr(0, h.target.find('?'));
      want = target != "/metrics" ? 404 : h.method != "GET" ? 405 : 200;
      break;
    }
  }
  const std::string status = "HTTP/1.1 " + std::to_string(want) + " ";
  if (r.compare(0, status.size(), status) != 0) fail("the response's status is not the route's", in);
  const std::size_t body_at = r.find("\r\n\r\n");
  const std::size_t cl = r.find("\r\nContent-Length: ");
  if (body_at == std::string::npos || cl == std::string::npos || cl > body_at)
    fail("a response without a head", in);
  const std::size_t body = r.size() - body_at - 4;
  if (std::strtoull(r.c_str() + cl + 18, nullptr, 10) != body) fail("Content-Length is not the body's", in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t cap = 16 + std::size_t{data[0]} * 8;  // 16 .. 2056 bytes
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  check(in, cap);
  check(in, max_http_head);
  check_route(in);
  return 0;
}
