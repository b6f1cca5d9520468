// Running an asynchronous core operation synchronously from a caller's thread.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>

#include "core.h"

namespace redlock::detail {

inline void set_elapsed(report& r, std::chrono::microseconds e) { r.elapsed = e; }
inline void set_elapsed(acquire_result& r, std::chrono::microseconds e) { r.report.elapsed = e; }
inline void set_elapsed(inspect_result& r, std::chrono::microseconds e) { r.report.elapsed = e; }

// Wraps a completion so that its report's elapsed counts from `called` (the public
// call, on the client's clock) to completion, as report.h promises.
template <class R>
std::function<void(R)> timed(std::shared_ptr<core> c, std::chrono::steady_clock::time_point called,
                             std::function<void(R)> done) {
  return [c = std::move(c), called, done = std::move(done)](R r) {
    set_elapsed(r, std::chrono::duration_cast<std::chrono::microseconds>(c->now() - called));
    done(std::move(r));
  };
}

// Posts start(done) to the loop and waits for done(result). Returns `refused(errc)`
// without waiting when called on the loop thread (would_deadlock) or after the
// client stopped (cancelled). In a simulated world driven from this thread
// (reactor::drive), waiting is running the world until the result is in.
template <class R, class Start, class Refused>
R run_sync(core& c, Start start, Refused refused) {
  if (c.must_not_block()) return refused(errc::would_deadlock);
  if (c.on_loop_thread()) {
    auto out = std::make_shared<std::optional<R>>();
    bool posted = c.post([start = std::move(start), out]() mutable {
      start([out](R r) { *out = std::move(r); });
    });
    if (!posted) return refused(errc::cancelled);
    if (!c.drive([&] { return out->has_value(); }) || !out->has_value()) return refused(errc::would_deadlock);
    return std::move(**out);
  }
  auto p = std::make_shared<std::promise<R>>();
  auto fut = p->get_future();
  bool posted = c.post([start = std::move(start), p]() mutable {
    start([p](R r) { p->set_value(std::move(r)); });
  });
  if (!posted) return refused(errc::cancelled);
  return fut.get();
}

}  // namespace redlock::detail
