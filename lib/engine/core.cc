// The loop, the cross-thread task queue, the timer queue and the shutdown drain.
// The operations live in lib/ops/; their long-lived services stop through
// engine/service.h.
#include "engine/core.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <future>

#include "node/connection.h"
#include "pure/decision.h"
#include "pure/token.h"

namespace redlock::detail {

namespace {
// Blocking calls: how long a caller may spin for its answer, at most, and how
// long the loop keeps polling after answering one (core.h).
constexpr long kDefaultSpinCapUs = 300;
constexpr long kDefaultLingerUs = 30;
}  // namespace

std::string reactor::token() { return make_token(); }

std::string reactor::use_tls(const tls_options&) {
  return "rediss:// (TLS) nodes are not supported by this transport (the simulator has no TLS): use redis://";
}

std::uint64_t reactor::seed() {
  std::uint64_t s = 0;
  random_bytes(&s, sizeof s);
  return s;
}

core::core(client_options options, std::vector<node_address> nodes, std::unique_ptr<reactor> io, bool own_thread)
    : options_(std::move(options)),
      nodes_(std::move(nodes)),
      io_(std::move(io)),
      owns_loop_(own_thread),
      rng_(io_->seed()) {
  observing_ = !options_.observers.empty();
  // Development only (issue 23), while cluster and Sentinel nodes are previews:
  // REDLOCK_PREVIEW_CONFIRM_REPLICATION=1 makes every standalone node's writes wait
  // for its replicas too (how tests reach a plain master and replica), =0 no node's,
  // cluster and Sentinel nodes included (the failover tests' negative controls).
  const char* confirm = std::getenv("REDLOCK_PREVIEW_CONFIRM_REPLICATION");
  const std::string_view c = confirm == nullptr ? "" : confirm;
  const replication_confirmation mode = c == "1"   ? replication_confirmation::everywhere
                                        : c == "0" ? replication_confirmation::nowhere
                                                   : replication_confirmation::by_deployment;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    endpoints_.push_back(make_endpoint(*this, i, nodes_[i], mode));
  }
  // Blocking-call tuning (see begin_sync_wait); the environment overrides the
  // defaults for measurements (docs/benchmarks.md), in microseconds, 0 = off.
  auto tuning = [](const char* name, long fallback_us) {
    const char* v = std::getenv(name);
    long us = fallback_us;
    if (v != nullptr && *v != '\0') us = std::strtol(v, nullptr, 10);
    // Not a number: 0 (off); at most 10 ms, so a typo cannot make a loop poll for seconds.
    return std::chrono::nanoseconds(std::chrono::microseconds(std::clamp(us, 0L, 10000L)));
  };
  spin_cap_ = tuning("REDLOCK_SYNC_SPIN_US", kDefaultSpinCapUs);
  linger_ = owns_loop_ ? tuning("REDLOCK_SYNC_LINGER_US", kDefaultLingerUs) : std::chrono::nanoseconds(0);
}

core::sync_wait_plan core::begin_sync_wait() noexcept {
  const bool alone = sync_waiting_.fetch_add(1, std::memory_order_relaxed) == 0;
  if (!alone || spin_cap_.count() == 0) return {};
  const std::chrono::nanoseconds spun(spun_ewma_ns_.load(std::memory_order_relaxed));
  const std::chrono::nanoseconds slept(slept_ewma_ns_.load(std::memory_order_relaxed));
  // Unmeasured ways first; then the faster one, and every 16th call the other.
  bool spin = true;
  if (spun.count() != 0 && slept.count() == 0) {
    spin = false;
  } else if (spun.count() != 0) {
    const bool explore = sync_calls_.fetch_add(1, std::memory_order_relaxed) % 16 == 15;
    spin = (spun <= slept) != explore;
  }
  if (!spin) return {std::chrono::nanoseconds(0), true};
  return {spun.count() == 0 ? spin_cap_ : std::min(spin_cap_, 2 * spun), true};
}

void core::end_sync_wait(const sync_wait_plan& plan, std::chrono::steady_clock::duration took) noexcept {
  sync_waiting_.fetch_sub(1, std::memory_order_relaxed);
  // Exponential averages (weight 1/8); racing callers may lose an update, which
  // is harmless. Only calls that were alone count (a crowd never spins).
  if (!plan.measured) return;
  auto& avg = plan.spin.count() > 0 ? spun_ewma_ns_ : slept_ewma_ns_;
  const std::int64_t t = std::chrono::duration_cast<std::chrono::nanoseconds>(took).count();
  const std::int64_t old = avg.load(std::memory_order_relaxed);
  avg.store(old == 0 ? t : old + (t - old) / 8, std::memory_order_relaxed);
}

