// The checks of a client's arguments (validate.h): the options, and each call's
// arguments, as the problem they show.
#include "api/validate.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string_view>

#include "engine/core.h"
#include "ops/support.h"
#include "pure/decision.h"
#include "pure/keys.h"
#include "pure/retry.h"
#include "pure/slot.h"
#include "redlock/client.h"

namespace redlock::detail {

namespace {

// The servers a node address may reach, as comparable strings, without DNS: a
// unix socket's lexically normalised path; for TCP the port with the host as
// written (lower case), except that IP literals are compared in canonical form
// (IPv4-mapped IPv6 as IPv4) and "localhost" may be 127.0.0.1 or ::1. Two names
// that resolve to one address are not detected (no resolution at construction).
// REDLOCK_PREVIEW_CLUSTER=1 in the environment (read once, at the first client):
// redis+cluster:// nodes are accepted, for the tests of node/cluster_endpoint. A
// development switch that exists only until a grant on a cluster node counts once it
// is replicated (docs/design.md, issue 23, plan item 4: built in connection, not yet
// turned on for a cluster's shard connections): until then a cluster node gives NO
// failover safety (a master that fails over may lose a lock it granted), which is
// why it is refused by default. Sentinel nodes stay refused either way.
bool preview_cluster() {
  static const bool on = [] {
    const char* v = std::getenv("REDLOCK_PREVIEW_CLUSTER");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return on;
}

// REDLOCK_PREVIEW_SENTINEL=1 (read once, at the first client): redis+sentinel://
// nodes are accepted, for the tests of node/sentinel_endpoint, until the failover
// scenarios of issue 23 are built and tested over Sentinel groups.
bool preview_sentinel() {
  static const bool on = [] {
    const char* v = std::getenv("REDLOCK_PREVIEW_SENTINEL");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return on;
}

bool admitted(const detail::node_address& a) {
  switch (a.topology) {
    case detail::node_address::deployment::standalone:
      return true;
    case detail::node_address::deployment::cluster:
      return preview_cluster();
    case detail::node_address::deployment::sentinel:
      return preview_sentinel();
  }
  return false;
}

std::set<std::string> server_identities(const detail::node_address& a) {
  if (a.type == detail::node_address::kind::unix_socket) {
    return {"unix:" + std::filesystem::path(a.path).lexically_normal().string()};
  }
  const std::string port = std::to_string(a.port);
  std::string host = a.host;
  std::transform(host.begin(), host.end(), host.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (!host.empty() && host.back() == '.') host.pop_back();
  if (host == "localhost") return {"tcp:127.0.0.1:" + port, "tcp:[::1]:" + port};
  char buf[INET6_ADDRSTRLEN] = {};
  unsigned char v4[4];
  unsigned char v6[16];
  if (inet_pton(AF_INET, host.c_str(), v4) == 1 && inet_ntop(AF_INET, v4, buf, sizeof buf) != nullptr) {
    return {"tcp:" + std::string(buf) + ":" + port};
  }
  // The resolver also takes the inet_aton shorthands ("127.1", "0x7f.0.0.1",
  // "2130706433") as IPv4 literals: compare them in canonical form too. Only a
  // host of digits, hex digits, 'x' and dots (inet_aton ignores what follows a space).
  in_addr aton{};
  const bool aton_chars = !host.empty() && std::all_of(host.begin(), host.end(), [](unsigned char ch) {
    return std::isxdigit(ch) != 0 || ch == 'x' || ch == '.';
  });
  if (aton_chars && inet_aton(host.c_str(), &aton) != 0 && inet_ntop(AF_INET, &aton, buf, sizeof buf) != nullptr) {
    return {"tcp:" + std::string(buf) + ":" + port};
  }
  if (inet_pton(AF_INET6, host.c_str(), v6) == 1) {
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::equal(mapped, mapped + 12, v6) && inet_ntop(AF_INET, v6 + 12, buf, sizeof buf) != nullptr) {
      return {"tcp:" + std::string(buf) + ":" + port};
    }
    if (inet_ntop(AF_INET6, v6, buf, sizeof buf) != nullptr) return {"tcp:[" + std::string(buf) + "]:" + port};
  }
  return {"tcp:" + host + ":" + port};
}

// A Sentinel node is the master its sentinel names for a name: two names asked of
// one sentinel are two masters (whether they are two servers, the same-server check
// tells once connected).
std::set<std::string> node_identities(const detail::node_address& a) {
  std::set<std::string> ids = server_identities(a);
  if (a.topology != detail::node_address::deployment::sentinel) return ids;
  std::set<std::string> named;
  for (const std::string& id : ids) named.insert(id + "/" + a.master_name);
  return named;
}

// The first node of `c` that is a whole Redis Cluster, or nullptr.
const node_address* first_cluster_node(const detail::core& c) {
  for (const node_address& a : c.nodes()) {
    if (a.topology == node_address::deployment::cluster) return &a;
  }
  return nullptr;
}

}  // namespace

std::vector<detail::node_address> validate_options(const client_options& o) {
  if (o.nodes.empty()) throw config_error("no nodes configured");
  std::vector<detail::node_address> out;
  std::vector<std::set<std::string>> ids;
  for (const std::string& uri : o.nodes) {
    detail::node_address a;
    std::string err;
    if (!detail::parse_node_uri(uri, a, err)) throw config_error(err);
    // The forms parse (so a typo is named as one), but this version connects to
    // standalone masters only: refusing is honest, treating the seed or the
    // sentinel as a master would not be. A Redis Cluster node (node/cluster_endpoint)
    // is a development preview behind REDLOCK_PREVIEW_CLUSTER=1 (preview_cluster()).
    if (!admitted(a)) {
      throw config_error("node URI '" + a.display + "': " +
                         (a.topology == detail::node_address::deployment::cluster ? "a Redis Cluster"
                                                                                  : "a Sentinel-managed master") +
                         " as one node is not supported by this version yet (standalone masters only: "
                         "redis://, rediss://, unix://)");
    }
    std::set<std::string> id = node_identities(a);
    for (std::size_t i = 0; i < out.size(); ++i) {
      for (const std::string& s : id) {
        if (ids[i].count(s) == 0) continue;
        throw config_error("node URIs '" + out[i].display + "' and '" + a.display + "' name the same server (" +
                           s.substr(s.find(':') + 1) +
                           "): every node must be an independent master (another database number on the same "
                           "server is not another node)");
      }
    }
    ids.push_back(std::move(id));
    out.push_back(std::move(a));
  }
  for (const detail::node_address& a : out) {
    if (a.topology != detail::node_address::deployment::cluster || o.key_prefix.empty() || o.key_prefix[0] != '}')
      continue;
    throw config_error("key_prefix '" + o.key_prefix + "' must not start with '}' with a Redis Cluster node ('" +
                       a.display + "'): every key would have an empty hash tag (see docs/protocol.md)");
  }
  if (o.max_ttl.count() <= 0) throw config_error("max_ttl must be positive");
  if (*detail::check_ttl(o.max_ttl, o.clock_drift_factor) != '\0') {
    throw config_error(std::string("max_ttl: ") + detail::check_ttl(o.max_ttl, o.clock_drift_factor));
  }
  if (o.restart_quarantine.count() > 0 && o.restart_quarantine < o.max_ttl) {
    throw config_error("restart_quarantine (" + std::to_string(o.restart_quarantine.count()) +
                       " ms) is shorter than max_ttl (" + std::to_string(o.max_ttl.count()) +
                       " ms): a restarted node could vote while a lock it forgot is still valid");
  }
  if (o.command_timeout.count() <= 0) throw config_error("command_timeout must be positive");
  if (o.connect_timeout.count() <= 0) throw config_error("connect_timeout must be positive");
  if (o.reconnect_min_backoff.count() <= 0) throw config_error("reconnect_min_backoff must be positive");
  if (o.reconnect_max_backoff < o.reconnect_min_backoff) {
    throw config_error("reconnect_max_backoff must be at least reconnect_min_backoff");
  }
  if (o.notify_idle_close.count() <= 0) {
    throw config_error("notify_idle_close must be > 0");
  }
  if (o.clock_jump_threshold.count() < 0) throw config_error("clock_jump_threshold must not be negative");
  if (o.clock_sample_interval.count() < 0) throw config_error("clock_sample_interval must not be negative");
  if (o.max_reply_bytes == 0) throw config_error("max_reply_bytes must be positive");
  if (!(o.clock_drift_factor >= 0.0 && o.clock_drift_factor < 0.5)) {
    throw config_error("clock_drift_factor must be in [0, 0.5)");
  }
  return out;
}

// "" if the acquire arguments are fine, else the problem.
std::string check_acquire(const detail::core& c, std::string_view resource, const acquire_options& o) {
  if (resource.empty()) return "resource name must not be empty";
  // The fence counter of resource R is the key R + ":fence" (under the same
  // prefix): a lock on such a name would collide with it. The counter key keeps
  // its format (counters already on the nodes stay valid across upgrades, so
  // tokens never go backwards); the names are reserved instead.
  // The check is on the key (key_prefix + resource), the name a counter has too.
  const std::string_view suffix = detail::kFenceSuffix;
  if (detail::is_fence_key(resource)) {
    return "resource name must not end in \":fence\": '" + std::string(resource) +
           "' names the fence counter of resource '" + std::string(resource.substr(0, resource.size() - suffix.size())) +
           "' (see docs/fencing.md)";
  }
  if (const std::string key = c.key_for(std::string(resource)); detail::is_fence_key(key)) {
    return "key prefix + resource name must not end in \":fence\": key_prefix '" + c.options().key_prefix +
           "' and resource '" + std::string(resource) + "' make the key '" + key +
           "', the fence counter of the key '" + key.substr(0, key.size() - suffix.size()) + "' (see docs/fencing.md)";
  }
  if (const node_address* cl = first_cluster_node(c)) {
    // On a cluster node the lock key L is sent as "{L}" (docs/protocol.md): an L that
    // starts with '}' has an empty tag, so its fence counter and record would hash to
    // other slots than the key.
    if (const std::string key = c.key_for(std::string(resource)); key.front() == '}') {
      return "key prefix + resource name must not start with '}' on a Redis Cluster node ('" + cl->display +
             "'): the key '" + key + "' would have an empty hash tag (see docs/protocol.md)";
    }
  }
  if (std::string bad = c.ttl_problem(o.ttl); !bad.empty()) return bad;
  if (const char* bad = detail::check_retry(o.retry); *bad) return bad;
  if (o.extend_interval.count() < 0) return "extend_interval must not be negative";
  if (o.max_hold.count() < 0) return "max_hold must not be negative";
  if (o.max_hold.count() > 0 && *detail::check_ttl(o.max_hold, c.options().clock_drift_factor) != '\0') {
    // A validity capped at max_hold (shorter than the TTL) would be none at all.
    return "max_hold (" + std::to_string(o.max_hold.count()) +
           " ms) must be longer than the clock drift allowance (max_hold * drift_factor + 2 ms)";
  }
  if (o.auto_extend) {
    // Each watchdog tick needs time for one extension round (up to command_timeout)
    // before the validity it extends runs out: interval + command_timeout <= ttl - drift.
    const auto interval = o.extend_interval.count() > 0 ? o.extend_interval : o.ttl / 3;
    const auto budget = std::chrono::microseconds(o.ttl) - detail::drift_of(o.ttl, c.options().clock_drift_factor) -
                        std::chrono::microseconds(c.options().command_timeout);
    if (std::chrono::microseconds(interval) > budget) {
      return "extend_interval (" + std::to_string(interval.count()) +
             " ms) leaves no time for an extension round: it must be at most ttl - drift - command_timeout (" +
             std::to_string(std::max<std::int64_t>(0, budget.count() / 1000)) + " ms)";
    }
  }
  return "";
}

// "" if a set acquire's arguments are fine, else the problem.
std::string check_acquire_many(const detail::core& c, const std::vector<std::string>& resources,
                               const acquire_options& o) {
  if (std::string bad = detail::check_resource_set(resources); !bad.empty()) return bad;
  if (o.fencing)
    return "fencing is not supported for a set of resources: acquire them one by one with fencing";
  for (const std::string& r : resources) {
    if (std::string bad = check_acquire(c, r, o); !bad.empty()) return bad;
  }
  if (const node_address* cl = first_cluster_node(c)) {
    // One script runs on the set's keys, and a cluster runs a script on the keys of
    // one slot only: refused here, before any node is asked, not half-acquired.
    const std::string first = c.key_for(resources.front());
    const int slot = key_slot(cluster_key(first, first));
    for (const std::string& r : resources) {
      const std::string key = c.key_for(r);
      if (key_slot(cluster_key(key, key)) == slot) continue;
      return "resources '" + resources.front() + "' and '" + r + "' hash to different slots on the Redis Cluster node '" +
             cl->display + "': a set on a cluster node needs one hash tag, e.g. every resource starting with "
             "the same {tag} (see docs/protocol.md)";
    }
  }
  return "";
}

// "" if lease `l` names what to extend or release, else the problem: a resource
// (or a set's resources, which must be a valid set) and a token.
std::string check_lease(const lease& l) {
  if ((l.resource.empty() && l.resources.empty()) || l.token.empty())
    return "resource and token are required";
  if (!l.resources.empty()) return detail::check_resource_set(l.resources);
  return "";
}

// "" if an extend of `l` to `ttl` may be attempted, else the problem.
std::string check_extend(const detail::core& c, const lease& l, std::chrono::milliseconds ttl) {
  if (std::string bad = check_lease(l); !bad.empty()) return bad;
  return c.ttl_problem(ttl);
}

}  // namespace redlock::detail
