// The handshake (handshake.h): begin -> AUTH? SELECT? PING (INFO server)? (INFO
// memory)? (TIME)? (INFO replication)? pipelined -> take(reply) per request -> ready, or fail at the
// first refusal.
#include "node/handshake.h"

#include "protocol/info.h"
#include "protocol/reply.h"
#include "protocol/resp.h"

namespace redlock::detail {

void handshake::begin(const plan& p, std::string& out) {
  steps_.clear();
  asks_time_ = false;
  if (p.auth) {
    if (p.username.empty()) {
      append_resp(out, {"AUTH", p.password});
    } else {
      append_resp(out, {"AUTH", p.username, p.password});
    }
    steps_.push_back(step::auth);
  }
  if (p.db != 0) {
    std::string db = std::to_string(p.db);
    append_resp(out, {"SELECT", db});
    steps_.push_back(step::select);
  }
  append_resp(out, {"PING"});
  steps_.push_back(step::ping);
  // A subscriber connection (waiters' notifications, lib/notify.h) casts no vote:
  // the guards and the eviction check watch the voting connection only.
  if (p.voting && p.restart_guard) {
    append_resp(out, {"INFO", "server"});
    steps_.push_back(step::info_server);
  }
  // The eviction policy, for on_warning and fenced acquires: whenever a guard is
  // on (the defaults; also with the restart guard off, as on persistent nodes).
  // With both guards off the handshake stays AUTH/SELECT/PING alone, for servers
  // and proxies that speak only the lock's commands. A separate INFO, not
  // "INFO server memory": servers before 7.0 take one section and refuse two.
  if (p.voting && (p.restart_guard || p.clock_guard)) {
    append_resp(out, {"INFO", "memory"});
    steps_.push_back(step::info_memory);
  }
  if (p.voting && p.clock_guard) {
    append_resp(out, {"TIME"});
    steps_.push_back(step::time);
    asks_time_ = true;
  }
  if (p.voting && p.confirm_replication) {
    append_resp(out, {"INFO", "replication"});
    steps_.push_back(step::info_replication);
  }
}

handshake::answer handshake::take(const redisReply& reply) {
  const redisReply* r = &reply;
  answer a;
  const step s = steps_.empty() ? step::ping : steps_.front();
  if (!steps_.empty()) steps_.pop_front();
  auto fail = [&a](node_status status, std::string detail, bool permanent) {
    a.verdict = answer::next::fail;
    a.status = status;
    a.detail = std::move(detail);
    a.permanent = permanent;
    return a;
  };
  if (r->type == REDIS_REPLY_ERROR && s == step::info_replication) {
    // Without it the replicas cannot be counted, so no write could be confirmed.
    std::string err = first_line(r->str, r->len);
    return fail(node_status::server_error,
                "INFO replication refused (" + err +
                    "): this node's writes must be confirmed by its replicas, which needs INFO",
                is_permission_error(err));
  }
  if (r->type == REDIS_REPLY_ERROR) {
    std::string err = first_line(r->str, r->len);
    if (s == step::info_server || s == step::info_memory || s == step::time) {
      // No permission for INFO or TIME: the guards cannot watch this node (and its
      // eviction policy stays unknown: no warning, no fencing exclusion).
    } else if (is_permission_error(err)) {
      // Authenticated, but the ACL forbids SELECT or PING: as permanent as a
      // refused password; the detail keeps the server's NOPERM text.
      return fail(node_status::server_error, err, true);
    } else if (is_auth_error(err)) {
      // The status already reads "authentication refused": the detail is the server's word.
      return fail(node_status::auth_error, err, true);
    } else {
      return fail(node_status::server_error, "handshake refused: " + err, false);
    }
  } else if (s == step::ping &&
             (r->type != REDIS_REPLY_STATUS || std::string_view(r->str, r->len) != "PONG")) {
    return fail(node_status::protocol_error, "unexpected reply to PING (not a Redis server?)", false);
  } else if (s == step::info_server && r->type == REDIS_REPLY_STRING) {
    a.carries = answer::content::server_info;
    a.text = std::string_view(r->str, r->len);
  } else if (s == step::info_memory && r->type == REDIS_REPLY_STRING) {
    a.carries = answer::content::memory_info;
    a.text = std::string_view(r->str, r->len);
  } else if (s == step::time) {
    a.carries = answer::content::server_time;
    a.server_us = parse_time_reply(r);
  } else if (s == step::info_replication) {
    if (r->type != REDIS_REPLY_STRING) return fail(node_status::protocol_error, "unexpected reply to INFO replication", false);
    // A server that is not a master (a replica: a failover moved the master away,
    // or a cluster's seed) stays connected, for what it can answer (a cluster's
    // slot map, redirects), but none of its writes is a vote (a writable replica
    // would grant what no failover keeps).
    a.text = std::string_view(r->str, r->len);
    a.replicas = replicas_of(a.text, a.no_vote);
    a.carries = answer::content::replicas;
  }
  if (steps_.empty()) a.verdict = answer::next::ready;
  return a;
}

int handshake::replicas_of(std::string_view info, std::string& problem) {
  problem.clear();
  const std::string role = info_field(info, "role");
  if (role == "slave") {
    // A failover moved the master away: never a vote.
    problem = "the server is a replica (of " + info_field(info, "master_host") + ":" + info_field(info, "master_port") +
              "), not a master: no vote";
    return 0;
  }
  if (role != "master") {
    problem = role.empty() ? "INFO replication has no role: the replicas cannot be counted"
                           : "the server's role is '" + role + "', not master: no vote";
    return 0;
  }
  // Every replica attached, also one still syncing (ROLE lists online ones only): a
  // write waits until each has it.
  const std::string n = info_field(info, "connected_slaves");
  int count = 0;
  for (char ch : n) {
    if (ch < '0' || ch > '9' || count > 100000) {
      problem = "INFO replication's connected_slaves is not a count";
      return 0;
    }
    count = count * 10 + (ch - '0');
  }
  if (n.empty()) problem = "INFO replication has no connected_slaves: the replicas cannot be counted";
  return count;
}

}  // namespace redlock::detail
