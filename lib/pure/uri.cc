#include "pure/uri.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "pure/decimal.h"

namespace redlock::detail {
namespace {

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

bool parse_number(std::string_view s, long max, long& out) {
  long long v = 0;
  if (s.size() > 10 || !parse_decimal(s, max, v)) return false;
  out = static_cast<long>(v);
  return true;
}

bool has_control_chars(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

bool fail(std::string& error, const std::string& display, const std::string& problem) {
  error = "node URI '" + display + "': " + problem;
  return false;
}

// host[:port] or [v6]:port into `out` (the port stays as it is when absent); on
// failure false, and `problem` says what is wrong.
bool parse_host_port(std::string_view hostport, host_port& out, std::string& problem) {
  if (hostport.empty()) {
    problem = "missing host";
    return false;
  }
  std::string_view portpart;
  if (hostport.front() == '[') {
    const std::size_t close = hostport.find(']');
    if (close == std::string_view::npos) {
      problem = "unterminated '[' in IPv6 host";
      return false;
    }
    out.host = std::string(hostport.substr(1, close - 1));
    const std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        problem = "unexpected characters after ']'";
        return false;
      }
      portpart = after.substr(1);
      if (portpart.empty()) {
        problem = "empty port after ':'";
        return false;
      }
    }
  } else {
    const std::size_t colon = hostport.find(':');
    out.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) {
      portpart = hostport.substr(colon + 1);
      if (portpart.empty()) {
        problem = "empty port after ':'";
        return false;
      }
    }
  }
  if (out.host.empty()) {
    problem = "missing host";
    return false;
  }
  if (!host_chars_valid(out.host)) {
    problem = "host contains an invalid character";
    return false;
  }
  if (!portpart.empty()) {
    long port = 0;
    if (!parse_number(portpart, 65535, port) || port == 0) {
      problem = "port must be a number from 1 to 65535";
      return false;
    }
    out.port = static_cast<int>(port);
  }
  return true;
}

struct scheme_form {
  std::string_view prefix;
  bool tls;
  node_address::deployment topology;
};

// Longest first where one prefix could start another.
constexpr scheme_form kSchemes[] = {
    {"rediss+sentinel://", true, node_address::deployment::sentinel},
    {"redis+sentinel://", false, node_address::deployment::sentinel},
    {"rediss+cluster://", true, node_address::deployment::cluster},
    {"redis+cluster://", false, node_address::deployment::cluster},
    {"rediss://", true, node_address::deployment::standalone},
    {"redis://", false, node_address::deployment::standalone},
};

// The query of a cluster or Sentinel URI: seed=HOST:PORT, repeated.
bool parse_seeds(std::string_view query, int default_port, node_address& out, std::string& error) {
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (param.empty()) continue;
    if (param.substr(0, 5) != "seed=") {
      const std::string name(param.substr(0, param.find('=')));
      return fail(error, out.display, "unknown query parameter '" + name + "' (only seed=HOST:PORT is supported)");
    }
    host_port e;
    e.port = default_port;
    std::string problem;
    if (!parse_host_port(param.substr(5), e, problem)) {
      return fail(error, out.display, "seed '" + std::string(param.substr(5)) + "': " + problem);
    }
    const auto same = [&](const host_port& o) { return o.host == e.host && o.port == e.port; };
    if ((e.host == out.host && e.port == out.port) || std::any_of(out.seeds.begin(), out.seeds.end(), same)) {
      return fail(error, out.display, "seed '" + std::string(param.substr(5)) + "' is given twice");
    }
    out.seeds.push_back(std::move(e));
  }
  return true;
}

}  // namespace

bool host_chars_valid(std::string_view host) noexcept {
  return std::all_of(host.begin(), host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '_';
  });
}

std::string redact_uri(std::string_view uri) {
  std::string s(uri);
  // Never echo control characters (terminal escapes) back to the user.
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  const std::size_t at = s.rfind('@');
  if (at == std::string::npos) return s;
  // Only a real scheme ([A-Za-z][A-Za-z0-9+.-]*) ends at "://"; one inside the user
  // info (a password may contain "://") must not move the start of the user info.
  std::size_t scheme = s.find("://");
  for (std::size_t i = 0; scheme != std::string::npos && i < scheme; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (!(std::isalpha(c) || (i > 0 && (std::isdigit(c) || c == '+' || c == '.' || c == '-')))) {
      scheme = std::string::npos;
    }
  }
  const std::size_t auth_begin = scheme == std::string::npos || scheme == 0 || scheme > at ? 0 : scheme + 3;
  const std::string_view userinfo(s.data() + auth_begin, at - auth_begin);
  const std::size_t colon = userinfo.find(':');
  if (colon == std::string_view::npos) {
    // A unix socket path may contain '@' (unix:///tmp/a@b.sock): no user info there.
    if (starts_with_ci(s, "unix://") && !userinfo.empty() && userinfo.front() == '/') return s;
    // Otherwise it may be a bare password (redis://secret@host).
    return s.substr(0, auth_begin) + "***" + s.substr(at);
  }
  return s.substr(0, auth_begin + colon + 1) + "***" + s.substr(at);
}

