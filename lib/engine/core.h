// The client's engine: one loop (the reactor), one endpoint per node (node/endpoint.h), a timer
// queue, the shutdown drain, and observer dispatch. The operations (acquire,
// extend, release, inspect: lib/ops/) run on it; their long-lived services
// (the notifier, the watchdog, the rollback deliveries) are installed as
// engine/service.h services, and the engine includes none of their headers.
//
// Everything here runs on the loop thread except post(), on_loop_thread(), now()
// and the stats counters, which any thread may use.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "node/endpoint.h"
#include "engine/service.h"
#include "node/host.h"
#include "io/reactor.h"
#include "pure/thread_annotations.h"
#include "redlock/client.h"
#include "redlock/observer.h"
#include "pure/keys.h"
#include "pure/retry.h"
#include "pure/uri.h"

namespace redlock::detail {

class acquire_op;
class deliveries;  // ops/services.h
class notifier;    // ops/notify.h
class watchdog;    // ops/watchdog.h
struct held;       // ops/held.h

void cancel_op(acquire_op& op);

struct stats_counters {
  std::atomic<std::uint64_t> acquires{0}, acquired{0}, contended{0}, releases{0}, release_failures{0},
      extends{0}, locks_lost{0}, reconnects{0}, observer_errors{0}, wake_ups_skipped{0},
      notifications_dropped{0}, wake_ups_deferred{0}, split_retries{0};
};

inline const report& report_of(const report& r) noexcept { return r; }
inline const report& report_of(const acquire_result& r) noexcept { return r.report; }
inline const report& report_of(const inspect_result& r) noexcept { return r.report; }

class core final : public std::enable_shared_from_this<core>, private reactor::driver, public node_host {
 public:
  // `io`: the world the core runs in (reactor.h). `own_thread`: start() runs the
  // reactor's loop on a thread of the core's own (uv_reactor with its own loop).
  core(client_options options, std::vector<node_address> nodes, std::unique_ptr<reactor> io, bool own_thread);
  ~core();

  // Starts: an own loop thread, or handles on the external loop (call on its
  // thread), or the simulated world's (call on the thread that drives it).
  void start();
  // Shuts down: drains in-flight work (bounded), then closes everything. For an own
  // loop, blocks until the loop thread has exited. Idempotent.
  void stop();

  // Runs fn on the loop thread, soon. Any thread. Returns false once stopped (fn not run).
  bool post(std::function<void()> fn);
  bool on_loop_thread() const noexcept;
  std::chrono::steady_clock::time_point now() const noexcept override;

  // A synchronous call from this thread must be refused (would_deadlock): it is
  // the loop thread, and the loop cannot be driven from here (reactor::drive).
  bool must_not_block() const;
  // Runs the loop from the calling thread until done() (the simulator): false when
  // this reactor cannot be driven from here.
  bool drive(const std::function<bool()>& done) { return io_->drive(done); }
  // Blocking calls from other threads (sync.h). A waiting caller may spin before
  // it sleeps, so that a quick answer reaches it without a thread wake-up. Whether
  // it does is measured, not assumed: the client keeps the recent latency of
  // blocking calls that spun and of calls that slept, uses the faster way, and
  // tries the other one every 16th call (on a machine short of cores a spinning
  // caller delays the very work it waits for; then sleeping wins). Only a caller
  // that is the client's only blocking call in flight spins, for at most twice the
  // recent latency of spun calls, capped (REDLOCK_SYNC_SPIN_US, default 300 us).
  // begin_sync_wait() returns the spin budget (zero: sleep at once) and whether the
  // call's latency is to be measured (it was alone). Any thread.
  struct sync_wait_plan {
    std::chrono::nanoseconds spin{0};
    bool measured = false;
  };
  sync_wait_plan begin_sync_wait() noexcept;
  void end_sync_wait(const sync_wait_plan& plan, std::chrono::steady_clock::duration took) noexcept;
  // Loop thread: a spinning blocking caller just got its answer. An own loop then
  // keeps polling for a short while (REDLOCK_SYNC_LINGER_US, default 30 us)
  // instead of sleeping in the kernel, and posts from other threads skip the
  // wake-up while it does: the caller's next call (typically the release after an
  // acquire) is picked up without a hand-off.
  void answered_blocking_caller();
  // Waits `d` on the client's clock: sleeps, or in a simulated world driven from
  // this thread, runs the world for `d`. Not on the loop thread of a real loop.
  void wait_for(std::chrono::milliseconds d);

