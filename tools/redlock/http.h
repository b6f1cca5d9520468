// The HTTP/1.x subset `redlock monitor --prometheus` speaks: parsing a request
// head and building a response. Pure.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace redlock::cli {

// The most a request head may take, request line and headers, blank line included.
inline constexpr std::size_t max_http_head = 8 * 1024;

struct http_head {
  enum class state {
    incomplete,  // no blank line yet, and below the cap: wait for more
    complete,    // method and target are set
    too_large,   // no blank line within `cap` bytes: 431
    bad,         // not an HTTP/1.x request line: 400
  };
  state st = state::incomplete;
  std::string method;
  std::string target;  // as sent: "/metrics", "/metrics?x=1", ...
};

// The length of a request head, its empty line included: the bytes up to the
// first empty line, where a line ends in LF with an optional CR before it (RFC 9112
// section 2.2: "\r\n\r\n", "\n\n", "\n\r\n", "\r\n\n"); npos while there is none.
std::size_t http_head_length(std::string_view received) noexcept;

// Parses the bytes received so far on a connection. The head ends as
// http_head_length() says; it must end within `cap` bytes. A complete head's
// request line is "METHOD TARGET HTTP/1.x": the method A-Z, the target visible
// ASCII; anything else is bad.
http_head parse_http_head(std::string_view received, std::size_t cap = max_http_head);

// A complete response with Content-Length and "Connection: close".
std::string http_response(int status, std::string_view content_type, std::string_view body,
                          std::string_view extra_headers = "");

// The reason phrase for the statuses used here ("OK", "Not Found", ...).
const char* http_reason(int status) noexcept;

// The response to a parsed head for a server of one resource, `path` (GET only;
// the query string is ignored): 200 with body() and content_type, 405 (with
// Allow: GET) for another method on it, 404 for another path, 400 for a bad head,
// 431 for a head over the cap.
template <class Body>
std::string http_route(const http_head& h, std::string_view path, std::string_view content_type, Body body) {
  switch (h.st) {
    case http_head::state::too_large:
      return http_response(431, "text/plain; charset=utf-8", "request header fields too large\n");
    case http_head::state::bad:
    case http_head::state::incomplete:
      return http_response(400, "text/plain; charset=utf-8", "bad request\n");
    case http_head::state::complete:
      break;
  }
  const std::string_view target = std::string_view(h.target).substr(0, h.target.find('?'));
  if (target != path) return http_response(404, "text/plain; charset=utf-8", "not found\n");
  if (h.method != "GET") {
    return http_response(405, "text/plain; charset=utf-8", "method not allowed\n", "Allow: GET\r\n");
  }
  return http_response(200, content_type, body());
}

}  // namespace redlock::cli
