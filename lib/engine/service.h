// A long-lived service of the layers above the engine (the notifier, the watchdog,
// the count of rollback deliveries: ops/services.h) as the core's stop sees it.
// The core owns its services and asks each, in the order they were installed,
// and knows nothing else of them: begin_stop() when the stop begins (before the
// pending acquires are cancelled), quiet() while it drains (the stop finishes
// early once every service and every connection is quiet), finish_stop() when
// the drain is over (after the connections shut down, before the last tasks run).
// Loop thread only.
#pragma once

namespace redlock::detail {

class service {
 public:
  virtual ~service() = default;
  // The client begins to stop: end what must not outlive it (the watchdog
  // declares its locks lost).
  virtual void begin_stop() {}
  // Nothing of this service's the drain must wait for (rollbacks being delivered).
  virtual bool quiet() const { return true; }
  // The drain is over: cancel timers, close connections of its own.
  virtual void finish_stop() {}
};

}  // namespace redlock::detail
