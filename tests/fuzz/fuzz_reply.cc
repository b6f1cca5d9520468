// libFuzzer target: reply handling. Arbitrary bytes are fed, in fragments of
// fuzzer-chosen sizes, into hiredis's redisReader (as lib/connection.cc does), and
// every complete reply is classified for every script (lib/reply.h) and, when it
// is an error, by classify_error and as a MOVED/ASK redirect; and every reply is
// read as a CLUSTER SHARDS and a CLUSTER SLOTS topology (protocol/cluster.h) and as
// Sentinel's and ROLE's answers (protocol/sentinel.h).
// Invariants: nothing crashes, each vote is one of the statuses a reply can
// produce, a redirect's slot and port are in range, and a slot map that parsed is
// consistent (each slot served by a shard whose master is a master node, or none).
#include <fuzzer/FuzzedDataProvider.h>
#include <hiredis/hiredis.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "protocol/cluster.h"
#include "protocol/reply.h"
#include "protocol/sentinel.h"
#include "pure/slot.h"

namespace {

using redlock::node_status;
using redlock::detail::classify_error;
using redlock::detail::classify_reply;
using redlock::detail::script_id;

bool valid_reply_status(node_status s) {
  return s == node_status::ok || s == node_status::held || s == node_status::not_owner ||
         s == node_status::auth_error || s == node_status::server_error || s == node_status::protocol_error;
}

// hiredis 0.14 has no maxelements (1.x caps it): a "*2000000000" header makes it
// calloc 16 GB, which libFuzzer would report as an out-of-memory. Inputs that
// announce more than 4096 elements are skipped, as hiredis's own reader fuzzer
// caps maxelements (at 1024).
bool announces_huge_array(const std::string& s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '*') continue;
    std::size_t j = i + 1;
    if (j < s.size() && s[j] == '-') continue;
    unsigned long long v = 0;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9' && v < 100000)
      v = v * 10 + static_cast<unsigned>(s[j++] - '0');
    if (v > 4096) return true;
  }
  return false;
}

void classify_all(const redisReply* r) {
  for (unsigned s = 0; s < static_cast<unsigned>(script_id::count); ++s) {
    auto c = classify_reply(static_cast<script_id>(s), r);
    if (!valid_reply_status(c.v.status)) {
      std::fprintf(stderr, "fuzz_reply: unexpected status %d for script %u\n", static_cast<int>(c.v.status),
                   s);
      std::abort();
    }
    if (c.detail.size() > 4096) std::abort();  // details are bounded
  }
  if (r->type == REDIS_REPLY_ERROR) {
    auto c = classify_error(std::string_view(r->str, r->len));
    if (!valid_reply_status(c.v.status) || c.detail.find('\n') != std::string::npos) std::abort();
    if (const auto to = redlock::detail::parse_redirect(std::string_view(r->str, r->len))) {
      if (to->slot < 0 || to->slot >= redlock::detail::kClusterSlots || to->port < 1 || to->port > 65535) std::abort();
    }
  }
}

// A slot map, however it parsed, is consistent: every slot served by a shard with
// a master, or by none; a shard's master is one of its nodes, and a master.
void check_map(const redlock::detail::slot_map& m) {
  if (m.shards().empty()) {
    if (m.covered() != 0) std::abort();
    return;
  }
  int covered = 0;
  for (int s = 0; s < redlock::detail::kClusterSlots; ++s) {
    const int i = m.shard_of(s);
    if (i < -1 || i >= static_cast<int>(m.shards().size())) std::abort();
    if (i < 0) continue;
    ++covered;
    const auto& shard = m.shards()[static_cast<std::size_t>(i)];
    if (shard.master < 0 || shard.master >= static_cast<int>(shard.nodes.size())) std::abort();
    if (!shard.nodes[static_cast<std::size_t>(shard.master)].master) std::abort();
  }
  if (covered != m.covered()) std::abort();
}

// CLUSTER SHARDS and CLUSTER SLOTS parsed from any reply (protocol/cluster.h).
void parse_topologies(const redisReply* r) {
  redlock::detail::slot_map m;
  std::string error;
  if (redlock::detail::parse_cluster_shards(r, "127.0.0.1", m, error)) check_map(m);
  if (redlock::detail::parse_cluster_slots(r, "127.0.0.1", m, error)) check_map(m);
  // Sentinel's answers and ROLE (protocol/sentinel.h): ports in range when parsed.
  if (const auto a = redlock::detail::parse_master_addr(r)) {
    if (a->known && (a->address.port < 1 || a->address.port > 65535 || a->address.host.empty())) std::abort();
  }
  if (const auto role = redlock::detail::parse_role(r)) {
    for (const auto& e : role->replicas) {
      if (e.port < 1 || e.port > 65535) std::abort();
    }
  }
  if (r->type == REDIS_REPLY_STRING) {
    if (const auto sw = redlock::detail::parse_switch_master(std::string_view(r->str, r->len))) {
      if (sw->name.empty() || sw->to.port < 1 || sw->from.port < 1) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (announces_huge_array(std::string(reinterpret_cast<const char*>(data), size))) return 0;
  FuzzedDataProvider in(data, size);
  redisReader* reader = redisReaderCreate();
  if (reader == nullptr) return 0;
  int replies = 0;
  while (in.remaining_bytes() > 0 && replies < 10000) {
    const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(1, 64);
    const std::string chunk = in.ConsumeBytesAsString(n);
    if (redisReaderFeed(reader, chunk.data(), chunk.size()) != REDIS_OK) break;
    bool broken = false;
    for (;;) {
      void* reply = nullptr;
      if (redisReaderGetReply(reader, &reply) != REDIS_OK) {
        broken = true;  // the connection would fail with protocol_error
        break;
      }
      if (reply == nullptr) break;
      classify_all(static_cast<redisReply*>(reply));
      parse_topologies(static_cast<redisReply*>(reply));
      freeReplyObject(reply);
      ++replies;
    }
    if (broken) break;
  }
  redisReaderFree(reader);
  return 0;
}
