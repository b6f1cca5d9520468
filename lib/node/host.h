// What a node's connection asks of its owner (the engine, engine/core.h, or a test
// double): timers, the two clocks, the options, the jitter draws, flush and quiet
// notices, the observer events it sends, and the other nodes' run_ids for the
// same-server check. A connection reaches its owner through this interface only,
// so node/ includes nothing from engine/.
//
// Loop thread only: every member is called on the loop thread, and no member calls
// back into the connection that called it (want_flush and note_quiet only take a
// note; the flush and a stop's drain run later, from the loop).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "io/reactor.h"
#include "redlock/client.h"
#include "redlock/observer.h"

namespace redlock::detail {

class connection;

class node_host {
 public:
  // Runs `fn` once, `delay` from now on the loop's millisecond clock (now_ms();
  // a delay of 0 or less: at the next timer turn), unless cancelled first. Timers
  // due at the same millisecond run in the order they were scheduled. Returns the
  // timer's id, never 0.
  virtual std::uint64_t schedule(std::chrono::milliseconds delay, std::function<void()> fn) = 0;
  // Cancels a timer that has not run yet; an id that ran or was cancelled already
  // is ignored.
  virtual void cancel_timer(std::uint64_t id) noexcept = 0;
  // The client's clock (client_options::clock, else steady_clock): dates requests,
  // the clock-jump guard's samples and the quarantines.
  virtual std::chrono::steady_clock::time_point now() const noexcept = 0;
  // The loop's millisecond clock (reactor::now_ms, cached per loop turn): the
  // requests' deadlines, the connect deadline and the stall detector.
  virtual std::uint64_t now_ms() const = 0;
  // The client's options, fixed for the client's life.
  virtual const client_options& options() const noexcept = 0;
  // The world links are opened in (reactor.h).
  virtual reactor& io() noexcept = 0;
  // The next draw of the client's reconnect jitter. The draws are the world's
  // randomness: each call takes one, in call order.
  virtual std::uint64_t jitter() noexcept = 0;
  // How long the restart guard quarantines a node after a restart: the options'
  // restart_quarantine, or max_ttl when that is negative (auto); 0 = guard off.
  virtual std::chrono::milliseconds restart_quarantine() const noexcept = 0;
  // True once the client is shutting down: a failed connection is closed, not
  // reconnected, and no quarantine timer is armed.
  virtual bool closing() const noexcept = 0;

  // `c` has bytes to write: its flush() runs once later in this loop turn (asking
  // again before that is a no-op).
  virtual void want_flush(connection* c) = 0;
  // A connection may have become quiet (connection::quiet()): lets a pending stop
  // finish once every connection is.
  virtual void note_quiet() = 0;
  // A voting connection that was up before came up again (client_stats::reconnects).
  virtual void note_reconnect() noexcept = 0;

  // A configuration warning (on_warning and the observers).
  virtual void warn(const warning& w) = 0;
  // True when the client has observers: every event site is
  // `if (observing()) { build the event; emit(...); }`.
  virtual bool observing() const noexcept = 0;
  // Delivers one event about this node to every observer, in list order (an
  // observer's exception is swallowed and counted). `name` names the callback,
  // for the debug build's slow-observer notice.
  virtual void emit(void (observer::*fn)(const node_event&), const node_event& e, const char* name) = 0;
  virtual void emit(void (observer::*fn)(const node_slow_event&), const node_slow_event& e,
                    const char* name) = 0;
  virtual void emit(void (observer::*fn)(const node_quarantine_event&), const node_quarantine_event& e,
                    const char* name) = 0;
  virtual void emit(void (observer::*fn)(const reconnect_scheduled&), const reconnect_scheduled& e,
                    const char* name) = 0;

  // The same-server check: the display name of the first voting node before node
  // `before` (in configuration order) whose last handshake reported `run_id`;
  // null when there is none. Valid until that node's next handshake.
  virtual const std::string* same_server(std::size_t before, const std::string& run_id) const = 0;

 protected:
  ~node_host() = default;
};

}  // namespace redlock::detail
