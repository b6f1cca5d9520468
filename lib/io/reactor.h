// The seam between the client's engine and the world it runs in.
//
// Above it: the core (task queue, timer queue, shutdown drain), the operations and
// rounds, and each connection's protocol logic (pipelining, deadlines, stall
// detection, handshake, guards, reconnect and backoff). They reach the outside
// only through a reactor: the loop's millisecond clock, one timer, an "idle" turn,
// a cross-thread wake-up, and links (byte streams to nodes, one per connect attempt).
//
// Below it: production is libuv (uv_reactor: uv_timer/uv_idle/uv_async and TCP or
// unix-socket streams); the deterministic simulator (redlock/testing.h, tests/sim)
// plugs in a reactor whose clock is virtual and whose links lead to simulated
// Redis nodes. Calls cross the seam per event and per buffer, never per byte.
//
// Operations and rounds see nodes through the narrower interface above this one:
// connection::submit() and exactly one sink::on_reply() per request (a reply,
// timeout, connection error or cancellation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "redlock/client.h"
#include "redlock/report.h"
#include "redlock/version.h"
#include "pure/uri.h"

namespace redlock::detail {

// What a link tells its connection. Never called from inside reactor::open() or
// link::write(); never after the link was destroyed.
class link_events {
 public:
  // Connected: the link may be written to.
  virtual void on_link_up() = 0;
  // Bytes from the node, in order.
  virtual void on_link_data(const char* data, std::size_t n) = 0;
  // The connect attempt failed, or the established stream broke (closed by the
  // node, reset, write error). Final: the link sends no more events.
  virtual void on_link_down(node_status status, std::string detail) = 0;

 protected:
  ~link_events() = default;
};

// A byte stream to one node for one connect attempt. Destroying it closes it.
class link {
 public:
  virtual ~link() = default;
  // Sends `bytes` (taken: left empty) after everything written before. Returns ""
  // or, when the stream cannot take them at all, why (the caller fails the
  // connection; no on_link_down follows for that error).
  virtual std::string write(std::string& bytes) = 0;
  // When the connect attempt ran out of time before on_link_up: what the link was
  // still waiting for, if it knows more than "the connect" (a TLS handshake the
  // server never answered), as a clause for the timeout's detail; else "".
  virtual std::string stalled_on() const { return {}; }
};

class REDLOCK_EXPORT reactor {
 public:
  // The core's side: called on the loop thread.
  class driver {
   public:
    virtual void on_timer() = 0;  // the armed timer is due
    virtual void on_idle() = 0;   // an idle turn, while idle(true)
    virtual void on_wake() = 0;   // after wake(), at least once

   protected:
    ~driver() = default;
  };

  virtual ~reactor() = default;

  // Binds the driver and creates the loop's handles (on the loop thread).
  virtual void start(driver& d) = 0;
  // The loop's clock in milliseconds (uv_now), cached per loop turn; refresh()
  // reads the clock again.
  virtual std::uint64_t now_ms() const = 0;
  virtual void refresh() = 0;
  // One timer: due `delay_ms` from now_ms(). Re-arming replaces it.
  virtual void arm_timer(std::uint64_t delay_ms) = 0;
  virtual void stop_timer() = 0;
  // On: driver::on_idle() runs on every loop turn until switched off.
  virtual void idle(bool on) = 0;
  // Any thread: driver::on_wake() soon, on the loop thread.
  virtual void wake() = 0;
  // Closes the handles; `closed` runs once they all are (maybe later, on the
  // loop thread). No driver calls after close().
  virtual void close(std::function<void()> closed) = 0;

  // Opens a link to `address`; the connect attempt (resolving and every address
  // the name has) ends by `deadline_ms` on now_ms() — the caller enforces it with
  // its own timer. On an immediate failure returns null and sets `error`.
  virtual std::unique_ptr<link> open(const node_address& address, std::uint64_t deadline_ms, link_events& events,
                                     node_status& status, std::string& error) = 0;

  // TLS for the client's rediss:// nodes (node_address::tls), set up once by the
  // client's constructor (its thread) before start(), and only when a node needs
  // it. Returns "" or why the options cannot be used (the constructor throws
  // config_error with it). The default refuses: a reactor without TLS (the
  // simulator) cannot connect to rediss:// nodes.
  virtual std::string use_tls(const tls_options& options);

  // The world's randomness: owner tokens (32 hex characters, unique per call) and
  // the reconnect jitter's seed. Production: getrandom(2) (token.h). The simulator:
  // its seeded generator, so that a run replays exactly.
  virtual std::string token();
  virtual std::uint64_t seed();

  // A reactor whose world the calling thread may run (the simulator): runs events
  // until `done()` is true or nothing is left to run. Returns false when it
  // cannot be driven from here (production: the loop is another thread's or the
  // application's; the simulator: already driving, a nested call).
  virtual bool drive(const std::function<bool()>& done) {
    (void)done;
    return false;
  }
  // True when drive() may be used from this thread now.
  virtual bool drivable() const { return false; }

  // A reactor with a loop of its own, which the core runs on a thread it starts
  // (uv_reactor without an application loop): run() runs the loop until its
  // handles are closed; close_loop() then releases the loop's descriptors, on the
  // same thread. The core calls them only for such a reactor (core::start); the
  // others (an application's loop, the simulator) are never run this way.
  virtual void run() {}
  virtual void close_loop() {}
};

// Builds a client over a reactor of the caller's (the simulator's), run from the
// thread that creates it. For redlock/testing.h (exported: the testing library is
// a library of its own).
struct REDLOCK_EXPORT client_access {
  static std::unique_ptr<client> make(client_options options, std::unique_ptr<reactor> io);
};

}  // namespace redlock::detail
