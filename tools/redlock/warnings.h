// acquire and run: the configuration warnings a first-time user needs to see
// (docs/cli.md, "Warnings"): fewer than 3 nodes (or an even number), a node whose
// maxmemory-policy may evict locks, and a node that did not grant an acquire that
// took the lock all the same. They come from the library: its on_warning events
// (client_options::observers) and the acquire's per-node report.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "args.h"
#include "redlock/redlock.h"

namespace redlock::cli {

// Collects the client's on_warning events, and each node's last state: up (it
// finished a handshake: its eviction_policy warning, if any, came before), or down
// and why.
// Thread-safety: the events arrive on the client's loop thread; the other members
// may be called from any thread.
class warning_collector final : public redlock::observer {
 public:
  void on_warning(const redlock::warning& w) override;
  void on_node_up(const redlock::node_event& e) override;
  void on_node_down(const redlock::node_event& e) override;

  // Waits until every node of `nodes` (configuration indexes) has been seen up or
  // down, or `limit` has passed.
  void wait_for_nodes(const std::vector<std::size_t>& nodes, std::chrono::milliseconds limit);
  // The warnings seen so far, each message once, in arrival order.
  std::vector<std::string> messages() const;
  // Node `index`: "up", "" (not seen up or down yet), or why it is down
  // ("connection_error: ...").
  std::string state_of(std::size_t index) const;

 private:
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::string> messages_;
  std::vector<std::string> states_;  // by node index, as state_of()
};

// After an acquire that completed (success or failure): prints one
// "redlock: warning: " line per warning (nothing with -q). The client's warnings
// first, each once: the node count, each node whose maxmemory-policy may evict
// locks. Nodes the acquire's decision did not wait for ("pending" in `rep`) and
// that were not connected yet are waited for (up or down) up to --node-timeout, so
// that their handshake's warning is not missed; nothing else delays the caller.
// Then, when the lock was taken, one line per node that did not grant it (down,
// timed out, not connected by then, refused, excluded), naming the node and why.
// Node names are the library's redacted URIs: no password.
void print_acquire_warnings(const invocation& inv, warning_collector& collected, const redlock::report& rep,
                            std::size_t quorum);

}  // namespace redlock::cli
