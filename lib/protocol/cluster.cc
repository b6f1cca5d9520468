#include "protocol/cluster.h"

#include <algorithm>

#include "protocol/fields.h"
#include "pure/slot.h"
#include "pure/uri.h"

namespace redlock::detail {
namespace {

bool port_of(const redisReply* r, int& out) noexcept {
  long long v = 0;
  if (!integer(r, 65535, v)) return false;
  out = static_cast<int>(v);
  return true;
}

// Where to connect to a node the reply describes: its endpoint unless unknown
// (empty, NULL, or "?" when misconfigured), then its IP, then the host that answered.
std::string connect_host(std::string_view endpoint, std::string_view ip, std::string_view answered) {
  if (!endpoint.empty() && endpoint != "?") return std::string(endpoint);
  if (!ip.empty() && ip != "?") return std::string(ip);
  return std::string(answered);
}

// CLUSTER SHARDS' node map: id, port, tls-port, ip, endpoint, hostname, role,
// replication-offset, health (RESP2: a flat array of names and values).
bool parse_shard_node(const redisReply* r, std::string_view answered, cluster_node& out, std::string& error) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0) {
    error = "CLUSTER SHARDS: a node is not a map of field names and values";
    return false;
  }
  std::string_view endpoint, ip;
  bool has_role = false;
  for (std::size_t i = 0; i + 1 < r->elements; i += 2) {
    if (!is_text(r->element[i])) {
      error = "CLUSTER SHARDS: a node's field name is not a string";
      return false;
    }
    const std::string_view name = text(r->element[i]);
    const redisReply* v = r->element[i + 1];
    if (name == "id") {
      out.id = std::string(text(v));
    } else if (name == "port") {
      if (!port_of(v, out.port)) return (error = "CLUSTER SHARDS: a node's port is not 0..65535", false);
    } else if (name == "tls-port") {
      if (!port_of(v, out.tls_port)) return (error = "CLUSTER SHARDS: a node's tls-port is not 0..65535", false);
    } else if (name == "ip") {
      ip = text(v);
    } else if (name == "endpoint") {
      endpoint = text(v);
    } else if (name == "role") {
      has_role = true;
      out.master = text(v) == "master" || text(v) == "primary";
    } else if (name == "replication-offset") {
      long long off = 0;
      if (integer(v, (1LL << 62), off)) out.replication_offset = off;
    } else if (name == "health") {
      out.online = text(v) == "online";
    }
  }
  if (!has_role) return (error = "CLUSTER SHARDS: a node has no role", false);
  if (out.port == 0 && out.tls_port == 0) return (error = "CLUSTER SHARDS: a node has neither port nor tls-port", false);
  out.host = connect_host(endpoint, ip, answered);
  return true;
}

}  // namespace

std::optional<redirect> parse_redirect(std::string_view error) noexcept {
  redirect out;
  std::string_view rest;
  if (error.substr(0, 6) == "MOVED ") {
    out.type = redirect::kind::moved;
    rest = error.substr(6);
  } else if (error.substr(0, 4) == "ASK ") {
    out.type = redirect::kind::ask;
    rest = error.substr(4);
  } else {
    return std::nullopt;
  }
  const std::size_t space = rest.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  long long slot = 0;
  if (!parse_decimal(rest.substr(0, space), kClusterSlots - 1, slot)) return std::nullopt;
  const std::string_view target = rest.substr(space + 1);
  const std::size_t colon = target.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  long long port = 0;
  if (!parse_decimal(target.substr(colon + 1), 65535, port) || port == 0) return std::nullopt;
  std::string_view host = target.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (!host_chars_valid(host)) return std::nullopt;
  out.slot = static_cast<int>(slot);
  out.host = std::string(host);
  out.port = static_cast<int>(port);
  return out;
}

int slot_map::shard_of(int slot) const noexcept {
  if (slot < 0 || slot >= kClusterSlots || owner_.empty()) return -1;
  return owner_[static_cast<std::size_t>(slot)];
}

int slot_map::covered() const noexcept {
  return static_cast<int>(std::count_if(owner_.begin(), owner_.end(), [](std::int16_t o) { return o >= 0; }));
}

bool slot_map::add(cluster_shard shard, std::string& error) {
  if (shards_.size() >= static_cast<std::size_t>(kClusterSlots)) {
    error = "more than 16384 shards";
    return false;
  }
  const auto index = static_cast<std::int16_t>(shards_.size());
  for (const auto& [lo, hi] : shard.ranges) {
    if (lo < 0 || hi >= kClusterSlots || lo > hi) {
      error = "slot range " + std::to_string(lo) + "-" + std::to_string(hi) + " is not within 0-16383";
      return false;
    }
    if (shard.master < 0) continue;  // served by no one until a master is elected
    if (owner_.empty()) owner_.assign(kClusterSlots, -1);
    for (int s = lo; s <= hi; ++s) {
      if (owner_[static_cast<std::size_t>(s)] >= 0) {
        error = "slot " + std::to_string(s) + " is claimed by two shards";
        return false;
      }
      owner_[static_cast<std::size_t>(s)] = index;
    }
  }
  shards_.push_back(std::move(shard));
  return true;
}

