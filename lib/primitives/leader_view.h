// Leader election's pure parts: the published leader record and the decision
// of who leads from what each node holds. No I/O; unit-tested in
// tests/unit/leader_view_test.cc.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

// The value of "<key>:leader": "<term> <sha1 hex of the lock token> <identity>".
struct leader_record {
  std::uint64_t term = 0;
  std::string token_sha1;  // 40 lower-case hex digits
  std::string identity;    // may contain spaces; not empty
};

std::string format_leader_record(const leader_record& r);
// nullopt for anything that is not a well-formed record.
std::optional<leader_record> parse_leader_record(std::string_view text);

// What one node answered to the observe script.
struct node_leader_view {
  bool answered = false;                  // a well-formed reply arrived
  std::optional<std::string> lock_sha1;   // sha1 hex of the lock key's value, if the key exists
  std::optional<std::string> record;      // the "<key>:leader" value, if it exists
  std::int64_t pttl = -2;                 // PTTL of the lock key
};

struct leader_decision {
  bool quorum_answered = false;  // at least `quorum` nodes answered
  std::optional<leader_record> leader;
  std::chrono::milliseconds ttl{0};
};

// A leader is named when at least `quorum` answering nodes hold a lock key whose
// value hashes to the token_sha1 of the record they also hold (one token can be
// on at most one quorum at a time). Its ttl is the quorum-th largest PTTL among
// those nodes: after it, fewer than a quorum hold the lock unless it is extended.
leader_decision decide_leader(const std::vector<node_leader_view>& nodes, std::size_t quorum);

}  // namespace redlock::detail
