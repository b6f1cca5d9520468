// The operations' long-lived services on a core (engine/service.h): the notifier
// (ops/notify.h), the watchdog (ops/watchdog.h) and the count of rollbacks being
// delivered (deliveries, here). install_services makes them, once per core,
// before it starts. Loop thread only.
#pragma once

#include <cstddef>

#include "engine/service.h"

namespace redlock::detail {

class core;

// Makes the notifier, the watchdog and the deliveries count and installs them on
// `c` (core::install). Call right after the core is made, before core::start().
void install_services(core& c);

// Rollbacks still being delivered (ops/rollback.cc, class cleanup). A stop waits
// for them (quiet), but only up to its drain bound (core::begin_stop); there the
// remaining ones are abandoned (dropped) and their keys expire by their TTL.
class deliveries final : public service {
 public:
  explicit deliveries(core& c) : c_(c) {}
  void started() noexcept { ++running_; }
  void finished();                         // one more may make the stop quiet
  void dropped() noexcept { --running_; }  // abandoned by the stop's end
  bool quiet() const override { return running_ == 0; }

 private:
  core& c_;
  std::size_t running_ = 0;
};

}  // namespace redlock::detail
