// Log lines from a client's events (docs/observability.md).
//
// A redlock::log_observer is an observer (redlock/observer.h) that turns the
// events worth logging into one human-readable line each, made of an event phrase
// and key=value fields, and hands it to the application's sink with a level:
//
//   auto log = std::make_shared<redlock::log_observer>(
//       [](redlock::log_level level, std::string_view line) {
//         std::fprintf(stderr, "%s redlock: %.*s\n", redlock::to_string(level),
//                      static_cast<int>(line.size()), line.data());
//       });
//   options.observers.push_back(log);
//
//   info     lock acquired, lock released, node up, node quarantine ended
//   warning  node down, node quarantined, lock lost, configuration warning,
//            slow node reply
//   debug    operation started and finished, lock extended, retry and reconnect
//            scheduled
//
// Lines carry no token and no password (the events carry none): nodes are named
// by their redacted URIs. A line has no timestamp (the events' times are on the
// client's monotonic clock): the sink adds the wall-clock time it wants.
//
// Repeated node errors are rate-limited: a node_down with the same node and
// status, a slow reply of the same node, a reconnect of the same node, each at most
// once per `repeat_interval`, measured between the events' own timestamps. The
// next line of the same kind for that node that is emitted says how many were
// suppressed (" suppressed=K"); so does the node's next "node up" line, for its
// suppressed node down lines.
//
// Thread safety: every member may be called from any thread; calls are serialised
// by a mutex that is held while the sink runs. The sink must not block and must
// not call back into this observer.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "redlock/observer.h"
#include "redlock/version.h"

namespace redlock {

enum class log_level : std::uint8_t { debug, info, warning };

// "debug", "info", "warning".
REDLOCK_EXPORT const char* to_string(log_level l) noexcept;

class REDLOCK_EXPORT log_observer final : public observer {
 public:
  using sink = std::function<void(log_level, std::string_view line)>;

  // Lines below `min_level` are not formatted. repeat_interval 0 = no rate limit.
  explicit log_observer(sink s, log_level min_level = log_level::info,
                        std::chrono::milliseconds repeat_interval = std::chrono::seconds{10});
  ~log_observer() override;
  log_observer(const log_observer&) = delete;
  log_observer& operator=(const log_observer&) = delete;

  void on_operation_started(const operation_started& e) override;
  void on_operation_finished(const operation_finished& e) override;
  void on_retry_scheduled(const retry_scheduled& e) override;
  void on_lock_acquired(const lock_event& e) override;
  void on_lock_extended(const lock_event& e) override;
  void on_lock_released(const lock_event& e) override;
  void on_lock_lost(const lock_lost_event& e) override;
  void on_node_up(const node_event& e) override;
  void on_node_down(const node_event& e) override;
  void on_reconnect_scheduled(const reconnect_scheduled& e) override;
  void on_node_quarantined(const node_quarantine_event& e) override;
  void on_node_cleared(const node_quarantine_event& e) override;
  void on_node_slow(const node_slow_event& e) override;
  void on_warning(const warning& w) override;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace redlock
