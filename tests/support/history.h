// Checkers over a recorded lock history, for the fault scenarios.
//
// Times are nanoseconds of std::chrono::steady_clock (CLOCK_MONOTONIC), which is
// one clock for every process on the machine, so histories recorded by several
// processes merge.
//
//  (M) owner-aware mutual exclusion: every successful acquisition holds the lock
//      from its completion until its validity ends or its release is invoked,
//      whichever is first. Two such windows of different owners must not overlap.
//  (S) lost updates: a counter incremented by read-sleep-write inside critical
//      sections; expected (critical sections that wrote) minus actual = lost.
//  (F) fencing: the fencing tokens of successive grants (in completion order)
//      strictly increase, and the fenced resource's log of accepted writes never
//      goes back to a smaller token.
//
// Thread safety: history::record* may be called from any thread; the check_*
// functions are pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace redlock::test {

// Now on the checker's clock (steady_clock), in nanoseconds.
std::int64_t mono_ns();

// One successful acquisition.
struct grant {
  std::string owner;                // the client (thread or process) that holds it; no spaces
  std::string token;                // the lock token (unique per grant); no spaces
  std::int64_t invoke_ns = 0;       // acquire called
  std::int64_t complete_ns = 0;     // acquire returned success
  std::int64_t valid_until_ns = 0;  // complete_ns + report.validity
  std::int64_t release_ns = -1;     // release invoked; -1 = never (held to expiry)
  std::optional<std::uint64_t> fence;

  // The window in which the owner may act as the holder.
  std::int64_t hold_start() const { return complete_ns; }
  std::int64_t hold_end() const;
};

// Two grants of different owners whose windows overlap (indices into the input).
struct overlap {
  std::size_t first = 0, second = 0;
  std::int64_t overlap_ns = 0;
};

// (M) All overlapping pairs of different owners. O(n log n + reported pairs).
std::vector<overlap> check_mutual_exclusion(const std::vector<grant>& grants);

// (F) The grants with a fence, ordered by completion: every index i where
// fence[i] <= fence[i-1] (a regression), as (previous, current) pairs.
std::vector<overlap> check_fence_order(const std::vector<grant>& grants);

// (F) The accepted writes of a fenced resource, in the order the resource applied
// them: the number of writes whose token is below a token accepted earlier.
std::size_t count_stale_writes(const std::vector<std::uint64_t>& accepted_tokens);

// (S) Lost updates of a lock-protected counter.
struct counter_check {
  std::int64_t expected = 0;  // increments performed inside critical sections
  std::int64_t actual = 0;    // the counter's final value
  std::int64_t lost() const { return expected - actual; }
};

// A human summary of an (M) overlap, for test failure messages.
std::string describe(const std::vector<grant>& grants, const overlap& o);

// Thread-safe recorder of grants and of failed acquires, with a line format that
// lets a worker process hand its history to the parent.
class history {
 public:
  history() = default;
  history(const history& other);
  history& operator=(const history& other);

  // Returns the grant's index, for record_release.
  std::size_t record_grant(grant g);
  void record_release(std::size_t index, std::int64_t release_ns);
  // A failed acquire (any error), by its error name; counted for the figures.
  void record_failure(const std::string& error);
  void merge(const history& other);

  std::vector<grant> grants() const;
  std::size_t failures() const;
  std::size_t failures(const std::string& error) const;
  std::size_t operations() const;  // grants + failures

  // One line per grant ("G owner token invoke complete valid_until release fence")
  // and per failure kind ("F error count").
  std::string serialize() const;
  // Parses serialize()'s output; throws std::runtime_error on a malformed line.
  static history parse(const std::string& text);

 private:
  mutable std::mutex mu_;
  std::vector<grant> grants_;
  std::vector<std::pair<std::string, std::size_t>> failures_;
};

}  // namespace redlock::test
