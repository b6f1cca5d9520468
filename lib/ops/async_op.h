// The base of every asynchronous operation (an acquire, a rollback's delivery, a
// probe, a plain round, a campaign, a semaphore acquire, the listeners of the
// inspect/extend/release rounds): self-owned until its last callback, and finished
// exactly once. Lifecycle: made as a shared_ptr -> keep() in each pending callback
// (a request's sink, a timer, a round's listener) -> finish(result): the done
// callback, once -> destroyed when the last of those callbacks lets go.
#pragma once

#include <functional>
#include <memory>
#include <utility>

namespace redlock::detail {

// Derived: the operation (CRTP, for keep()'s type). Result...: what its done
// callback takes (none: an operation without one). Loop thread only, as the
// operations are.
template <class Derived, class... Result>
class async_op : public std::enable_shared_from_this<Derived> {
 public:
  using done_fn = std::function<void(Result...)>;

  // The result was delivered (or the operation ended without one).
  bool finished() const { return finished_; }

 protected:
  explicit async_op(done_fn done = {}) : done_(std::move(done)) {}
  ~async_op() = default;

  // For an operation whose callback is known only after it is made (before its start).
  void set_done(done_fn done) { done_ = std::move(done); }

  // Keeps the operation alive: what every pending callback holds.
  std::shared_ptr<Derived> keep() { return this->shared_from_this(); }

  // The first call marks the operation finished, runs `first` (what the operation
  // does once finished, before its caller hears: its state, stats, observer events)
  // and calls done(result...); later calls do nothing and return false. The
  // callback is moved out before it runs and destroyed right after it returns.
  template <class First, class... R>
  bool finish_after(First&& first, R&&... result) {
    if (finished_) return false;
    finished_ = true;
    first();
    auto done = std::move(done_);
    done_ = nullptr;
    if (done) done(std::forward<R>(result)...);
    return true;
  }
  template <class... R>
  bool finish(R&&... result) {
    return finish_after([] {}, std::forward<R>(result)...);
  }

 private:
  done_fn done_;
  bool finished_ = false;
};

}  // namespace redlock::detail
