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
  return !state_ || state_->lost.load(std::memory_order_acquire) ||
         state_->finished.load(std::memory_order_acquire) || state_->expired();
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
    // A background operation for observers: nobody called it.
    c->release_held(h, c->observe_op<report>(operation_kind::release, h->resource, true, [h, c](report r) {
      if (!r.error || h->lost.load()) return;
      c->stats().release_failures.fetch_add(1, std::memory_order_relaxed);
      if (c->options().on_release_failure) c->options().on_release_failure(h->snapshot(), r);
    }));
  });
}

bool lock::owns_lock() const noexcept {
  return state_ && !state_->finished.load(std::memory_order_acquire) &&
         !state_->lost.load(std::memory_order_acquire) && !state_->expired();
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
  if (std::string bad = h->owner->ttl_problem(ttl); !bad.empty()) {
    return refused_report(h.get(), errc::invalid_argument, bad.c_str());
  }
  const auto called = h->owner->now();
  return detail::run_sync<report>(
      *h->owner,
      [h, ttl, called](std::function<void(report)> done) {
        h->owner->extend_held(h, ttl,
                              h->owner->observe_op<report>(operation_kind::extend, h->resource, false,
                                                           detail::timed(h->owner, called, std::move(done))));
      },
      [&](errc e) { return refused_report(h.get(), e, ""); });
}

namespace {
// Claims the handle's state for a release: the first release, or a retry after a
// failed one. False if it was released (or given up) already.
bool claim_release(held& h) {
  if (!h.finished.exchange(true)) return true;
  return h.release_failed.exchange(false);
}

// A release that was not confirmed leaves the handle able to release again.
void note_release(held& h, const report& r) {
  if (r.error && r.error != errc::not_owner) h.release_failed.store(true);
}
}  // namespace

report lock::release() {
  if (!state_) return refused_report(nullptr, errc::not_owner, "lock not held");
  auto h = state_;
  if (h->owner->must_not_block()) return refused_report(h.get(), errc::would_deadlock, "");
  if (!claim_release(*h)) return refused_report(h.get(), errc::not_owner, "lock not held");
  const auto called = h->owner->now();
  report r = detail::run_sync<report>(
      *h->owner,
      [h, called](std::function<void(report)> done) {
        h->owner->release_held(h, h->owner->observe_op<report>(operation_kind::release, h->resource, false,
                                                               detail::timed(h->owner, called, std::move(done))));
      },
      [&](errc e) { return refused_report(h.get(), e, e == errc::cancelled ? "client shut down" : ""); });
  note_release(*h, r);
  return r;
}

void lock::release_async(std::function<void(report)> done) {
  if (!state_ || !claim_release(*state_)) {
    report r = refused_report(state_.get(), errc::not_owner, "lock not held");
    auto c = state_ ? state_->owner : nullptr;
    if (c && c->post([done, r] { done(r); })) return;
    done(r);
    return;
  }
  auto h = state_;
  auto c = h->owner;
  const auto called = c->now();
  if (!c->post([h, c, called, done] {
        c->release_held(h, c->observe_op<report>(operation_kind::release, h->resource, false,
                                                 detail::timed<report>(c, called, [h, done](report r) {
                                                   note_release(*h, r);
                                                   done(std::move(r));
                                                 })));
      })) {
    // The client's loop has finished: nobody else can run the callback.
    h->release_failed.store(true);
    done(refused_report(h.get(), errc::cancelled, "client shut down"));
  }
}

lease lock::detach() noexcept {
  if (!state_) return {};
  auto h = std::move(state_);
  h->finished.store(true);
  lease l = h->snapshot();
  auto c = h->owner;
  c->post([h, c] {
    c->stop_watchdog(*h);
    c->untrack_handle(*h);  // the caller manages the lease from now on
  });
  return l;
}

namespace detail {
lock core::make_lock(std::shared_ptr<held> h) {
  track_handle(h);
  return lock(std::move(h));
}

void core::untrack_handle(const held& h) {
  auto it = handles_.find(h.token);
  if (it == handles_.end()) return;
  auto p = it->second.lock();
  if (!p || p.get() == &h) handles_.erase(it);
}

std::shared_ptr<held> core::handle_for(const lease& l) {
  auto it = handles_.find(l.token);
  if (it == handles_.end()) return nullptr;
  auto h = it->second.lock();
  if (!h) {
    handles_.erase(it);
    return nullptr;
  }
  if (h->resource != l.resource || h->finished.load() || h->lost.load()) return nullptr;
  return h;
}
}  // namespace detail

}  // namespace redlock
