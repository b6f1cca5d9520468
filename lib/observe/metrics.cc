// redlock::metrics: events in, Prometheus text format 0.0.4 out.
//
// The aggregates are fixed-size arrays indexed by small enums (operation kind,
// outcome, quarantine reason) and one slot per node, allocated when the node is
// first seen. Events update them under one mutex; render() copies them under the
// mutex and formats the copy without it.
#include "redlock/metrics.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string_view>

#include "redlock/client.h"
#include "redlock/error.h"

namespace redlock {
namespace {

// Outcome labels: "ok", then one slot per redlock::errc value (1..kMaxErrc), then
// "other" for an error of another category (the library reports none).
constexpr int kMaxErrc = 31;
constexpr std::size_t kOutcomes = kMaxErrc + 2;
constexpr std::size_t kOutcomeOk = 0;
constexpr std::size_t kOutcomeOther = kMaxErrc + 1;
constexpr std::size_t kKinds = 4;    // operation_kind
constexpr std::size_t kReasons = 3;  // quarantine_reason

std::size_t outcome_index(const std::error_code& ec) noexcept {
  if (!ec) return kOutcomeOk;
  if (ec.category() == category() && ec.value() >= 1 && ec.value() <= kMaxErrc)
    return static_cast<std::size_t>(ec.value());
  return kOutcomeOther;
}

const char* outcome_label(std::size_t i) noexcept {
  if (i == kOutcomeOk) return "ok";
  if (i == kOutcomeOther) return "other";
  return to_string(static_cast<errc>(i));
}

double seconds(std::chrono::microseconds d) noexcept { return static_cast<double>(d.count()) / 1e6; }

struct histogram {
  std::vector<std::uint64_t> counts;  // per bucket, not cumulative; the last is +Inf
  double sum = 0;
  std::uint64_t count = 0;

  explicit histogram(std::size_t bounds = 0) : counts(bounds + 1, 0) {}
  void observe(double v, const std::vector<double>& bounds) noexcept {
    // le means "less than or equal": the first bound >= v.
    auto i = static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin());
    ++counts[i];
    sum += v;
    ++count;
  }
};

struct node_series {
  std::string name;  // redacted URI
  int up = -1;       // -1 = no up/down event seen yet (not rendered)
  histogram rtt;
  std::uint64_t reconnects = 0;
  std::array<int, kReasons> quarantined{};
};

struct snapshot {
  std::vector<double> bounds;
  std::vector<histogram> acquire;  // by outcome
  histogram wait;
  histogram hold;
  std::array<std::array<std::uint64_t, kOutcomes>, kKinds> operations{};
  std::int64_t held = 0;
  std::array<std::uint64_t, kOutcomes> lost{};
  std::vector<node_series> nodes;  // in the order first seen
};

// --- formatting ---

void append_double(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  // The shortest form that reads back as the same double, spelled as Go's
  // strconv.FormatFloat(v, 'g', -1, 64) does (what the Go client and Prometheus
  // print: "0.0001", "5e-05", "2.5", "10", "1e+06"), independent of the C locale.
  char buf[64];
  auto sci = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const char* e = std::find(buf, sci.ptr, 'e');
  int exponent = 0;
  (void)std::from_chars(e + (e[1] == '+' ? 2 : 1), sci.ptr, exponent);
  if (exponent < -4 || exponent >= 6) {
    out.append(buf, sci.ptr);
    return;
  }
  auto fixed = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  out.append(buf, fixed.ptr);
}

void append_uint(std::string& out, std::uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// A label value: backslash, double quote and line feed escaped.
void append_label_value(std::string& out, std::string_view v) {
  for (char c : v) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

struct label {
  const char* name;
  std::string_view value;
};

void append_labels(std::string& out, std::initializer_list<label> labels, const char* le = nullptr) {
  if (labels.size() == 0 && le == nullptr) return;
  out += '{';
  bool first = true;
  for (const label& l : labels) {
    if (!first) out += ',';
    first = false;
    out += l.name;
    out += "=\"";
    append_label_value(out, l.value);
    out += '"';
  }
  if (le != nullptr) {
    if (!first) out += ',';
    out += "le=\"";
    out += le;
    out += '"';
  }
  out += '}';
}

void append_family(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;  // constant text: no backslash or line feed to escape
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void append_sample(std::string& out, const char* name, const char* suffix,
                   std::initializer_list<label> labels, const char* le, const std::string& value) {
  out += name;
  out += suffix;
  append_labels(out, labels, le);
  out += ' ';
  out += value;
  out += '\n';
}

void append_histogram(std::string& out, const char* name, std::initializer_list<label> labels,
                      const histogram& h, const std::vector<double>& bounds) {
  std::uint64_t cumulative = 0;
  std::string le, value;
  for (std::size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += h.counts[i];
    le.clear();
    if (i < bounds.size())
      append_double(le, bounds[i]);
    else
      le = "+Inf";
    value.clear();
    append_uint(value, cumulative);
    append_sample(out, name, "_bucket", labels, le.c_str(), value);
  }
  value.clear();
  append_double(value, h.sum);
  append_sample(out, name, "_sum", labels, nullptr, value);
  value.clear();
  append_uint(value, h.count);
  append_sample(out, name, "_count", labels, nullptr, value);
}

std::string uint_string(std::uint64_t v) {
  std::string s;
  append_uint(s, v);
  return s;
}

}  // namespace

struct metrics::state {
  mutable std::mutex mu;
  snapshot s;

  // The node's slot; `index` (its position in client_options::nodes) is a hint.
  // Allocates only the first time a node is seen.
  node_series& node(std::size_t index, const std::string& name) {
    if (index < s.nodes.size() && s.nodes[index].name == name) return s.nodes[index];
    for (node_series& n : s.nodes)
      if (n.name == name) return n;
    node_series n;
    n.name = name;
    n.rtt = histogram(s.bounds.size());
    s.nodes.push_back(std::move(n));
    return s.nodes.back();
  }
};

metrics::metrics(metrics_options options) : state_(std::make_unique<state>()) {
  std::vector<double> bounds = options.buckets.empty() ? default_buckets() : std::move(options.buckets);
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || bounds[i] <= 0)
      throw config_error("metrics_options::buckets: every bound must be finite and > 0");
    if (i > 0 && !(bounds[i] > bounds[i - 1]))
      throw config_error("metrics_options::buckets: bounds must be strictly increasing");
  }
  snapshot& s = state_->s;
  s.bounds = std::move(bounds);
  s.acquire.assign(kOutcomes, histogram(s.bounds.size()));
  s.wait = histogram(s.bounds.size());
  s.hold = histogram(s.bounds.size());
}

metrics::~metrics() = default;

std::vector<double> metrics::default_buckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
}