  // Loop thread only.
  reactor& io() noexcept override { return *io_; }
  std::uint64_t now_ms() const override { return io_->now_ms(); }  // the loop's millisecond clock
  std::uint64_t schedule(std::chrono::milliseconds delay, std::function<void()> fn) override;
  void cancel_timer(std::uint64_t id) noexcept override;
  void want_flush(connection* c) override;
  // `c` is about to be destroyed (a closed subscriber connection): no flush for it.
  void forget_conn(connection* c);
  std::uint64_t jitter() noexcept override { return rng_.next(); }
  bool closing() const noexcept override { return closing_; }
  void note_quiet() override;  // a connection may have become quiet; finishes a pending stop
  // The operations' long-lived services (engine/service.h), installed once by
  // install_services (ops/services.h), before start(). The core owns them, asks
  // each of them at its stop (begin_stop, quiet, finish_stop, in the order they
  // were installed), and hands out the three the operations reach through it.
  struct services {
    std::vector<std::unique_ptr<service>> owned;
    notifier* notify = nullptr;
    class watchdog* watch = nullptr;
    class deliveries* rollbacks = nullptr;  // the count of rollbacks being delivered
  };
  void install(services s);
  notifier& notify() noexcept { return *services_.notify; }
  class watchdog& watch() noexcept { return *services_.watch; }
  class deliveries& rollbacks() noexcept { return *services_.rollbacks; }
  // A copy of the jitter sequence, for a service's own sequence seeded without a
  // draw from this one (the watchdog's spread).
  jitter_rng rng_copy() const noexcept { return rng_; }

  // Operations (loop thread). Callbacks run on the loop thread, exactly once.
  // `called`: when the public call was made (default: now).
  void acquire(std::uint64_t id, std::string resource, acquire_options o, std::function<void(acquire_result)> done,
               std::optional<std::chrono::steady_clock::time_point> called = std::nullopt);
  // Several resources at once, all or none (ops/commands.cc): `resources` checked by the
  // caller (check_resource_set), o.fencing false.
  void acquire_many(std::uint64_t id, std::vector<std::string> resources, acquire_options o,
                    std::function<void(acquire_result)> done,
                    std::optional<std::chrono::steady_clock::time_point> called = std::nullopt);
  void cancel(std::uint64_t id);
  void extend(lease l, std::chrono::milliseconds ttl, std::function<void(report)> done);
  void release(lease l, std::function<void(report)> done);
  void inspect(std::string resource, std::function<void(inspect_result)> done);
  void ping(std::function<void(report)> done);
  // Lock-handle support (the handle's state and the watchdog: ops/held.h,
  // ops/watchdog.h). The handle is made here (lock's constructor is the core's);
  // make_lock also registers it (lib/api/lock.cc). start_watchdog: watch().start
  // (ops/watchdog.cc), for the acquire.
  lock make_lock(std::shared_ptr<held> h);
  void start_watchdog(const std::shared_ptr<held>& h);

