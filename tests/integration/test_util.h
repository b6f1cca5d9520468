// Small helpers shared by the integration tests.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "redis_node.h"
#include "redlock/redlock.h"

namespace redlock::test {

using namespace std::chrono_literals;

// Polls `pred` every 5 ms until it is true or `limit` passed; returns its last value.
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit = 3000ms) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

// Options for a client of `cluster`, with timeouts generous enough for a loaded
// CI machine running sanitizers, yet far below the TTLs the tests use.
// The cluster's TCP URIs with an ACL user and password.
inline std::vector<std::string> uris_as(redis_cluster& cl, const std::string& user, const std::string& password) {
  std::vector<std::string> uris;
  for (std::size_t i = 0; i < cl.size(); ++i) {
    uris.push_back("redis://" + user + ":" + password + "@127.0.0.1:" + std::to_string(cl[i].port()));
  }
  return uris;
}

inline client_options options_for(const std::vector<std::string>& uris) {
  client_options o;
  o.nodes = uris;
  o.command_timeout = 150ms;
  o.connect_timeout = 500ms;
  o.reconnect_min_backoff = 5ms;
  o.reconnect_max_backoff = 100ms;
  return o;
}

// Waits until `expected` nodes (default: all) answer an inspect (bounded).
inline bool wait_connected(client& c, int expected = -1) {
  if (expected < 0) expected = static_cast<int>(c.node_count());
  return eventually([&] { return c.inspect("warmup-probe").report.count(node_status::ok) == expected; });
}

inline acquire_options once(std::chrono::milliseconds ttl = 10000ms) {
  acquire_options o;
  o.ttl = ttl;
  o.retry = retry_policy::once();
  return o;
}

// Acquires `r` once at a time (releasing what is granted) until an attempt is
// refused with `why` in its report, within `within`; `last` is the last report.
inline bool refused_with(client& c, const std::string& r, const std::string& why, std::string& last,
                         std::chrono::milliseconds within = 10000ms) {
  return eventually(
      [&] {
        auto b = c.acquire(r, once(20000ms));
        last = b.report.message();
        if (b) (void)b.lock.release();
        return !b && last.find(why) != std::string::npos;
      },
      within);
}

// Acquires `r` once at a time (every 50 ms, each grant released at once) until one
// is granted, within `within`: how long after `from` it was (nullopt: none);
// `last` is the last report.
inline std::optional<std::chrono::milliseconds> first_grant_after(client& c, const std::string& r,
                                                                  std::chrono::steady_clock::time_point from,
                                                                  std::chrono::milliseconds within, std::string& last) {
  std::optional<std::chrono::milliseconds> at;
  (void)eventually(
      [&] {
        auto b = c.acquire(r, once(20000ms));
        last = b.report.message();
        if (!b) {
          std::this_thread::sleep_for(50ms);
          return false;
        }
        at = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - from);
        (void)b.lock.release();
        return true;
      },
      within);
  return at;
}

}  // namespace redlock::test
