// A test double for applications: real redlock clients over simulated Redis
// nodes, in one process, in virtual time.
//
// The clients are ordinary redlock::client objects (the same type, the same API,
// the same code paths down to the RESP bytes); only the network, the nodes and the
// clock are simulated. Time stands still until the test advances it (advance(),
// run_until()), or until a blocking call of a client (acquire, release, ...)
// needs it to move: that call runs the world until its answer is in. Everything
// happens on the thread that owns the world; nothing sleeps.
//
//   redlock::testing::world w;                  // three nodes, seed 1
//   auto c = w.make_client();
//   redlock::acquire_options o;
//   o.ttl = std::chrono::seconds(10);
//   o.auto_extend = true;
//   auto r = c->acquire("report", o);
//   w.delete_key_everywhere("report");      // someone else's FLUSHALL: the lock is lost
//   w.advance(std::chrono::seconds(5));      // the watchdog notices, on_lost runs
//
// Node faults: pause (process frozen; bytes queue up), crash + restart (with or
// without its data), black hole (nothing gets through, nothing is refused),
// partitions between one client and one node, latency, dropped replies (the node
// executes, the answer is lost), reset connections, clock jumps and drift,
// injected error replies (READONLY, OOM, NOPERM, ...). Client faults: pause a
// client's process while time runs (the GC-pause case).
//
// The network is TCP-like: each connection delivers its bytes in order, one way
// delay per message drawn from the node's latency range, and never loses bytes
// while it lives. A black hole or a partition holds the bytes back (as TCP's
// retransmissions would) and lets them through, in order, when it ends: a
// request written into a black hole may still run on the node later, if its
// connection was not reset meanwhile.
//
// Single-threaded: use a world, its clients and their locks from the thread that
// created the world. Destroy the clients (and lock handles) before the world.
// Determinism: the same seed and the same calls give the same run, tokens and all.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redlock/client.h"
#include "redlock/options.h"
#include "redlock/version.h"

namespace redlock::testing {

struct world_options {
  std::size_t nodes = 3;
  std::uint64_t seed = 1;
  // One-way network delay of every message, drawn uniformly per message (in-order
  // per connection). Microseconds.
  std::int64_t min_latency_us = 100;
  std::int64_t max_latency_us = 400;
  // Nodes keep their data across restart() (appendonly yes, appendfsync always).
  bool persistent = false;
  // Per node, overriding `persistent`: empty, or one entry per node.
  std::vector<bool> persistent_nodes;
  // A persistent node that restarts is loading its AOF for this long (virtual
  // time, by the node's clock): meanwhile it answers every command but AUTH,
  // SELECT, INFO, TIME and ECHO with "-LOADING Redis is loading the dataset in memory",
  // as Redis does. 0 (the default): it serves at once.
  std::int64_t restart_loading_us = 0;
  // Per node, the maxmemory-policy its INFO memory reports ("allkeys-lru", ...):
  // empty = "noeviction" on every node, or one entry per node. The nodes never
  // evict; the policy is what the client's eviction check reads.
  std::vector<std::string> maxmemory_policies;
};

// What a node holds under a key.
struct key_state {
  std::string value;
  std::int64_t pttl_ms = -1;  // -1: no expiry
};

class REDLOCK_EXPORT world {
 public:
  explicit world(world_options options = {});
  ~world();
  world(const world&) = delete;
  world& operator=(const world&) = delete;

  // A client over every node of this world. `options.nodes` is filled in (any
  // value given is replaced), and `options.clock` is the world's virtual clock.
  // Throws config_error as client's constructor does.
  std::unique_ptr<client> make_client(client_options options = {});
  // The nodes' URIs ("redis://node0:6379", ...), as make_client uses them.
  std::vector<std::string> node_uris() const;
  std::size_t node_count() const;

  // --- time ---
  // Virtual time since the world was created.
  std::chrono::steady_clock::time_point now() const;
  std::chrono::microseconds elapsed() const;
  // Runs everything due in the next `d` of virtual time.
  void advance(std::chrono::microseconds d);
  // Runs until `done()` or `limit` of virtual time has passed; returns done().
  bool run_until(const std::function<bool()>& done, std::chrono::microseconds limit);

  // --- node faults ---
  void pause_node(std::size_t i);   // like SIGSTOP
  void resume_node(std::size_t i);  // like SIGCONT
  // Kills the node (connections reset, connects refused) until restart_node().
  void crash_node(std::size_t i);
  // Starts a crashed node again (or crashes and starts a running one): a new
  // run_id, an empty script cache, and the data only when the node is persistent
  // (world_options::persistent, persistent_nodes).
  void restart_node(std::size_t i);
  // False between crash_node() and restart_node().
  bool node_up(std::size_t i) const;
  // While on, nothing gets to or from the node (connects hang); bytes on open
  // connections are held back and delivered in order when it ends.
  void black_hole_node(std::size_t i, bool on);
  // The same between one client and one node (the others still reach it).
  void partition(const client& c, std::size_t node, bool cut);
  // While on, the node executes every request it gets but its replies are lost.
  // A connection that lost replies cannot go on (TCP never loses bytes on a live
  // connection): when it is switched off, those connections are reset.
  void drop_replies(std::size_t i, bool on);
  // Resets every open connection to the node (clients reconnect).
  void reset_connections(std::size_t i);
  // This node's messages take this long, one way (uniform), from now on.
  void set_node_latency(std::size_t i, std::int64_t min_us, std::int64_t max_us);
  // Steps the node's wall clock (TIME and key expiry) by `by` (negative: back).
  void jump_node_clock(std::size_t i, std::chrono::milliseconds by);
  // The node's clock runs at (1 + rate) x real speed from now on (0.01: 1 % fast;
  // rate > -1).
  void set_node_clock_rate(std::size_t i, double rate);
  // The node's wall clock now (what TIME reports), since the Unix epoch. Node
  // clocks start at 2026-12-01 00:00 UTC.
  std::chrono::microseconds node_clock(std::size_t i) const;
  // Every command (or every `command`, upper case) gets this error reply instead
  // of running, e.g. "READONLY You can't write against a read only replica.";
  // an empty `error_line` clears it.
  void inject_error(std::size_t i, std::string command, std::string error_line);

  // --- client faults ---
  // The client's process stops running (no callbacks, no timers, no reading)
  // for `d` of virtual time from now, while the rest of the world goes on; what
  // it would have done runs, in order, when the pause ends. (Its clock does not
  // stop: a lock whose validity ran out meanwhile is not owned when it resumes.)
  void pause_client(const client& c, std::chrono::microseconds d);

  // --- what the nodes hold (keys as stored: key_prefix + resource) ---
  std::optional<key_state> key_at(std::size_t node, const std::string& key) const;
  std::vector<std::string> keys_at(std::size_t node) const;
  // Deletes `key` on every node (an operator's DEL, a FLUSHALL, an eviction).
  void delete_key_everywhere(const std::string& key);
  // Makes `key` expire now on every node.
  void expire_key_everywhere(const std::string& key);
  // Overwrites `key` on every node with `value` (another owner's token) and `ttl`:
  // a lock stolen by a misbehaving client.
  void steal_key_everywhere(const std::string& key, const std::string& value, std::chrono::milliseconds ttl);

  // --- statistics ---
  std::uint64_t events_run() const;    // simulator events processed so far
  // Deliveries of request bytes the nodes executed so far (one or several
  // pipelined commands each).
  std::uint64_t commands_run() const;

  struct impl;
  impl& internals() { return *impl_; }  // for the project's own simulator harness

 private:
  std::shared_ptr<impl> impl_;
};

}  // namespace redlock::testing
