// Name resolution below the seam: the order a connect attempt tries a resolver's
// addresses in, how an address reads in an error, and the test seam that stands in
// for getaddrinfo. Used by uv_reactor.cc; no libuv type here.
#pragma once

#include <netdb.h>
#include <sys/socket.h>

#include <string>
#include <vector>

namespace redlock::detail {

// The addresses one connect attempt tries, in turn: the resolver's list in its
// order (IPv4 and IPv6 only), duplicates dropped.
std::vector<sockaddr_storage> connect_order(const struct addrinfo* list);
// "127.0.0.1:6379" or "[::1]:6379".
std::string address_text(const sockaddr_storage& a);

// Test seam: resolves a host name (never a numeric address) in place of
// getaddrinfo, returning numeric addresses in the order to try them. Null (the
// default) = the system resolver. Set it before creating a client; any thread.
using resolver_override = std::vector<std::string> (*)(const std::string& host);
void set_resolver_override(resolver_override fn) noexcept;
resolver_override current_resolver_override() noexcept;

}  // namespace redlock::detail
