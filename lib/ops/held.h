// A lock handle's state, shared by the handle (lock, any thread) and the loop (the
// watchdog, extend_held, release_held), and the registry of the live handles of a
// client by token. Loop thread only, except where a field or member says so.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "redlock/client.h"

namespace redlock::detail {

class core;

// State shared by a lock handle and the loop (the watchdog).
struct held {
  std::shared_ptr<core> owner;
  std::string resource;
  std::vector<std::string> resources;  // a set's (acquire_many); empty for one resource
  std::string token;
  std::optional<std::uint64_t> fence;
  std::atomic<std::int64_t> valid_until_ns{0};  // steady-clock ns since its epoch
  std::atomic<bool> lost{false};
  std::atomic<bool> finished{false};  // released or detached: the watchdog stops
  // The last release of this handle failed (not confirmed by a quorum): the handle
  // keeps the lease and may release again.
  std::atomic<bool> release_failed{false};
  // Loop thread only (the fields are ordered to pack: a held lock with its
  // shared_ptr control block is one 256-byte allocation):
  bool watchdog = false;
  bool capped = false;  // the extension cap was reached: the lock runs out
  // The latest extension sent asked for less than it was asked to (what was left
  // of max_hold): when the validity it set runs out, that is the cap's end.
  bool hold_shortened = false;
  // A release of this handle that does not reach a quorum is delivered again, like
  // a confirmed one's stragglers, to every node that did not confirm it, until it
  // does or `ttl` (plus drift) has passed (release_held). Set for an election's
  // leadership lock (lib/election.cc): what observers see must follow what the
  // candidate believes. Other handles leave a failed release to their owner.
  bool redeliver_release = false;
  // A release of this handle found it expired and reported the loss: a retry of
  // that release (after it was not confirmed) does not report it again.
  bool loss_reported = false;
  // The watchdog's armed tick (watchdog::arm_tick), 0 if none: a queued tick whose id
  // is not this one was cancelled and is skipped. (32 bits: should the ids wrap
  // and a stale tick match, it only runs a tick early, and an early tick is safe.)
  std::uint32_t timer = 0;
  std::uint32_t watch_slot = 0;  // 1 + its index in watchdog::slots_; 0 = not watched
  int max_extensions = 0;        // 0 = no cap
  int extensions = 0;
  std::chrono::milliseconds ttl{0};
  std::chrono::milliseconds interval{0};
  std::function<void(const lease&, const report&)> on_lost;
  std::uint64_t extensions_sent = 0;  // extension rounds started (watchdog and extend())
  std::chrono::milliseconds max_hold{0};  // 0 = no cap
  std::chrono::steady_clock::time_point acquired_at;
  // The last failed watchdog extension, for on_lost (allocated on a failure only:
  // a held lock carries 8 bytes for it, not a whole report).
  std::unique_ptr<report> last_failure;

  // The TTL an extension may ask for now under the cap; nullopt once it is reached.
  std::optional<std::chrono::milliseconds> capped_ttl(std::chrono::milliseconds ttl,
                                                      std::chrono::steady_clock::time_point now, double drift) const;

  lease snapshot() const;
  // Validity has run out on the owner's clock (any thread).
  bool expired() const noexcept;
  // Claims the handle for a release (any thread): the first release, or a retry
  // after a failed one. False if it was released (or given up) already.
  bool claim_release() noexcept;
  // After the release claimed: one not confirmed (other than not_owner) leaves the
  // handle able to release again.
  void note_release(const report& r) noexcept;
};

// The registry of live lock handles by token, so that client::extend of a
// handle's lease goes through the handle's bookkeeping (extend_held). A handle is
// registered when made (core::make_lock) and forgotten once released, detached or
// lost; a destroyed one is forgotten by its release, or found expired on lookup.
// Tokens of 32 lowercase hex digits (every token this library makes) are kept as
// their 16 bytes, without a string copy.
class handle_registry {
 public:
  void track(const std::shared_ptr<held>& h);
  void untrack(const held& h);
  // The live handle (not finished, not lost) holding lease `l`, if any.
  std::shared_ptr<held> handle_for(const lease& l);
  // The tracked handle holding lease `l`, live or not: a lost one (tracked until
  // its release), or one whose release was not confirmed (tracked again for a
  // retry). Released, detached and destroyed handles are not tracked.
  std::shared_ptr<held> tracked_for(const lease& l);

 private:
  struct token_bits {
    std::uint64_t hi = 0, lo = 0;
    bool operator==(const token_bits& o) const noexcept { return hi == o.hi && lo == o.lo; }
  };
  struct token_bits_hash {
    std::size_t operator()(const token_bits& t) const noexcept { return static_cast<std::size_t>(t.hi ^ (t.lo * 0x9e3779b97f4a7c15ULL)); }
  };
  static std::optional<token_bits> bits_of(const std::string& token) noexcept;
  std::unordered_map<token_bits, std::weak_ptr<held>, token_bits_hash> handles_;
  std::unordered_map<std::string, std::weak_ptr<held>> other_handles_;  // any other token
};

}  // namespace redlock::detail
