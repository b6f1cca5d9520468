// Running an asynchronous core operation synchronously from a caller's thread.
#pragma once

#include <functional>
#include <future>
#include <memory>

#include "core.h"

namespace redlock::detail {

// Posts start(done) to the loop and waits for done(result). Returns `refused(errc)`
// without waiting when called on the loop thread (would_deadlock) or after the
// client stopped (cancelled).
template <class R, class Start, class Refused>
R run_sync(core& c, Start start, Refused refused) {
  if (c.on_loop_thread()) return refused(errc::would_deadlock);
  auto p = std::make_shared<std::promise<R>>();
  auto fut = p->get_future();
  bool posted = c.post([start = std::move(start), p]() mutable {
    start([p](R r) { p->set_value(std::move(r)); });
  });
  if (!posted) return refused(errc::cancelled);
  return fut.get();
}

}  // namespace redlock::detail
