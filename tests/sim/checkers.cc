#include "checkers.h"

#include <algorithm>
#include <map>

namespace redlock::simtest {

namespace {
constexpr std::size_t kMaxReported = 3;  // per checker and resource: the first ones tell the story
constexpr std::int64_t kContext_us = 300'000;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::vector<violation> check_mutual_exclusion(const history& h) {
  struct piece {
    interval iv;
    int hold;
  };
  std::map<int, std::vector<piece>> by_resource;
  for (const auto& hd : h.holds) {
    for (const auto& iv : hd.belief) {
      if (iv.from < iv.to) by_resource[hd.resource].push_back(piece{iv, hd.id});
    }
  }
  std::vector<violation> out;
  for (auto& [resource, pieces] : by_resource) {
    std::sort(pieces.begin(), pieces.end(), [](const piece& a, const piece& b) {
      return a.iv.from != b.iv.from ? a.iv.from < b.iv.from : a.hold < b.hold;
    });
    // Starts ascending: a piece overlaps some earlier piece iff it overlaps the
    // earlier one that ends last (a hold's own pieces are disjoint).
    const piece* longest = nullptr;
    std::size_t found = 0;
    for (const auto& p : pieces) {
      if (longest != nullptr && p.iv.from < longest->iv.to && p.hold != longest->hold) {
        ++found;
        if (found <= kMaxReported) {
          const hold_record& a = h.holds[static_cast<std::size_t>(longest->hold)];
          const hold_record& b = h.holds[static_cast<std::size_t>(p.hold)];
          const std::int64_t overlap = std::min(p.iv.to, longest->iv.to) - p.iv.from;
          violation v;
          v.checker = "mutual_exclusion";
          v.t_us = p.iv.from;
          v.summary = "r" + std::to_string(resource) + ": c" + std::to_string(a.client) + " (hold #" +
                      std::to_string(a.id) + ") and c" + std::to_string(b.client) + " (hold #" +
                      std::to_string(b.id) + ") both believed they held it for " + std::to_string(overlap) +
                      " us from " + history::format_time(p.iv.from);
          v.detail = "  " + h.format_hold(a) + "\n  " + h.format_hold(b) + "\n  the two clients on r" +
                     std::to_string(resource) + ", and the faults, until the overlap ended:\n" +
                     h.slice_for(a, b, std::min(p.iv.to, longest->iv.to) + 1);
          out.push_back(std::move(v));
        }
      }
      if (longest == nullptr || p.iv.to > longest->iv.to) longest = &p;
    }
  }
  return out;
}

std::vector<violation> check_fence_order(const history& h, std::int64_t data_lost_at_us) {
  std::map<int, std::vector<const hold_record*>> by_resource;
  for (const auto& hd : h.holds) {
    if (hd.fence) by_resource[hd.resource].push_back(&hd);
  }
  std::vector<violation> out;
  for (auto& [resource, holds] : by_resource) {
    std::vector<const hold_record*> by_completion = holds;
    std::sort(by_completion.begin(), by_completion.end(), [](const hold_record* a, const hold_record* b) {
      return a->complete_us != b->complete_us ? a->complete_us < b->complete_us : a->id < b->id;
    });
    // best[i]: the hold with the highest fence among the first i + 1 completions.
    std::vector<const hold_record*> best(by_completion.size());
    for (std::size_t i = 0; i < by_completion.size(); ++i) {
      best[i] = (i == 0 || *by_completion[i]->fence > *best[i - 1]->fence) ? by_completion[i] : best[i - 1];
    }
    std::size_t found = 0;
    for (const hold_record* b : holds) {
      if (data_lost_at_us >= 0 && b->invoke_us >= data_lost_at_us) continue;
      // The holds whose acquire succeeded before b's was called.
      auto it = std::lower_bound(by_completion.begin(), by_completion.end(), b->invoke_us,
                                 [](const hold_record* x, std::int64_t t) { return x->complete_us < t; });
      if (it == by_completion.begin()) continue;
      const hold_record* a = best[static_cast<std::size_t>(it - by_completion.begin()) - 1];
      if (*b->fence > *a->fence) continue;
      ++found;
      if (found > kMaxReported) continue;
      violation v;
      v.checker = "fence_order";
      v.t_us = b->complete_us;
      v.summary = "r" + std::to_string(resource) + ": hold #" + std::to_string(b->id) + " of c" +
                  std::to_string(b->client) + " got fence " + std::to_string(*b->fence) +
                  ", not above fence " + std::to_string(*a->fence) + " of hold #" + std::to_string(a->id) +
                  " of c" + std::to_string(a->client) + ", whose acquire had succeeded before";
      v.detail = "  " + h.format_hold(*a) + "\n  " + h.format_hold(*b) + "\n  the two clients on r" +
                 std::to_string(resource) + ", and the faults:\n" + h.slice_for(*a, *b, b->complete_us + 1);
      out.push_back(std::move(v));
    }
  }
  return out;
}

std::vector<violation> check_fenced_resource(const history& h) {
  std::map<int, std::uint64_t> highest;
  std::map<int, bool> seen;
  std::vector<const write_record*> order;
  for (const auto& w : h.writes) order.push_back(&w);
  std::stable_sort(order.begin(), order.end(),
                   [](const write_record* a, const write_record* b) { return a->arrived_us < b->arrived_us; });
  std::vector<violation> out;
  for (const write_record* w : order) {
    const bool any = seen[w->resource];
    const std::uint64_t top = highest[w->resource];
    const bool should_accept = !any || w->fence >= top;
    if (w->accepted != should_accept) {
      violation v;
      v.checker = "fenced_resource";
      v.t_us = w->arrived_us;
      v.summary = "r" + std::to_string(w->resource) + ": a write with fence " + std::to_string(w->fence) + " was " +
                  (w->accepted ? "accepted" : "refused") + " with the highest fence seen " +
                  (any ? std::to_string(top) : std::string("none"));
      v.detail = h.slice(w->arrived_us - kContext_us, w->arrived_us + kContext_us, w->resource);
      out.push_back(std::move(v));
    }
    if (w->accepted) {
      seen[w->resource] = true;
      highest[w->resource] = std::max(top, w->fence);
    }
  }
  return out;
}

std::vector<violation> check_keys_left(const std::vector<std::vector<std::string>>& names,
                                       const std::vector<std::vector<std::string>>& described, std::int64_t t_us) {
  std::vector<violation> out;
  std::string list;
  std::size_t n = 0;
  for (std::size_t node = 0; node < names.size(); ++node) {
    for (std::size_t k = 0; k < names[node].size(); ++k) {
      if (ends_with(names[node][k], ":fence")) continue;
      ++n;
      list += "    node" + std::to_string(node) + ": " +
              (k < described[node].size() ? described[node][k] : names[node][k]) + "\n";
    }
  }
  if (n > 0) {
    violation v;
    v.checker = "keys_left";
    v.t_us = t_us;
    v.summary = std::to_string(n) + " lock key(s) still on the nodes after the faults healed and every TTL passed";
    v.detail = list;
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<violation> check_callbacks(const history& h) {
  std::vector<violation> out;
  auto add = [&](std::int64_t t, std::string summary, std::string detail) {
    if (out.size() >= 2 * kMaxReported) return;
    violation v;
    v.checker = "callbacks";
    v.t_us = t;
    v.summary = std::move(summary);
    v.detail = std::move(detail);
    out.push_back(std::move(v));
  };
  for (const auto& o : h.ops) {
    if (o.completions != 1) {
      add(o.call_us,
          std::string(to_string(o.kind)) + " #" + std::to_string(o.id) + " of c" + std::to_string(o.client) +
              " called " + history::format_time(o.call_us) + ": its callback ran " + std::to_string(o.completions) +
              " times",
          h.slice(o.call_us - kContext_us, o.call_us + kContext_us, o.resource));
    }
    if (o.inside_call) {
      add(o.call_us,
          std::string(to_string(o.kind)) + " #" + std::to_string(o.id) + " of c" + std::to_string(o.client) +
              ": its callback ran inside the call",
          "");
    }
  }
  for (const auto& hd : h.holds) {
    const int expected = hd.lost ? 1 : 0;
    if (hd.on_lost_calls != expected) {
      add(hd.complete_us,
          "hold #" + std::to_string(hd.id) + " of c" + std::to_string(hd.client) + ": on_lost ran " +
              std::to_string(hd.on_lost_calls) + " times, lock::lost() is " + (hd.lost ? "true" : "false"),
          "  " + h.format_hold(hd) + "\n");
    }
  }
  return out;
}

}  // namespace redlock::simtest
