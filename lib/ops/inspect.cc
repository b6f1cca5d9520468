// Reading: client::inspect (who holds a resource, per node and by quorum, with
// each node's eviction policy) and client::ping (is a quorum reachable). Lifecycle:
//   inspect -> a round that waits for every node -> inspect_listener::decided:
//   tokens, PTTLs, warnings, the quorum holder -> done;  ping -> a round of PING
//   -> ping_listener::decided -> done.
#include <utility>

#include "engine/core.h"
#include "ops/async_op.h"
#include "ops/round.h"
#include "ops/support.h"
#include "protocol/info.h"
#include "protocol/reply.h"

namespace redlock::detail {

using clock_tp = std::chrono::steady_clock::time_point;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

// client::inspect's round (it waits for every node) reports here, once: the
// tokens, the PTTLs, each node's eviction policy and warning, the quorum holder.
class inspect_listener final : public round_listener, public async_op<inspect_listener, inspect_result> {
 public:
  inspect_listener(core& c, clock_tp start, std::function<void(inspect_result)> done)
      : async_op(std::move(done)), c_(c), start_(start) {}

  void decided(round& rd) override {
    inspect_result res;
    res.report = round_report(c_, rd, {}, start_, c_.now(), 1);
    const std::size_t q = quorum_of(rd.votes.size());
    std::size_t answered = 0;
    res.nodes.resize(rd.votes.size());
    for (std::size_t i = 0; i < rd.votes.size(); ++i) {
      if (rd.votes[i].status != node_status::ok) continue;
      ++answered;
      res.nodes[i].token = rd.values[i];
      res.nodes[i].pttl = milliseconds(rd.pttls[i]);
    }
    // What each connection's handshake read, answered or not.
    for (std::size_t i = 0; i < res.nodes.size(); ++i) {
      const endpoint& conn = c_.node(i);
      res.nodes[i].maxmemory_policy = conn.maxmemory_policy();
      if (eviction_risk_of(conn.maxmemory_policy()) != eviction_risk::none) {
        warning w;
        w.code = warning_code::eviction_policy;
        w.node = conn.name();
        w.message = eviction_warning_text(conn.name(), conn.maxmemory_policy(), conn.maxmemory());
        res.nodes[i].warnings.push_back(std::move(w));
      }
    }
    if (answered < q) {
      res.report.error = failure_reason(refusal::not_owner, rd.votes);
    }
    for (std::size_t i = 0; i < res.nodes.size() && !res.holder; ++i) {
      if (!res.nodes[i].token) continue;
      std::size_t same = 0;
      for (const auto& v : res.nodes) same += v.token == res.nodes[i].token ? 1 : 0;
      if (same >= q) res.holder = res.nodes[i].token;
    }
    finish(std::move(res));
  }

 private:
  core& c_;
  clock_tp start_;
};

// client::ping's round of PING (it waits for every node) reports here, once.
class ping_listener final : public round_listener, public async_op<ping_listener, report> {
 public:
  ping_listener(core& c, clock_tp start, std::function<void(report)> done)
      : async_op(std::move(done)), c_(c), start_(start) {}

  void decided(round& rd) override {
    std::error_code ec;
    if (rd.outcome != verdict::quorum) ec = failure_reason(refusal::not_owner, rd.votes);
    finish(round_report(c_, rd, ec, start_, c_.now(), 1));
  }

 private:
  core& c_;
  clock_tp start_;
};

}  // namespace

void core::inspect(std::string resource, std::function<void(inspect_result)> done) {
  if (observing_) done = observe_op(operation_kind::inspect, resource, false, std::move(done));
  if (closing_) {
    inspect_result res;
    res.report = empty_report(*this, make_error_code(errc::cancelled), "client shut down");
    res.nodes.resize(size());
    return done(std::move(res));
  }
  const clock_tp start = now();
  auto r = std::make_shared<round>(*this, script_id::inspect, true);
  r->listen(std::make_shared<inspect_listener>(*this, start, std::move(done)));
  command cmd;
  cmd.script = script_id::inspect;
  cmd.key = key_for(resource);
  r->send(cmd);
}

void core::ping(std::function<void(report)> done) {
  if (closing_) return done(empty_report(*this, make_error_code(errc::cancelled), "client shut down"));
  const clock_tp start = now();
  auto r = std::make_shared<round>(*this, script_id::ping, true);
  r->listen(std::make_shared<ping_listener>(*this, start, std::move(done)));
  command cmd;
  cmd.script = script_id::ping;
  r->send(cmd);
}

}  // namespace redlock::detail
