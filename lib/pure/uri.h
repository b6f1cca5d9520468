// Parsing and redaction of node URIs. Pure; no I/O.
#pragma once

#include <string>
#include <string_view>

namespace redlock::detail {

struct node_address {
  enum class kind { tcp, unix_socket };
  kind type = kind::tcp;
  std::string host;  // tcp: name or address (IPv6 without brackets)
  int port = 6379;   // tcp
  std::string path;  // unix socket path
  std::string username;  // ACL user; empty = default user
  std::string password;  // empty = no AUTH
  bool has_password = false;
  long db = 0;
  bool tls = false;      // rediss://: TLS over the TCP stream (tls_options)
  std::string display;  // the URI with the password replaced by "***"
};

// Parses redis://[user[:password]@]host[:port][/db], the same with rediss:// (TLS),
// or unix:///path[?db=N] (never TLS).
// User and password may be percent-encoded. On failure returns false and sets
// `error` to a message naming the (redacted) URI and the problem.
bool parse_node_uri(std::string_view uri, node_address& out, std::string& error);

// The URI with any password replaced by "***"; works on malformed input too.
std::string redact_uri(std::string_view uri);

}  // namespace redlock::detail