void core::answered_blocking_caller() {
  if (linger_.count() == 0 || closing_ || finished_) return;
  linger_until_ = std::chrono::steady_clock::now() + linger_;
  if (lingering_) return;
  lingering_ = true;
  {
    lock_guard g(tasks_mu_);
    awake_ = true;
  }
  if (!idle_on_) {
    idle_on_ = true;
    io_->idle(true);
  }
}

void core::end_linger() {
  lingering_ = false;
  {
    lock_guard g(tasks_mu_);
    awake_ = false;
  }
  // Tasks posted while the loop was awake came without a wake-up: run them now.
  run_tasks();
}

core::~core() {
  // Handles are closed by finish_stop(); the own loop is closed by its thread
  // (uv_reactor::close_loop()).
}

std::chrono::steady_clock::time_point core::now() const noexcept {
  return options_.clock ? options_.clock->now() : std::chrono::steady_clock::now();
}

bool core::on_loop_thread() const noexcept { return std::this_thread::get_id() == loop_thread_id_; }

bool core::must_not_block() const { return on_loop_thread() && !io_->drivable(); }

void core::wait_for(std::chrono::milliseconds d) {
  if (on_loop_thread()) {
    const auto until = now() + d;
    io_->drive([this, until] { return now() >= until; });
    return;
  }
  std::this_thread::sleep_for(d);
}

void core::start() {
  io_->start(*this);
  self_ = shared_from_this();
  auto begin = [this] {
    start_warnings();
    for (auto& c : endpoints_) c->start();
  };
  if (owns_loop_) {
    std::promise<void> started;
    auto fut = started.get_future();
    thread_ = std::thread([this, begin, &started] {
      // A write to a socket the peer reset raises SIGPIPE in the writing thread;
      // blocked here, the write fails with EPIPE instead of killing the process.
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
      loop_thread_id_ = std::this_thread::get_id();
      begin();
      started.set_value();
      io_->run();
      // Work posted while the handles closed still runs here, on the loop thread.
      final_drain();
      // The loop's descriptors go with its thread, not with the core (which a lock
      // handle may keep alive long after the client).
      io_->close_loop();
      // From here on no thread is this client's loop thread: a thread started later
      // may be given this one's id, and its calls must not be refused as reentrant.
      loop_thread_id_.store(std::thread::id());
      // Last use of `this` on this thread; may destroy the core if the client
      // detached the thread (destroyed from its own callback).
      std::shared_ptr<core> keep = std::move(self_);
    });
    fut.wait();
  } else {
    loop_thread_id_ = std::this_thread::get_id();
    begin();
  }
}

bool core::post(std::function<void()> fn) {
  if (on_loop_thread()) {
    // From the loop itself: no lock, no wake-up; runs in the next idle phase (or,
    // once the handles are closing, in the final drain).
    {
      lock_guard g(tasks_mu_);
      if (stopped_) return false;
    }
    deferred_.push_back(std::move(fn));
    if (!finished_ && !idle_on_) {
      idle_on_ = true;
      io_->idle(true);
    }
    return true;
  }
  {
    lock_guard g(tasks_mu_);
    if (stopped_) return false;
    tasks_.push_back(std::move(fn));
    // Sent under the lock: finish_stop() sets async_closed_ under it before closing
    // async_; tasks posted after that run in final_drain(). A lingering loop
    // (awake_) polls tasks_ on its own: end_linger() runs what came meanwhile.
    if (!async_closed_ && !awake_) io_->wake();
  }
  return true;
}

void core::run_tasks() {
  {
    lock_guard g(tasks_mu_);
    local_.swap(tasks_);
  }
  for (auto& fn : local_) fn();
  local_.clear();
}

void core::want_flush(connection* c) {
  if (c->flush_queued()) return;
  c->set_flush_queued(true);
  dirty_.push_back(c);
  if (!finished_ && !idle_on_) {
    idle_on_ = true;
    io_->idle(true);
  }
}

void core::forget_conn(connection* c) {
  dirty_.erase(std::remove(dirty_.begin(), dirty_.end(), c), dirty_.end());
  c->set_flush_queued(false);
}

void core::on_idle() {
  if (lingering_) {
    run_tasks();
    if (finished_ || closing_ || std::chrono::steady_clock::now() >= linger_until_) end_linger();
  }
  if (!deferred_.empty()) {
    std::vector<std::function<void()>> d;
    d.swap(deferred_);
    for (auto& fn : d) fn();
  }
  std::vector<connection*> d;
  d.swap(dirty_);
  for (connection* c : d) c->flush();
  if (dirty_.empty() && deferred_.empty() && !lingering_ && idle_on_ && !finished_) {
    idle_on_ = false;
    io_->idle(false);
  }
}

