// Parsing and redaction of node URIs. Pure; no I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

// A host and port (a cluster node or a sentinel given as a seed).
struct host_port {
  std::string host;  // name or address (IPv6 without brackets)
  int port = 0;
};

struct node_address {
  enum class kind { tcp, unix_socket };
  // What one Redlock node is: one server, a whole Redis Cluster (host:port is its
  // first seed; the shards are discovered), or the master a Sentinel group names
  // (host:port is the first sentinel).
  enum class deployment { standalone, cluster, sentinel };
  kind type = kind::tcp;
  deployment topology = deployment::standalone;
  std::vector<host_port> seeds;  // cluster, sentinel: the further entry points (?seed=HOST:PORT)
  std::string master_name;      // sentinel: the name Sentinel knows the master by
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

// "host:port", an IPv6 address in brackets ("[::1]:6379").
std::string host_port_text(const std::string& host, int port);

// Parses redis://[user[:password]@]host[:port][/db], the same with rediss:// (TLS),
// unix:///path[?db=N] (never TLS), a Redis Cluster as one node:
// redis+cluster://[user[:password]@]host[:port][?seed=HOST:PORT&...] (rediss+cluster://
// for TLS; database 0 only, as in every cluster), or a Sentinel-managed master:
// redis+sentinel://[user[:password]@]host[:port]/MASTER_NAME[?seed=HOST:PORT&...]
// (rediss+sentinel:// for TLS; the default port is Sentinel's, 26379). Seeds must be
// distinct and differ from host:port.
// User and password may be percent-encoded. On failure returns false and sets
// `error` to a message naming the (redacted) URI and the problem.
bool parse_node_uri(std::string_view uri, node_address& out, std::string& error);

// Whether every character of `host` may be in a host name or address (letters,
// digits, '.', '-', ':', '_'); true for "" (say "missing host" first where it matters).
bool host_chars_valid(std::string_view host) noexcept;

// The URI with any password replaced by "***"; works on malformed input too.
std::string redact_uri(std::string_view uri);

}  // namespace redlock::detail
