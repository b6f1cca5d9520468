// Prometheus metrics from a client's events (docs/observability.md).
//
// A redlock::metrics is an observer (redlock/observer.h) that aggregates the
// events it receives into counters, gauges and histograms, and renders them on
// demand in the Prometheus text exposition format, version 0.0.4:
//
//   auto m = std::make_shared<redlock::metrics>();
//   redlock::client_options o;
//   o.observers.push_back(m);
//   ...
//   std::string body = m->render();  // serve as text/plain; version=0.0.4
//
// Thread safety: the events arrive on the client's loop thread; render() may be
// called from any thread at any time, concurrently with them. One mutex guards the
// aggregates; an event holds it for a few counter updates and never allocates once
// the node it names has been seen, render() holds it only to copy the numbers.
//
// One metrics object per client is the intended use. Several clients may share one:
// counters and histograms then add up, and node series are keyed by the node's
// redacted URI (two clients of the same node share its node_up gauge: the last
// event wins).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "redlock/observer.h"
#include "redlock/version.h"

namespace redlock {

struct metrics_options {
  // Upper bounds, in seconds, of every histogram's buckets (the +Inf bucket is
  // implicit). Finite, > 0 and strictly increasing; empty = default_buckets().
  std::vector<double> buckets;
};

class REDLOCK_EXPORT metrics final : public observer {
 public:
  // Throws config_error (redlock/client.h) for a bucket list that is not finite,
  // positive and strictly increasing.
  explicit metrics(metrics_options options = {});
  ~metrics() override;
  metrics(const metrics&) = delete;
  metrics& operator=(const metrics&) = delete;

  // 50 us to 10 s in 1-2.5-5 steps (17 bounds): the range from a loopback round
  // trip to a long contended wait.
  static std::vector<double> default_buckets();

  // The metrics now, in the Prometheus text format 0.0.4 (every family's HELP and
  // TYPE lines, then its samples; "\n"-terminated). Any thread.
  std::string render() const;

  // The content type to serve render()'s text with.
  static constexpr const char* content_type = "text/plain; version=0.0.4; charset=utf-8";

  void on_operation_finished(const operation_finished& e) override;
  void on_lock_acquired(const lock_event& e) override;
  void on_lock_released(const lock_event& e) override;
  void on_lock_lost(const lock_lost_event& e) override;
  void on_node_up(const node_event& e) override;
  void on_node_down(const node_event& e) override;
  void on_reconnect_scheduled(const reconnect_scheduled& e) override;
  void on_node_quarantined(const node_quarantine_event& e) override;
  void on_node_cleared(const node_quarantine_event& e) override;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace redlock
