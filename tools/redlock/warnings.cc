#include "warnings.h"

#include <algorithm>

#include "common.h"
#include "monitor_view.h"

namespace redlock::cli {

void warning_collector::on_warning(const redlock::warning& w) {
  {
    std::lock_guard<std::mutex> g(mu_);
    // A reconnect reports a node's warning again.
    if (std::find(messages_.begin(), messages_.end(), w.message) == messages_.end()) messages_.push_back(w.message);
  }
  changed_.notify_all();
}

void warning_collector::on_node_up(const redlock::node_event& e) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (states_.size() <= e.index) states_.resize(e.index + 1);
    states_[e.index] = "up";
  }
  changed_.notify_all();
}

void warning_collector::on_node_down(const redlock::node_event& e) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (states_.size() <= e.index) states_.resize(e.index + 1);
    states_[e.index] = std::string(to_string(e.status)) + (e.detail.empty() ? "" : ": " + e.detail);
  }
  changed_.notify_all();
}

void warning_collector::wait_for_nodes(const std::vector<std::size_t>& nodes, std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> g(mu_);
  (void)changed_.wait_for(g, limit, [&] {
    return std::all_of(nodes.begin(), nodes.end(), [&](std::size_t i) { return i < states_.size() && !states_[i].empty(); });
  });
}

std::vector<std::string> warning_collector::messages() const {
  std::lock_guard<std::mutex> g(mu_);
  return messages_;
}

std::string warning_collector::state_of(std::size_t index) const {
  std::lock_guard<std::mutex> g(mu_);
  return index < states_.size() ? states_[index] : std::string();
}

namespace {

bool did_not_answer(node_status s) {
  return s == node_status::timeout || s == node_status::connection_error || s == node_status::cancelled;
}

}  // namespace

void print_acquire_warnings(const invocation& inv, warning_collector& collected, const redlock::report& rep,
                            std::size_t quorum) {
  if (inv.quiet) return;
  std::vector<std::size_t> pending;
  for (std::size_t i = 0; i < rep.nodes.size(); ++i) {
    if (rep.nodes[i].status == node_status::pending) pending.push_back(i);
  }
  if (!pending.empty()) collected.wait_for_nodes(pending, inv.node_timeout);
  for (const std::string& m : collected.messages()) print_warning(inv, m);
  if (!rep) return;
  const std::string taken = "the lock was taken without it (" + counted(rep.nodes.size(), "node") + ", quorum " +
                            std::to_string(quorum) + ")";
  for (std::size_t i = 0; i < rep.nodes.size(); ++i) {
    const redlock::node_result& n = rep.nodes[i];
    // A node still holding the key of an owner that let go an instant ago (a waiter
    // that won its quorum while the release was on its way) is no configuration
    // problem: no warning for a `held` refusal.
    if (n.status == node_status::ok || n.status == node_status::held) continue;
    std::string why;
    bool answered = false;
    if (n.status == node_status::pending) {
      // Decided without it: fine if it is up (its grant comes late); not if it is
      // down or still connecting.
      why = collected.state_of(i);
      if (why == "up") continue;
      if (why.empty()) why = "not connected within --node-timeout " + std::to_string(inv.node_timeout.count()) + "ms";
    } else {
      why = to_string(n.status);
      if (!n.detail.empty()) why += ": " + n.detail;
      answered = !did_not_answer(n.status);
    }
    print_warning(inv, n.node + (answered ? ": refused the acquire (" : ": did not answer the acquire (") + why + "); " +
                           taken);
  }
}

}  // namespace redlock::cli
