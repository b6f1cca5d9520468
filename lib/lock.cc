#include "core.h"
#include "decision.h"
#include "sync.h"

namespace redlock {

using detail::held;

namespace {
report refused_report(const held* h, errc e, const char* detail) {
  report r;
  r.error = e;
  r.attempts = 1;
  if (h != nullptr && h->owner) {
    for (const auto& n : h->owner->nodes()) r.nodes.push_back(node_result{n.display, node_status::pending, detail, {}});
  }
  return r;
}
}  // namespace

bool loss_token::stop_requested() const noexcept {
  return !state_ || state_->lost.load(std::memory_order_acquire) || state_->finished.load(std::memory_order_acquire);
}

lock::lock() noexcept = default;
lock::lock(std::shared_ptr<held> s) noexcept : state_(std::move(s)) {}
lock::lock(lock&& o) noexcept = default;

lock& lock::operator=(lock&& o) noexcept {
  if (this != &o) {
    lock old(std::move(*this));
    state_ = std::move(o.state_);
  }
  return *this;
}

lock::~lock() {
  if (!state_ || state_->finished.exchange(true)) return;
  std::shared_ptr<held> h = std::move(state_);
  std::shared_ptr<detail::core> c = h->owner;
  // Best effort, without blocking: the release runs on the loop.
  c->post([h, c] {
    c->release_held(h, [h, c](report r) {
      if (!r.error || h->lost.load()) return;
      c->stats().release_failures.fetch_add(1, std::memory_order_relaxed);
      if (c->options().on_release_failure) c->options().on_release_failure(h->snapshot(), r);
    });
  });
}

bool lock::owns_lock() const noexcept {
  return state_ && !state_->finished.load(std::memory_order_acquire) && !state_->lost.load(std::memory_order_acquire);
}

lease lock::info() const { return state_ ? state_->snapshot() : lease{}; }

std::chrono::milliseconds lock::remaining_validity() const noexcept {
  if (!owns_lock()) return std::chrono::milliseconds(0);
  const auto until = std::chrono::steady_clock::time_point(
      std::chrono::nanoseconds(state_->valid_until_ns.load(std::memory_order_acquire)));
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - state_->owner->now());
  return left.count() > 0 ? left : std::chrono::milliseconds(0);
}

bool lock::lost() const noexcept { return state_ && state_->lost.load(std::memory_order_acquire); }

loss_token lock::token_for_work() const {
  loss_token t;
  t.state_ = state_;
  return t;
}

std::optional<std::uint64_t> lock::fence() const { return state_ ? state_->fence : std::nullopt; }

report lock::extend(std::chrono::milliseconds ttl) {
  if (!state_) return refused_report(nullptr, errc::not_owner, "lock not held");
  auto h = state_;
  if (const char* bad = detail::check_ttl(ttl, h->owner->options().clock_drift_factor); *bad) {
    return refused_report(h.get(), errc::invalid_argument, bad);
  }
  return detail::run_sync<report>(
      *h->owner, [h, ttl](std::function<void(report)> done) { h->owner->extend_held(h, ttl, std::move(done)); },
      [&](errc e) { return refused_report(h.get(), e, ""); });
}

report lock::release() {
  if (!state_) return refused_report(nullptr, errc::not_owner, "lock not held");
  auto h = state_;
  if (h->owner->on_loop_thread()) return refused_report(h.get(), errc::would_deadlock, "");
  if (h->finished.exchange(true)) return refused_report(h.get(), errc::not_owner, "lock not held");
  state_.reset();
  return detail::run_sync<report>(
      *h->owner, [h](std::function<void(report)> done) { h->owner->release_held(h, std::move(done)); },
      [&](errc e) { return refused_report(h.get(), e, ""); });
}

void lock::release_async(std::function<void(report)> done) {
  if (!state_ || state_->finished.exchange(true)) {
    report r = refused_report(state_.get(), errc::not_owner, "lock not held");
    auto c = state_ ? state_->owner : nullptr;
    if (c && c->post([done, r] { done(r); })) return;
    done(r);
    return;
  }
  auto h = std::move(state_);
  auto c = h->owner;
  if (!c->post([h, c, done] { c->release_held(h, done); })) {
    done(refused_report(h.get(), errc::cancelled, "client shut down"));
  }
}

lease lock::detach() noexcept {
  if (!state_) return {};
  auto h = std::move(state_);
  h->finished.store(true);
  lease l = h->snapshot();
  auto c = h->owner;
  c->post([h, c] { c->stop_watchdog(*h); });
  return l;
}

namespace detail {
lock core::make_lock(std::shared_ptr<held> h) { return lock(std::move(h)); }
}  // namespace detail

}  // namespace redlock
