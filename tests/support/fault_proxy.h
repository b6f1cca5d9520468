// A TCP fault proxy on 127.0.0.1, for making latency, partitions, resets and lost
// replies between a client and one redis-server (tc/netem is not available).
//
// The proxy listens on a free loopback port and forwards every accepted connection
// to 127.0.0.1:target_port, on its own libuv loop thread. Its mode applies to all
// of its connections at once and can be switched at run time:
//
//   pass          forward both ways at once.
//   latency(D)    deliver every chunk D ms after it was read, in both directions,
//                 preserving order (a chunk never overtakes an earlier one, even
//                 when D shrinks). D is a lower bound measured on the precise
//                 monotonic clock (never undershot, not even by rounding): a round
//                 trip through the proxy takes >= 2 D. Delivery is late by the
//                 loop's scheduling only (~1 ms idle, more on a loaded machine).
//   black_hole    a partition: accept, keep every connection, forward nothing and
//                 answer nothing. Bytes are held, not lost (the proxy stops reading,
//                 so they wait in the kernel's buffers, as TCP retransmission would
//                 make them wait), and flow again in order when the mode changes.
//                 New connections are accepted and held the same way.
//   reset         close every connection now (with RST), and close new ones at once.
//   drop_replies  forward client->server bytes; read and discard server->client
//                 bytes (the server applies a SET, the client never hears). A byte
//                 stream that lost bytes cannot continue (TCP never loses bytes on
//                 a live connection), so when the mode leaves drop_replies every
//                 connection that lost bytes is reset.
//   drop_reply_then_black_hole(T)
//                 a one-shot fault that trips between "the server ran it" and
//                 "the client heard": forwards both ways (as pass) until a
//                 client->server chunk completes the byte string T (which may span
//                 chunks) on some connection. That chunk is forwarded, so the
//                 server runs the command; from then on that connection's
//                 server->client bytes are read and discarded (its reply is lost),
//                 and everything else is held as in black_hole: no more client
//                 bytes are read on any connection, new connections are accepted
//                 and held. It models a node that becomes unreachable right after
//                 it executed a command: when the mode changes, every connection
//                 open since the trip is reset, and nothing held during it is ever
//                 delivered (an outage that outlived TCP's retransmissions). Left
//                 before it trips, it behaves as pass and resets nothing.
//
// Thread safety: every member function may be called from any thread. set_mode()
// and its shorthands return once the loop thread has applied the mode (bounded:
// they throw std::runtime_error if the loop does not answer within 5 s).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace redlock::test {

class fault_proxy {
 public:
  enum class mode { pass, latency, black_hole, reset, drop_replies, drop_reply_then_black_hole };

  struct counters {
    std::uint64_t accepted = 0;       // client connections accepted
    std::uint64_t refused = 0;        // closed at once because the mode was reset
    std::uint64_t reset = 0;          // live connections closed by reset / leaving drop_replies
    std::uint64_t bytes_up = 0;       // client -> server bytes delivered
    std::uint64_t bytes_down = 0;     // server -> client bytes delivered
    std::uint64_t bytes_dropped = 0;  // server -> client bytes discarded (drop_replies)
    std::uint64_t open = 0;           // connections currently open (client side)
    std::uint64_t mode_changes = 0;   // set_mode calls applied
    std::uint64_t trips = 0;          // drop_reply_then_black_hole trips
  };

  // Binds 127.0.0.1 on a free port, starts the loop thread, forwards to
  // 127.0.0.1:target_port. Starts in pass mode. Throws std::runtime_error.
  explicit fault_proxy(int target_port);
  // Closes every connection and the listener, stops and joins the loop thread.
  // Bounded (everything is local); never throws.
  ~fault_proxy();

  fault_proxy(const fault_proxy&) = delete;
  fault_proxy& operator=(const fault_proxy&) = delete;

  int port() const;
  int target_port() const;
  // "redis://127.0.0.1:PORT"
  std::string uri() const;

  // Switches the mode; `delay` is used by mode::latency only, `trigger` by
  // mode::drop_reply_then_black_hole only (not empty for it: std::invalid_argument).
  void set_mode(mode m, std::chrono::milliseconds delay = std::chrono::milliseconds(0),
                std::string trigger = {});
  void pass() { set_mode(mode::pass); }
  void latency(std::chrono::milliseconds d) { set_mode(mode::latency, d); }
  void black_hole() { set_mode(mode::black_hole); }
  void reset() { set_mode(mode::reset); }
  void drop_replies() { set_mode(mode::drop_replies); }
  void drop_reply_then_black_hole(std::string trigger) {
    set_mode(mode::drop_reply_then_black_hole, std::chrono::milliseconds(0), std::move(trigger));
  }
  // Waits (<= limit) until the armed drop_reply_then_black_hole has tripped;
  // returns whether it has.
  bool wait_tripped(std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) const;
  mode current() const;

  counters stats() const;
  // Waits (<= limit) until no connection is open; returns whether none is.
  bool wait_idle(std::chrono::milliseconds limit = std::chrono::milliseconds(2000)) const;
  // Waits (<= limit) until no chunk waits in the proxy for its delivery time (after
  // a latency, once the delayed bytes were written on); returns whether none does.
  // (Bytes black_hole holds back are in the kernel's buffers and not counted; but
  // chunks already queued when black_hole began stay queued until it ends.)
  bool wait_flushed(std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) const;

  // The loop-thread state; public only so that the .cc's connection pairs can
  // name it.
  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

const char* to_string(fault_proxy::mode m) noexcept;

}  // namespace redlock::test
