#include "node/waiting_requests.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "pure/retry.h"

namespace redlock::detail {

std::uint64_t schedule_rediscovery(node_host& host, int failures, std::function<void()> fn) {
  if (host.closing()) return 0;
  const auto& o = host.options();
  return host.schedule(
      reconnect_delay(o.reconnect_min_backoff, o.reconnect_max_backoff, failures, false, host.jitter()),
      std::move(fn));
}

void fail_unsent(sink& s, std::size_t node, std::uint32_t tag, node_status status, std::string_view detail) {
  reply_event ev;
  ev.status = status;
  ev.detail = detail;
  ev.unsent = true;
  s.on_reply(node, tag, ev);
}

waiting_requests::waiting_requests(node_host& host, std::size_t index, std::string what,
                                   std::function<std::string()> so_far)
    : host_(host), index_(index), what_(std::move(what)), so_far_(std::move(so_far)) {}

waiting_requests::~waiting_requests() {
  if (timer_ != 0) host_.cancel_timer(timer_);
}

void waiting_requests::add(std::shared_ptr<const wire> w, bool force_eval, std::shared_ptr<sink> s,
                           std::uint32_t tag, bool first_try, std::uint64_t started_ms) {
  if (queue_.size() >= kMax) {
    return fail_unsent(*s, index_, tag, node_status::connection_error,
                       what_ + " not known yet, and " + std::to_string(kMax) + " requests wait for it already");
  }
  // Its command timeout, counted (as a connection counts a request submitted
  // during its first connect) from the end of the first connect timeout at the
  // earliest: the first discovery connects first.
  const std::uint64_t now = host_.now_ms();
  const auto cmd_ms = static_cast<std::uint64_t>(host_.options().command_timeout.count());
  std::uint64_t deadline = now + cmd_ms;
  if (first_try) {
    const auto connect_ms = static_cast<std::uint64_t>(host_.options().connect_timeout.count());
    deadline = std::max(deadline, started_ms + connect_ms + cmd_ms);
  }
  const bool untimed = w->untimed();
  queue_.push_back(entry{std::move(w), force_eval, std::move(s), tag, now, untimed ? kNoDeadline : deadline});
  if (timer_ != 0 && queue_.back().deadline_ms < armed_at_) {
    host_.cancel_timer(timer_);
    timer_ = 0;
  }
  if (timer_ == 0) arm();
}

std::deque<waiting_requests::entry> waiting_requests::take_all() {
  if (timer_ != 0) host_.cancel_timer(timer_);
  timer_ = 0;
  std::deque<entry> out;
  out.swap(queue_);
  return out;
}

void waiting_requests::fail_all(node_status status, const std::string& detail) {
  for (entry& r : take_all()) fail_unsent(*r.target, index_, r.tag, status, detail);
}

void waiting_requests::arm() {
  // Deadlines grow along the queue (untimed requests, rare, are stepped over).
  std::uint64_t next = kNoDeadline;
  for (const entry& r : queue_) {
    if (r.deadline_ms != kNoDeadline) {
      next = r.deadline_ms;
      break;
    }
  }
  if (next == kNoDeadline) return;
  const std::uint64_t now = host_.now_ms();
  armed_at_ = next;
  timer_ = host_.schedule(std::chrono::milliseconds(next > now ? next - now : 0), [this] {
    timer_ = 0;
    on_timer();
  });
}

void waiting_requests::on_timer() {
  const std::uint64_t now = host_.now_ms();
  std::vector<entry> expired;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->deadline_ms <= now) {
      expired.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  const std::string so_far = so_far_ ? so_far_() : std::string();
  for (entry& r : expired) {
    const std::string detail = what_ + " not known " + std::to_string(now - r.submitted_ms) +
                               " ms after the request (command_timeout " +
                               std::to_string(host_.options().command_timeout.count()) + " ms)" +
                               (so_far.empty() ? "" : "; so far " + so_far);
    fail_unsent(*r.target, index_, r.tag, node_status::timeout, detail);
  }
  if (timer_ == 0) arm();
  host_.note_quiet();
}

}  // namespace redlock::detail