  // The restart-guard quarantine (see options.h: restart_quarantine, max_ttl); the
  // TTL is not used: every TTL is bounded by max_ttl.
  std::chrono::milliseconds quarantine_for(std::chrono::milliseconds ttl) const noexcept;
  std::chrono::milliseconds restart_quarantine() const noexcept override { return quarantine_for(std::chrono::milliseconds(0)); }
  // "" if `ttl` may be used for an acquire or extend (drift, max_ttl), else the problem.
  std::string ttl_problem(std::chrono::milliseconds ttl) const;
  // cancel() support for an acquire_async whose task has not run yet (any thread
  // for expect_op; loop thread for the others).
  void expect_op(std::uint64_t id);
  void forget_unstarted(std::uint64_t id);
  bool cancel_unstarted(std::uint64_t id);  // true: remembered, the acquire will be cancelled
  bool start_op(std::uint64_t id);          // true: cancelled before it started
  std::string key_for(const std::string& resource) const { return lock_key(options_.key_prefix, resource); }
  const client_options& options() const noexcept override { return options_; }
  std::size_t size() const noexcept { return nodes_.size(); }
  const std::vector<node_address>& nodes() const noexcept { return nodes_; }
  // Node i as the operations see it (node/endpoint.h).
  endpoint& node(std::size_t i) { return *endpoints_[i]; }
  stats_counters& stats() noexcept { return stats_; }
  std::uint64_t next_id() noexcept { return ids_.fetch_add(1) + 1; }
  void forget_op(std::uint64_t id) {
    ops_.erase(id);
  }

  // Observer events (redlock/observer.h), loop thread only. Every event site is
  // `if (c.observing()) { build the event; c.emit(...); }`: a client without
  // observers pays that one branch, no allocation. No site runs with tasks_mu_ or
  // unstarted_mu_ held (the only mutexes; taken for a few lines around the
  // queues, never around operation code), so events need no deferral.
  bool observing() const noexcept override { return observing_; }
  // Delivers `e` to every observer, in list order. An observer that throws has
  // its exception swallowed and counted (client_stats::observer_errors); the event
  // still goes to the observers after it, and the client goes on. Debug builds
  // time each call and say on stderr (rate-limited) when one took over 1 ms.
  template <class E>
  void emit(void (observer::*fn)(const E&), const E& e, const char* name) {
    for (const auto& o : options_.observers) {
      if (!o) continue;
#ifndef NDEBUG
      const auto t0 = std::chrono::steady_clock::now();
#endif
      try {
        ((*o).*fn)(e);
      } catch (...) {
        stats_.observer_errors.fetch_add(1, std::memory_order_relaxed);
      }
#ifndef NDEBUG
      note_observer_time(name, std::chrono::steady_clock::now() - t0);
#else
      (void)name;
#endif
    }
  }
  // node_host: a node's events go through the template above.
  void emit(void (observer::*fn)(const node_event&), const node_event& e, const char* name) override {
    emit<node_event>(fn, e, name);
  }
  void emit(void (observer::*fn)(const node_slow_event&), const node_slow_event& e, const char* name) override {
    emit<node_slow_event>(fn, e, name);
  }
  void emit(void (observer::*fn)(const node_quarantine_event&), const node_quarantine_event& e,
            const char* name) override {
    emit<node_quarantine_event>(fn, e, name);
  }
  void emit(void (observer::*fn)(const reconnect_scheduled&), const reconnect_scheduled& e,
            const char* name) override {
    emit<reconnect_scheduled>(fn, e, name);
  }
  void note_reconnect() noexcept override { stats_.reconnects.fetch_add(1, std::memory_order_relaxed); }
  const std::string* same_server(std::size_t before, const std::string& run_id) const override;
  // operation_started now, and a completion that sends operation_finished (with
  // its report) before calling `done`. Without observers: `done` itself.
  template <class R>
  std::function<void(R)> observe_op(operation_kind kind, const std::string& resource, bool background,
                                    std::function<void(R)> done) {
    if (!observing_) return done;
    operation_started s;
    s.at = now();
    s.kind = kind;
    s.resource = resource;
    s.background = background;
    emit(&observer::on_operation_started, s, "on_operation_started");
    return [this, kind, resource, background, done = std::move(done)](R r) {
      operation_finished f;
      f.at = now();
      f.kind = kind;
      f.resource = resource;
      f.background = background;
      f.report = &report_of(r);
      emit(&observer::on_operation_finished, f, "on_operation_finished");
      done(std::move(r));
    };
  }
  // A configuration warning: to client_options::on_warning (exceptions swallowed)
  // and to the observers.
  void warn(const warning& w) override;
  // lock_event for a held lock, now (valid_until: the handle's, unless released).
  // ops/held.cc, beside the state it reads.
  lock_event lock_event_of(const held& h, bool released) const;

