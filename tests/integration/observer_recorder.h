// A recording observer for the event tests (integration and simulator): every
// event as one line of text, plus typed copies of what the tests check. Any thread
// may read it (events arrive on the client's loop thread).
#pragma once

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "redlock/observer.h"

namespace redlock::test {

class recorder : public observer {
 public:
  struct op_rec {
    bool finished = false;
    operation_kind kind{};
    std::string resource;
    bool background = false;
    std::error_code error;  // finished only
    int attempts = 0;
    std::chrono::microseconds elapsed{0};
  };

  void on_operation_started(const operation_started& e) override {
    op_rec r{false, e.kind, e.resource, e.background, {}, 0, {}};
    add(std::string("started ") + to_string(e.kind) + " " + e.resource + (e.background ? " bg" : ""),
        {e.resource}, [&] { ops_.push_back(r); });
  }
  void on_operation_finished(const operation_finished& e) override {
    op_rec r{true, e.kind, e.resource, e.background, e.report->error, e.report->attempts, e.report->elapsed};
    std::vector<std::string> strings{e.resource, e.report->message(), e.report->error.message()};
    for (const auto& n : e.report->nodes) {
      strings.push_back(n.node);
      strings.push_back(n.detail);
    }
    add(std::string("finished ") + to_string(e.kind) + " " + e.resource + (e.background ? " bg" : "") +
            (e.report->error ? " " + e.report->error.message() : " ok"),
        strings, [&] { ops_.push_back(r); });
  }
  void on_retry_scheduled(const retry_scheduled& e) override {
    add("retry " + e.resource + " " + std::to_string(e.next_attempt), {e.resource, e.last_error.message()},
        [&] { retries_.push_back(e); });
  }
  void on_lock_acquired(const lock_event& e) override {
    add("acquired " + e.resource, {e.resource}, [&] { locks_.push_back(e); });
  }
  void on_lock_extended(const lock_event& e) override {
    add("extended " + e.resource, {e.resource}, [&] { locks_.push_back(e); });
  }
  void on_lock_released(const lock_event& e) override {
    add("released " + e.resource, {e.resource}, [&] { locks_.push_back(e); });
  }
  void on_lock_lost(const lock_lost_event& e) override {
    add("lost " + e.resource + " " + e.reason.message(), {e.resource, e.detail, e.reason.message()},
        [&] { lost_.push_back(e); });
  }
  void on_node_up(const node_event& e) override {
    add("up " + std::to_string(e.index), {e.node, e.detail}, [&] { nodes_.push_back(e); });
  }
  void on_node_down(const node_event& e) override {
    add("down " + std::to_string(e.index), {e.node, e.detail}, [&] { nodes_.push_back(e); });
  }
  void on_reconnect_scheduled(const reconnect_scheduled& e) override {
    add("reconnect " + std::to_string(e.index), {e.node, e.reason}, [&] { reconnects_.push_back(e); });
  }
  void on_node_quarantined(const node_quarantine_event& e) override {
    add("quarantined " + std::to_string(e.index) + " " + to_string(e.reason), {e.node, e.detail},
        [&] { quarantines_.push_back(e); });
  }
  void on_node_cleared(const node_quarantine_event& e) override {
    add("cleared " + std::to_string(e.index) + " " + to_string(e.reason), {e.node, e.detail},
        [&] { cleared_.push_back(e); });
  }
  void on_node_slow(const node_slow_event& e) override {
    add("slow " + std::to_string(e.index) + " " + to_string(e.kind), {e.node}, [&] { slow_.push_back(e); });
  }
  void on_warning(const warning& w) override {
    add("warning " + std::to_string(static_cast<int>(w.code)), {w.node, w.message}, [&] { warnings_.push_back(w); });
  }

  // The event lines, in order.
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> g(mu_);
    return lines_;
  }
  // The lines about one resource (operations and lock events), in order.
  std::vector<std::string> about(const std::string& resource) const {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<std::string> out;
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      if (resources_[i] == resource) out.push_back(lines_[i]);
    }
    return out;
  }
  std::size_t count(const std::string& line) const {
    std::lock_guard<std::mutex> g(mu_);
    return static_cast<std::size_t>(std::count(lines_.begin(), lines_.end(), line));
  }
  bool saw(const std::string& line) const { return count(line) > 0; }
  // Every string field of every event so far (for the no-secrets check).
  std::vector<std::string> strings() const {
    std::lock_guard<std::mutex> g(mu_);
    return strings_;
  }
  // The typed events (copies).
  template <class T>
  std::vector<T> get(std::vector<T> recorder::*member) const {
    std::lock_guard<std::mutex> g(mu_);
    return this->*member;
  }
  // The event-loop thread that delivered the events (all of them on one).
  bool one_thread() const {
    std::lock_guard<std::mutex> g(mu_);
    return !mixed_threads_;
  }

  std::vector<op_rec> ops_;
  std::vector<retry_scheduled> retries_;
  std::vector<lock_event> locks_;
  std::vector<lock_lost_event> lost_;
  std::vector<node_event> nodes_;
  std::vector<reconnect_scheduled> reconnects_;
  std::vector<node_quarantine_event> quarantines_;
  std::vector<node_quarantine_event> cleared_;
  std::vector<node_slow_event> slow_;
  std::vector<warning> warnings_;

  // Called (outside the recorder's lock) after each event is recorded.
  std::function<void(const std::string& line)> then;

 private:
  void add(std::string line, std::vector<std::string> strings, const std::function<void()>& keep) {
    {
      std::lock_guard<std::mutex> g(mu_);
      const auto id = std::this_thread::get_id();
      if (lines_.empty()) thread_ = id;
      mixed_threads_ = mixed_threads_ || thread_ != id;
      const bool about_resource = line.rfind("up ", 0) != 0 && line.rfind("down ", 0) != 0 &&
                                  line.rfind("reconnect ", 0) != 0 && line.rfind("quarantined ", 0) != 0 &&
                                  line.rfind("cleared ", 0) != 0 && line.rfind("slow ", 0) != 0 &&
                                  line.rfind("warning ", 0) != 0;
      resources_.push_back(about_resource ? strings.front() : std::string());
      lines_.push_back(line);
      for (auto& s : strings) strings_.push_back(std::move(s));
      strings_.push_back(line);
      keep();
    }
    if (then) then(line);
  }

  mutable std::mutex mu_;
  std::vector<std::string> lines_;
  std::vector<std::string> resources_;
  std::vector<std::string> strings_;
  std::thread::id thread_;
  bool mixed_threads_ = false;
};

}  // namespace redlock::test
