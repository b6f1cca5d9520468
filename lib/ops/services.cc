// The operations' services on a core (ops/services.h): made and installed once,
// stopped by the core. Lifecycle: install_services -> core::start -> ... ->
// begin_stop (the watchdog's locks lost) -> quiet (no rollback in delivery) ->
// finish_stop (the notifier's connections closed, the ticks dropped).
#include "ops/services.h"

#include <memory>
#include <utility>

#include "engine/core.h"
#include "ops/notify.h"
#include "ops/watchdog.h"

namespace redlock::detail {

void install_services(core& c) {
  core::services s;
  auto notify = std::make_unique<notifier>(c);
  auto watch = std::make_unique<watchdog>(c);
  auto rollbacks = std::make_unique<deliveries>(c);
  s.notify = notify.get();
  s.watch = watch.get();
  s.rollbacks = rollbacks.get();
  // The stop asks them in this order: the watchdog first, as the core did before
  // it cancelled the pending acquires; the notifier's connections close where
  // they did, after the node connections shut down.
  s.owned.push_back(std::move(watch));
  s.owned.push_back(std::move(notify));
  s.owned.push_back(std::move(rollbacks));
  c.install(std::move(s));
}

void deliveries::finished() {
  --running_;
  c_.note_quiet();
}

}  // namespace redlock::detail
