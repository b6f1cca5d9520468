// client::probe (ops/probe.h): PING and three INFO sections to every node, as one
// plain fan-out (ops/fan_out.h). Lifecycle: probe -> start (four requests per
// node) -> answer (per reply) -> result (the guards' state, warnings, counts) ->
// done, once.
#include "ops/probe.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/core.h"
#include "node/endpoint.h"
#include "ops/fan_out.h"
#include "protocol/info.h"
#include "pure/decision.h"

namespace redlock::detail {
namespace {

using std::chrono::steady_clock;

enum probe_tag : std::uint32_t { tag_ping, tag_server, tag_persistence, tag_memory, tag_count };

std::shared_ptr<const wire> plain(std::initializer_list<std::string_view> argv) {
  std::string out;
  append_resp(out, argv);
  return std::make_shared<const wire>(wire::plain_tag{}, std::move(out));
}

// The probe's four requests to every node (the plain fan-out), in tag order.
class probe_op final : public fan_out<probe_result> {
 public:
  probe_op(core& c, std::function<void(probe_result)> done) : fan_out(c, std::move(done)) {
    result_.nodes.resize(c.size());
    for (std::size_t i = 0; i < c.size(); ++i) result_.nodes[i].node = c.node(i).name();
  }

  void start() {
    static const auto ping = plain({"PING"});
    static const auto server = plain({"INFO", "server"});
    static const auto persistence = plain({"INFO", "persistence"});
    static const auto memory = plain({"INFO", "memory"});
    static_assert(tag_count == 4, "one request per tag, in tag order");
    fan_out::start({ping, server, persistence, memory});
  }

 private:
  void answer(std::size_t node, std::uint32_t tag, const reply_event& ev) override {
    node_health& h = result_.nodes[node];
    const bool replied = ev.status == node_status::pending && ev.reply != nullptr;
    if (tag == tag_ping) {
      if (!replied) {
        h.status = ev.status;
        h.detail = std::string(ev.detail);
      } else if (ev.reply->type == REDIS_REPLY_ERROR) {
        const std::string_view text(ev.reply->str, ev.reply->len);
        const bool auth = text.rfind("NOAUTH", 0) == 0 || text.rfind("WRONGPASS", 0) == 0;
        h.status = auth ? node_status::auth_error : node_status::server_error;
        h.detail = std::string(text);
      } else {
        h.status = node_status::ok;
        h.rtt = ev.latency;
      }
    } else if (replied && ev.reply->type == REDIS_REPLY_STRING) {
      apply_info(std::string_view(ev.reply->str, ev.reply->len), h);
    }
  }

  // Every node answered every request: the guards' state, the policies' warnings,
  // the counts.
  probe_result result() override {
    const auto now = core_.now();
    const auto quarantine = core_.quarantine_for(core_.options().max_ttl);
    for (std::size_t i = 0; i < result_.nodes.size(); ++i) {
      node_health& h = result_.nodes[i];
      const endpoint& conn = core_.node(i);
      if (h.status == node_status::pending) h.status = node_status::protocol_error;
      h.quarantine_detail = conn.acquire_exclusion(now, quarantine);
      h.quarantined = !h.quarantine_detail.empty();
      if (h.quarantined) {
        std::optional<steady_clock::time_point> until;
        if (conn.restarted_at() && quarantine.count() > 0 && now - *conn.restarted_at() < quarantine) {
          until = *conn.restarted_at() + quarantine;
        }
        const auto jump_quarantine = std::max(quarantine, core_.options().max_ttl);
        if (conn.jumped_at() && now - *conn.jumped_at() < jump_quarantine) {
          const auto end = *conn.jumped_at() + jump_quarantine;
          if (!until || end > *until) until = end;
        }
        h.quarantined_until = until;
      }
      h.members = conn.members();
      h.master_changed_at = conn.master_changed_at();
      // The handshake's policy when this probe could not read one.
      if (h.maxmemory_policy.empty()) h.maxmemory_policy = conn.maxmemory_policy();
      if (eviction_risk_of(h.maxmemory_policy) != eviction_risk::none) {
        warning w;
        w.code = warning_code::eviction_policy;
        w.node = conn.name();
        w.message = eviction_warning_text(conn.name(), h.maxmemory_policy, conn.maxmemory());
        h.warnings.push_back(std::move(w));
      }
      if (h.status == node_status::ok) {
        ++result_.reachable;
        if (!h.quarantined) ++result_.voting;
      }
    }
    result_.quorum_ok = result_.voting >= quorum_of(result_.nodes.size());
    result_.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(now - started());
    return std::move(result_);
  }

  probe_result result_;
};

}  // namespace

void apply_info(std::string_view info, node_health& h) {
  if (auto v = info_field(info, "run_id"); !v.empty()) h.run_id = v;
  if (auto v = info_field(info, "redis_version"); !v.empty()) h.redis_version = v;
  if (auto v = info_field(info, "uptime_in_seconds"); !v.empty()) {
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    if (end != v.c_str() && *end == '\0' && n >= 0) h.uptime_s = n;
  }
  if (auto v = info_field(info, "aof_enabled"); v == "0" || v == "1") h.aof_enabled = v == "1";
  if (auto v = info_field(info, "maxmemory_policy"); !v.empty()) h.maxmemory_policy = v;
}

void probe(core& c, std::function<void(probe_result)> done) {
  if (c.closing()) {
    probe_result r;
    r.nodes.resize(c.size());
    for (std::size_t i = 0; i < c.size(); ++i) {
      r.nodes[i].node = c.node(i).name();
      r.nodes[i].status = node_status::cancelled;
      r.nodes[i].detail = "client shut down";
    }
    return done(std::move(r));
  }
  auto op = std::make_shared<probe_op>(c, std::move(done));
  op->start();
}

}  // namespace redlock::detail