void metrics::on_operation_finished(const operation_finished& e) {
  if (e.report == nullptr) return;
  const report& r = *e.report;
  const auto kind = static_cast<std::size_t>(e.kind);
  if (kind >= kKinds) return;
  const std::size_t outcome = outcome_index(r.error);
  const double elapsed = seconds(r.elapsed);
  std::lock_guard<std::mutex> lock(state_->mu);
  snapshot& s = state_->s;
  ++s.operations[kind][outcome];
  if (e.kind == operation_kind::acquire) {
    s.acquire[outcome].observe(elapsed, s.bounds);
    if (outcome == kOutcomeOk) s.wait.observe(elapsed, s.bounds);
  }
  for (std::size_t i = 0; i < r.nodes.size(); ++i) {
    const node_result& n = r.nodes[i];
    if (n.latency.count() > 0) state_->node(i, n.node).rtt.observe(seconds(n.latency), s.bounds);
  }
}

void metrics::on_lock_acquired(const lock_event&) {
  std::lock_guard<std::mutex> lock(state_->mu);
  ++state_->s.held;
}

void metrics::on_lock_released(const lock_event& e) {
  const double held_for = seconds(e.held_for);
  std::lock_guard<std::mutex> lock(state_->mu);
  snapshot& s = state_->s;
  if (e.of_handle) --s.held;  // a bare lease was never counted in
  s.hold.observe(held_for, s.bounds);
}

void metrics::on_lock_lost(const lock_lost_event& e) {
  const double held_for = seconds(e.held_for);
  const std::size_t reason = outcome_index(e.reason);
  std::lock_guard<std::mutex> lock(state_->mu);
  snapshot& s = state_->s;
  --s.held;
  ++s.lost[reason];
  s.hold.observe(held_for, s.bounds);
}

void metrics::on_node_up(const node_event& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->node(e.index, e.node).up = 1;
}

void metrics::on_node_down(const node_event& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->node(e.index, e.node).up = 0;
}

void metrics::on_reconnect_scheduled(const reconnect_scheduled& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  ++state_->node(e.index, e.node).reconnects;
}