bool parse_cluster_shards(const redisReply* reply, std::string_view answered_host, slot_map& out,
                          std::string& error) {
  out = slot_map{};
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
    error = "CLUSTER SHARDS: the reply is not an array";
    return false;
  }
  for (std::size_t i = 0; i < reply->elements; ++i) {
    const redisReply* s = reply->element[i];
    if (s == nullptr || s->type != REDIS_REPLY_ARRAY || s->elements % 2 != 0) {
      error = "CLUSTER SHARDS: a shard is not a map of field names and values";
      return false;
    }
    cluster_shard shard;
    bool has_slots = false, has_nodes = false;
    for (std::size_t f = 0; f + 1 < s->elements; f += 2) {
      const std::string_view name = text(s->element[f]);
      const redisReply* v = s->element[f + 1];
      if (name == "slots") {
        has_slots = true;
        if (v == nullptr || v->type != REDIS_REPLY_ARRAY || v->elements % 2 != 0) {
          error = "CLUSTER SHARDS: a shard's slots are not pairs of integers";
          return false;
        }
        for (std::size_t k = 0; k + 1 < v->elements; k += 2) {
          long long lo = 0, hi = 0;
          if (!integer(v->element[k], 1LL << 30, lo) || !integer(v->element[k + 1], 1LL << 30, hi)) {
            error = "CLUSTER SHARDS: a shard's slots are not pairs of integers";
            return false;
          }
          shard.ranges.emplace_back(static_cast<int>(lo), static_cast<int>(hi));
        }
      } else if (name == "nodes") {
        has_nodes = true;
        if (v == nullptr || v->type != REDIS_REPLY_ARRAY) {
          error = "CLUSTER SHARDS: a shard's nodes are not an array";
          return false;
        }
        for (std::size_t k = 0; k < v->elements; ++k) {
          cluster_node n;
          if (!parse_shard_node(v->element[k], answered_host, n, error)) return false;
          if (n.master && shard.master < 0) shard.master = static_cast<int>(shard.nodes.size());
          shard.nodes.push_back(std::move(n));
        }
      }
    }
    if (!has_slots || !has_nodes) {
      error = "CLUSTER SHARDS: a shard lacks its slots or its nodes";
      return false;
    }
    if (!out.add(std::move(shard), error)) {
      error = "CLUSTER SHARDS: " + error;
      return false;
    }
  }
  return true;
}

bool parse_cluster_slots(const redisReply* reply, std::string_view answered_host, slot_map& out,
                         std::string& error) {
  out = slot_map{};
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
    error = "CLUSTER SLOTS: the reply is not an array";
    return false;
  }
  // Ranges grouped by their master (its id, or its address when the id is absent).
  std::vector<std::string> keys;
  std::vector<cluster_shard> shards;
  for (std::size_t i = 0; i < reply->elements; ++i) {
    const redisReply* e = reply->element[i];
    long long lo = 0, hi = 0;
    if (e == nullptr || e->type != REDIS_REPLY_ARRAY || e->elements < 3 || !integer(e->element[0], 1LL << 30, lo) ||
        !integer(e->element[1], 1LL << 30, hi)) {
      error = "CLUSTER SLOTS: an entry is not [start, end, master, replica...]";
      return false;
    }
    std::vector<cluster_node> nodes;
    for (std::size_t k = 2; k < e->elements; ++k) {
      const redisReply* n = e->element[k];
      cluster_node node;
      if (n == nullptr || n->type != REDIS_REPLY_ARRAY || n->elements < 2 || !port_of(n->element[1], node.port) ||
          (n->element[0]->type != REDIS_REPLY_NIL && !is_text(n->element[0]))) {
        error = "CLUSTER SLOTS: a node is not [host, port, id, ...]";
        return false;
      }
      if (n->elements >= 3) node.id = std::string(text(n->element[2]));
      node.host = connect_host(text(n->element[0]), {}, answered_host);
      node.master = k == 2;
      nodes.push_back(std::move(node));
    }
    const std::string key = nodes[0].id.empty() ? nodes[0].host + ":" + std::to_string(nodes[0].port) : nodes[0].id;
    const std::size_t at = static_cast<std::size_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
    if (at == keys.size()) {
      keys.push_back(key);
      cluster_shard s;
      s.nodes = std::move(nodes);
      s.master = 0;
      shards.push_back(std::move(s));
    }
    shards[at].ranges.emplace_back(static_cast<int>(lo), static_cast<int>(hi));
  }
  for (cluster_shard& s : shards) {
    if (!out.add(std::move(s), error)) {
      error = "CLUSTER SLOTS: " + error;
      return false;
    }
  }
  return true;
}

std::optional<std::uint64_t> parse_node_timeout(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) return std::nullopt;
  if (text(reply->element[0]) != "cluster-node-timeout") return std::nullopt;
  long long ms = 0;
  if (!integer(reply->element[1], 1LL << 40, ms) || ms <= 0) return std::nullopt;
  return static_cast<std::uint64_t>(ms);
}

}  // namespace redlock::detail
