// The simulated world behind redlock/testing.h: virtual time, one event queue, a
// seeded generator, simulated nodes (sim_node.h), and a reactor per client
// (reactor.h) whose links lead to those nodes. Not installed: the project's own
// simulator harness (tests/sim) includes it for what the public API does not show.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "../reactor.h"
#include "redlock/testing.h"
#include "sim_node.h"

namespace redlock::testing {

using detail::link;
using detail::link_events;
using detail::node_address;
using detail::reactor;

// xoshiro256** seeded by splitmix64: fast, good enough, identical everywhere.
class sim_rng {
 public:
  explicit sim_rng(std::uint64_t seed);
  std::uint64_t next();
  // Uniform in [lo, hi] (hi >= lo).
  std::int64_t between(std::int64_t lo, std::int64_t hi);
  // True with probability p.
  bool chance(double p);

 private:
  std::uint64_t s_[4];
};

struct world::impl {
  struct client_state;
  struct conn_state;

  struct node_state {
    std::unique_ptr<sim::node> node;
    bool up = true;
    bool paused = false;
    bool black_hole = false;
    bool drop_replies = false;
    std::int64_t min_latency_us = 0, max_latency_us = 0;
    // The node's wall clock: base + offset + elapsed * (1 + rate), piecewise.
    std::int64_t clock_base_us = 0;  // node clock at virtual time clock_from_us
    std::int64_t clock_from_us = 0;
    double clock_rate = 0.0;
    std::uint64_t epoch = 0;  // bumped by every crash: connections of older epochs are dead
    // Bytes that arrived while the node was paused, in arrival order.
    struct pending {
      std::weak_ptr<conn_state> conn;
      std::string bytes;
    };
    std::deque<pending> paused_input;
    std::vector<std::weak_ptr<conn_state>> conns;
  };

  struct client_state {
    std::size_t id = 0;
    bool alive = true;  // the reactor exists
    bool closed = false;
    reactor::driver* driver = nullptr;
    std::int64_t paused_until_us = 0;
    std::uint64_t timer_gen = 0;  // the armed timer's generation (0: none)
    bool idle_on = false;
    bool idle_queued = false;
    bool wake_queued = false;
    const void* tag = nullptr;  // the client object, for pause_client()
    // Per node: cut off (a partition between this client and the node).
    std::vector<bool> cut;
  };

  struct conn_state {
    std::shared_ptr<client_state> client;
    std::size_t node = 0;
    std::uint64_t node_epoch = 0;
    link_events* events = nullptr;  // null once the client dropped the link
    std::unique_ptr<sim::node::session> session;
    bool up = false;    // the connect completed
    bool dead = false;  // reset / closed by the node: the node runs nothing more from it
    bool down_delivered = false;  // the client heard the end
    std::int64_t last_to_node_us = 0;
    std::int64_t last_to_client_us = 0;
  };

  explicit impl(world_options o);
  ~impl();

  // --- the event queue ---
  void at(std::int64_t t_us, std::function<void()> fn);
  void after(std::int64_t delay_us, std::function<void()> fn) { at(now_us + delay_us, std::move(fn)); }
  // Runs the next event; false when none is due at or before `until_us`.
  bool step(std::int64_t until_us);
  bool run_until(const std::function<bool()>& done, std::int64_t limit_us);

  // --- network ---
  std::int64_t latency(std::size_t node);
  std::int64_t node_now_us(std::size_t node) const;
  void send_to_node(const std::shared_ptr<conn_state>& c, std::string bytes);
  void deliver_to_node(const std::shared_ptr<conn_state>& c, std::string bytes);
  void send_to_client(const std::shared_ptr<conn_state>& c, std::string bytes, bool then_close);
  // Breaks a connection: the client hears `why` after a network delay.
  void reset(const std::shared_ptr<conn_state>& c, std::string why);
  // Runs fn for the client now, or when its pause ends.
  void for_client(const std::shared_ptr<client_state>& cl, std::function<void()> fn);
  bool passes(const conn_state& c) const;  // not black-holed / cut

  void send_refusal(const std::shared_ptr<conn_state>& c);
  void crash(std::size_t node);
  void prune(std::size_t node);  // forgets finished connections

  std::unique_ptr<reactor> make_reactor(std::shared_ptr<client_state> cl);
  std::unique_ptr<link> open(const std::shared_ptr<client_state>& cl, const node_address& a, link_events& ev,
                             node_status& status, std::string& error);
  std::string token();

  std::weak_ptr<impl> self;
  world_options options;
  sim_rng rng;
  std::int64_t now_us = 0;
  std::uint64_t seq = 0;
  std::uint64_t events = 0;
  std::uint64_t commands = 0;
  bool driving = false;
  struct event {
    std::int64_t t;
    std::uint64_t seq;
    std::function<void()> fn;
  };
  struct later {
    bool operator()(const event& a, const event& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
  };
  std::priority_queue<event, std::vector<event>, later> queue;
  std::vector<node_state> nodes;
  std::vector<std::shared_ptr<client_state>> clients;
  std::shared_ptr<redlock::clock> clock;
  // Observers for the harness (may be empty): every command a node executes.
  std::function<void(std::size_t node, const std::string& bytes)> on_node_input;
};

}  // namespace redlock::testing
