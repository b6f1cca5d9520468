// A lock handle's state (held) and the registry of live handles: what the
// handle, the watchdog and the handles' extend and release read and change.
// Lifecycle of a held: made by a successful acquire -> tracked (make_lock) ->
// extended (watchdog, extend_held) -> released (claim_release, release_held),
// detached, or lost (watchdog::declare_lost) -> untracked.
#include "ops/held.h"

#include "engine/core.h"
#include "pure/decision.h"

namespace redlock::detail {

using clock_tp = std::chrono::steady_clock::time_point;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

lease held::snapshot() const {
  lease l;
  l.resource = resource;
  l.resources = resources;
  l.token = token;
  l.fence = fence;
  l.valid_until = std::chrono::steady_clock::time_point(
      std::chrono::nanoseconds(valid_until_ns.load(std::memory_order_acquire)));
  l.acquired_at = acquired_at;
  return l;
}

bool held::expired() const noexcept {
  const auto until = std::chrono::steady_clock::time_point(
      std::chrono::nanoseconds(valid_until_ns.load(std::memory_order_acquire)));
  return owner->now() >= until;
}

std::optional<milliseconds> held::capped_ttl(milliseconds want, clock_tp now, double drift) const {
  if (max_extensions > 0 && extensions >= max_extensions) return std::nullopt;
  if (max_hold.count() > 0) {
    const auto left = duration_cast<milliseconds>(acquired_at + max_hold - now);
    if (*check_ttl(left, drift) != '\0') return std::nullopt;
    if (left < want) return left;
  }
  return want;
}

bool held::claim_release() noexcept {
  if (!finished.exchange(true)) return true;
  return release_failed.exchange(false);
}

void held::note_release(const report& r) noexcept {
  if (r.error && r.error != errc::not_owner) release_failed.store(true);
}

std::optional<handle_registry::token_bits> handle_registry::bits_of(const std::string& token) noexcept {
  if (token.size() != 32) return std::nullopt;
  std::uint64_t half[2] = {0, 0};
  for (std::size_t i = 0; i < 32; ++i) {
    const char ch = token[i];
    std::uint64_t d;
    if (ch >= '0' && ch <= '9') {
      d = static_cast<std::uint64_t>(ch - '0');
    } else if (ch >= 'a' && ch <= 'f') {
      d = static_cast<std::uint64_t>(ch - 'a' + 10);
    } else {
      return std::nullopt;  // not lowercase hex: kept as a string
    }
    half[i / 16] = (half[i / 16] << 4) | d;
  }
  return token_bits{half[0], half[1]};
}

void handle_registry::track(const std::shared_ptr<held>& h) {
  if (auto b = bits_of(h->token)) {
    handles_[*b] = h;
  } else {
    other_handles_[h->token] = h;
  }
}

namespace {
template <class Map, class Key>
void untrack_in(Map& m, const Key& k, const held& h) {
  auto it = m.find(k);
  if (it == m.end()) return;
  auto p = it->second.lock();
  if (!p || p.get() == &h) m.erase(it);
}

template <class Map, class Key>
std::shared_ptr<held> find_in(Map& m, const Key& k) {
  auto it = m.find(k);
  if (it == m.end()) return nullptr;
  auto h = it->second.lock();
  if (!h) m.erase(it);
  return h;
}
}  // namespace

void handle_registry::untrack(const held& h) {
  if (auto b = bits_of(h.token)) {
    untrack_in(handles_, *b, h);
  } else {
    untrack_in(other_handles_, h.token, h);
  }
}

std::shared_ptr<held> handle_registry::tracked_for(const lease& l) {
  const auto b = bits_of(l.token);
  auto h = b ? find_in(handles_, *b) : find_in(other_handles_, l.token);
  if (!h || h->token != l.token || h->resource != l.resource) return nullptr;
  return h;
}

std::shared_ptr<held> handle_registry::handle_for(const lease& l) {
  auto h = tracked_for(l);
  if (!h || h->finished.load() || h->lost.load()) return nullptr;
  return h;
}

// The core's (engine/core.h declares it for the acquire, which sends the first
// lock event): defined beside the state it reads.
lock_event core::lock_event_of(const held& h, bool released) const {
  lock_event e;
  e.at = now();
  e.resource = h.resource;
  e.fence = h.fence;
  if (!released) {
    e.valid_until = std::chrono::steady_clock::time_point(
        std::chrono::nanoseconds(h.valid_until_ns.load(std::memory_order_acquire)));
  }
  e.held_for = std::chrono::duration_cast<std::chrono::microseconds>(e.at - h.acquired_at);
  return e;
}

}  // namespace redlock::detail
