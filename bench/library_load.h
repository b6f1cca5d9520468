// Load generators that drive the redlock library through its public API.
//
//  - sync_pairs: one caller thread, client::acquire then lock::release, distinct keys.
//  - run_chains: K chains in flight, each acquire_async -> release_async -> next
//    acquire, driven from the callbacks on the clients' loop threads.
//  - acquire_many: takes and keeps N locks (for the watchdog and memory figures).
//
// Thread-safety: each function is called from one (non-loop) thread and blocks
// until its load has finished; the callbacks it starts run on the loop threads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "measure.h"
#include "redlock/client.h"

namespace redlock::bench {

// TTL 30 s, one attempt: what every throughput and latency figure uses.
acquire_options bench_acquire_options();

struct pair_result {
  latencies pair, acquire, release;  // microseconds
  std::uint64_t pairs = 0;           // completed acquire + release pairs
  std::uint64_t errors = 0;          // failed acquires or releases
  double seconds = 0;
};

// Synchronous acquire + release pairs on distinct keys until `duration` or
// `max_pairs`, whichever comes first.
pair_result sync_pairs(client& c, const acquire_options& o, bench_clock::duration duration,
                       std::uint64_t max_pairs);

struct chain_config {
  int inflight = 1;  // chains running at once (spread round-robin over the clients)
  int keys = 0;      // 0: every acquire on a fresh key; else chain i uses key i % keys
  bench_clock::duration duration = std::chrono::seconds(1);
  std::uint64_t max_attempts = 10'000'000;  // bound on acquires started, all chains
  acquire_options options = bench_acquire_options();
};

struct chain_result {
  latencies pair;                                      // acquire call to release callback, microseconds
  std::uint64_t attempts = 0;                          // acquires started
  std::uint64_t acquired = 0;                          // of which succeeded
  std::uint64_t contended = 0;                         // of which failed contended
  std::uint64_t errors = 0;                            // other acquire failures and failed releases
  std::uint64_t pairs = 0;                             // completed acquire + release pairs
  double seconds = 0;                                  // from the first start to the last chain's end
  std::map<std::string, std::uint64_t> error_reasons;  // report message -> count (errors)
  std::uint64_t node_timeouts = 0;                     // node answers that timed out, over all reports
};

// Runs `cfg.inflight` chains over `clients` (not empty). Blocks until every chain
// has stopped; aborts the process if a callback never comes (a library bug).
chain_result run_chains(const std::vector<client*>& clients, const chain_config& cfg);

struct hold_result {
  std::vector<lock> locks;                               // the held locks (failed slots hold empty handles)
  std::uint64_t failures = 0;                            // acquires that failed
  std::map<std::string, std::uint64_t> failure_reasons;  // error message -> count
  double seconds = 0;
};

// Acquires `count` locks on distinct keys with `inflight` acquires at a time and
// keeps them. Blocks until done.
hold_result acquire_many(client& c, std::size_t count, int inflight, const acquire_options& o);

}  // namespace redlock::bench
