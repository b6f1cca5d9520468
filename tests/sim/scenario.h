// The scenario runner: one seeded run of real redlock clients in a simulated
// world (redlock/testing.h), checked by checkers.h.
//
// A run is a function of (seed, scenario, guard switched off, fault mask): the
// seed draws the plan (nodes, clients, resources, options, the timed fault
// schedule) and drives the clients' actors; the same inputs give the same run,
// event for event, and the same digest.
//
// Every client is an event-driven actor per resource, scheduled through the
// world's queue as turns of the client's process (so a paused client's actors
// pause too). It acquires with the real asynchronous API (acquire_async, with
// or without fencing and the watchdog, sometimes cancelled), holds for a while
// (extending through client::extend_async, writing to the fenced resource), and
// gives the lock up in one of the API's ways (lock::release_async,
// client::release_async of the lease, the handle's destructor, detach then
// release or expiry). After the schedule, every fault heals, the actors stop,
// the nodes must be empty of lock keys once every TTL has passed, and each client
// must then acquire each resource uncontended within the liveness bound.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "checkers.h"
#include "history.h"

namespace redlock::simtest {

// The safety guard a negative control switches off (client_options).
enum class guard_off : std::uint8_t {
  none,
  restart,  // restart_quarantine = 0
  clock,    // clock_jump_threshold = 0
  // replication_confirmation::nowhere (REDLOCK_PREVIEW_CONFIRM_REPLICATION=0 while
  // the clients are made): a cluster shard's grant counts before its replica has it
  replication,
};
const char* to_string(guard_off g);
bool parse_guard_off(const std::string& s, guard_off& out);

struct fault {
  enum class kind : std::uint8_t {
    latency,       // node's latency range raised for dur
    black_hole,    // node black-holed for dur
    partition,     // one client cut off from one node for dur
    drop_replies,  // node's replies lost for dur (then its connections reset)
    reset,         // node's connections reset (instant)
    pause_node,    // SIGSTOP for dur
    crash,         // down for dur, then restarted (data kept only if persistent)
    restart,       // crash + start at once
    clock_jump,    // node clock stepped by amount ms (instant)
    clock_drift,   // node clock rate = rate for dur
    pause_client,  // the client's process stops for dur
    jump_reset,    // node clock stepped by amount ms and its connections reset at once (a VM resumed or migrated)
    deny,          // node answers the lock commands with NOPERM for dur (an ACL change); only a minority of nodes
    // Cluster scenarios: the shard of `node` (an original shard master) fails over.
    // Its replication stalls for `amount` us (the replica keeps what it had), then
    // its master stops and the replica is promoted with only what it received
    // (every member's map shows it); dur after the fault began, the old master
    // comes back empty as the new master's replica. Skipped when the shard has no
    // replica up (an earlier failover's old master not back yet).
    failover,
  };
  kind what = kind::latency;
  std::int64_t at_us = 0;
  std::int64_t dur_us = 0;  // 0 for instant faults
  std::size_t node = 0;
  std::size_t client = 0;
  std::int64_t amount = 0;  // latency: max one-way us; clock_jump: ms (negative: back)
  double rate = 0.0;        // clock_drift
};
std::string describe(const fault& f);

// What one client's actors do (drawn per client from the seed).
struct client_profile {
  std::int64_t ttl_min_ms = 0, ttl_max_ms = 0;
  double auto_extend = 0;      // probability per acquire
  double fencing = 0;          // probability per acquire
  double explicit_extend = 0;  // probability per hold step
  double write = 0;            // probability per hold step (fenced holds)
  double cancel = 0;           // probability per acquire
  double long_hold = 0;        // probability of holding for several TTLs
  // Probability that the holder's process stops (a GC pause, swap) between its
  // check of owns_lock() and its fenced write, for 0.5 to 3 TTLs.
  double gc_pause = 0;
  std::int64_t think_max_us = 0;  // between two acquires (x3 after a failed one)
  std::int64_t step_max_us = 0;  // between two steps of a hold
  int retry_attempts = 1;
};

struct plan {
  std::string scenario;
  std::uint64_t seed = 0;
  guard_off off = guard_off::none;
  std::size_t nodes = 3, clients = 2, resources = 1;
  std::vector<bool> persistent;  // per node
  // Cluster scenarios: the Redlock nodes are Redis Clusters of these world nodes:
  // per Redlock node, per shard, its master then its replica. Empty: each world
  // node is a standalone Redlock node.
  std::vector<std::vector<std::vector<std::size_t>>> clusters;
  std::int64_t max_ttl_ms = 2000;
  std::int64_t run_us = 0;  // the schedule's length; then everything heals
  std::int64_t min_latency_us = 100, max_latency_us = 400;
  std::vector<client_profile> profiles;
  // The last client is created this late (-1: with the others, at the start), with
  // restart_guard_first_sight (docs/safety.md: a client that never saw a node
  // before its restart is safe only so). Only in scenarios without clock jumps: a
  // new process cannot see a jump from before it connected (docs/safety.md).
  std::int64_t late_join_us = -1;
  std::vector<fault> faults;
  // Scenario-specific checks and names (each off in the general scenarios):
  //  check_orphans: a lock key whose token is no successful acquire's (a failed
  //    attempt's grant) is gone within orphan_bound_us of its node being healthy
  //    (up, answering, reachable): rollbacks and late grants are delivered
  //    (docs/safety.md, Found by review 8 and 9). Checker "orphan_keys".
  //  check_no_reset: no node pause lasts as long as the stall bound (1 s), so no
  //    connection may be reset: stalled means no reply for the bound since the
  //    request was written (docs/safety.md, 7). Checker "spurious_reset".
  //  reserved_name: resource 1 is resource 0's name + ":fence", which the API
  //    refuses (invalid_argument, docs/safety.md 11): that refusal is expected, and
  //    a name it accepts must still work (liveness).
  bool check_orphans = false;
  std::int64_t orphan_bound_us = 3'000'000;
  bool check_no_reset = false;
  bool reserved_name = false;
  std::string describe() const;  // several lines
};

// The scenarios by name, each with its fault mix ("mixed", "pauses", ...).
const std::vector<std::string>& scenario_names();
bool known_scenario(const std::string& name);
plan make_plan(std::uint64_t seed, const std::string& scenario, guard_off off);

struct run_options {
  std::uint64_t seed = 1;
  std::string scenario = "mixed";
  guard_off off = guard_off::none;
  // Which faults of the plan to apply (empty: all): a subset, for shrinking.
  std::vector<bool> fault_mask;
  // Prints the plan and every timeline line as it happens.
  std::ostream* verbose = nullptr;
};

struct run_result {
  plan p;
  std::uint64_t digest = 0;
  std::uint64_t operations = 0;  // acquire, extend and release calls
  std::uint64_t acquired = 0;
  std::uint64_t events = 0;      // world events
  std::int64_t virtual_us = 0;
  std::int64_t liveness_us = 0;  // the slowest liveness acquire
  std::size_t faults_applied = 0;
  std::vector<violation> violations;
  history h;
  bool passed() const { return violations.empty(); }
  // "pass" or "violation:<first checker>"
  std::string verdict() const;
};

run_result run(const run_options& o);

// The command that replays a run.
std::string replay_command(const run_options& o);

// Delta debugging over the fault schedule: the smallest subset of faults (within
// `budget` runs) for which the run still fails with `checker`. Returns the mask.
std::vector<bool> shrink(const run_options& o, const std::string& checker, int budget, int* runs_used = nullptr);

// The regression corpus (tests/sim/seeds.txt): one run a line,
//   <scenario> <seed> <expect> [guard-off=<restart|clock|replication>]
// where <expect> is "pass" or "violation:<checker>"; '#' starts a comment.
struct corpus_entry {
  std::string scenario;
  std::uint64_t seed = 0;
  std::string expect;
  guard_off off = guard_off::none;
  int line = 0;
};
// Throws std::runtime_error naming the file and line of a malformed entry.
std::vector<corpus_entry> read_corpus(const std::string& path);
// Whether a run met an expectation: "pass" = no violation; "violation:X" = the
// checker X fired (others may have too).
bool meets(const run_result& r, const std::string& expect);

}  // namespace redlock::simtest
