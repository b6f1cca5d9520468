// redlock::log_observer: events in, one key=value line each out, with node errors
// rate-limited on the events' own timestamps.
#include "redlock/log.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "redlock/error.h"
#include "redlock/report.h"

namespace redlock {

const char* to_string(log_level l) noexcept {
  switch (l) {
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warning:
      return "warning";
  }
  return "unknown";
}

namespace {

const char* warning_name(warning_code c) noexcept {
  switch (c) {
    case warning_code::eviction_policy:
      return "eviction_policy";
    case warning_code::even_node_count:
      return "even_node_count";
    case warning_code::single_node:
      return "single_node";
  }
  return "unknown";
}

// An error code as a label: "ok", the errc's name, or the code's message.
std::string error_name(const std::error_code& ec) {
  if (!ec) return "ok";
  if (ec.category() == category()) return to_string(static_cast<errc>(ec.value()));
  return ec.message();
}

// node_status names with "_" for spaces ("connection_error"), one token each.
std::string status_name(node_status s) {
  std::string n = to_string(s);
  for (char& c : n)
    if (c == ' ') c = '_';
  return n;
}

// One line being built: "phrase key=value key=value ...". A value with a blank,
// '=', a quote, a backslash or a control character (or an empty one) is quoted,
// with \" \\ \n \r \t and \xHH escapes, so a resource name or a server's error
// text can never start a new line or forge a field.
class line {
 public:
  explicit line(const char* phrase) : text_(phrase) {}

  line& field(const char* key, std::string_view value) {
    text_ += ' ';
    text_ += key;
    text_ += '=';
    bool quote = value.empty();
    for (char c : value)
      if (c == ' ' || c == '=' || c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        quote = true;
    if (!quote) {
      text_ += value;
      return *this;
    }
    text_ += '"';
    for (char c : value) {
      switch (c) {
        case '"':
          text_ += "\\\"";
          break;
        case '\\':
          text_ += "\\\\";
          break;
        case '\n':
          text_ += "\\n";
          break;
        case '\r':
          text_ += "\\r";
          break;
        case '\t':
          text_ += "\\t";
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
            text_ += buf;
          } else {
            text_ += c;
          }
      }
    }
    text_ += '"';
    return *this;
  }
  line& field(const char* key, std::uint64_t value) { return field(key, std::to_string(value)); }
  line& field(const char* key, int value) { return field(key, std::to_string(value)); }
  // A duration as milliseconds with microsecond precision: "12.345".
  line& millis(const char* key, std::chrono::microseconds d) {
    const long long us = d.count();
    const long long whole = us / 1000;
    const long long frac = (us < 0 ? -us : us) % 1000;
    char buf[48];
    if (frac == 0)
      std::snprintf(buf, sizeof buf, "%s%lld", us < 0 && whole == 0 ? "-" : "", whole);
    else
      std::snprintf(buf, sizeof buf, "%s%lld.%03lld", us < 0 && whole == 0 ? "-" : "", whole, frac);
    return field(key, std::string_view(buf));
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

std::chrono::microseconds micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d);
}

}  // namespace

struct log_observer::state {
  struct limit {
    bool seen = false;
    event_time last{};
    std::uint64_t suppressed = 0;
  };

  std::mutex mu;
  sink out;
  log_level min_level;
  std::chrono::milliseconds interval;
  // (node, kind) -> when its last line was emitted, and how many were suppressed since.
  std::map<std::pair<std::string, std::string>, limit> limits;

  bool wants(log_level l) const { return out && l >= min_level; }

  void emit(log_level l, const line& ln) { out(l, ln.text()); }

  // Whether a line of this kind for this node may be emitted at `at`; if so,
  // `suppressed` is how many were held back since the last one.
  bool admit(const std::string& node, std::string kind, event_time at, std::uint64_t& suppressed) {
    suppressed = 0;
    if (interval.count() <= 0) return true;
    limit& e = limits[{node, std::move(kind)}];
    if (e.seen && at - e.last < interval) {
      ++e.suppressed;
      return false;
    }
    e.seen = true;
    e.last = at;
    suppressed = e.suppressed;
    e.suppressed = 0;
    return true;
  }

  // Takes (and zeroes) the suppressed counts of the node's "down:*" kinds.
  std::uint64_t take_suppressed_downs(const std::string& node) {
    std::uint64_t total = 0;
    for (auto it = limits.lower_bound({node, "down:"}); it != limits.end() && it->first.first == node; ++it) {
      if (it->first.second.compare(0, 5, "down:") != 0) break;
      total += it->second.suppressed;
      it->second.suppressed = 0;
    }
    return total;
  }
};

log_observer::log_observer(sink s, log_level min_level, std::chrono::milliseconds repeat_interval)
    : state_(std::make_unique<state>()) {
  state_->out = std::move(s);
  state_->min_level = min_level;
  state_->interval = repeat_interval;
}

log_observer::~log_observer() = default;

void log_observer::on_operation_started(const operation_started& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::debug)) return;
  line ln("operation started");
  ln.field("op", to_string(e.kind)).field("resource", e.resource);
  if (e.background) ln.field("background", "true");
  state_->emit(log_level::debug, ln);
}

