#include "primitives/leader_view.h"

#include <algorithm>
#include <functional>
#include <map>

namespace redlock::detail {

namespace {

bool is_sha1_hex(std::string_view s) {
  if (s.size() != 40) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

std::string format_leader_record(const leader_record& r) {
  return std::to_string(r.term) + " " + r.token_sha1 + " " + r.identity;
}

std::optional<leader_record> parse_leader_record(std::string_view text) {
  const auto sp1 = text.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0 || sp1 > 20) return std::nullopt;
  const auto sp2 = text.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return std::nullopt;
  leader_record r;
  std::uint64_t term = 0;
  for (char c : text.substr(0, sp1)) {
    if (c < '0' || c > '9') return std::nullopt;
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (term > (UINT64_MAX - digit) / 10) return std::nullopt;
    term = term * 10 + digit;
  }
  if (term == 0) return std::nullopt;
  r.term = term;
  r.token_sha1 = std::string(text.substr(sp1 + 1, sp2 - sp1 - 1));
  if (!is_sha1_hex(r.token_sha1)) return std::nullopt;
  r.identity = std::string(text.substr(sp2 + 1));
  if (r.identity.empty()) return std::nullopt;
  return r;
}

leader_decision decide_leader(const std::vector<node_leader_view>& nodes, std::size_t quorum) {
  leader_decision d;
  std::size_t answered = 0;
  struct group {
    leader_record record;
    std::vector<std::int64_t> pttls;
  };
  std::map<std::string, group> groups;  // by token sha1
  for (const auto& n : nodes) {
    if (!n.answered) continue;
    ++answered;
    if (!n.lock_sha1 || !n.record) continue;
    auto rec = parse_leader_record(*n.record);
    if (!rec || rec->token_sha1 != *n.lock_sha1) continue;
    auto& g = groups[rec->token_sha1];
    if (g.pttls.empty()) g.record = std::move(*rec);
    g.pttls.push_back(n.pttl < 0 ? 0 : n.pttl);
  }
  d.quorum_answered = quorum > 0 && answered >= quorum;
  if (!d.quorum_answered) return d;
  for (auto& [sha, g] : groups) {
    if (g.pttls.size() < quorum) continue;
    std::sort(g.pttls.begin(), g.pttls.end(), std::greater<>());
    const std::int64_t ttl = g.pttls[quorum - 1];
    if (ttl <= 0) continue;  // expiring now: no validity left on a quorum
    if (!d.leader || g.record.term > d.leader->term) {
      d.leader = g.record;
      d.ttl = std::chrono::milliseconds(ttl);
    }
  }
  return d;
}

}  // namespace redlock::detail
