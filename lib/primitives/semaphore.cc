// The semaphore: one operation per acquire, driven on the client's loop thread by
// the completions of the permit acquires it starts (client::acquire_async) and by
// one core timer between attempts. Its lifecycle, top to bottom:
//   begin (an attempt: a fresh random permit order) -> round (one permit first
//   with probe_first, then up to `batch` permit acquires at once) -> on_permit (the first win finishes the
//   operation; later wins are released at once) -> next round, or attempt_failed -> retry timer -> begin ...
//   -> finish (the callback, exactly once).
#include "redlock/semaphore.h"

#include <mutex>
#include <unordered_map>

#include "engine/core.h"
#include "ops/async_op.h"
#include "primitives/permits.h"
#include "pure/retry.h"
#include "api/sync.h"

namespace redlock {

namespace detail {
struct semaphore_op;
}  // namespace detail

struct semaphore::state {
  client* c = nullptr;
  std::shared_ptr<detail::core> core;
  std::string name;
  std::size_t permits = 1;
  std::size_t batch = 1;
  bool probe_first = true;
  std::mutex mu;  // guards ops
  std::unordered_map<std::uint64_t, std::shared_ptr<detail::semaphore_op>> ops;
  std::uint64_t next_id = 0;  // guarded by mu
};

namespace {

report empty_report(semaphore::state& st, std::error_code e, const char* detail) {
  report r;
  r.error = e;
  for (auto& n : st.c->node_names()) {
    node_result nr;
    nr.node = std::move(n);
    nr.status = e == errc::cancelled ? node_status::cancelled : node_status::pending;
    nr.detail = detail;
    r.nodes.push_back(std::move(nr));
  }
  return r;
}

}  // namespace

namespace detail {

// Everything below runs on the loop thread, except the constructor.
struct semaphore_op : async_op<semaphore_op, semaphore_result> {
  std::shared_ptr<semaphore::state> st;
  std::uint64_t id = 0;            // 0: a blocking call, not in st->ops
  acquire_options permit_options;  // the caller's, with one attempt per permit
  retry_policy policy;
  std::chrono::steady_clock::time_point called;

  int attempt = 0;
  std::vector<std::size_t> order;  // this attempt's permit order
  std::size_t next = 0;            // first permit of `order` not tried yet
  std::size_t pending = 0;         // permit acquires of this round still out
  std::vector<std::uint64_t> in_flight;
  std::vector<report> failures;  // this attempt's failed permits
  std::uint64_t timer = 0;       // the retry timer, while waiting
  bool cancelled = false;

  // The caller's callback, set before the operation starts.
  void on_done(std::function<void(semaphore_result)> done) { set_done(std::move(done)); }
  // The answer of an operation that never reached the loop (the post failed): as it is.
  void refuse(semaphore_result r) { async_op::finish(std::move(r)); }

  void begin() {
    if (finished()) return;
    if (cancelled) return finish_error(make_error_code(errc::cancelled), "cancelled");
    if (const char* bad = detail::check_retry(policy); *bad != '\0') {
      return finish_error(make_error_code(errc::invalid_argument), bad);
    }
    ++attempt;
    order = detail::permit_order(st->permits, [this] { return st->core->jitter(); });
    next = 0;
    failures.clear();
    round();
  }

  void round() {
    const std::size_t size = next == 0 && st->probe_first ? 1 : st->batch;
    const std::size_t n = std::min(size, order.size() - next);
    pending = n;
    in_flight.clear();
    auto self = keep();
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t index = order[next++];
      in_flight.push_back(
          st->c->acquire_async(detail::permit_resource(st->name, index), permit_options,
                               [self, index](acquire_result r) { self->on_permit(index, std::move(r)); }));
    }
  }

  void on_permit(std::size_t index, acquire_result r) {
    --pending;
    if (r) {
      // An extra (a win after the first, or after a cancel): released right away
      // by the handle's destructor, never held.
      if (finished() || cancelled) return;
      semaphore_result out;
      out.report = std::move(r.report);
      out.lock = std::move(r.lock);
      out.permit = index;
      return finish(std::move(out));
    }
    if (finished()) return;
    failures.push_back(std::move(r.report));
    if (pending > 0) return;
    std::vector<std::error_code> errors;
    for (const auto& f : failures) errors.push_back(f.error);
    const std::error_code e =
        cancelled ? make_error_code(errc::cancelled) : detail::combine_permit_errors(errors);
    if (!detail::retryable(e)) return finish_failure(e);
    if (next < order.size()) return round();
    attempt_failed(e);
  }

