#include "engine/core.h"
#include "ops/support.h"
#include "ops/watchdog.h"
#include "pure/decision.h"
#include "api/sync.h"

namespace redlock {

using detail::held;

namespace {
// A call refused on the calling thread: the report without a round (ops/reports.cc);
// without a handle (or its client), one that names no node.
report refused_report(const held* h, errc e, const char* detail) {
  if (h != nullptr && h->owner) return detail::empty_report(*h->owner, make_error_code(e), detail);
  report r;
  r.error = e;
  r.attempts = 1;
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
  if (!state_) return;
  if (state_->finished.exchange(true)) {
    // A release that was not confirmed left the handle tracked for a retry
    // (release_held): nobody can retry it now.
    if (state_->release_failed.load()) {
      std::shared_ptr<held> h = std::move(state_);
      std::shared_ptr<detail::core> c = h->owner;
      c->post([h, c] {
        if (h->release_failed.load()) c->watch().handles().untrack(*h);
      });
    }
    return;
  }
  std::shared_ptr<held> h = std::move(state_);
  std::shared_ptr<detail::core> c = h->owner;
  // Best effort, without blocking: the release runs on the loop.
  c->post([h, c] {
    // A background operation for observers: nobody called it.
    detail::release_held(*c, h,
                    c->observe_op<report>(operation_kind::release, h->resource, true,
                                          [h, c](report r) {
                                            if (!r.error || h->lost.load()) return;
                                            c->stats().release_failures.fetch_add(1,
                                                                                  std::memory_order_relaxed);
                                            if (c->options().on_release_failure)
                                              c->options().on_release_failure(h->snapshot(), r);
                                          }),
                    /*retry=*/false);
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
        detail::extend_held(*h->owner, h, ttl,
                              h->owner->observe_op<report>(operation_kind::extend, h->resource, false,
                                                           detail::timed(h->owner, called, std::move(done))));
      },
      [&](errc e) { return refused_report(h.get(), e, ""); });
}

report lock::release() {
  if (!state_) return refused_report(nullptr, errc::not_owner, "lock not held");
  auto h = state_;
  if (h->owner->must_not_block()) return refused_report(h.get(), errc::would_deadlock, "");
  if (!h->claim_release()) return refused_report(h.get(), errc::not_owner, "lock not held");
  const auto called = h->owner->now();
  bool ran = true;
  report r = detail::run_sync<report>(
      *h->owner,
      [h, called](std::function<void(report)> done) {
        detail::release_held(*h->owner, h, h->owner->observe_op<report>(operation_kind::release, h->resource, false,
                                                               detail::timed(h->owner, called, std::move(done))));
      },
      [&](errc e) {
        ran = false;
        return refused_report(h.get(), e, e == errc::cancelled ? "client shut down" : "");
      });
  // A release that ran was marked by release_held (on the loop, before this thread
  // heard of it); one that never ran is marked here.
  if (!ran) h->note_release(r);
  return r;
}

void lock::release_async(std::function<void(report)> done) {
  if (!state_ || !state_->claim_release()) {
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
        detail::release_held(*c, h, c->observe_op<report>(operation_kind::release, h->resource, false,
                                                 detail::timed<report>(c, called, std::move(done))));
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
    c->watch().stop(*h);
    c->watch().handles().untrack(*h);  // the caller manages the lease from now on
  });
  return l;
}

namespace detail {
lock core::make_lock(std::shared_ptr<held> h) {
  watch().handles().track(h);
  return lock(std::move(h));
}

}  // namespace detail

}  // namespace redlock
