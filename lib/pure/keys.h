// The names of everything the library keeps on a node: the lock key, the fence
// counter, the election record and the release channel. Pure string building, the
// one place these formats live; docs/protocol.md ("Keys, values and channels")
// specifies them and tests/unit/protocol_doc_test.cc checks the two agree.
#pragma once

#include <string>
#include <string_view>

namespace redlock::detail {

inline constexpr std::string_view kFenceSuffix = ":fence";        // the fence counter of a lock key
inline constexpr std::string_view kLeaderSuffix = ":leader";      // an election's record
inline constexpr std::string_view kReleasedSuffix = ":released";  // the release notifications' channel

// key_prefix + resource: no separator is added.
inline std::string lock_key(std::string_view key_prefix, std::string_view resource) {
  std::string k(key_prefix);
  k += resource;
  return k;
}

inline std::string suffixed(std::string_view key, std::string_view suffix) {
  std::string k(key);
  k += suffix;
  return k;
}

inline std::string fence_key(std::string_view lock_key) { return suffixed(lock_key, kFenceSuffix); }
inline std::string leader_record_key(std::string_view lock_key) { return suffixed(lock_key, kLeaderSuffix); }
inline std::string release_channel(std::string_view lock_key) { return suffixed(lock_key, kReleasedSuffix); }

// A key's name on a Redis Cluster node (issue 23, docs/protocol.md): the lock key L
// wrapped in a hash tag, "{L}", and every key made from it (fence counter, election
// record: L + suffix) as "{L}" + suffix, so all of one resource's keys hash to one
// slot. `base` is the lock key the key was made from; `key` is L itself or L + a
// suffix (else, a key not made from `base`, the whole key is wrapped).
inline std::string cluster_key(std::string_view base, std::string_view key) {
  std::string k = "{";
  if (key.size() >= base.size() && key.substr(0, base.size()) == base) {
    k += base;
    k += '}';
    k += key.substr(base.size());
  } else {
    k += key;
    k += '}';
  }
  return k;
}

// True when `key` ends in ":fence" (a name reserved for fence counters).
inline bool is_fence_key(std::string_view key) {
  return key.size() >= kFenceSuffix.size() && key.substr(key.size() - kFenceSuffix.size()) == kFenceSuffix;
}

}  // namespace redlock::detail
