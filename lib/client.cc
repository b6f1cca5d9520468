#include "redlock/client.h"

#include <set>

#include "core.h"
#include "decision.h"
#include "redlock/uv.h"
#include "retry.h"
#include "sync.h"

namespace redlock {

namespace {

std::vector<detail::node_address> validate(const client_options& o) {
  if (o.nodes.empty()) throw config_error("no nodes configured");
  std::vector<detail::node_address> out;
  std::set<std::string> seen;
  for (const std::string& uri : o.nodes) {
    detail::node_address a;
    std::string err;
    if (!detail::parse_node_uri(uri, a, err)) throw config_error(err);
    std::string identity = a.type == detail::node_address::kind::unix_socket
                               ? "unix:" + a.path + "/" + std::to_string(a.db)
                               : a.host + ":" + std::to_string(a.port) + "/" + std::to_string(a.db);
    if (!seen.insert(identity).second) {
      throw config_error("node URI '" + a.display + "' is listed twice: every node must be an independent master");
    }
    out.push_back(std::move(a));
  }
  if (o.command_timeout.count() <= 0) throw config_error("command_timeout must be positive");
  if (o.connect_timeout.count() <= 0) throw config_error("connect_timeout must be positive");
  if (o.reconnect_min_backoff.count() <= 0) throw config_error("reconnect_min_backoff must be positive");
  if (o.reconnect_max_backoff < o.reconnect_min_backoff) {
    throw config_error("reconnect_max_backoff must be at least reconnect_min_backoff");
  }
  if (o.clock_jump_threshold.count() < 0) throw config_error("clock_jump_threshold must not be negative");
  if (o.clock_sample_interval.count() < 0) throw config_error("clock_sample_interval must not be negative");
  if (!(o.clock_drift_factor >= 0.0 && o.clock_drift_factor < 0.5)) {
    throw config_error("clock_drift_factor must be in [0, 0.5)");
  }
  return out;
}

report invalid(const detail::core& c, errc e, const std::string& why) {
  report r;
  r.error = e;
  r.attempts = e == errc::invalid_argument ? 0 : 1;
  for (const auto& n : c.nodes()) r.nodes.push_back(node_result{n.display, node_status::pending, {}, {}});
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
  if (const std::string_view suffix = ":fence";
      resource.size() >= suffix.size() && resource.substr(resource.size() - suffix.size()) == suffix) {
    return "resource name must not end in \":fence\": '" + std::string(resource) +
           "' names the fence counter of resource '" + std::string(resource.substr(0, resource.size() - suffix.size())) +
           "' (see docs/fencing.md)";
  }
  if (const char* bad = detail::check_ttl(o.ttl, c.options().clock_drift_factor); *bad) return bad;
  if (const char* bad = detail::check_retry(o.retry); *bad) return bad;
  if (o.extend_interval.count() < 0) return "extend_interval must not be negative";
  if (o.auto_extend && o.extend_interval.count() > 0 && o.extend_interval >= o.ttl) {
    return "extend_interval must be shorter than the ttl";
  }
  return "";
}

}  // namespace

client::client(client_options options) : client(std::move(options), nullptr) {}

client::client(client_options options, uv_loop_s* loop) {
  auto nodes = validate(options);
  core_ = std::make_shared<detail::core>(std::move(options), std::move(nodes), loop);
  core_->start();
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
    r.report = invalid(*core_, e, "");
    return r;
  };
  if (std::string bad = check_acquire(*core_, resource, options); !bad.empty()) {
    acquire_result r;
    r.report = invalid(*core_, errc::invalid_argument, bad);
    return r;
  }
  const std::uint64_t id = core_->next_id();
  auto c = core_;
  return detail::run_sync<acquire_result>(
      *core_,
      [c, id, res = std::string(resource), options](std::function<void(acquire_result)> done) mutable {
        c->acquire(id, std::move(res), std::move(options), std::move(done));
      },
      refused);
}

