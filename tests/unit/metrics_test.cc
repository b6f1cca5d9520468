// redlock::metrics fed with synthesized events (no client, no emitter), every
// render() checked by a strict text-format parser (prom_text.h), and that parser
// checked against the format documentation's own example.
#include "redlock/metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "prom_text.h"
#include "redlock/client.h"
#include "redlock/error.h"

namespace {

using namespace std::chrono_literals;
using prom_text::labels;
using redlock::errc;
using redlock::node_status;
using redlock::operation_kind;

const redlock::event_time t0 = redlock::event_time{} + 1h;

// The example block of "Text format details", quoted from the Prometheus
// documentation, https://prometheus.io/docs/instrumenting/exposition_formats/
// (source: github.com/prometheus/docs, content/docs/instrumenting/exposition_formats.md).
const char* const kDocExample = R"(# HELP http_requests_total The total number of HTTP requests.
# TYPE http_requests_total counter
http_requests_total{method="post",code="200"} 1027 1395066363000
http_requests_total{method="post",code="400"}    3 1395066363000

# Escaping in label values:
msdos_file_access_time_seconds{path="C:\\DIR\\FILE.TXT",error="Cannot find file:\n\"FILE.TXT\""} 1.458255915e9

# Minimalistic line:
metric_without_timestamp_and_labels 12.47

# A weird metric from before the epoch:
something_weird{problem="division by zero"} +Inf -3982045

# A histogram, which has a pretty complex representation in the text format:
# HELP http_request_duration_seconds A histogram of the request duration.
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{le="0.05"} 24054
http_request_duration_seconds_bucket{le="0.1"} 33444
http_request_duration_seconds_bucket{le="0.2"} 100392
http_request_duration_seconds_bucket{le="0.5"} 129389
http_request_duration_seconds_bucket{le="1"} 133988
http_request_duration_seconds_bucket{le="+Inf"} 144320
http_request_duration_seconds_sum 53423
http_request_duration_seconds_count 144320

# Finally a summary, which has a complex representation, too:
# HELP telemetry_requests_metrics_latency_microseconds A summary of the response latency.
# TYPE telemetry_requests_metrics_latency_microseconds summary
telemetry_requests_metrics_latency_microseconds{quantile="0.01"} 3102
telemetry_requests_metrics_latency_microseconds{quantile="0.05"} 3272
telemetry_requests_metrics_latency_microseconds{quantile="0.5"} 4773
telemetry_requests_metrics_latency_microseconds{quantile="0.9"} 9001
telemetry_requests_metrics_latency_microseconds{quantile="0.99"} 76656
telemetry_requests_metrics_latency_microseconds_sum 1.7560473e+07
telemetry_requests_metrics_latency_microseconds_count 2693
)";

