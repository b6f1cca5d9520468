// redlock::log_observer fed with synthesized events: the lines, their levels,
// the minimum level, quoting, and the rate limit on repeated node errors (on the
// events' timestamps).
#include "redlock/log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redlock/error.h"

namespace {

using namespace std::chrono_literals;
using redlock::errc;
using redlock::log_level;
using redlock::node_status;

const redlock::event_time t0 = redlock::event_time{} + 1h;

struct captured {
  log_level level;
  std::string line;
};

struct fixture {
  std::vector<captured> lines;
  redlock::log_observer log;

  explicit fixture(log_level min = log_level::debug, std::chrono::milliseconds interval = 10s)
      : log(
            [this](log_level l, std::string_view s) {
              lines.push_back({l, std::string(s)});
            },
            min, interval) {}
};

redlock::node_event node_ev(redlock::event_time at, std::string uri, node_status s, std::string detail = "") {
  redlock::node_event e;
  e.at = at;
  e.index = 1;
  e.node = std::move(uri);
  e.status = s;
  e.detail = std::move(detail);
  return e;
}

TEST(log_observer, lock_lifecycle_lines_at_their_levels) {
  fixture f;
  redlock::lock_event e;
  e.at = t0;
  e.resource = "orders";
  e.fence = 42;
  e.valid_until = t0 + 29990ms + 500us;
  f.log.on_lock_acquired(e);
  e.held_for = 10s;
  f.log.on_lock_extended(e);
  e.valid_until.reset();
  e.held_for = 12345678us;
  f.log.on_lock_released(e);
  redlock::lock_lost_event lost;
  lost.at = t0;
  lost.resource = "orders";
  lost.fence = 42;
  lost.held_for = 31s;
  lost.reason = errc::lock_lost;
  lost.detail = "validity ran out before a quorum extension";
  f.log.on_lock_lost(lost);
  ASSERT_EQ(f.lines.size(), 4u);
  EXPECT_EQ(f.lines[0].level, log_level::info);
  EXPECT_EQ(f.lines[0].line, "lock acquired resource=orders fence=42 validity_ms=29990.500");
  EXPECT_EQ(f.lines[1].level, log_level::debug);
  EXPECT_EQ(f.lines[1].line, "lock extended resource=orders fence=42 validity_ms=29990.500 held_ms=10000");
  EXPECT_EQ(f.lines[2].level, log_level::info);
  EXPECT_EQ(f.lines[2].line, "lock released resource=orders fence=42 held_ms=12345.678");
  EXPECT_EQ(f.lines[3].level, log_level::warning);
  EXPECT_EQ(f.lines[3].line,
            "lock lost resource=orders fence=42 reason=lock_lost held_ms=31000 "
            "detail=\"validity ran out before a quorum extension\"");
}

TEST(log_observer, operation_and_retry_lines_are_debug) {
  fixture f;
  redlock::operation_started s;
  s.at = t0;
  s.kind = redlock::operation_kind::extend;
  s.resource = "r";
  s.background = true;
  f.log.on_operation_started(s);
  redlock::report r;
  r.error = errc::contended;
  r.attempts = 3;
  r.elapsed = 1500us;
  redlock::operation_finished fin;
  fin.at = t0;
  fin.kind = redlock::operation_kind::acquire;
  fin.resource = "r";
  fin.report = &r;
  f.log.on_operation_finished(fin);
  redlock::retry_scheduled rt;
  rt.at = t0;
  rt.resource = "r";
  rt.next_attempt = 2;
  rt.delay = 80ms;
  rt.last_error = errc::unavailable;
  f.log.on_retry_scheduled(rt);
  ASSERT_EQ(f.lines.size(), 3u);
  for (const auto& l : f.lines) EXPECT_EQ(l.level, log_level::debug);
  EXPECT_EQ(f.lines[0].line, "operation started op=extend resource=r background=true");
  EXPECT_EQ(f.lines[1].line.rfind("operation finished op=acquire resource=r outcome=contended attempts=3 "
                                  "elapsed_ms=1.500 why=\"",
                                  0),
            0u)
      << f.lines[1].line;
  EXPECT_EQ(f.lines[2].line, "retry scheduled resource=r attempt=2 delay_ms=80 error=unavailable");
}

TEST(log_observer, node_guard_and_warning_lines) {
  fixture f;
  const std::string uri = "redis://:***@10.0.0.1:6379";
  f.log.on_node_up(node_ev(t0, uri, node_status::ok));
  f.log.on_node_down(node_ev(t0, uri, node_status::connection_error, "connection refused"));
  redlock::node_quarantine_event q;
  q.at = t0;
  q.index = 1;
  q.node = uri;
  q.reason = redlock::quarantine_reason::restart;
  q.until = t0 + 60s;
  q.detail = "run_id changed";
  f.log.on_node_quarantined(q);
  f.log.on_node_cleared(q);
  redlock::node_slow_event slow;
  slow.at = t0;
  slow.index = 1;
  slow.node = uri;
  slow.latency = 25300us;
  slow.kind = redlock::operation_kind::acquire;
  f.log.on_node_slow(slow);
  redlock::warning w;
  w.code = redlock::warning_code::eviction_policy;
  w.node = uri;
  w.message = "maxmemory-policy is allkeys-lru";
  f.log.on_warning(w);
  redlock::reconnect_scheduled rc;
  rc.at = t0;
  rc.index = 1;
  rc.node = uri;
  rc.backoff = 20ms;
  rc.reason = "connection refused";
  f.log.on_reconnect_scheduled(rc);
  std::vector<std::string> expected = {
      "node up node=redis://:***@10.0.0.1:6379 index=1",
      "node down node=redis://:***@10.0.0.1:6379 index=1 status=connection_error detail=\"connection "
      "refused\"",
      "node quarantined node=redis://:***@10.0.0.1:6379 index=1 reason=restart for_ms=60000 detail=\"run_id "
      "changed\"",
      "node quarantine ended node=redis://:***@10.0.0.1:6379 index=1 reason=restart",
      "slow node reply node=redis://:***@10.0.0.1:6379 index=1 op=acquire latency_ms=25.300",
      "configuration warning code=eviction_policy node=redis://:***@10.0.0.1:6379 "
      "message=\"maxmemory-policy is allkeys-lru\"",
      "reconnect scheduled node=redis://:***@10.0.0.1:6379 index=1 backoff_ms=20 reason=\"connection "
      "refused\""};
  std::vector<log_level> levels = {log_level::info, log_level::warning, log_level::warning,
                                   log_level::info, log_level::warning, log_level::warning,
                                   log_level::debug};
  ASSERT_EQ(f.lines.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(f.lines[i].line, expected[i]);
    EXPECT_EQ(f.lines[i].level, levels[i]) << expected[i];
  }
}

TEST(log_observer, lines_below_the_minimum_level_are_dropped) {
  fixture f(log_level::warning);
  redlock::lock_event e;
  e.at = t0;
  e.resource = "r";
  f.log.on_lock_acquired(e);                                             // info
  f.log.on_lock_extended(e);                                             // debug
  f.log.on_node_up(node_ev(t0, "redis://a:1", node_status::ok));         // info
  f.log.on_node_down(node_ev(t0, "redis://a:1", node_status::timeout));  // warning
  ASSERT_EQ(f.lines.size(), 1u);
  EXPECT_EQ(f.lines[0].line, "node down node=redis://a:1 index=1 status=timeout");
  // An empty sink is allowed: nothing is called.
  redlock::log_observer quiet(nullptr, log_level::debug);
  quiet.on_lock_acquired(e);
  EXPECT_STREQ(redlock::to_string(log_level::warning), "warning");
}

TEST(log_observer, values_that_could_forge_a_field_or_a_line_are_quoted_and_escaped) {
  fixture f;
  redlock::lock_event e;
  e.at = t0;
  e.resource = "a b=\"c\"\\\nfake=1\x01";
  f.log.on_lock_acquired(e);
  e.resource = "";
  f.log.on_lock_acquired(e);
  ASSERT_EQ(f.lines.size(), 2u);
  EXPECT_EQ(f.lines[0].line, "lock acquired resource=\"a b=\\\"c\\\"\\\\\\nfake=1\\x01\"");
  EXPECT_EQ(f.lines[0].line.find('\n'), std::string::npos);
  EXPECT_EQ(f.lines[1].line, "lock acquired resource=\"\"");
}

TEST(log_observer, repeated_node_errors_are_limited_per_node_and_status_on_event_time) {
  fixture f(log_level::debug, 10s);
  const std::string a = "redis://a:1", b = "redis://b:1";
  f.log.on_node_down(node_ev(t0, a, node_status::connection_error));           // emitted
  f.log.on_node_down(node_ev(t0 + 1s, a, node_status::connection_error));      // suppressed
  f.log.on_node_down(node_ev(t0 + 2s, a, node_status::connection_error));      // suppressed
  f.log.on_node_down(node_ev(t0 + 3s, a, node_status::timeout));               // other status: emitted
  f.log.on_node_down(node_ev(t0 + 4s, b, node_status::connection_error));      // other node: emitted
  f.log.on_node_down(node_ev(t0 + 9999ms, a, node_status::connection_error));  // still inside: suppressed
  f.log.on_node_down(
      node_ev(t0 + 10s, a, node_status::connection_error));  // window over: emitted, 3 held back
  f.log.on_node_down(node_ev(t0 + 11s, a, node_status::connection_error));  // suppressed (window from 10 s)
  ASSERT_EQ(f.lines.size(), 4u);
  EXPECT_EQ(f.lines[0].line, "node down node=redis://a:1 index=1 status=connection_error");
  EXPECT_EQ(f.lines[1].line, "node down node=redis://a:1 index=1 status=timeout");
  EXPECT_EQ(f.lines[2].line, "node down node=redis://b:1 index=1 status=connection_error");
  EXPECT_EQ(f.lines[3].line, "node down node=redis://a:1 index=1 status=connection_error suppressed=3");
  // The node coming back is always said, with what was held back since.
  f.log.on_node_up(node_ev(t0 + 12s, a, node_status::ok));
  ASSERT_EQ(f.lines.size(), 5u);
  EXPECT_EQ(f.lines[4].line, "node up node=redis://a:1 index=1 suppressed=1");
  f.log.on_node_up(node_ev(t0 + 13s, a, node_status::ok));
  EXPECT_EQ(f.lines.back().line, "node up node=redis://a:1 index=1");
  // The up line took the count: the next emitted down line does not repeat it.
  f.log.on_node_down(node_ev(t0 + 30s, a, node_status::connection_error));
  EXPECT_EQ(f.lines.back().line, "node down node=redis://a:1 index=1 status=connection_error");
}

TEST(log_observer, slow_replies_and_reconnects_are_limited_too_and_zero_interval_disables_the_limit) {
  fixture f(log_level::debug, 5s);
  redlock::node_slow_event slow;
  slow.at = t0;
  slow.node = "redis://a:1";
  slow.latency = 20ms;
  for (int i = 0; i < 6; ++i) {
    slow.at = t0 + std::chrono::seconds(i);
    f.log.on_node_slow(slow);  // t0 and t0+5s emitted
  }
  redlock::reconnect_scheduled rc;
  rc.node = "redis://a:1";
  rc.backoff = 1s;
  for (int i = 0; i < 3; ++i) {
    rc.at = t0 + std::chrono::seconds(i);
    f.log.on_reconnect_scheduled(rc);  // t0 only
  }
  ASSERT_EQ(f.lines.size(), 3u);
  EXPECT_EQ(f.lines[1].line,
            "slow node reply node=redis://a:1 index=0 op=acquire latency_ms=20 suppressed=4");
  EXPECT_EQ(f.lines[2].line, "reconnect scheduled node=redis://a:1 index=0 backoff_ms=1000");

  fixture unlimited(log_level::debug, 0ms);
  for (int i = 0; i < 5; ++i) unlimited.log.on_node_down(node_ev(t0, "redis://a:1", node_status::timeout));
  EXPECT_EQ(unlimited.lines.size(), 5u);
}

}  // namespace