std::uint64_t client::acquire_async(std::string resource, acquire_options options,
                                    std::function<void(acquire_result)> done) {
  const std::uint64_t id = core_->next_id();
  auto c = core_;
  std::string bad = check_acquire(*core_, resource, options);
  bool posted = core_->post([c, id, bad, res = std::move(resource), o = std::move(options), done]() mutable {
    if (!bad.empty()) {
      acquire_result r;
      r.report = invalid(*c, errc::invalid_argument, bad);
      return done(std::move(r));
    }
    c->acquire(id, std::move(res), std::move(o), std::move(done));
  });
  if (!posted) {
    acquire_result r;
    r.report = invalid(*core_, errc::cancelled, "client shut down");
    done(std::move(r));
  }
  return id;
}

void client::cancel(std::uint64_t operation_id) {
  auto c = core_;
  c->post([c, operation_id] { c->cancel(operation_id); });
}

report client::extend(const lease& l, std::chrono::milliseconds ttl) {
  if (l.resource.empty() || l.token.empty()) return invalid(*core_, errc::invalid_argument, "resource and token are required");
  if (const char* bad = detail::check_ttl(ttl, core_->options().clock_drift_factor); *bad) {
    return invalid(*core_, errc::invalid_argument, bad);
  }
  auto c = core_;
  return detail::run_sync<report>(
      *core_, [c, l, ttl](std::function<void(report)> done) { c->extend(l, ttl, std::move(done)); },
      [this](errc e) { return invalid(*core_, e, ""); });
}

void client::extend_async(lease l, std::chrono::milliseconds ttl, std::function<void(report)> done) {
  auto c = core_;
  const char* bad = detail::check_ttl(ttl, core_->options().clock_drift_factor);
  if (l.resource.empty() || l.token.empty()) bad = "resource and token are required";
  std::string why = bad;
  if (!core_->post([c, l = std::move(l), ttl, why, done]() mutable {
        if (!why.empty()) return done(invalid(*c, errc::invalid_argument, why));
        c->extend(std::move(l), ttl, std::move(done));
      })) {
    done(invalid(*core_, errc::cancelled, "client shut down"));
  }
}

report client::release(const lease& l) {
  if (l.resource.empty() || l.token.empty()) return invalid(*core_, errc::invalid_argument, "resource and token are required");
  auto c = core_;
  return detail::run_sync<report>(
      *core_, [c, l](std::function<void(report)> done) { c->release(l, std::move(done)); },
      [this](errc e) { return invalid(*core_, e, ""); });
}

void client::release_async(lease l, std::function<void(report)> done) {
  auto c = core_;
  if (l.resource.empty() || l.token.empty()) {
    if (c->post([c, done] { done(invalid(*c, errc::invalid_argument, "resource and token are required")); })) return;
    return done(invalid(*c, errc::cancelled, "client shut down"));
  }
  if (!core_->post([c, l = std::move(l), done]() mutable { c->release(std::move(l), std::move(done)); })) {
    done(invalid(*core_, errc::cancelled, "client shut down"));
  }
}

inspect_result client::inspect(std::string_view resource) {
  auto refused = [this](errc e) {
    inspect_result r;
    r.report = invalid(*core_, e, "");
    r.nodes.resize(core_->size());
    return r;
  };
  if (resource.empty()) {
    inspect_result r;
    r.report = invalid(*core_, errc::invalid_argument, "resource name must not be empty");
    r.nodes.resize(core_->size());
    return r;
  }
  auto c = core_;
  return detail::run_sync<inspect_result>(
      *core_,
      [c, res = std::string(resource)](std::function<void(inspect_result)> done) { c->inspect(res, std::move(done)); },
      refused);
}

report client::ping() {
  auto c = core_;
  return detail::run_sync<report>(
      *core_, [c](std::function<void(report)> done) { c->ping(std::move(done)); },
      [this](errc e) { return invalid(*core_, e, ""); });
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
  return out;
}

}  // namespace redlock
