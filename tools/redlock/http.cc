#include "http.h"

namespace redlock::cli {

std::size_t http_head_length(std::string_view received) noexcept {
  std::size_t line = 0;
  for (std::size_t lf = received.find('\n'); lf != std::string_view::npos; lf = received.find('\n', line)) {
    if (lf == line || (lf == line + 1 && received[line] == '\r')) return lf + 1;
    line = lf + 1;
  }
  return std::string_view::npos;
}

http_head parse_http_head(std::string_view received, std::size_t cap) {
  http_head h;
  const std::size_t end = http_head_length(received);
  if (end == std::string_view::npos || end > cap) {
    h.st = received.size() >= cap ? http_head::state::too_large : http_head::state::incomplete;
    return h;
  }
  std::string_view line = received.substr(0, received.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  h.st = http_head::state::bad;
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || sp1 == 0 || sp2 == sp1 + 1) return h;
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  for (char c : method) {
    if (c < 'A' || c > 'Z') return h;
  }
  // A target is visible ASCII (no blank, control character or bare CR); the
  // version is HTTP/1.<digit>.
  for (char c : target) {
    if (c <= ' ' || c >= 0x7f) return h;
  }
  if (version.size() != 8 || version.rfind("HTTP/1.", 0) != 0 || version[7] < '0' || version[7] > '9')
    return h;
  h.st = http_head::state::complete;
  h.method = std::string(method);
  h.target = std::string(target);
  return h;
}

const char* http_reason(int status) noexcept {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Internal Server Error";
  }
}

std::string http_response(int status, std::string_view content_type, std::string_view body,
                          std::string_view extra_headers) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + http_reason(status) + "\r\n";
  out += "Content-Type: ";
  out += content_type;
  out += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n";
  out += extra_headers;
  out += "\r\n";
  out += body;
  return out;
}

}  // namespace redlock::cli
