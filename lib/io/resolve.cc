// Name resolution helpers (resolve.h): the connect order of a getaddrinfo list,
// address text, and the resolver override.
#include "io/resolve.h"

#include <arpa/inet.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace redlock::detail {
namespace {

std::atomic<resolver_override> g_resolver_override{nullptr};

}  // namespace

void set_resolver_override(resolver_override fn) noexcept { g_resolver_override.store(fn); }
resolver_override current_resolver_override() noexcept { return g_resolver_override.load(); }

std::vector<sockaddr_storage> connect_order(const struct addrinfo* list) {
  std::vector<sockaddr_storage> out;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addr == nullptr || (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)) continue;
    const std::size_t len = ai->ai_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (static_cast<std::size_t>(ai->ai_addrlen) < len) continue;
    sockaddr_storage ss{};
    std::memcpy(&ss, ai->ai_addr, len);
    const bool seen = std::any_of(out.begin(), out.end(), [&](const sockaddr_storage& o) {
      return o.ss_family == ss.ss_family && std::memcmp(&o, &ss, len) == 0;
    });
    if (!seen) out.push_back(ss);
  }
  return out;
}

std::string address_text(const sockaddr_storage& a) {
  char ip[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
    uv_ip6_name(in6, ip, sizeof ip);
    return "[" + std::string(ip) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  const auto* in4 = reinterpret_cast<const sockaddr_in*>(&a);
  uv_ip4_name(in4, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(in4->sin_port));
}

}  // namespace redlock::detail