 private:
  void run_tasks();
  // reactor::driver
  void on_idle() override;
  void on_timer() override;
  void on_wake() override { run_tasks(); }
  void handles_closed();
  void arm_timer();
  void begin_stop();
  void finish_stop();
  void final_drain();
  void start_warnings();
#ifndef NDEBUG
  void note_observer_time(const char* name, std::chrono::steady_clock::duration took);
  std::chrono::steady_clock::time_point slow_observer_said_{};
#endif

  client_options options_;
  bool observing_ = false;  // !options_.observers.empty()
  std::vector<node_address> nodes_;
  // Declared before the timers and the connections: destroyed after them (a
  // timer's op may leave the notifier; a rollback abandoned in a connection's
  // queue counts itself out of the deliveries).
  services services_;
  std::vector<std::unique_ptr<endpoint>> endpoints_;  // one per node, in configuration order
  std::unique_ptr<reactor> io_;
  bool owns_loop_;  // own_thread
  std::thread thread_;
  // The loop's thread while it runs; cleared when the loop thread is done with the
  // core (a later thread may be given the same id). Any thread reads it.
  std::atomic<std::thread::id> loop_thread_id_{};
  bool idle_on_ = false;
  mutex tasks_mu_;
  std::vector<std::function<void()>> tasks_ REDLOCK_GUARDED_BY(tasks_mu_);
  bool stopped_ REDLOCK_GUARDED_BY(tasks_mu_) = false;       // no more tasks
  bool async_closed_ REDLOCK_GUARDED_BY(tasks_mu_) = false;  // no more wake-ups
  std::vector<std::function<void()>> local_;  // loop thread: tasks swapped out
  std::vector<std::function<void()>> deferred_;  // loop thread: posted from the loop itself
  std::vector<connection*> dirty_;
  // Lingering after answering a blocking caller (answered_blocking_caller).
  bool awake_ REDLOCK_GUARDED_BY(tasks_mu_) = false;  // the loop polls tasks_ without a wake-up
  bool lingering_ = false;  // loop thread
  std::chrono::steady_clock::time_point linger_until_{};  // loop thread
  void end_linger();
  std::chrono::nanoseconds linger_{0};      // 0: never linger
  std::chrono::nanoseconds spin_cap_{0};    // 0: never spin
  std::atomic<int> sync_waiting_{0};               // blocking calls in flight
  std::atomic<std::uint64_t> sync_calls_{0};
  std::atomic<std::int64_t> spun_ewma_ns_{0};     // recent latency of calls that spun
  std::atomic<std::int64_t> slept_ewma_ns_{0};    // ... and of calls that slept at once

  std::map<std::pair<std::uint64_t, std::uint64_t>, std::function<void()>> timers_;  // (due ms, id)
  std::unordered_map<std::uint64_t, std::uint64_t> timer_due_;
  std::uint64_t timer_ids_ = 0;
  std::uint64_t timer_armed_for_ = 0;

  std::unordered_map<std::uint64_t, std::weak_ptr<acquire_op>> ops_;
  mutex unstarted_mu_;
  std::unordered_set<std::uint64_t> unstarted_ REDLOCK_GUARDED_BY(unstarted_mu_);
  std::unordered_set<std::uint64_t> cancelled_early_;  // loop thread
  bool closing_ = false;
  bool finished_ = false;
  bool handles_closed_ = false;
  std::shared_ptr<core> self_;  // keeps the core alive until its handles closed
  jitter_rng rng_;
  stats_counters stats_;
  std::atomic<std::uint64_t> ids_{0};
};

}  // namespace redlock::detail
