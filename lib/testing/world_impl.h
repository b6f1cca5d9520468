// The simulated world behind redlock/testing.h: virtual time, one event queue, a
// seeded generator, simulated nodes (sim_node.h), and a reactor per client
// (reactor.h) whose links lead to those nodes. Not installed: the project's own
// simulator harness (tests/sim) includes it for what the public API does not show.
//
// The network. A connection carries two ordered byte streams, as TCP does: every
// message (bytes, the connect's answer, the end of the connection) waits in its
// direction's queue until its delivery time, and no message overtakes an earlier
// one. A blocked path (a black-holed node, a client cut off from a node) holds
// the messages back, as TCP's retransmissions would, and lets them through in
// order once it is open again. Bytes are never lost on a live connection: the
// only loss is drop_replies', and a connection that lost bytes is reset when
// drop_replies ends (as the fault proxy of tests/support does).
//
// The clients. Everything a client's process does (timers, idle turns, wake-ups,
// link events) runs through for_client(): in order, and not while the client is
// paused (world::pause_client) — its turns then wait, in order, for the pause's end.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <vector>

#include "io/reactor.h"
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
  // Uniform in [lo, hi] (hi >= lo; lo when hi < lo).
  std::int64_t between(std::int64_t lo, std::int64_t hi);
  // True with probability p.
  bool chance(double p);
  // Uniform in [0, 1).
  double unit();

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
    // The node's wall clock: clock_base_us at virtual time clock_from_us, then
    // running at (1 + clock_rate) x virtual speed.
    std::int64_t clock_base_us = 0;
    std::int64_t clock_from_us = 0;
    double clock_rate = 0.0;
    std::uint64_t epoch = 0;  // bumped by every crash: connections of older epochs are dead
    // Bytes that arrived while the node was paused, in arrival order.
    struct pending {
      std::shared_ptr<conn_state> conn;
      std::string bytes;
    };
    std::deque<pending> paused_input;
    // Its connections, until both ends are done with them: a connection the client
    // closed still delivers what it wrote (held back by a black hole, or waiting in
    // a paused node's socket), as TCP delivers data ahead of the FIN.
    std::vector<std::shared_ptr<conn_state>> conns;
    // Replication (a replica's): the master it follows, and the stream from it. A
    // generation change (promoted, following another) drops what is in flight.
    std::optional<std::size_t> master_of;
    std::uint64_t repl_gen = 0;
    struct repl_record {
      std::int64_t due_us = 0;
      sim::node::replicated_write w;
    };
    std::deque<repl_record> repl_in;  // in flight from the master, in order
    bool repl_pump_queued = false;
    bool repl_stalled = false;  // a fault: what the master sends waits (a slow replication link)
  };

  struct client_state {
    std::size_t id = 0;
    bool alive = true;  // the reactor exists
    bool closed = false;
    reactor::driver* driver = nullptr;
    std::int64_t paused_until_us = 0;
    // Turns that wait for the pause's end (or for earlier waiting turns), in order.
    std::deque<std::function<void()>> waiting;
    bool resume_queued = false;
    std::uint64_t timer_gen = 0;  // the armed timer's generation (0: none)
    bool idle_on = false;
    bool idle_queued = false;
    bool wake_queued = false;
    const void* tag = nullptr;  // the client object, for pause_client() and partition()
    // Per node: cut off (a partition between this client and the node).
    std::vector<bool> cut;
  };

  // One message of a connection's direction.
  struct message {
    enum class kind : std::uint8_t { data, up, down };
    kind what = kind::data;
    std::int64_t due_us = 0;
    std::string bytes;  // data: the bytes; down: why
  };

  struct conn_state {
    std::shared_ptr<client_state> client;
    std::size_t node = 0;
    std::uint64_t node_epoch = 0;
    link_events* events = nullptr;  // null once the client dropped the link
    std::unique_ptr<sim::node::session> session;
    bool syn_sent = false;      // the connect reached the node (or was refused)
    bool up = false;            // the client heard the connect complete
    bool dead = false;          // reset / closed by the node: the node runs nothing more from it
    bool down_queued = false;   // the end is on its way to the client
    bool lost_bytes = false;    // drop_replies discarded replies: reset when it ends
    std::deque<message> to_node, to_client;
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
  bool passes(const conn_state& c) const;  // not black-holed / cut
  void send_to_node(const std::shared_ptr<conn_state>& c, std::string bytes);
  void send_to_client(const std::shared_ptr<conn_state>& c, message::kind what, std::string bytes);
  // Deliver what is due in each direction, unless the path is blocked.
  void pump_to_node(const std::shared_ptr<conn_state>& c);
  void pump_to_client(const std::shared_ptr<conn_state>& c);
  void syn(const std::shared_ptr<conn_state>& c);  // the connect reaches the node
  void execute(const std::shared_ptr<conn_state>& c, std::string bytes);
  // A path opened again: what it held back flows one latency from now.
  void kick(const std::shared_ptr<conn_state>& c);
  // Breaks a connection (RST): the node runs nothing more from it; the client
  // hears `why` after what is already on its way to it.
  void reset(const std::shared_ptr<conn_state>& c, std::string why);
  // Runs fn as a turn of the client's process: now, or after its pause and the
  // turns waiting before it.
  void for_client(const std::shared_ptr<client_state>& cl, std::function<void()> fn);
  void resume_client(const std::shared_ptr<client_state>& cl);

  // Output of a node for connection c (replies, then the close after a protocol
  // error), then the writes the node recorded go to its replicas, and a WAIT the
  // request blocked in gets its timer.
  void deliver(const std::shared_ptr<conn_state>& c, std::string out, bool ok);
  // --- replication ---
  // `replica` follows `master` from now: a full sync (its data becomes the
  // master's), then every write the master applies reaches it one latency later
  // (held while either end is black-holed or the replica paused or down), and its
  // acknowledgement one latency after that.
  void replicate(std::size_t replica, std::size_t master);
  // `replica` stops following (what is in flight to it is lost) and is a master.
  void promote(std::size_t replica);
  void ship_writes(std::size_t master);
  void pump_replication(std::size_t replica);
  // Answers the WAITs of `node` that can be answered now.
  void poll_blocked(std::size_t node);
  void arm_wait_timer(const std::shared_ptr<conn_state>& c);

  // --- simulated Redis Clusters (issue 23) ---
  // A cluster of these nodes: per shard, its master then its replicas (world
  // indices), the slots split evenly in shard order. Every member learns the map
  // (sim::node::set_cluster), each replica follows its master. Returns its index.
  std::size_t add_cluster(std::vector<std::vector<std::size_t>> shards);
  // Failover of the shard `master` serves: the master stops (down), its first
  // replica is promoted with what it had received (in-flight writes are lost),
  // every member's map shows the new master and the old one as a failed replica.
  // False (nothing done) if `master` is no cluster's shard master or has no replica.
  bool failover(std::size_t master);
  // A failed old master comes back: restarted (empty), it follows its shard's
  // master (a full sync) and is an online replica in every member's map.
  void rejoin(std::size_t node);
  // The cluster and shard of a node (nullopt: in none).
  std::optional<std::pair<std::size_t, std::size_t>> cluster_of(std::size_t node) const;
  struct sim_cluster {
    std::vector<std::vector<std::size_t>> shards;  // per shard: master first
    std::vector<std::pair<int, int>> ranges;       // per shard
    std::vector<bool> failed;                      // per world node
  };
  std::vector<sim_cluster> clusters;
  void publish_map(std::size_t cluster);

  void crash(std::size_t node);
  void prune(std::size_t node);  // forgets finished connections
  std::vector<std::shared_ptr<conn_state>> live_conns(std::size_t node);

  std::unique_ptr<reactor> make_reactor(std::shared_ptr<client_state> cl);
  // A client of this world whose nodes are `uris` (world::make_client: one
  // redis://nodeK:6379 per node; e.g. redis+cluster://nodeK:6379 for a simulated
  // cluster, whose hosts open() resolves the same way).
  std::unique_ptr<client> make_client(client_options options, std::vector<std::string> uris);
  std::unique_ptr<link> open(const std::shared_ptr<client_state>& cl, const node_address& a, link_events& ev,
                             node_status& status, std::string& error);
  std::string token();
  std::shared_ptr<client_state> client_of(const client& c) const;

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
  // Observers for the harness (may be empty). After every turn of a client's
  // process (client id = its index in `clients`, the order of make_client):
  std::function<void(std::size_t client)> on_client_turn;
  // Every batch of request bytes a node is about to execute.
  std::function<void(std::size_t node, const std::string& bytes)> on_node_input;
};

}  // namespace redlock::testing