std::string replace(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// --- the parser against the documentation ---

TEST(prom_text_parser, accepts_the_documentation_example_and_reads_it_right) {
  auto e = prom_text::parse(kDocExample);
  ASSERT_TRUE(e) << e.error;
  ASSERT_EQ(e.families.size(), 6u);
  const auto* requests = e.find("http_requests_total");
  ASSERT_NE(requests, nullptr);
  EXPECT_EQ(requests->type, "counter");
  EXPECT_EQ(requests->help, "The total number of HTTP requests.");
  ASSERT_EQ(requests->samples.size(), 2u);
  EXPECT_EQ(requests->samples[1].value, 3);  // several blanks before the value
  EXPECT_EQ(requests->samples[1].timestamp, 1395066363000);
  EXPECT_EQ(e.value("http_requests_total", {{"method", "post"}, {"code", "200"}}), 1027);

  const auto* msdos = e.find("msdos_file_access_time_seconds");
  ASSERT_NE(msdos, nullptr);
  EXPECT_EQ(msdos->type, "untyped");
  ASSERT_EQ(msdos->samples.size(), 1u);
  EXPECT_EQ(msdos->samples[0].label.at("path"), "C:\\DIR\\FILE.TXT");
  EXPECT_EQ(msdos->samples[0].label.at("error"), "Cannot find file:\n\"FILE.TXT\"");
  EXPECT_EQ(msdos->samples[0].value, 1.458255915e9);

  EXPECT_EQ(e.value("metric_without_timestamp_and_labels"), 12.47);
  const auto* weird = e.find("something_weird");
  ASSERT_NE(weird, nullptr);
  EXPECT_TRUE(std::isinf(weird->samples[0].value) && weird->samples[0].value > 0);
  EXPECT_EQ(weird->samples[0].timestamp, -3982045);

  const auto* hist = e.find("http_request_duration_seconds");
  ASSERT_NE(hist, nullptr);
  EXPECT_EQ(hist->type, "histogram");
  EXPECT_EQ(hist->samples.size(), 8u);
  EXPECT_EQ(e.value("http_request_duration_seconds_bucket", {{"le", "+Inf"}}), 144320);
  EXPECT_EQ(e.value("http_request_duration_seconds_sum"), 53423);

  const auto* summary = e.find("telemetry_requests_metrics_latency_microseconds");
  ASSERT_NE(summary, nullptr);
  EXPECT_EQ(summary->type, "summary");
  EXPECT_EQ(summary->samples.size(), 7u);
  EXPECT_EQ(e.value("telemetry_requests_metrics_latency_microseconds_sum"), 1.7560473e+07);
}

TEST(prom_text_parser, accepts_what_the_rules_allow) {
  // A trailing comma in the label set, blanks around tokens, NaN and -Inf,
  // comments anywhere, HELP with escapes, TYPE before HELP.
  const char* text =
      "  # just a comment\n"
      "# TYPE a gauge\n"
      "# HELP a first\\nsecond \\\\ back\n"
      "a{x=\"1\",} NaN\n"
      "a { y = \"2\" , z=\"3\" } -Inf 12\n"
      "\t\n"
      "b 0\n";
  auto e = prom_text::parse(text);
  ASSERT_TRUE(e) << e.error;
  EXPECT_EQ(e.find("a")->help, "first\nsecond \\ back");
  EXPECT_TRUE(std::isnan(*e.value("a", {{"x", "1"}})));
  EXPECT_EQ(e.value("a", {{"y", "2"}, {"z", "3"}}), -INFINITY);
  EXPECT_TRUE(prom_text::parse(""));
}

TEST(prom_text_parser, rejects_each_violation_of_the_rules) {
  const std::string doc = kDocExample;
  struct bad {
    const char* what;
    std::string text;
  };
  const std::vector<bad> cases = {
      {"no final line feed", doc.substr(0, doc.size() - 1)},
      {"second TYPE", replace(doc, "# TYPE http_requests_total counter\n",
                              "# TYPE http_requests_total counter\n# TYPE http_requests_total counter\n")},
      {"second HELP", replace(doc, "# TYPE http_requests_total counter\n",
                              "# TYPE http_requests_total counter\n# HELP http_requests_total again\n")},
      {"TYPE after samples", doc + "# TYPE metric_without_timestamp_and_labels gauge\n"},
      {"unknown type", replace(doc, "http_requests_total counter", "http_requests_total countr")},
      {"TYPE with three tokens",
       replace(doc, "http_requests_total counter", "http_requests_total counter x")},
      {"group interrupted", doc + "http_requests_total{method=\"get\",code=\"200\"} 1\n"},
      {"duplicate series", replace(doc, "code=\"400\"", "code=\"200\"")},
      {"bad metric name", replace(doc, "metric_without_timestamp_and_labels", "0metric")},
      {"bad label name", replace(doc, "problem=", "pro-blem=")},
      {"label twice", replace(doc, "{problem=\"division by zero\"}", "{p=\"1\",p=\"2\"}")},
      {"unescaped quote", replace(doc, "division by zero", "division \"by zero")},
      {"unknown escape", replace(doc, "division by zero", "division \\t zero")},
      {"unterminated value", replace(doc, "\"division by zero\"}", "\"division by zero}")},
      {"bad value", replace(doc, "12.47", "12,47")},
      {"missing value",
       replace(doc, "metric_without_timestamp_and_labels 12.47", "metric_without_timestamp_and_labels")},
      {"bad timestamp", replace(doc, "-3982045", "-3982045.5")},
      {"trailing token", replace(doc, "12.47", "12.47 1 2")},
      {"buckets not cumulative", replace(doc, "{le=\"0.2\"} 100392", "{le=\"0.2\"} 100")},
      {"le not sorted", replace(doc, "{le=\"0.2\"}", "{le=\"0.01\"}")},
      {"no +Inf bucket", replace(doc, "http_request_duration_seconds_bucket{le=\"+Inf\"} 144320\n", "")},
      {"+Inf differs from _count", replace(doc, "http_request_duration_seconds_count 144320",
                                           "http_request_duration_seconds_count 144321")},
      {"bucket without le", replace(doc, "{le=\"0.05\"}", "{lx=\"0.05\"}")},
      {"no _count", replace(doc, "http_request_duration_seconds_count 144320\n", "")},
      {"quantiles unsorted", replace(doc, "{quantile=\"0.5\"}", "{quantile=\"0.02\"}")},
      {"bad HELP escape", replace(doc, "The total number", "The \\total number")},
  };
  for (const bad& c : cases) EXPECT_FALSE(prom_text::parse(c.text)) << c.what;
}

// --- events ---

redlock::report make_report(std::error_code ec, std::chrono::microseconds elapsed,
                            std::vector<redlock::node_result> nodes = {}) {
  redlock::report r;
  r.error = ec;
  r.elapsed = elapsed;
  r.attempts = 1;
  r.nodes = std::move(nodes);
  return r;
}

redlock::node_result node(std::string uri, node_status s, std::chrono::microseconds latency) {
  redlock::node_result n;
  n.node = std::move(uri);
  n.status = s;
  n.latency = latency;
  return n;
}

void finish(redlock::metrics& m, operation_kind kind, const redlock::report& r, bool background = false) {
  redlock::operation_finished e;
  e.at = t0;
  e.kind = kind;
  e.resource = "res";
  e.background = background;
  e.report = &r;
  m.on_operation_finished(e);
}

void acquire(redlock::metrics& m, std::error_code ec, std::chrono::microseconds elapsed) {
  finish(m, operation_kind::acquire, make_report(ec, elapsed));
}

redlock::lock_event lock_ev(std::chrono::microseconds held_for) {
  redlock::lock_event e;
  e.at = t0;
  e.resource = "res";
  e.held_for = held_for;
  return e;
}

redlock::node_event node_ev(std::size_t index, std::string uri, node_status s = node_status::ok) {
  redlock::node_event e;
  e.at = t0;
  e.index = index;
  e.node = std::move(uri);
  e.status = s;
  return e;
}

prom_text::exposition parsed(const redlock::metrics& m) {
  std::string text = m.render();
  auto e = prom_text::parse(text);
  EXPECT_TRUE(e) << e.error << "\n" << text;
  return e;
}

// The cumulative count of a histogram's bucket.
double bucket(const prom_text::exposition& e, const std::string& name, labels l, const std::string& le) {
  l["le"] = le;
  auto v = e.value(name + "_bucket", l);
  EXPECT_TRUE(v.has_value()) << name << " le=" << le;
  return v.value_or(-1);
}

const std::vector<std::string> kFamilies = {"redlock_acquire_duration_seconds",
                                            "redlock_wait_duration_seconds",
                                            "redlock_hold_duration_seconds",
                                            "redlock_operations_total",
                                            "redlock_locks_held",
                                            "redlock_locks_lost_total",
                                            "redlock_node_up",
                                            "redlock_node_rtt_seconds",
                                            "redlock_node_quarantined",
                                            "redlock_reconnects_total"};

TEST(metrics, a_fresh_object_renders_every_family_with_help_and_type_and_zero_series) {
  redlock::metrics m;
  auto e = parsed(m);
  ASSERT_EQ(e.families.size(), kFamilies.size());
  for (std::size_t i = 0; i < kFamilies.size(); ++i) {
    EXPECT_EQ(e.families[i].name, kFamilies[i]);
    EXPECT_TRUE(e.families[i].typed);
    EXPECT_TRUE(e.families[i].help.has_value());
  }
  EXPECT_EQ(e.find("redlock_acquire_duration_seconds")->type, "histogram");
  EXPECT_EQ(e.find("redlock_operations_total")->type, "counter");
  EXPECT_EQ(e.find("redlock_locks_held")->type, "gauge");
  EXPECT_EQ(e.find("redlock_node_up")->type, "gauge");
  // Not to be mistaken for redlock monitor's probe (redlock_monitor_node_up): its HELP says so.
  EXPECT_EQ(e.find("redlock_node_up")->help.value_or("").rfind("Client connection state: ", 0), 0u);
  EXPECT_NE(e.find("redlock_node_up")->help.value_or("").find("redlock_monitor_node_up"), std::string::npos);
  EXPECT_EQ(e.find("redlock_reconnects_total")->type, "counter");
  EXPECT_EQ(e.value("redlock_acquire_duration_seconds_count", {{"outcome", "ok"}}), 0);
  EXPECT_EQ(e.value("redlock_wait_duration_seconds_count"), 0);
  EXPECT_EQ(e.value("redlock_operations_total", {{"op", "release"}, {"outcome", "ok"}}), 0);
  EXPECT_EQ(e.value("redlock_locks_held"), 0);
  EXPECT_EQ(e.value("redlock_locks_lost_total", {{"reason", "lock_lost"}}), 0);
  EXPECT_EQ(e.value("redlock_locks_lost_total", {{"reason", "extension_limit"}}), 0);
  EXPECT_EQ(e.value("redlock_locks_lost_total", {{"reason", "cancelled"}}), 0);
  EXPECT_TRUE(e.find("redlock_node_up")->samples.empty());
  // Outcomes never seen have no series.
  EXPECT_FALSE(e.value("redlock_acquire_duration_seconds_count", {{"outcome", "contended"}}));
  // The default buckets: 50 us .. 10 s, 17 bounds and +Inf.
  EXPECT_EQ(e.all("redlock_wait_duration_seconds_bucket").size(), 18u);
  EXPECT_EQ(bucket(e, "redlock_wait_duration_seconds", {}, "5e-05"), 0);
  EXPECT_EQ(bucket(e, "redlock_wait_duration_seconds", {}, "10"), 0);
  // Bounds are spelled as the Go client spells them (strconv 'g', shortest).
  std::string les;
  for (const auto* s : e.all("redlock_wait_duration_seconds_bucket")) les += s->label.at("le") + " ";
  EXPECT_EQ(les,
            "5e-05 0.0001 0.00025 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 +Inf ");
}

TEST(metrics, sums_are_rendered_exactly_in_go_float_notation) {
  redlock::metrics_options o;
  o.buckets = {1e-7, 123456.5, 1e6};
  redlock::metrics m(o);
  acquire(m, {}, 1234567891us);
  std::string text = m.render();
  EXPECT_NE(text.find("redlock_wait_duration_seconds_bucket{le=\"1e-07\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("redlock_wait_duration_seconds_bucket{le=\"123456.5\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("redlock_wait_duration_seconds_bucket{le=\"1e+06\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("redlock_wait_duration_seconds_sum 1234.567891\n"), std::string::npos);
}

TEST(metrics, acquire_durations_fall_in_the_right_buckets_by_outcome) {
  redlock::metrics m;
  acquire(m, {}, 30us);    // le=5e-05
  acquire(m, {}, 1000us);  // exactly a bound: le=0.001 ("less than or equal")
  acquire(m, {}, 1001us);  // le=0.0025
  acquire(m, {}, 3s);      // le=5
  acquire(m, {}, 20s);     // +Inf only
  acquire(m, errc::contended, 250ms);
  acquire(m, errc::unavailable, 60ms);
  acquire(m, errc::unavailable, 70ms);
  auto e = parsed(m);
  const std::string h = "redlock_acquire_duration_seconds";
  const labels ok = {{"outcome", "ok"}};
  EXPECT_EQ(bucket(e, h, ok, "5e-05"), 1);
  EXPECT_EQ(bucket(e, h, ok, "0.0005"), 1);
  EXPECT_EQ(bucket(e, h, ok, "0.001"), 2);
  EXPECT_EQ(bucket(e, h, ok, "0.0025"), 3);
  EXPECT_EQ(bucket(e, h, ok, "2.5"), 3);
  EXPECT_EQ(bucket(e, h, ok, "5"), 4);
  EXPECT_EQ(bucket(e, h, ok, "10"), 4);
  EXPECT_EQ(bucket(e, h, ok, "+Inf"), 5);
  EXPECT_EQ(e.value(h + "_count", ok), 5);
  EXPECT_DOUBLE_EQ(*e.value(h + "_sum", ok), 0.00003 + 0.001 + 0.001001 + 3 + 20);
  EXPECT_EQ(bucket(e, h, {{"outcome", "contended"}}, "0.1"), 0);
  EXPECT_EQ(bucket(e, h, {{"outcome", "contended"}}, "0.25"), 1);
  EXPECT_EQ(bucket(e, h, {{"outcome", "unavailable"}}, "0.05"), 0);
  EXPECT_EQ(bucket(e, h, {{"outcome", "unavailable"}}, "0.1"), 2);
  EXPECT_DOUBLE_EQ(*e.value(h + "_sum", {{"outcome", "unavailable"}}), 0.13);
  // The wait histogram has the successful acquires only.
  EXPECT_EQ(e.value("redlock_wait_duration_seconds_count"), 5);
  EXPECT_EQ(bucket(e, "redlock_wait_duration_seconds", {}, "0.001"), 2);
  EXPECT_EQ(e.value("redlock_operations_total", {{"op", "acquire"}, {"outcome", "ok"}}), 5);
  EXPECT_EQ(e.value("redlock_operations_total", {{"op", "acquire"}, {"outcome", "unavailable"}}), 2);
}

TEST(metrics, operations_are_counted_by_op_and_outcome_background_ones_included) {
  redlock::metrics m;
  finish(m, operation_kind::extend, make_report({}, 1ms), true);
  finish(m, operation_kind::extend, make_report({}, 1ms));
  finish(m, operation_kind::extend, make_report(errc::lock_lost, 1ms), true);
  finish(m, operation_kind::release, make_report(errc::not_owner, 1ms));
  finish(m, operation_kind::inspect, make_report({}, 1ms));
  finish(m, operation_kind::acquire, make_report(std::make_error_code(std::errc::io_error), 1ms));
  redlock::operation_finished no_report;
  no_report.kind = operation_kind::release;
  m.on_operation_finished(no_report);  // no report: nothing to count
  auto e = parsed(m);
  const std::string c = "redlock_operations_total";
  EXPECT_EQ(e.value(c, {{"op", "extend"}, {"outcome", "ok"}}), 2);
  EXPECT_EQ(e.value(c, {{"op", "extend"}, {"outcome", "lock_lost"}}), 1);
  EXPECT_EQ(e.value(c, {{"op", "release"}, {"outcome", "ok"}}), 0);
  EXPECT_EQ(e.value(c, {{"op", "release"}, {"outcome", "not_owner"}}), 1);
  EXPECT_EQ(e.value(c, {{"op", "inspect"}, {"outcome", "ok"}}), 1);
  EXPECT_EQ(e.value(c, {{"op", "acquire"}, {"outcome", "other"}}), 1);
  EXPECT_EQ(e.all(c).size(), 4u + 3u);
  // Extends and releases are not acquires: no acquire or wait histogram sample.
  EXPECT_EQ(e.value("redlock_wait_duration_seconds_count"), 0);
  EXPECT_EQ(e.value("redlock_acquire_duration_seconds_count", {{"outcome", "other"}}), 1);
}

TEST(metrics, locks_held_counts_acquired_minus_released_minus_lost_and_hold_times_are_observed) {
  redlock::metrics m;
  for (int i = 0; i < 4; ++i) m.on_lock_acquired(lock_ev(0us));
  m.on_lock_extended(lock_ev(10ms));
  m.on_lock_released(lock_ev(400ms));
  redlock::lock_lost_event lost;
  lost.at = t0;
  lost.resource = "res";
  lost.held_for = 30s;
  lost.reason = errc::lock_lost;
  m.on_lock_lost(lost);
  lost.reason = errc::extension_limit;
  lost.held_for = 2s;
  m.on_lock_lost(lost);
  auto e = parsed(m);
  EXPECT_EQ(e.value("redlock_locks_held"), 1);
  EXPECT_EQ(e.value("redlock_locks_lost_total", {{"reason", "lock_lost"}}), 1);
  EXPECT_EQ(e.value("redlock_locks_lost_total", {{"reason", "extension_limit"}}), 1);
  EXPECT_EQ(e.value("redlock_locks_lost_total", {{"reason", "cancelled"}}), 0);
  const std::string h = "redlock_hold_duration_seconds";
  EXPECT_EQ(e.value(h + "_count"), 3);
  EXPECT_EQ(bucket(e, h, {}, "0.25"), 0);
  EXPECT_EQ(bucket(e, h, {}, "0.5"), 1);
  EXPECT_EQ(bucket(e, h, {}, "2.5"), 2);
  EXPECT_EQ(bucket(e, h, {}, "10"), 2);
  EXPECT_EQ(bucket(e, h, {}, "+Inf"), 3);
  EXPECT_DOUBLE_EQ(*e.value(h + "_sum"), 32.4);

  // More releases than acquires (one object shared by clients that started
  // before it): the gauge goes negative rather than lie.
  m.on_lock_released(lock_ev(1ms));
  m.on_lock_released(lock_ev(1ms));
  EXPECT_EQ(parsed(m).value("redlock_locks_held"), -1);
}

// The release of a bare lease (client::release(lease): of_handle false) was never
// counted in, so it is not counted out: the gauge does not go below the handles.
TEST(metrics, the_release_of_a_bare_lease_leaves_the_held_gauge_alone) {
  redlock::metrics m;
  m.on_lock_acquired(lock_ev(0us));
  redlock::lock_event bare = lock_ev(5ms);
  bare.of_handle = false;
  m.on_lock_released(bare);
  auto e = parsed(m);
  EXPECT_EQ(e.value("redlock_locks_held"), 1);
  EXPECT_EQ(e.value("redlock_hold_duration_seconds_count"), 1);  // still a hold observed
  m.on_lock_released(lock_ev(5ms));
  EXPECT_EQ(parsed(m).value("redlock_locks_held"), 0);
}

TEST(metrics, node_series_follow_up_down_quarantine_reconnect_and_reply_latency) {
  redlock::metrics m;
  const std::string a = "redis://10.0.0.1:6379", b = "rediss://user:***@10.0.0.2:6380/2";
  m.on_node_up(node_ev(0, a));
  m.on_node_up(node_ev(1, b));
  m.on_node_down(node_ev(1, b, node_status::timeout));
  redlock::reconnect_scheduled rc;
  rc.at = t0;
  rc.index = 1;
  rc.node = b;
  m.on_reconnect_scheduled(rc);
  m.on_reconnect_scheduled(rc);
  redlock::node_quarantine_event q;
  q.at = t0;
  q.index = 0;
  q.node = a;
  q.reason = redlock::quarantine_reason::restart;
  m.on_node_quarantined(q);
  q.reason = redlock::quarantine_reason::clock_jump;
  m.on_node_quarantined(q);
  m.on_node_cleared(q);
  // Latencies come from finished operations' reports; 0 = no reply, not counted.
  finish(m, operation_kind::acquire,
         make_report({}, 2ms, {node(a, node_status::ok, 180us), node(b, node_status::timeout, 0us)}));
  finish(m, operation_kind::release,
         make_report({}, 2ms, {node(a, node_status::ok, 90us), node(b, node_status::ok, 3ms)}));
  auto e = parsed(m);
  EXPECT_EQ(e.value("redlock_node_up", {{"node", a}}), 1);
  EXPECT_EQ(e.value("redlock_node_up", {{"node", b}}), 0);
  EXPECT_EQ(e.value("redlock_reconnects_total", {{"node", a}}), 0);
  EXPECT_EQ(e.value("redlock_reconnects_total", {{"node", b}}), 2);
  EXPECT_EQ(e.value("redlock_node_quarantined", {{"node", a}, {"reason", "restart"}}), 1);
  EXPECT_EQ(e.value("redlock_node_quarantined", {{"node", a}, {"reason", "clock_jump"}}), 0);
  EXPECT_EQ(e.value("redlock_node_quarantined", {{"node", a}, {"reason", "first_sight"}}), 0);
  EXPECT_EQ(e.value("redlock_node_quarantined", {{"node", b}, {"reason", "restart"}}), 0);
  const std::string h = "redlock_node_rtt_seconds";
  EXPECT_EQ(e.value(h + "_count", {{"node", a}}), 2);
  EXPECT_EQ(bucket(e, h, {{"node", a}}, "0.0001"), 1);
  EXPECT_EQ(bucket(e, h, {{"node", a}}, "0.00025"), 2);
  EXPECT_EQ(e.value(h + "_count", {{"node", b}}), 1);
  EXPECT_EQ(bucket(e, h, {{"node", b}}, "0.0025"), 0);
  EXPECT_EQ(bucket(e, h, {{"node", b}}, "0.005"), 1);
  EXPECT_DOUBLE_EQ(*e.value(h + "_sum", {{"node", a}}), 0.00027);
  // Nodes in the order first seen.
  auto ups = e.all("redlock_node_up");
  ASSERT_EQ(ups.size(), 2u);
  EXPECT_EQ(ups[0]->label.at("node"), a);
}

TEST(metrics, node_labels_are_escaped_and_nodes_are_keyed_by_uri_not_index) {
  redlock::metrics m;
  const std::string odd = "unix:///tmp/a \"b\"\\c\nd.sock";
  m.on_node_up(node_ev(0, odd));
  // Another client's node 0 is another node; a node at an index other than
  // its first one is still the same node.
  m.on_node_down(node_ev(0, "redis://other:1"));
  m.on_node_down(node_ev(5, odd));
  auto text = m.render();
  EXPECT_NE(text.find("node=\"unix:///tmp/a \\\"b\\\"\\\\c\\nd.sock\""), std::string::npos) << text;
  auto e = parsed(m);
  EXPECT_EQ(e.value("redlock_node_up", {{"node", odd}}), 0);
  EXPECT_EQ(e.value("redlock_node_up", {{"node", "redis://other:1"}}), 0);
  EXPECT_EQ(e.all("redlock_node_up").size(), 2u);
}

TEST(metrics, custom_buckets_are_used_and_bad_ones_refused) {
  redlock::metrics_options o;
  o.buckets = {0.001, 0.5};
  redlock::metrics m(o);
  acquire(m, {}, 200ms);
  auto e = parsed(m);
  EXPECT_EQ(e.all("redlock_wait_duration_seconds_bucket").size(), 3u);
  EXPECT_EQ(bucket(e, "redlock_wait_duration_seconds", {}, "0.001"), 0);
  EXPECT_EQ(bucket(e, "redlock_wait_duration_seconds", {}, "0.5"), 1);
  for (std::vector<double> bad :
       std::vector<std::vector<double>>{{0.1, 0.1}, {0.2, 0.1}, {0, 1}, {-1}, {1, INFINITY}, {NAN}}) {
    redlock::metrics_options b;
    b.buckets = bad;
    EXPECT_THROW(redlock::metrics{b}, redlock::config_error);
  }
  EXPECT_EQ(redlock::metrics::default_buckets().size(), 17u);
}

TEST(metrics, render_from_another_thread_while_events_arrive_is_consistent) {
  auto m = std::make_shared<redlock::metrics>();
  constexpr int kEvents = 4000;
  std::atomic<bool> done{false};
  std::atomic<int> renders{0};
  std::string failure;
  std::thread reader([&] {
    double last_ok = 0;
    // Bounded: stops when the writer is done (after one render at least), or after
    // 100000 renders.
    for (int i = 0; i < 100000 && (i == 0 || !done.load()); ++i) {
      auto e = prom_text::parse(m->render());
      renders.fetch_add(1);
      if (!e) {
        failure = e.error;
        return;
      }
      double ok = e.value("redlock_operations_total", {{"op", "acquire"}, {"outcome", "ok"}}).value_or(-1);
      double held = e.value("redlock_locks_held").value_or(-1);
      if (ok < last_ok || held < 0 || held > 1) {
        failure = "counter went back or gauge out of range";
        return;
      }
      last_ok = ok;
    }
  });
  const std::string uri = "redis://127.0.0.1:7000";
  // The events start once the reader is rendering (bounded wait: 10 s), so the two
  // really overlap even where the writer alone would finish first.
  for (int spins = 0; spins < 100000 && renders.load() == 0; ++spins) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (int i = 0; i < kEvents; ++i) {
    finish(*m, operation_kind::acquire,
           make_report({}, std::chrono::microseconds(i), {node(uri, node_status::ok, 50us)}));
    m->on_lock_acquired(lock_ev(0us));
    m->on_lock_released(lock_ev(std::chrono::microseconds(i)));
    if (i % 100 == 0) m->on_node_up(node_ev(0, uri));
  }
  done = true;
  reader.join();
  EXPECT_EQ(failure, "");
  EXPECT_GT(renders.load(), 0);
  auto e = parsed(*m);
  EXPECT_EQ(e.value("redlock_operations_total", {{"op", "acquire"}, {"outcome", "ok"}}), kEvents);
  EXPECT_EQ(e.value("redlock_node_rtt_seconds_count", {{"node", uri}}), kEvents);
  EXPECT_EQ(e.value("redlock_hold_duration_seconds_count"), kEvents);
  EXPECT_EQ(e.value("redlock_locks_held"), 0);
}

}  // namespace
