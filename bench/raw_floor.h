// The network floor: what a minimal client needs for one lock + unlock with raw
// hiredis, measured in the same run as the library so ratios are meaningful.
//
//  - parallel floor: write `SET key token NX PX 30000` to every node, then read every
//    reply; then `EVALSHA <release> 1 key token` to every node, then read every reply.
//  - sequential floor: the same commands, node by node (write, read, next node).
//  - quorum floor: as the parallel floor, but each phase stops waiting at the first
//    `quorum` replies (the others are read after the clock stops): the floor for a
//    client that decides early, as the library does.
//  - pipelined floor: as the parallel floor with `batch` locks per round, each node
//    getting all `batch` commands in one write.
//  - ping: plain PING round trip per node.
//
// The parallel and pipelined floors can also take the lock with the library's own
// acquire commands (floor_acquire), to isolate what each costs the servers.
//
// Thread-safety: a raw_nodes and everything run on it belong to one thread.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "measure.h"

namespace redlock::bench {

// One blocking hiredis context per node on 127.0.0.1 (TCP_NODELAY, 2 s timeouts),
// with the release script (and the library's acquire script) loaded.
// Throws std::runtime_error if a node cannot be reached.
class raw_nodes {
 public:
  explicit raw_nodes(const std::vector<int>& ports);
  ~raw_nodes();
  raw_nodes(const raw_nodes&) = delete;
  raw_nodes& operator=(const raw_nodes&) = delete;

  std::size_t size() const noexcept { return ctx_.size(); }
  redisContext* at(std::size_t i) const { return ctx_.at(i); }
  const std::string& release_sha() const noexcept { return release_sha_; }
  const std::string& acquire_sha() const noexcept { return acquire_sha_; }

 private:
  std::vector<redisContext*> ctx_;
  std::string release_sha_, acquire_sha_;
};

// How the parallel floor takes the lock on each node.
enum class floor_acquire {
  set_nx,           // SET key token NX PX 30000 (the floor of the issue)
  library_set_get,  // SET key token NX PX 30000 GET: the library's plain acquire (nil = granted)
  set_get_time,     // SET key token NX PX 30000 GET, then TIME, pipelined on the same connection:
                    // the library's acquire when the clock-jump guard wants a sample (by default,
                    // every acquire)
  library_script,   // EVALSHA of the library's acquire script (SET NX PX in Lua; it also called
                    // TIME until Dec 2026, now pipelined behind it): what the library falls back
                    // to before 7.0's SET ... NX ... GET
};

struct floor_result {
  latencies pair, acquire, release;  // per pair, microseconds
  std::uint64_t pairs = 0;           // completed pairs
  std::uint64_t errors = 0;          // a node that did not grant or did not delete
  double seconds = 0;                // wall time of the measured loop
};

// At most `max_pairs` pairs or `duration`, whichever ends first. Distinct keys.
floor_result parallel_floor(raw_nodes& nodes, floor_acquire how, bench_clock::duration duration,
                            std::uint64_t max_pairs);
// Parallel floor that times each phase up to the first `quorum` replies; the other
// replies are drained before the next phase, outside the timing.
floor_result quorum_floor(raw_nodes& nodes, std::size_t quorum, bench_clock::duration duration,
                          std::uint64_t max_pairs);
// As the quorum floor, but the late replies are not drained between phases: each
// node's outstanding replies are read whenever they come, while the next phases
// run (a phase counts only its own replies, in each node's reply order). The floor
// for a client that decides at the quorum and never waits for a slow node, as the
// library does, paying the same late-reply traffic. Drains (<= 2 s) at the end.
floor_result async_quorum_floor(raw_nodes& nodes, std::size_t quorum, bench_clock::duration duration,
                                std::uint64_t max_pairs);
floor_result sequential_floor(raw_nodes& nodes, bench_clock::duration duration, std::uint64_t max_pairs);
// `batch` locks per round; result.pair holds the latency of each round.
floor_result pipelined_floor(raw_nodes& nodes, int batch, bench_clock::duration duration,
                             std::uint64_t max_rounds, floor_acquire how = floor_acquire::set_nx);

// PING round trips per node: at most `count` per node or `duration` per node.
std::vector<summary> ping_per_node(raw_nodes& nodes, std::uint64_t count, bench_clock::duration duration);

// A process-wide unique suffix for benchmark keys ("<pid>:<n>").
std::string unique_key_suffix();

// 32 hex characters from a fast non-cryptographic generator (benchmark tokens).
std::string fast_token();

}  // namespace redlock::bench