void metrics::on_node_quarantined(const node_quarantine_event& e) {
  const auto reason = static_cast<std::size_t>(e.reason);
  if (reason >= kReasons) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->node(e.index, e.node).quarantined[reason] = 1;
}

void metrics::on_node_cleared(const node_quarantine_event& e) {
  const auto reason = static_cast<std::size_t>(e.reason);
  if (reason >= kReasons) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->node(e.index, e.node).quarantined[reason] = 0;
}

std::string metrics::render() const {
  snapshot s;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    s = state_->s;
  }
  std::string out;
  out.reserve(4096 + s.nodes.size() * 2048);

  // Series with a fixed label set are always present for the outcomes an alert
  // needs (ok; the loss reasons the library reports); others appear once counted.
  const char* name = "redlock_acquire_duration_seconds";
  append_family(
      out, name, "histogram",
      "Time from an acquire call to its completion, retries and their delays included, by outcome.");
  for (std::size_t o = 0; o < kOutcomes; ++o)
    if (o == kOutcomeOk || s.acquire[o].count > 0)
      append_histogram(out, name, {{"outcome", outcome_label(o)}}, s.acquire[o], s.bounds);

  name = "redlock_wait_duration_seconds";
  append_family(out, name, "histogram",
                "Time callers waited for a lock they got: the elapsed time of successful acquires, "
                "retries and their delays included.");
  append_histogram(out, name, {}, s.wait, s.bounds);

  name = "redlock_hold_duration_seconds";
  append_family(out, name, "histogram",
                "Time a lock was held, from its acquire round to its release or loss.");
  append_histogram(out, name, {}, s.hold, s.bounds);

  name = "redlock_operations_total";
  append_family(out, name, "counter",
                "Completed operations (acquire, extend, release, inspect), by outcome.");
  for (std::size_t k = 0; k < kKinds; ++k)
    for (std::size_t o = 0; o < kOutcomes; ++o)
      if (o == kOutcomeOk || s.operations[k][o] > 0)
        append_sample(out, name, "",
                      {{"op", to_string(static_cast<operation_kind>(k))}, {"outcome", outcome_label(o)}},
                      nullptr, uint_string(s.operations[k][o]));

  name = "redlock_locks_held";
  append_family(out, name, "gauge", "Locks held now: acquired minus released minus lost.");
  {
    std::string v;
    append_int(v, s.held);
    append_sample(out, name, "", {}, nullptr, v);
  }

  name = "redlock_locks_lost_total";
  append_family(out, name, "counter",
                "Locks the library stopped guaranteeing before they were released, by reason.");
  for (std::size_t o = 0; o < kOutcomes; ++o)
    if (o == static_cast<std::size_t>(errc::lock_lost) ||
        o == static_cast<std::size_t>(errc::extension_limit) ||
        o == static_cast<std::size_t>(errc::cancelled) || s.lost[o] > 0)
      append_sample(out, name, "", {{"reason", outcome_label(o)}}, nullptr, uint_string(s.lost[o]));

  name = "redlock_node_up";
  append_family(out, name, "gauge",
                "Client connection state: 1 while this client's connection to the node is up (handshake "
                "done), 0 while it is down. (redlock monitor's probe of the node is redlock_monitor_node_up.)");
  for (const node_series& n : s.nodes)
    if (n.up >= 0) append_sample(out, name, "", {{"node", n.name}}, nullptr, n.up == 1 ? "1" : "0");

  name = "redlock_node_rtt_seconds";
  append_family(out, name, "histogram", "Round trip of each node's reply to an operation's command.");
  for (const node_series& n : s.nodes) append_histogram(out, name, {{"node", n.name}}, n.rtt, s.bounds);

  name = "redlock_node_quarantined";
  append_family(out, name, "gauge", "1 while a safety guard keeps the node out of acquire votes, by guard.");
  for (const node_series& n : s.nodes)
    for (std::size_t r = 0; r < kReasons; ++r)
      append_sample(out, name, "",
                    {{"node", n.name}, {"reason", to_string(static_cast<quarantine_reason>(r))}}, nullptr,
                    n.quarantined[r] == 1 ? "1" : "0");

  name = "redlock_reconnects_total";
  append_family(out, name, "counter",
                "Reconnects scheduled after the connection to the node failed or was lost.");
  for (const node_series& n : s.nodes)
    append_sample(out, name, "", {{"node", n.name}}, nullptr, uint_string(n.reconnects));

  return out;
}

}  // namespace redlock
