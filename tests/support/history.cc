#include "history.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace redlock::test {

std::int64_t mono_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::int64_t grant::hold_end() const {
  if (release_ns >= 0) return std::min(valid_until_ns, release_ns);
  return valid_until_ns;
}

std::vector<overlap> check_mutual_exclusion(const std::vector<grant>& grants) {
  std::vector<std::size_t> order(grants.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return grants[a].hold_start() < grants[b].hold_start(); });
  std::vector<overlap> out;
  // Sweep by start time, keeping the windows that are still open.
  std::vector<std::size_t> active;
  for (std::size_t idx : order) {
    const grant& g = grants[idx];
    if (g.hold_end() <= g.hold_start()) continue;  // empty window (released at once, or no validity)
    active.erase(std::remove_if(active.begin(), active.end(),
                                [&](std::size_t a) { return grants[a].hold_end() <= g.hold_start(); }),
                 active.end());
    for (std::size_t a : active) {
      if (grants[a].owner == g.owner) continue;
      const std::int64_t ov = std::min(grants[a].hold_end(), g.hold_end()) - g.hold_start();
      out.push_back({a, idx, ov});
    }
    active.push_back(idx);
  }
  return out;
}

std::vector<overlap> check_fence_order(const std::vector<grant>& grants) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < grants.size(); ++i) {
    if (grants[i].fence) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return grants[a].complete_ns < grants[b].complete_ns; });
  std::vector<overlap> out;
  for (std::size_t k = 1; k < order.size(); ++k) {
    if (*grants[order[k]].fence <= *grants[order[k - 1]].fence) out.push_back({order[k - 1], order[k], 0});
  }
  return out;
}

std::size_t count_stale_writes(const std::vector<std::uint64_t>& accepted_tokens) {
  std::size_t stale = 0;
  std::uint64_t highest = 0;
  for (std::uint64_t t : accepted_tokens) {
    if (t < highest) {
      ++stale;
    } else {
      highest = t;
    }
  }
  return stale;
}

std::string describe(const std::vector<grant>& grants, const overlap& o) {
  const grant& a = grants.at(o.first);
  const grant& b = grants.at(o.second);
  std::ostringstream out;
  auto ms = [&](std::int64_t ns) { return static_cast<double>(ns - a.complete_ns) / 1e6; };
  out << "owner " << a.owner << " held [0, " << ms(a.hold_end()) << "] ms";
  if (a.fence) out << " (fence " << *a.fence << ")";
  out << "; owner " << b.owner << " held [" << ms(b.hold_start()) << ", " << ms(b.hold_end()) << "] ms";
  if (b.fence) out << " (fence " << *b.fence << ")";
  out << "; overlap " << static_cast<double>(o.overlap_ns) / 1e6 << " ms";
  return out.str();
}

history::history(const history& other) {
  std::lock_guard<std::mutex> lk(other.mu_);
  grants_ = other.grants_;
  failures_ = other.failures_;
}

history& history::operator=(const history& other) {
  if (this == &other) return *this;
  std::scoped_lock lk(mu_, other.mu_);
  grants_ = other.grants_;
  failures_ = other.failures_;
  return *this;
}

std::size_t history::record_grant(grant g) {
  std::lock_guard<std::mutex> lk(mu_);
  grants_.push_back(std::move(g));
  return grants_.size() - 1;
}

void history::record_release(std::size_t index, std::int64_t release_ns) {
  std::lock_guard<std::mutex> lk(mu_);
  grants_.at(index).release_ns = release_ns;
}

void history::record_failure(const std::string& error) {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& f : failures_) {
    if (f.first == error) {
      ++f.second;
      return;
    }
  }
  failures_.emplace_back(error, 1);
}

void history::merge(const history& other) {
  if (&other == this) return;
  std::vector<grant> g = other.grants();
  std::vector<std::pair<std::string, std::size_t>> f;
  {
    std::lock_guard<std::mutex> lk(other.mu_);
    f = other.failures_;
  }
  for (auto& x : g) record_grant(std::move(x));
  for (auto& [name, n] : f) {
    for (std::size_t i = 0; i < n; ++i) record_failure(name);
  }
}

std::vector<grant> history::grants() const {
  std::lock_guard<std::mutex> lk(mu_);
  return grants_;
}

std::size_t history::failures() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::size_t n = 0;
  for (const auto& f : failures_) n += f.second;
  return n;
}

std::size_t history::failures(const std::string& error) const {
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& f : failures_) {
    if (f.first == error) return f.second;
  }
  return 0;
}

std::size_t history::operations() const {
  const std::size_t f = failures();
  std::lock_guard<std::mutex> lk(mu_);
  return grants_.size() + f;
}

std::string history::serialize() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::ostringstream out;
  for (const grant& g : grants_) {
    out << "G " << g.owner << ' ' << g.token << ' ' << g.invoke_ns << ' ' << g.complete_ns << ' '
        << g.valid_until_ns << ' ' << g.release_ns << ' '
        << (g.fence ? std::to_string(*g.fence) : std::string("-")) << '\n';
  }
  for (const auto& f : failures_) out << "F " << f.first << ' ' << f.second << '\n';
  return out.str();
}

history history::parse(const std::string& text) {
  history h;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "G") {
      grant g;
      std::string fence;
      ls >> g.owner >> g.token >> g.invoke_ns >> g.complete_ns >> g.valid_until_ns >> g.release_ns >> fence;
      if (!ls || fence.empty()) throw std::runtime_error("history: malformed line: " + line);
      if (fence != "-") g.fence = std::stoull(fence);
      h.grants_.push_back(std::move(g));
    } else if (kind == "F") {
      std::string name;
      std::size_t n = 0;
      ls >> name >> n;
      if (!ls) throw std::runtime_error("history: malformed line: " + line);
      h.failures_.emplace_back(name, n);
    } else {
      throw std::runtime_error("history: malformed line: " + line);
    }
  }
  return h;
}

}  // namespace redlock::test
