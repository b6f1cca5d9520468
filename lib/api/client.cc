// The client (redlock/client.h): its life (the options checked, the reactor and
// the core built, started, stopped) and every public call marshalled onto the
// loop, a synchronous one as post + wait (api/sync.h). The arguments' checks are
// api/validate.h's.
#include "redlock/client.h"
#include "io/uv_reactor.h"

#include <algorithm>

#include "api/validate.h"
#include "engine/core.h"
#include "pure/decision.h"
#include "ops/support.h"
#include "ops/probe.h"
#include "ops/services.h"
#include "redlock/uv.h"
#include "api/sync.h"

namespace redlock {

namespace {

// A call refused before it ran: the report without a round (ops/reports.cc), with
// the reason on the first node only, and no attempt for an invalid argument.
report invalid(const detail::core& c, errc e, const std::string& why) {
  report r = detail::empty_report(c, make_error_code(e), "");
  if (e == errc::invalid_argument) r.attempts = 0;
  if (!why.empty() && !r.nodes.empty()) r.nodes.front().detail = why;
  return r;
}

// The body of acquire_async and acquire_many_async. The id is registered before
// the post, so that a cancel() that reaches the loop first (posted from the loop
// thread, or racing from another thread) is not lost; on the loop, an invalid
// request (`bad`) or an early cancel is answered at once; a client whose loop has
// finished answers "client shut down" here, since nobody else can run the
// callback. start(core, id, done, called) starts the acquire on the loop.
template <class Start>
std::uint64_t post_acquire(const std::shared_ptr<detail::core>& core, std::string bad, Start start,
                           std::function<void(acquire_result)> done) {
  const std::uint64_t id = core->next_id();
  const auto called = core->now();
  auto c = core;
  core->expect_op(id);
  bool posted = core->post([c, id, called, bad = std::move(bad), start = std::move(start), done]() mutable {
    const bool cancelled_early = c->start_op(id);
    if (!bad.empty() || cancelled_early) {
      acquire_result r;
      r.report = bad.empty() ? invalid(*c, errc::cancelled, "cancelled before it started")
                             : invalid(*c, errc::invalid_argument, bad);
      c->stats().acquires.fetch_add(1, std::memory_order_relaxed);
      return done(std::move(r));
    }
    start(*c, id, detail::timed(c, called, std::move(done)), called);
  });
  if (!posted) {
    core->forget_unstarted(id);
    acquire_result r;
    r.report = invalid(*core, errc::cancelled, "client shut down");
    done(std::move(r));
  }
  return id;
}

}  // namespace

client::client(client_options options) : client(std::move(options), nullptr) {}

client::client(client_options options, uv_loop_s* loop)
    : client(std::move(options), std::make_unique<detail::uv_reactor>(loop), loop == nullptr) {}

client::client(client_options options, std::unique_ptr<detail::reactor> io, bool own_thread) {
  auto nodes = detail::validate_options(options);
  if (std::any_of(nodes.begin(), nodes.end(), [](const detail::node_address& a) { return a.tls; })) {
    if (std::string bad = io->use_tls(options.tls); !bad.empty()) throw config_error(bad);
  }
  core_ = std::make_shared<detail::core>(std::move(options), std::move(nodes), std::move(io), own_thread);
  detail::install_services(*core_);
  core_->start();
}

std::unique_ptr<client> detail::client_access::make(client_options options, std::unique_ptr<reactor> io) {
  return std::unique_ptr<client>(new client(std::move(options), std::move(io), false));
}

client::~client() {
  if (core_) core_->stop();
}

std::unique_ptr<client> make_client_on_loop(client_options options, uv_loop_s* loop) {
  if (loop == nullptr) throw config_error("make_client_on_loop: loop is null");
  return std::unique_ptr<client>(new client(std::move(options), loop));
}

acquire_result client::acquire(std::string_view resource, const acquire_options& options) {
  auto refused = [this](errc e) {
    acquire_result r;
    r.report = invalid(*core_, e, e == errc::cancelled ? "client shut down" : "");
    return r;
  };
  if (std::string bad = detail::check_acquire(*core_, resource, options); !bad.empty()) {
    acquire_result r;
    r.report = invalid(*core_, errc::invalid_argument, bad);
    return r;
  }
  const std::uint64_t id = core_->next_id();
  const auto called = core_->now();
  auto c = core_;
  return detail::run_sync<acquire_result>(
      *core_,
      [c, id, called, res = std::string(resource), options](std::function<void(acquire_result)> done) mutable {
        c->acquire(id, std::move(res), std::move(options), detail::timed(c, called, std::move(done)), called);
      },
      refused);
}

std::uint64_t client::acquire_async(std::string resource, acquire_options options,
                                    std::function<void(acquire_result)> done) {
  std::string bad = detail::check_acquire(*core_, resource, options);
  return post_acquire(
      core_, std::move(bad),
      [res = std::move(resource), o = std::move(options)](detail::core& c, std::uint64_t id, auto timed_done,
                                                         auto called) mutable {
        c.acquire(id, std::move(res), std::move(o), std::move(timed_done), called);
      },
      std::move(done));
}

acquire_result client::acquire_many(const std::vector<std::string>& resources,
                                    const acquire_options& options) {
  auto refused = [this](errc e) {
    acquire_result r;
    r.report = invalid(*core_, e, e == errc::cancelled ? "client shut down" : "");
    return r;
  };
  if (std::string bad = detail::check_acquire_many(*core_, resources, options); !bad.empty()) {
    acquire_result r;
    r.report = invalid(*core_, errc::invalid_argument, bad);
    return r;
  }
  const std::uint64_t id = core_->next_id();
  const auto called = core_->now();
  auto c = core_;
  return detail::run_sync<acquire_result>(
      *core_,
      [c, id, called, resources, options](std::function<void(acquire_result)> done) mutable {
        c->acquire_many(id, std::move(resources), std::move(options),
                        detail::timed(c, called, std::move(done)), called);
      },
      refused);
}

std::uint64_t client::acquire_many_async(std::vector<std::string> resources, acquire_options options,
                                         std::function<void(acquire_result)> done) {
  std::string bad = detail::check_acquire_many(*core_, resources, options);
  return post_acquire(
      core_, std::move(bad),
      [res = std::move(resources), o = std::move(options)](detail::core& c, std::uint64_t id, auto timed_done,
                                                          auto called) mutable {
        c.acquire_many(id, std::move(res), std::move(o), std::move(timed_done), called);
      },
      std::move(done));
}

void client::cancel(std::uint64_t operation_id) {
  auto c = core_;
  c->post([c, operation_id] {
    if (!c->cancel_unstarted(operation_id)) c->cancel(operation_id);
  });
}

report client::extend(const lease& l, std::chrono::milliseconds ttl) {
  if (std::string bad = detail::check_extend(*core_, l, ttl); !bad.empty()) {
    return invalid(*core_, errc::invalid_argument, bad);
  }
  const auto called = core_->now();
  auto c = core_;
  return detail::run_sync<report>(
      *core_,
      [c, l, ttl, called](std::function<void(report)> done) {
        c->extend(l, ttl, detail::timed(c, called, std::move(done)));
      },
      [this](errc e) { return invalid(*core_, e, e == errc::cancelled ? "client shut down" : ""); });
}

void client::extend_async(lease l, std::chrono::milliseconds ttl, std::function<void(report)> done) {
  auto c = core_;
  const auto called = core_->now();
  std::string why = detail::check_extend(*core_, l, ttl);
  if (!core_->post([c, l = std::move(l), ttl, why, called, done]() mutable {
        if (!why.empty()) return done(invalid(*c, errc::invalid_argument, why));
        c->extend(std::move(l), ttl, detail::timed(c, called, std::move(done)));
      })) {
    // The client's loop has finished (see client.h): nobody else can run the callback.
    done(invalid(*core_, errc::cancelled, "client shut down"));
  }
}

report client::release(const lease& l) {
  if (std::string bad = detail::check_lease(l); !bad.empty()) {
    return invalid(*core_, errc::invalid_argument, bad);
  }
  const auto called = core_->now();
  auto c = core_;
  return detail::run_sync<report>(
      *core_,
      [c, l, called](std::function<void(report)> done) { c->release(l, detail::timed(c, called, std::move(done))); },
      [this](errc e) { return invalid(*core_, e, e == errc::cancelled ? "client shut down" : ""); });
}

void client::release_async(lease l, std::function<void(report)> done) {
  auto c = core_;
  const auto called = core_->now();
  std::string bad = detail::check_lease(l);
  if (!core_->post([c, l = std::move(l), bad, called, done]() mutable {
        if (!bad.empty()) return done(invalid(*c, errc::invalid_argument, bad));
        c->release(std::move(l), detail::timed(c, called, std::move(done)));
      })) {
    // The client's loop has finished (see client.h): nobody else can run the callback.
    done(invalid(*core_, errc::cancelled, "client shut down"));
  }
}

inspect_result client::inspect(std::string_view resource) {
  auto refused = [this](errc e) {
    inspect_result r;
    r.report = invalid(*core_, e, e == errc::cancelled ? "client shut down" : "");
    r.nodes.resize(core_->size());
    return r;
  };
  if (resource.empty()) {
    inspect_result r;
    r.report = invalid(*core_, errc::invalid_argument, "resource name must not be empty");
    r.nodes.resize(core_->size());
    return r;
  }
  const auto called = core_->now();
  auto c = core_;
  return detail::run_sync<inspect_result>(
      *core_,
      [c, called, res = std::string(resource)](std::function<void(inspect_result)> done) {
        c->inspect(res, detail::timed(c, called, std::move(done)));
      },
      refused);
}

report client::ping() {
  const auto called = core_->now();
  auto c = core_;
  return detail::run_sync<report>(
      *core_, [c, called](std::function<void(report)> done) { c->ping(detail::timed(c, called, std::move(done))); },
      [this](errc e) { return invalid(*core_, e, e == errc::cancelled ? "client shut down" : ""); });
}

probe_result client::probe() {
  auto c = core_;
  auto refused = [c](errc e) {
    probe_result r;
    r.nodes.resize(c->size());
    for (std::size_t i = 0; i < c->size(); ++i) {
      r.nodes[i].node = c->nodes()[i].display;
      r.nodes[i].status = node_status::cancelled;
      r.nodes[i].detail = e == errc::cancelled ? "client shut down" : make_error_code(e).message();
    }
    return r;
  };
  return detail::run_sync<probe_result>(
      *core_, [c](std::function<void(probe_result)> done) { detail::probe(*c, std::move(done)); }, refused);
}

void client::probe_async(std::function<void(probe_result)> done) {
  auto c = core_;
  if (!core_->post([c, done]() mutable { detail::probe(*c, std::move(done)); })) {
    probe_result r;
    r.nodes.resize(c->size());
    for (std::size_t i = 0; i < c->size(); ++i) {
      r.nodes[i].node = c->nodes()[i].display;
      r.nodes[i].status = node_status::cancelled;
      r.nodes[i].detail = "client shut down";
    }
    done(std::move(r));
  }
}

std::size_t client::node_count() const noexcept { return core_->size(); }
std::size_t client::quorum() const noexcept { return detail::quorum_of(core_->size()); }

std::vector<std::string> client::node_names() const {
  std::vector<std::string> out;
  for (const auto& n : core_->nodes()) out.push_back(n.display);
  return out;
}

client_stats client::stats() const noexcept {
  auto& s = core_->stats();
  client_stats out;
  out.acquires = s.acquires.load();
  out.acquired = s.acquired.load();
  out.contended = s.contended.load();
  out.releases = s.releases.load();
  out.release_failures = s.release_failures.load();
  out.extends = s.extends.load();
  out.locks_lost = s.locks_lost.load();
  out.reconnects = s.reconnects.load();
  out.observer_errors = s.observer_errors.load();
  out.wake_ups_skipped = s.wake_ups_skipped.load();
  out.notifications_dropped = s.notifications_dropped.load();
  out.wake_ups_deferred = s.wake_ups_deferred.load();
  out.split_retries = s.split_retries.load();
  return out;
}

}  // namespace redlock