void log_observer::on_operation_finished(const operation_finished& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::debug)) return;
  line ln("operation finished");
  ln.field("op", to_string(e.kind)).field("resource", e.resource);
  if (e.background) ln.field("background", "true");
  if (e.report != nullptr) {
    ln.field("outcome", error_name(e.report->error));
    if (e.kind == operation_kind::acquire) ln.field("attempts", e.report->attempts);
    ln.millis("elapsed_ms", e.report->elapsed);
    if (e.report->error) ln.field("why", e.report->message());
  }
  state_->emit(log_level::debug, ln);
}

void log_observer::on_retry_scheduled(const retry_scheduled& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::debug)) return;
  line ln("retry scheduled");
  ln.field("resource", e.resource)
      .field("attempt", e.next_attempt)
      .millis("delay_ms", e.delay)
      .field("error", error_name(e.last_error));
  state_->emit(log_level::debug, ln);
}

void log_observer::on_lock_acquired(const lock_event& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::info)) return;
  line ln("lock acquired");
  ln.field("resource", e.resource);
  if (e.fence) ln.field("fence", *e.fence);
  if (e.valid_until) ln.millis("validity_ms", micros(*e.valid_until - e.at));
  state_->emit(log_level::info, ln);
}

void log_observer::on_lock_extended(const lock_event& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::debug)) return;
  line ln("lock extended");
  ln.field("resource", e.resource);
  if (e.fence) ln.field("fence", *e.fence);
  if (e.valid_until) ln.millis("validity_ms", micros(*e.valid_until - e.at));
  ln.millis("held_ms", e.held_for);
  state_->emit(log_level::debug, ln);
}

void log_observer::on_lock_released(const lock_event& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::info)) return;
  line ln("lock released");
  ln.field("resource", e.resource);
  if (e.fence) ln.field("fence", *e.fence);
  ln.millis("held_ms", e.held_for);
  state_->emit(log_level::info, ln);
}

void log_observer::on_lock_lost(const lock_lost_event& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::warning)) return;
  line ln("lock lost");
  ln.field("resource", e.resource);
  if (e.fence) ln.field("fence", *e.fence);
  ln.field("reason", error_name(e.reason)).millis("held_ms", e.held_for);
  if (!e.detail.empty()) ln.field("detail", e.detail);
  state_->emit(log_level::warning, ln);
}

void log_observer::on_node_up(const node_event& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::info)) return;
  line ln("node up");
  ln.field("node", e.node).field("index", static_cast<std::uint64_t>(e.index));
  // Never limited: after a burst of suppressed "node down" lines, this line is
  // what says the node is back, and how many of those were held back.
  if (std::uint64_t k = state_->take_suppressed_downs(e.node); k > 0) ln.field("suppressed", k);
  state_->emit(log_level::info, ln);
}

void log_observer::on_node_down(const node_event& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::warning)) return;
  std::uint64_t suppressed = 0;
  const std::string status = status_name(e.status);
  if (!state_->admit(e.node, "down:" + status, e.at, suppressed)) return;
  line ln("node down");
  ln.field("node", e.node).field("index", static_cast<std::uint64_t>(e.index)).field("status", status);
  if (!e.detail.empty()) ln.field("detail", e.detail);
  if (suppressed > 0) ln.field("suppressed", suppressed);
  state_->emit(log_level::warning, ln);
}

void log_observer::on_reconnect_scheduled(const reconnect_scheduled& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::debug)) return;
  std::uint64_t suppressed = 0;
  if (!state_->admit(e.node, "reconnect", e.at, suppressed)) return;
  line ln("reconnect scheduled");
  ln.field("node", e.node)
      .field("index", static_cast<std::uint64_t>(e.index))
      .millis("backoff_ms", e.backoff);
  if (!e.reason.empty()) ln.field("reason", e.reason);
  if (suppressed > 0) ln.field("suppressed", suppressed);
  state_->emit(log_level::debug, ln);
}

void log_observer::on_node_quarantined(const node_quarantine_event& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::warning)) return;
  line ln("node quarantined");
  ln.field("node", e.node)
      .field("index", static_cast<std::uint64_t>(e.index))
      .field("reason", to_string(e.reason))
      .millis("for_ms", micros(e.until - e.at));
  if (!e.detail.empty()) ln.field("detail", e.detail);
  state_->emit(log_level::warning, ln);
}

void log_observer::on_node_cleared(const node_quarantine_event& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::info)) return;
  line ln("node quarantine ended");
  ln.field("node", e.node)
      .field("index", static_cast<std::uint64_t>(e.index))
      .field("reason", to_string(e.reason));
  state_->emit(log_level::info, ln);
}

void log_observer::on_node_slow(const node_slow_event& e) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::warning)) return;
  std::uint64_t suppressed = 0;
  if (!state_->admit(e.node, "slow", e.at, suppressed)) return;
  line ln("slow node reply");
  ln.field("node", e.node)
      .field("index", static_cast<std::uint64_t>(e.index))
      .field("op", to_string(e.kind))
      .millis("latency_ms", e.latency);
  if (suppressed > 0) ln.field("suppressed", suppressed);
  state_->emit(log_level::warning, ln);
}

void log_observer::on_warning(const warning& w) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->wants(log_level::warning)) return;
  line ln("configuration warning");
  ln.field("code", warning_name(w.code));
  if (!w.node.empty()) ln.field("node", w.node);
  ln.field("message", w.message);
  state_->emit(log_level::warning, ln);
}

}  // namespace redlock