std::uint64_t core::schedule(std::chrono::milliseconds delay, std::function<void()> fn) {
  const std::uint64_t due = io_->now_ms() + static_cast<std::uint64_t>(std::max<std::int64_t>(0, delay.count()));
  const std::uint64_t id = ++timer_ids_;
  timers_.emplace(std::make_pair(due, id), std::move(fn));
  timer_due_.emplace(id, due);
  if (timer_armed_for_ == 0 || due < timer_armed_for_) arm_timer();
  return id;
}

void core::cancel_timer(std::uint64_t id) noexcept {
  auto it = timer_due_.find(id);
  if (it == timer_due_.end()) return;
  timers_.erase(std::make_pair(it->second, id));
  timer_due_.erase(it);
}

void core::arm_timer() {
  if (finished_) return;
  if (timers_.empty()) {
    io_->stop_timer();
    timer_armed_for_ = 0;
    return;
  }
  const std::uint64_t due = timers_.begin()->first.first;
  const std::uint64_t now = io_->now_ms();
  timer_armed_for_ = due;
  io_->arm_timer(due > now ? due - now : 0);
}

void core::on_timer() {
  timer_armed_for_ = 0;
  io_->refresh();
  const std::uint64_t now = io_->now_ms();
  // Bounded: only the timers due when the batch starts; ones that callbacks schedule
  // wait for the next turn. One at a time, each looked up again just before it
  // runs: a callback may cancel a later timer of the same batch (a connection
  // failure frees a round, whose destructor cancels the round's deadline), and a
  // cancelled timer must not run.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> due;
  for (auto it = timers_.begin(); it != timers_.end() && it->first.first <= now; ++it) due.push_back(it->first);
  for (const auto& key : due) {
    auto it = timers_.find(key);
    if (it == timers_.end()) continue;  // cancelled by an earlier callback of this batch
    std::function<void()> fn = std::move(it->second);
    timers_.erase(it);
    timer_due_.erase(key.second);
    fn();
  }
  if (timer_armed_for_ == 0) arm_timer();
}

void core::stop() {
  if (owns_loop_) {
    if (!thread_.joinable()) return;
    if (on_loop_thread()) {
      // Destroyed from its own callback: cannot join ourselves. Detach; the loop
      // finishes the drain and exits on its own.
      post([this] { begin_stop(); });
      thread_.detach();
      return;
    }
    post([this] { begin_stop(); });
    thread_.join();
  } else {
    begin_stop();
    // A simulated world run from this thread: finish the drain now (bounded by
    // the drain timer), so that nothing of this client runs after its destructor.
    if (!handles_closed_) io_->drive([this] { return handles_closed_; });
  }
}

void core::warn(const warning& w) {
  if (const auto& notify = options_.on_warning) {
    // A throwing callback must not unwind through the loop: the warning is dropped.
    try {
      notify(w);
    } catch (...) {
    }
  }
  if (observing_) emit(&observer::on_warning, w, "on_warning");
}

void core::start_warnings() {
  // About the configuration as a whole: once, at the start, on the loop thread.
  if (!options_.on_warning && !observing_) return;
  const std::size_t n = nodes_.size();
  if (n == 1) {
    warning w;
    w.code = warning_code::single_node;
    w.message = "one node (" + nodes_[0].display +
                "): no fault tolerance, the lock is as safe as that one server; use 3 or 5 independent nodes";
    warn(w);
  } else if (n % 2 == 0) {
    warning w;
    w.code = warning_code::even_node_count;
    const std::size_t tolerated = n - (n / 2 + 1);
    w.message = std::to_string(n) + " nodes: the quorum of " + std::to_string(n / 2 + 1) + " tolerates " +
                (tolerated == 0 ? std::string("no failure")
                                : std::to_string(tolerated) + (tolerated == 1 ? " failure" : " failures")) +
                ", no more than " + std::to_string(n - 1) + (n - 1 == 1 ? " node" : " nodes") +
                " would; use an odd number of nodes";
    warn(w);
  }
}