bool parse_node_uri(std::string_view uri, node_address& out, std::string& error) {
  out = node_address{};
  const std::string display = redact_uri(uri);
  out.display = display;
  if (uri.empty()) return fail(error, display, "empty URI");
  if (has_control_chars(uri)) return fail(error, display, "contains control characters");

  if (starts_with_ci(uri, "unix://")) {
    std::string_view rest = uri.substr(7);
    std::size_t q = rest.find('?');
    std::string_view path = rest.substr(0, q);
    if (path.empty() || path.front() != '/') {
      return fail(error, display, "unix socket path must be absolute (unix:///path/to.sock)");
    }
    if (path.size() > 107) return fail(error, display, "unix socket path is longer than 107 bytes");
    out.type = node_address::kind::unix_socket;
    out.path = std::string(path);
    if (q != std::string_view::npos) {
      std::string_view query = rest.substr(q + 1);
      while (!query.empty()) {
        std::size_t amp = query.find('&');
        std::string_view param = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        if (param.substr(0, 3) == "db=") {
          if (!parse_number(param.substr(3), 2147483647L, out.db)) {
            return fail(error, display, "db must be a non-negative integer");
          }
        } else {
          return fail(error, display, "unknown query parameter (only db=N is supported)");
        }
      }
    }
    return true;
  }

  const scheme_form* form = nullptr;
  for (const scheme_form& f : kSchemes) {
    if (starts_with_ci(uri, f.prefix)) {
      form = &f;
      break;
    }
  }
  if (form == nullptr) {
    return fail(error, display,
                "scheme must be redis://, rediss:// (TLS) or unix:// (or, for a Redis Cluster or a Sentinel "
                "group as one node, redis+cluster://, rediss+cluster://, redis+sentinel:// or "
                "rediss+sentinel://)");
  }
  out.tls = form->tls;
  out.topology = form->topology;
  const bool standalone = form->topology == node_address::deployment::standalone;
  const bool sentinel = form->topology == node_address::deployment::sentinel;
  std::string_view rest = uri.substr(form->prefix.size());
  // Authority ends at the first '/' after the user info (a password may hold '/',
  // '?' or '@': the last '@' ends it).
  std::size_t at = rest.rfind('@');
  std::string_view userinfo;
  if (at != std::string_view::npos) {
    userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
  }
  if (!standalone && (userinfo.find("?seed=") != std::string_view::npos ||
                      userinfo.find("&seed=") != std::string_view::npos)) {
    return fail(error, display, "a seed takes HOST:PORT only (the credentials, for every node, go before the first host)");
  }
  std::string_view query;
  if (!standalone) {
    const std::size_t q = rest.find('?');
    if (q != std::string_view::npos) {
      query = rest.substr(q + 1);
      rest = rest.substr(0, q);
    }
  }
  std::size_t slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  std::string_view dbpart = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  if (hostport.find('?') != std::string_view::npos || dbpart.find('?') != std::string_view::npos) {
    return fail(error, display, "query parameters are not supported in redis:// and rediss:// URIs");
  }

  if (at != std::string_view::npos) {
    std::size_t colon = userinfo.find(':');
    std::string_view user = userinfo.substr(0, colon);
    if (!percent_decode(user, out.username)) return fail(error, display, "bad percent-encoding in user name");
    if (colon != std::string_view::npos) {
      if (!percent_decode(userinfo.substr(colon + 1), out.password)) {
        return fail(error, display, "bad percent-encoding in password");
      }
      out.has_password = true;
      if (out.password.empty()) return fail(error, display, "empty password after ':'");
    } else if (!out.username.empty()) {
      return fail(error, display, "user name without password (use user:password@)");
    }
  }

  host_port first;
  first.port = sentinel ? 26379 : 6379;
  std::string problem;
  if (!parse_host_port(hostport, first, problem)) return fail(error, display, problem);
  out.host = std::move(first.host);
  out.port = first.port;
  if (sentinel) {
    if (dbpart.empty()) {
      return fail(error, display, "missing master name (redis+sentinel://HOST:PORT/MASTER_NAME)");
    }
    if (!percent_decode(dbpart, out.master_name)) return fail(error, display, "bad percent-encoding in master name");
    for (char c : out.master_name) {
      if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '/') {
        return fail(error, display, "master name contains a space, '/' or a control character");
      }
    }
  } else if (!dbpart.empty()) {
    if (!standalone) return fail(error, display, "a Redis Cluster has database 0 only (no /N after the host)");
    if (!parse_number(dbpart, 2147483647L, out.db)) {
      return fail(error, display, "database must be a non-negative integer (redis://host:port/N)");
    }
  }
  if (!standalone && !parse_seeds(query, sentinel ? 26379 : 6379, out, error)) return false;
  return true;
}

std::string host_port_text(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace redlock::detail
