// The handshake of one connection: the requests pipelined on every connect (AUTH,
// SELECT, PING, the guards' INFO server, INFO memory and TIME, and INFO replication
// where writes are confirmed by replication) and the verdict
// on each reply: more to come, ready, or fail (status, detail, permanent). It sends
// nothing and holds no guard: the connection writes the requests, feeds the
// replies in order and hands what INFO and TIME carried to its guards
// (node/guards.h).
//
// Loop thread only (one per connection; begin() starts it again on every connect).
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "redlock/report.h"

namespace redlock::detail {

class handshake {
 public:
  // What this connect attempt's handshake asks.
  struct plan {
    bool auth = false;  // AUTH [username] password
    std::string username;
    std::string password;
    long db = 0;                 // SELECT db unless 0
    bool voting = true;          // false: a subscriber connection, no guard watches it
    bool restart_guard = false;  // restart_quarantine != 0
    bool clock_guard = false;    // clock_jump_threshold > 0
    // The node's writes count only once its replicas have them (a cluster shard's
    // or a Sentinel group's master, issue 23): INFO replication, which must say
    // role:master for its writes to count, and whose connected_slaves sizes the
    // WAIT behind each write.
    bool confirm_replication = false;
  };
  // Starts a handshake: appends its requests to `out` (pipelined, in order).
  void begin(const plan& p, std::string& out);
  // True when the current handshake asked for TIME (the clock-jump guard's sample,
  // dated by the caller when it sends).
  bool asks_time() const noexcept { return asks_time_; }

  // The verdict on one reply.
  struct answer {
    enum class next { more, ready, fail };
    next verdict = next::more;
    // fail: the connection fails with these.
    node_status status = node_status::server_error;
    std::string detail;
    bool permanent = false;
    // What the reply carried for the guards (not on fail): the INFO text of
    // `INFO server`, `INFO memory` or `INFO replication` (valid during the reply),
    // or the TIME sample.
    enum class content { nothing, server_info, memory_info, server_time, replicas };
    content carries = content::nothing;
    std::string_view text;
    std::optional<std::int64_t> server_us;
    int replicas = 0;  // replicas: connected_slaves of INFO replication
    std::string no_vote;  // replicas: why no write of this server may count ("" for a master)
  };
  // Takes the next reply, in request order.
  answer take(const redisReply& r);

  // What INFO replication says of a server whose writes need their replicas: the
  // replicas to wait for (connected_slaves), or why it cannot vote (a replica, a
  // sentinel, no role field) in `problem`.
  static int replicas_of(std::string_view info, std::string& problem);

 private:
  enum class step : char { auth, select, ping, info_server, info_memory, time, info_replication };
  std::deque<step> steps_;
  bool asks_time_ = false;
};

}  // namespace redlock::detail
