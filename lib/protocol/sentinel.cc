#include "protocol/sentinel.h"

#include "protocol/fields.h"

namespace redlock::detail {
namespace {

bool valid_host(std::string_view h) noexcept { return !h.empty() && host_chars_valid(h); }

bool read_host_port(const redisReply* host, const redisReply* port, host_port& out) noexcept {
  long long p = 0;
  if (!valid_host(text(host)) || !integer(port, 65535, p) || p == 0) return false;
  out.host = std::string(text(host));
  out.port = static_cast<int>(p);
  return true;
}

bool read_host_port(std::string_view host, std::string_view port, host_port& out) {
  long long p = 0;
  if (!valid_host(host) || !parse_decimal(port, 65535, p) || p == 0) return false;
  out.host = std::string(host);
  out.port = static_cast<int>(p);
  return true;
}

}  // namespace

std::optional<master_addr> parse_master_addr(const redisReply* reply) {
  if (reply == nullptr) return std::nullopt;
  master_addr out;
  if (reply->type == REDIS_REPLY_NIL) return out;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) return std::nullopt;
  if (!read_host_port(reply->element[0], reply->element[1], out.address)) return std::nullopt;
  out.known = true;
  return out;
}

std::optional<std::vector<host_port>> parse_sentinels(const redisReply* reply, std::size_t max) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return std::nullopt;
  std::vector<host_port> out;
  for (std::size_t i = 0; i < reply->elements; ++i) {
    const redisReply* s = reply->element[i];
    if (s->type != REDIS_REPLY_ARRAY || s->elements % 2 != 0) return std::nullopt;
    std::string_view ip, port, flags;
    for (std::size_t k = 0; k + 1 < s->elements; k += 2) {
      const std::string_view field = text(s->element[k]);
      if (field == "ip") ip = text(s->element[k + 1]);
      if (field == "port") port = text(s->element[k + 1]);
      if (field == "flags") flags = text(s->element[k + 1]);
    }
    if (flags.find("s_down") != std::string_view::npos || flags.find("o_down") != std::string_view::npos ||
        flags.find("disconnected") != std::string_view::npos) {
      continue;
    }
    host_port hp;
    if (out.size() < max && read_host_port(ip, port, hp)) out.push_back(std::move(hp));
  }
  return out;
}

std::optional<std::uint64_t> parse_failover_timeout(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements % 2 != 0) return std::nullopt;
  for (std::size_t k = 0; k + 1 < reply->elements; k += 2) {
    if (text(reply->element[k]) != "failover-timeout") continue;
    long long ms = 0;
    if (!integer(reply->element[k + 1], 1LL << 40, ms) || ms <= 0) return std::nullopt;
    return static_cast<std::uint64_t>(ms);
  }
  return std::nullopt;
}

std::optional<switch_master> parse_switch_master(std::string_view payload) {
  std::vector<std::string_view> words;
  while (!payload.empty() && words.size() <= 5) {
    const std::size_t space = payload.find(' ');
    words.push_back(payload.substr(0, space));
    payload = space == std::string_view::npos ? std::string_view{} : payload.substr(space + 1);
  }
  if (words.size() != 5 || words[0].empty()) return std::nullopt;
  switch_master out;
  out.name = std::string(words[0]);
  if (!read_host_port(words[1], words[2], out.from) || !read_host_port(words[3], words[4], out.to)) return std::nullopt;
  return out;
}

std::optional<server_role> parse_role(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2) return std::nullopt;
  const std::string_view role = text(reply->element[0]);
  server_role out;
  if (role == "master") {
    if (reply->elements != 3 || !integer(reply->element[1], 1LL << 62, out.offset)) return std::nullopt;
    const redisReply* list = reply->element[2];
    if (list->type != REDIS_REPLY_ARRAY) return std::nullopt;
    for (std::size_t i = 0; i < list->elements; ++i) {
      const redisReply* r = list->element[i];
      host_port e;
      if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || !read_host_port(r->element[0], r->element[1], e)) {
        return std::nullopt;
      }
      out.replicas.push_back(std::move(e));
    }
    return out;
  }
  if (role == "slave" || role == "replica") {
    out.type = server_role::kind::replica;
    if (reply->elements != 5 || !read_host_port(reply->element[1], reply->element[2], out.master)) return std::nullopt;
    out.link_up = text(reply->element[3]) == "connected";
    long long off = 0;
    if (integer(reply->element[4], 1LL << 62, off)) out.offset = off;  // -1 before the first sync
    return out;
  }
  if (role == "sentinel") {
    out.type = server_role::kind::sentinel;
    return out;
  }
  return std::nullopt;
}

}  // namespace redlock::detail