  void attempt_failed(std::error_code e) {
    if (attempt >= policy.max_attempts) return finish_failure(e);
    const auto delay = detail::retry_delay(policy, attempt + 1, st->core->jitter());
    if (policy.deadline.count() > 0 && st->core->now() + delay > called + policy.deadline) {
      return finish_failure(e);
    }
    // A timer dropped unfired (cancel(), or the client shutting down) finishes the
    // operation as cancelled from the guard's destructor: exactly one callback.
    struct guard {
      std::shared_ptr<detail::semaphore_op> op;
      bool fired = false;
      ~guard() {
        if (!fired) op->finish_error(make_error_code(errc::cancelled), "cancelled");
      }
    };
    auto g = std::make_shared<guard>();
    g->op = keep();
    timer = st->core->schedule(delay, [g] {
      g->fired = true;
      g->op->timer = 0;
      g->op->begin();
    });
  }

  void cancel() {
    if (finished() || cancelled) return;
    cancelled = true;
    if (timer != 0) {
      const std::uint64_t t = timer;
      timer = 0;
      st->core->cancel_timer(t);  // the guard finishes us
      return;
    }
    for (std::uint64_t op : in_flight) st->c->cancel(op);
  }

  // The report of a permit that failed with `e` stands for the attempt.
  void finish_failure(std::error_code e) {
    for (auto& f : failures) {
      if (f.error == e) {
        semaphore_result out;
        out.report = std::move(f);
        return finish(std::move(out));
      }
    }
    finish_error(e, e == errc::cancelled ? "cancelled" : "");
  }

  void finish_error(std::error_code e, const char* detail) {
    semaphore_result out;
    out.report = empty_report(*st, e, detail);
    finish(std::move(out));
  }

  void finish(semaphore_result out) {
    if (finished()) return;
    out.report.attempts = attempt;
    out.report.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(st->core->now() - called);
    finish_after(
        [this] {
          if (id == 0) return;
          std::lock_guard<std::mutex> g(st->mu);
          st->ops.erase(id);
        },
        std::move(out));
  }
};

}  // namespace detail

semaphore::semaphore(client& c, std::string name, semaphore_options options)
    : client_(c), name_(std::move(name)), permits_(options.permits), probe_first_(options.probe_first) {
  batch_ = options.batch == 0 ? std::min<std::size_t>(permits_, 4) : options.batch;
  if (std::string bad = detail::check_semaphore(name_, permits_, batch_); !bad.empty())
    throw config_error(bad);
  state_ = std::make_shared<state>();
  state_->c = &client_;
  state_->core = client_.core_;
  state_->name = name_;
  state_->permits = permits_;
  state_->batch = batch_;
  state_->probe_first = probe_first_;
}

semaphore::~semaphore() = default;

std::string semaphore::permit_resource(std::string_view name, std::size_t index) {
  return detail::permit_resource(name, index);
}

namespace {

std::shared_ptr<detail::semaphore_op> make_op(const std::shared_ptr<semaphore::state>& st,
                                              acquire_options options) {
  auto op = std::make_shared<detail::semaphore_op>();
  op->st = st;
  op->policy = options.retry;
  op->permit_options = std::move(options);
  op->permit_options.retry = retry_policy::once();
  op->called = st->core->now();
  return op;
}

}  // namespace

semaphore_result semaphore::acquire(const acquire_options& options) {
  auto op = make_op(state_, options);
  auto st = state_;
  return detail::run_sync<semaphore_result>(
      *state_->core,
      [op](std::function<void(semaphore_result)> done) {
        op->on_done(std::move(done));
        op->begin();
      },
      [st](errc e) {
        semaphore_result r;
        r.report = empty_report(*st, make_error_code(e), e == errc::cancelled ? "client shut down" : "");
        return r;
      });
}

semaphore_result semaphore::try_acquire(const acquire_options& options) {
  acquire_options once = options;
  once.retry = retry_policy::once();
  return acquire(once);
}

std::uint64_t semaphore::acquire_async(acquire_options options, std::function<void(semaphore_result)> done) {
  auto op = make_op(state_, std::move(options));
  op->on_done(std::move(done));
  {
    std::lock_guard<std::mutex> g(state_->mu);
    op->id = ++state_->next_id;
    state_->ops.emplace(op->id, op);  // before the post: a cancel() that reaches the loop first is not lost
  }
  const std::uint64_t id = op->id;
  if (!state_->core->post([op] { op->begin(); })) {
    {
      std::lock_guard<std::mutex> g(state_->mu);
      state_->ops.erase(id);
    }
    semaphore_result r;
    r.report = empty_report(*state_, make_error_code(errc::cancelled), "client shut down");
    op->refuse(std::move(r));
  }
  return id;
}

void semaphore::cancel(std::uint64_t id) {
  std::shared_ptr<detail::semaphore_op> op;
  {
    std::lock_guard<std::mutex> g(state_->mu);
    auto it = state_->ops.find(id);
    if (it == state_->ops.end()) return;
    op = it->second;
  }
  state_->core->post([op] { op->cancel(); });
}

}  // namespace redlock
