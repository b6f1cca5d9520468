// The requests an endpoint made of several connections holds while it cannot route
// them yet: a cluster node before its slot map is known (node/cluster_endpoint.h),
// a Sentinel node before a sentinel named its master (node/sentinel_endpoint.h).
// A bounded queue in submission order; each request is failed with `timeout`
// (unsent) when its command timeout passes first (an untimed wire waits until the
// queue is drained or failed), counted — as a connection counts a request
// submitted during its first connect — from the end of the first connect timeout
// at the earliest while the endpoint has not failed yet.
//
// Loop thread only. Every request added gets exactly one sink call, unless it is
// taken back by take_all().
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "node/endpoint.h"
#include "node/host.h"

namespace redlock::detail {

// Schedules `fn`, the next discovery of an endpoint whose `failures`-th discovery in
// a row just failed, after the connection's backoff (capped exponential, jitter in
// [d/2, d]); returns the timer, or 0 (nothing scheduled) while the client shuts down.
std::uint64_t schedule_rediscovery(node_host& host, int failures, std::function<void()> fn);

// Fails `s`'s request at once: never sent, so the server cannot have run it.
void fail_unsent(sink& s, std::size_t node, std::uint32_t tag, node_status status, std::string_view detail);

class waiting_requests {
 public:
  struct entry {
    std::shared_ptr<const wire> w;
    bool force_eval = false;
    std::shared_ptr<sink> target;
    std::uint32_t tag = 0;
    std::uint64_t submitted_ms = 0;  // on now_ms()
    std::uint64_t deadline_ms = 0;   // on now_ms(); kNoDeadline for untimed wires
  };
  static constexpr std::uint64_t kNoDeadline = ~std::uint64_t{0};
  // At most this many requests wait; more fail at once.
  static constexpr std::size_t kMax = 4096;

  // `what` names what the requests wait for ("cluster slot map", "Sentinel's
  // master"), in every failure's detail; `so_far` adds what went wrong until now
  // ("" when nothing did) to a timeout's detail.
  waiting_requests(node_host& host, std::size_t index, std::string what, std::function<std::string()> so_far);
  ~waiting_requests();
  waiting_requests(const waiting_requests&) = delete;
  waiting_requests& operator=(const waiting_requests&) = delete;

  // Queues a request, or fails it at once when kMax wait already. `first_try`:
  // the endpoint has not failed since it started at `started_ms` (then the first
  // connect timeout is added to the deadline).
  void add(std::shared_ptr<const wire> w, bool force_eval, std::shared_ptr<sink> s, std::uint32_t tag,
           bool first_try, std::uint64_t started_ms);
  bool empty() const noexcept { return queue_.empty(); }
  // Every waiting request, in submission order, the queue emptied (to be routed).
  std::deque<entry> take_all();
  // Fails every waiting request (collected first: sinks may submit again).
  void fail_all(node_status status, const std::string& detail);

 private:
  void arm();
  void on_timer();

  node_host& host_;
  std::size_t index_;
  std::string what_;
  std::function<std::string()> so_far_;
  std::deque<entry> queue_;
  std::uint64_t timer_ = 0;
  std::uint64_t armed_at_ = 0;
};

}  // namespace redlock::detail
