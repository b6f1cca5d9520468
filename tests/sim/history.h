// What a simulated run did, in virtual time: every lock operation's invocation
// and completion, every hold (a successful acquisition) with the intervals in
// which its client believed it held the lock, the fenced resource's writes, the
// faults, and a timeline of lines for people (and for the run's digest).
//
// Times are microseconds of virtual time since the world started. Single-threaded,
// like the world.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace redlock::simtest {

// A half-open interval [from, to) of virtual time.
struct interval {
  std::int64_t from = 0, to = 0;
};

enum class op_kind : std::uint8_t { acquire, extend, release };
const char* to_string(op_kind k);

// One call of the public API that completes through a callback.
struct op_record {
  std::uint32_t id = 0;
  op_kind kind = op_kind::acquire;
  int client = 0;
  int resource = 0;
  int hold = -1;  // extend/release: the hold it is about; acquire: the hold it made
  std::int64_t call_us = 0;
  std::int64_t done_us = -1;
  int completions = 0;        // callback invocations: exactly 1 expected
  bool inside_call = false;   // a callback ran inside the call that started it
  std::string result;         // "ok" or the error's name
};

// One successful acquisition, and what its client believed about it.
struct hold_record {
  int id = 0;
  int client = 0;
  int resource = 0;
  std::uint32_t acquire_op = 0;
  std::string token;
  std::optional<std::uint64_t> fence;
  bool auto_extend = false;
  std::int64_t invoke_us = 0;    // acquire called
  std::int64_t complete_us = 0;  // its callback ran (success)
  // The client believed it held the lock exactly in these intervals (ascending,
  // disjoint): from the acquire's callback until the earliest of the validity end
  // the API reported at each instant (lock::info().valid_until, re-read after
  // every turn of the client's process), a release call, the loss.
  std::vector<interval> belief;
  std::int64_t release_call_us = -1;  // first release call (-1: none)
  int on_lost_calls = 0;
  std::int64_t on_lost_us = -1;
  bool lost = false;  // lock::lost() when the handle was given up
  bool ended = false;  // the belief is final
};

// A write sent to the fenced resource by a holder, and the resource's answer.
struct write_record {
  int hold = 0;
  int client = 0;
  int resource = 0;
  std::uint64_t fence = 0;
  std::int64_t checked_us = 0;  // the holder checked owns_lock() (true) here
  std::int64_t sent_us = 0;     // and sent the write here (later if paused)
  std::int64_t arrived_us = 0;  // the resource applied its check here
  bool accepted = false;
};

// A fault as applied (begin or end).
struct fault_record {
  std::int64_t t_us = 0;
  std::string text;
  // What the checkers need to know about it.
  bool loses_data = false;  // a restart of a node without persistence
};

struct timeline_entry {
  std::int64_t t_us = 0;
  int client = -1;    // -1: the world (faults), or several
  int resource = -1;  // -1: none
  std::string text;
};

class history {
 public:
  std::vector<op_record> ops;
  std::vector<hold_record> holds;
  std::vector<write_record> writes;
  std::vector<fault_record> faults;
  std::vector<timeline_entry> timeline;

  void note(std::int64_t t_us, int client, int resource, std::string text);
  // A 64-bit FNV-1a digest of the timeline and of every record: the same run
  // gives the same digest, on any machine.
  std::uint64_t digest() const;
  // "  12.345678 c1 r0 acquire ok ..." lines.
  static std::string format_time(std::int64_t t_us);
  std::string format(const timeline_entry& e) const;
  // The timeline entries in [from, to] (of `client`/`resource` when >= 0, plus
  // every world entry), formatted.
  std::string slice(std::int64_t from, std::int64_t to, int resource = -1, std::size_t max_lines = 80) const;
  // The entries `pick` chooses, formatted (the last max_lines of them).
  std::string slice(const std::function<bool(const timeline_entry&)>& pick, std::size_t max_lines = 80) const;
  // What led to two holds' conflict: the world's lines (faults) from `lookback_us`
  // before the earlier acquire, and the two clients' lines on the resource, up to
  // `to`.
  std::string slice_for(const hold_record& a, const hold_record& b, std::int64_t to,
                        std::int64_t lookback_us = 2'000'000) const;
  std::string format_hold(const hold_record& h) const;
};

}  // namespace redlock::simtest
