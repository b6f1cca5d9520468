#include "redlock/client.h"
#include "io/uv_reactor.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "engine/core.h"
#include "pure/decision.h"
#include "ops/support.h"
#include "ops/probe.h"
#include "ops/services.h"
#include "redlock/uv.h"
#include "pure/retry.h"
#include "api/sync.h"

namespace redlock {

namespace {

// The servers a node address may reach, as comparable strings, without DNS: a
// unix socket's lexically normalised path; for TCP the port with the host as
// written (lower case), except that IP literals are compared in canonical form
// (IPv4-mapped IPv6 as IPv4) and "localhost" may be 127.0.0.1 or ::1. Two names
// that resolve to one address are not detected (no resolution at construction).
std::set<std::string> server_identities(const detail::node_address& a) {
  if (a.type == detail::node_address::kind::unix_socket) {
    return {"unix:" + std::filesystem::path(a.path).lexically_normal().string()};
  }
  const std::string port = std::to_string(a.port);
  std::string host = a.host;
  std::transform(host.begin(), host.end(), host.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (!host.empty() && host.back() == '.') host.pop_back();
  if (host == "localhost") return {"tcp:127.0.0.1:" + port, "tcp:[::1]:" + port};
  char buf[INET6_ADDRSTRLEN] = {};
  unsigned char v4[4];
  unsigned char v6[16];
  if (inet_pton(AF_INET, host.c_str(), v4) == 1 && inet_ntop(AF_INET, v4, buf, sizeof buf) != nullptr) {
    return {"tcp:" + std::string(buf) + ":" + port};
  }
  // The resolver also takes the inet_aton shorthands ("127.1", "0x7f.0.0.1",
  // "2130706433") as IPv4 literals: compare them in canonical form too. Only a
  // host of digits, hex digits, 'x' and dots (inet_aton ignores what follows a space).
  in_addr aton{};
  const bool aton_chars = !host.empty() && std::all_of(host.begin(), host.end(), [](unsigned char ch) {
    return std::isxdigit(ch) != 0 || ch == 'x' || ch == '.';
  });
  if (aton_chars && inet_aton(host.c_str(), &aton) != 0 && inet_ntop(AF_INET, &aton, buf, sizeof buf) != nullptr) {
    return {"tcp:" + std::string(buf) + ":" + port};
  }
  if (inet_pton(AF_INET6, host.c_str(), v6) == 1) {
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::equal(mapped, mapped + 12, v6) && inet_ntop(AF_INET, v6 + 12, buf, sizeof buf) != nullptr) {
      return {"tcp:" + std::string(buf) + ":" + port};
    }
    if (inet_ntop(AF_INET6, v6, buf, sizeof buf) != nullptr) return {"tcp:[" + std::string(buf) + "]:" + port};
  }
  return {"tcp:" + host + ":" + port};
}

std::vector<detail::node_address> validate(const client_options& o) {
  if (o.nodes.empty()) throw config_error("no nodes configured");
  std::vector<detail::node_address> out;
  std::vector<std::set<std::string>> ids;
  for (const std::string& uri : o.nodes) {
    detail::node_address a;
    std::string err;
    if (!detail::parse_node_uri(uri, a, err)) throw config_error(err);
    std::set<std::string> id = server_identities(a);
    for (std::size_t i = 0; i < out.size(); ++i) {
      for (const std::string& s : id) {
        if (ids[i].count(s) == 0) continue;
        throw config_error("node URIs '" + out[i].display + "' and '" + a.display + "' name the same server (" +
                           s.substr(s.find(':') + 1) +
                           "): every node must be an independent master (another database number on the same "
                           "server is not another node)");
      }
    }
    ids.push_back(std::move(id));
    out.push_back(std::move(a));
  }
  if (o.max_ttl.count() <= 0) throw config_error("max_ttl must be positive");
  if (*detail::check_ttl(o.max_ttl, o.clock_drift_factor) != '\0') {
    throw config_error(std::string("max_ttl: ") + detail::check_ttl(o.max_ttl, o.clock_drift_factor));
  }
  if (o.restart_quarantine.count() > 0 && o.restart_quarantine < o.max_ttl) {
    throw config_error("restart_quarantine (" + std::to_string(o.restart_quarantine.count()) +
                       " ms) is shorter than max_ttl (" + std::to_string(o.max_ttl.count()) +
                       " ms): a restarted node could vote while a lock it forgot is still valid");
  }
  if (o.command_timeout.count() <= 0) throw config_error("command_timeout must be positive");
  if (o.connect_timeout.count() <= 0) throw config_error("connect_timeout must be positive");
  if (o.reconnect_min_backoff.count() <= 0) throw config_error("reconnect_min_backoff must be positive");
  if (o.reconnect_max_backoff < o.reconnect_min_backoff) {
    throw config_error("reconnect_max_backoff must be at least reconnect_min_backoff");
  }
  if (o.notify_idle_close.count() <= 0) {
    throw config_error("notify_idle_close must be > 0");
  }
  if (o.clock_jump_threshold.count() < 0) throw config_error("clock_jump_threshold must not be negative");
  if (o.clock_sample_interval.count() < 0) throw config_error("clock_sample_interval must not be negative");
  if (o.max_reply_bytes == 0) throw config_error("max_reply_bytes must be positive");
  if (!(o.clock_drift_factor >= 0.0 && o.clock_drift_factor < 0.5)) {
    throw config_error("clock_drift_factor must be in [0, 0.5)");
  }
  return out;
}

// A call refused before it ran: the report without a round (ops/reports.cc), with
// the reason on the first node only, and no attempt for an invalid argument.
report invalid(const detail::core& c, errc e, const std::string& why) {
  report r = detail::empty_report(c, make_error_code(e), "");
  if (e == errc::invalid_argument) r.attempts = 0;
  if (!why.empty() && !r.nodes.empty()) r.nodes.front().detail = why;
  return r;
}

// "" if the acquire arguments are fine, else the problem.
std::string check_acquire(const detail::core& c, std::string_view resource, const acquire_options& o) {
  if (resource.empty()) return "resource name must not be empty";
  // The fence counter of resource R is the key R + ":fence" (under the same
  // prefix): a lock on such a name would collide with it. The counter key keeps
  // its format (counters already on the nodes stay valid across upgrades, so
  // tokens never go backwards); the names are reserved instead.
  // The check is on the key (key_prefix + resource), the name a counter has too.
  const std::string_view suffix = ":fence";
  auto ends_in_fence = [&](std::string_view s) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
  };
  if (ends_in_fence(resource)) {
    return "resource name must not end in \":fence\": '" + std::string(resource) +
           "' names the fence counter of resource '" + std::string(resource.substr(0, resource.size() - suffix.size())) +
           "' (see docs/fencing.md)";
  }
  if (const std::string key = c.key_for(std::string(resource)); ends_in_fence(key)) {
    return "key prefix + resource name must not end in \":fence\": key_prefix '" + c.options().key_prefix +
           "' and resource '" + std::string(resource) + "' make the key '" + key +
           "', the fence counter of the key '" + key.substr(0, key.size() - suffix.size()) + "' (see docs/fencing.md)";
  }
  if (std::string bad = c.ttl_problem(o.ttl); !bad.empty()) return bad;
  if (const char* bad = detail::check_retry(o.retry); *bad) return bad;
  if (o.extend_interval.count() < 0) return "extend_interval must not be negative";
  if (o.max_hold.count() < 0) return "max_hold must not be negative";
  if (o.max_hold.count() > 0 && *detail::check_ttl(o.max_hold, c.options().clock_drift_factor) != '\0') {
    // A validity capped at max_hold (shorter than the TTL) would be none at all.
    return "max_hold (" + std::to_string(o.max_hold.count()) +
           " ms) must be longer than the clock drift allowance (max_hold * drift_factor + 2 ms)";
  }
  if (o.auto_extend) {
    // Each watchdog tick needs time for one extension round (up to command_timeout)
    // before the validity it extends runs out: interval + command_timeout <= ttl - drift.
    const auto interval = o.extend_interval.count() > 0 ? o.extend_interval : o.ttl / 3;
    const auto budget = std::chrono::microseconds(o.ttl) - detail::drift_of(o.ttl, c.options().clock_drift_factor) -
                        std::chrono::microseconds(c.options().command_timeout);
    if (std::chrono::microseconds(interval) > budget) {
      return "extend_interval (" + std::to_string(interval.count()) +
             " ms) leaves no time for an extension round: it must be at most ttl - drift - command_timeout (" +
             std::to_string(std::max<std::int64_t>(0, budget.count() / 1000)) + " ms)";
    }
  }
  return "";
}

// "" if a set acquire's arguments are fine, else the problem.
std::string check_acquire_many(const detail::core& c, const std::vector<std::string>& resources,
                               const acquire_options& o) {
  if (std::string bad = detail::check_resource_set(resources); !bad.empty()) return bad;
  if (o.fencing)
    return "fencing is not supported for a set of resources: acquire them one by one with fencing";
  for (const std::string& r : resources) {
    if (std::string bad = check_acquire(c, r, o); !bad.empty()) return bad;
  }
  return "";
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
  auto nodes = validate(options);
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
  if (std::string bad = check_acquire(*core_, resource, options); !bad.empty()) {
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
  std::string bad = check_acquire(*core_, resource, options);
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
  if (std::string bad = check_acquire_many(*core_, resources, options); !bad.empty()) {
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
  std::string bad = check_acquire_many(*core_, resources, options);
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

namespace {
// "" if lease `l` names what to extend or release, else the problem: a resource
// (or a set's resources, which must be a valid set) and a token.
std::string check_lease(const lease& l) {
  if ((l.resource.empty() && l.resources.empty()) || l.token.empty())
    return "resource and token are required";
  if (!l.resources.empty()) return detail::check_resource_set(l.resources);
  return "";
}

// "" if an extend of `l` to `ttl` may be attempted, else the problem.
std::string check_extend(const detail::core& c, const lease& l, std::chrono::milliseconds ttl) {
  if (std::string bad = check_lease(l); !bad.empty()) return bad;
  return c.ttl_problem(ttl);
}
}  // namespace

report client::extend(const lease& l, std::chrono::milliseconds ttl) {
  if (std::string bad = check_extend(*core_, l, ttl); !bad.empty()) return invalid(*core_, errc::invalid_argument, bad);
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
  std::string why = check_extend(*core_, l, ttl);
  if (!core_->post([c, l = std::move(l), ttl, why, called, done]() mutable {
        if (!why.empty()) return done(invalid(*c, errc::invalid_argument, why));
        c->extend(std::move(l), ttl, detail::timed(c, called, std::move(done)));
      })) {
    // The client's loop has finished (see client.h): nobody else can run the callback.
    done(invalid(*core_, errc::cancelled, "client shut down"));
  }
}

report client::release(const lease& l) {
  if (std::string bad = check_lease(l); !bad.empty()) return invalid(*core_, errc::invalid_argument, bad);
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
  std::string bad = check_lease(l);
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