#ifndef NDEBUG
void core::note_observer_time(const char* name, std::chrono::steady_clock::duration took) {
  if (took <= std::chrono::milliseconds(1)) return;
  // Rate-limited on the real clock: one line per client per 10 s at most.
  const auto t = std::chrono::steady_clock::now();
  if (slow_observer_said_ != std::chrono::steady_clock::time_point{} &&
      t - slow_observer_said_ < std::chrono::seconds(10)) {
    return;
  }
  slow_observer_said_ = t;
  std::fprintf(stderr, "redlock: observer slow: %s took %lld ms; observers must not block\n", name,
               static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
}
#endif

std::chrono::milliseconds core::quarantine_for(std::chrono::milliseconds) const noexcept {
  const auto q = options_.restart_quarantine;
  return q.count() < 0 ? options_.max_ttl : q;
}

const std::string* core::same_server(std::size_t before, const std::string& run_id) const {
  for (std::size_t j = 0; j < before; ++j) {
    if (endpoints_[j]->run_id() == run_id) return &endpoints_[j]->name();
  }
  return nullptr;
}

std::string core::ttl_problem(std::chrono::milliseconds ttl) const {
  if (const char* bad = check_ttl(ttl, options_.clock_drift_factor); *bad) return bad;
  if (ttl > options_.max_ttl) {
    return "ttl " + std::to_string(ttl.count()) + " ms exceeds client_options::max_ttl (" +
           std::to_string(options_.max_ttl.count()) +
           " ms), the bound the restart and clock-jump guards protect; raise max_ttl on every client of "
           "these nodes to use longer TTLs";
  }
  return "";
}

void core::expect_op(std::uint64_t id) {
  lock_guard g(unstarted_mu_);
  unstarted_.insert(id);
}

void core::forget_unstarted(std::uint64_t id) {
  lock_guard g(unstarted_mu_);
  unstarted_.erase(id);
}

bool core::cancel_unstarted(std::uint64_t id) {
  lock_guard g(unstarted_mu_);
  if (unstarted_.count(id) == 0) return false;
  cancelled_early_.insert(id);
  return true;
}

bool core::start_op(std::uint64_t id) {
  forget_unstarted(id);
  return cancelled_early_.erase(id) > 0;
}

void core::install(services s) {
  services_ = std::move(s);
}

void core::begin_stop() {
  if (closing_) return;
  closing_ = true;
  // The services first (the watchdog declares its locks lost: their owners hear
  // so through on_lost, errc::cancelled, never silently).
  for (auto& s : services_.owned) s->begin_stop();
  // Pending acquires (in flight or waiting to retry) end with "cancelled".
  std::vector<std::shared_ptr<acquire_op>> ops;
  for (auto& [id, w] : ops_) {
    if (auto op = w.lock()) ops.push_back(op);
  }
  for (auto& op : ops) cancel_op(*op);
  // Drain: in-flight requests finish or time out, and rollbacks still being
  // delivered (ops/rollback.cc) get until the same bound: two command
  // timeouts. Past it, finish_stop() abandons the rollbacks not yet confirmed; the
  // keys they were deleting expire by their TTL.
  schedule(options_.command_timeout * 2 + std::chrono::milliseconds(5), [this] { finish_stop(); });
  note_quiet();
}

void core::note_quiet() {
  if (!closing_ || finished_) return;
  for (const auto& s : services_.owned) {
    if (!s->quiet()) return;
  }
  for (auto& c : endpoints_) {
    if (!c->quiet()) return;
  }
  // Finish from a fresh stack frame: we may be inside a connection's callback.
  schedule(std::chrono::milliseconds(0), [this] { finish_stop(); });
}

void core::finish_stop() {
  if (finished_) return;
  for (auto& c : endpoints_) c->flush();
  for (auto& c : endpoints_) c->shutdown();
  for (auto& s : services_.owned) s->finish_stop();
  finished_ = true;
  lingering_ = false;
  {
    lock_guard g(tasks_mu_);
    async_closed_ = true;
  }
  // Tasks posted before the stop still run (their operations see "cancelled"); so
  // do tasks posted while the handles close (final_drain()).
  run_tasks();
  {
    std::vector<std::function<void()>> d;
    d.swap(deferred_);
    for (auto& fn : d) fn();
  }
  timers_.clear();
  timer_due_.clear();
  io_->close([this] { handles_closed(); });
}

void core::handles_closed() {
  handles_closed_ = true;
  if (!owns_loop_) {
    final_drain();
    // The external loop's thread is this client's no longer (core.h).
    loop_thread_id_.store(std::thread::id());
    // External loop: `keep` may be the last reference; the core is destroyed here.
    std::shared_ptr<core> keep = std::move(self_);
  }
}

}  // namespace redlock::detail

namespace redlock::detail {

void core::final_drain() {
  // On the loop thread, after the handles closed. Bounded: a few rounds for work
  // that posts more work; then posts fail (their callers run callbacks themselves).
  for (int round = 0;; ++round) {
    {
      lock_guard g(tasks_mu_);
      if (round >= 8) stopped_ = true;
      if (tasks_.empty() && deferred_.empty()) {
        stopped_ = true;
        return;
      }
      local_.swap(tasks_);
    }
    for (auto& fn : local_) fn();
    local_.clear();
    std::vector<std::function<void()>> d;
    d.swap(deferred_);
    for (auto& fn : d) fn();
  }
}

}  // namespace redlock::detail
