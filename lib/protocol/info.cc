// INFO fields, eviction risk and its warning text, error kinds, and the operation
// kind of a script (info.h).
#include "protocol/info.h"

#include <algorithm>

#include "protocol/reply.h"

namespace redlock::detail {

std::string first_line(const char* s, std::size_t n) { return printable_line(std::string_view(s, n)); }

// An authentication refusal. (An ACL refusal of an authenticated user, NOPERM, is
// not one: see is_permission_error.)
bool is_auth_error(std::string_view e) {
  return e.rfind("NOAUTH", 0) == 0 || e.rfind("WRONGPASS", 0) == 0 ||
         e.rfind("ERR invalid password", 0) == 0 || e.rfind("ERR invalid username-password", 0) == 0 ||
         e.rfind("ERR AUTH", 0) == 0 || e.rfind("ERR Client sent AUTH", 0) == 0;
}

std::string info_field(std::string_view info, std::string_view name) {
  // Fields are "name:value" lines; match at a line start only (the text begins
  // with a "# Section" line, so every field follows a newline).
  std::size_t from = 0;
  while (true) {
    const std::size_t at = info.find(name, from);
    if (at == std::string_view::npos) return {};
    const std::size_t colon = at + name.size();
    if (at > 0 && info[at - 1] == '\n' && colon < info.size() && info[colon] == ':') {
      const std::size_t end = info.find_first_of("\r\n", colon + 1);
      return std::string(info.substr(colon + 1, end == std::string_view::npos ? std::string_view::npos : end - colon - 1));
    }
    from = at + 1;
  }
}

std::vector<std::string> info_replicas(std::string_view info, int count) {
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(count));
  // "slaveK:ip=127.0.0.1,port=7004,state=online,offset=5,lag=0"
  const auto attribute = [](std::string_view line, std::string_view key) -> std::string_view {
    std::size_t from = 0;
    while (from <= line.size()) {
      const std::size_t end = std::min(line.find(',', from), line.size());
      const std::string_view item = line.substr(from, end - from);
      if (item.size() > key.size() && item.substr(0, key.size()) == key && item[key.size()] == '=') {
        return item.substr(key.size() + 1);
      }
      from = end + 1;
    }
    return {};
  };
  for (int k = 0; k < count; ++k) {
    const std::string line = info_field(info, "slave" + std::to_string(k));
    const std::string_view ip = attribute(line, "ip");
    const std::string_view port = attribute(line, "port");
    if (ip.empty() || port.empty()) {
      names.push_back("#" + std::to_string(k));
    } else {
      names.push_back(printable_line(std::string(ip) + ":" + std::string(port)));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

eviction_risk eviction_risk_of(std::string_view policy) {
  if (policy.empty() || policy == "noeviction") return eviction_risk::none;
  if (policy.rfind("volatile-", 0) == 0) return eviction_risk::keys_with_ttl;
  // allkeys-*, and any policy this client does not know: assume the worst.
  return eviction_risk::any_key;
}

std::string eviction_warning_text(std::string_view node, std::string_view policy, std::string_view maxmemory) {
  std::string m = std::string(node) + ": maxmemory-policy " + printable_line(policy);
  if (eviction_risk_of(policy) == eviction_risk::keys_with_ttl) {
    m += " may evict keys that have a TTL when memory runs out: held locks (every lock key has one), so a second "
         "client can acquire a lock still held; fence counters (no TTL) are not evicted";
  } else {
    m += " may evict any key when memory runs out: held locks (a second client can acquire a lock still held) and "
         "fence counters (fencing tokens can go backwards; fenced acquires do not count this node)";
  }
  if (maxmemory == "0") {
    m += "; maxmemory is 0 now (no limit), but it can be set at run time";
  } else if (!maxmemory.empty()) {
    m += "; maxmemory " + printable_line(maxmemory) + " bytes";
  }
  m += ". Lock nodes need maxmemory-policy noeviction";
  return m;
}

operation_kind kind_of(script_id s) noexcept {
  switch (s) {
    case script_id::extend: return operation_kind::extend;
    case script_id::release: return operation_kind::release;
    case script_id::inspect:
    case script_id::ping: return operation_kind::inspect;
    default: return operation_kind::acquire;  // acquire scripts, SET NX, the fence commit
  }
}

}  // namespace redlock::detail
