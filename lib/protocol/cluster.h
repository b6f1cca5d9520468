// What a Redis Cluster says about its topology, parsed: the MOVED and ASK redirects
// of an error reply, and the slot map of a CLUSTER SHARDS (7.0+) or CLUSTER SLOTS
// reply. No I/O; a reply is read, never kept.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

// "-MOVED 3999 127.0.0.1:6381" (the slot lives there now: update the map) or
// "-ASK 3999 127.0.0.1:6381" (this once, ASKING there first: a slot in migration).
struct redirect {
  enum class kind { moved, ask };
  kind type = kind::moved;
  int slot = 0;
  // Empty: an unknown endpoint (":6381", Redis 7's cluster-preferred-endpoint-type
  // unknown-endpoint): the host of the node that answered, with this port.
  std::string host;
  int port = 0;
};

// The redirect an error reply's text (without the leading '-') names, or nothing
// when it is no well-formed MOVED/ASK (a slot outside 0..16383, a port outside
// 1..65535, trailing text). The host is split from the port at the last ':', so
// an IPv6 address ("::1:6381") keeps its colons; a bracketed one is unwrapped.
std::optional<redirect> parse_redirect(std::string_view error) noexcept;

struct cluster_node {
  std::string id;    // the 40-character node id ("" when the reply has none)
  std::string host;  // where to connect: the preferred endpoint, else the IP, else the host that answered
  int port = 0;      // plain TCP port; 0 when the node has only a TLS port
  int tls_port = 0;  // 0 when none
  bool master = false;
  long long replication_offset = 0;
  bool online = true;  // CLUSTER SHARDS "health": online (not "failed" or "loading")
};

struct cluster_shard {
  std::vector<std::pair<int, int>> ranges;  // inclusive slot ranges
  std::vector<cluster_node> nodes;
  int master = -1;  // index into nodes; -1 when no node of the shard is a master
};

// Which shard serves each slot.
class slot_map {
 public:
  const std::vector<cluster_shard>& shards() const noexcept { return shards_; }
  // The shard serving `slot` (0..16383), or -1 when no shard with a master does.
  int shard_of(int slot) const noexcept;
  // How many of the 16384 slots a shard with a master serves.
  int covered() const noexcept;
  // Adds a shard, claiming its ranges for it if it has a master; false (and
  // `error`) when a range is out of 0..16383, reversed, or claims a claimed slot.
  bool add(cluster_shard shard, std::string& error);

 private:
  std::vector<cluster_shard> shards_;
  std::vector<std::int16_t> owner_;  // 16384 entries once a shard with a master is added, else empty
};

// CLUSTER SHARDS (RESP2: each map a flat array of field names and values). Fields
// not named here are ignored, so a newer server's additions parse. `answered_host`
// is the host the reply came from (for nodes whose endpoint is unknown). False, with
// `error` naming the problem, on a reply of another shape, a slot out of range, or
// a slot claimed twice.
bool parse_cluster_shards(const redisReply* reply, std::string_view answered_host, slot_map& out,
                          std::string& error);

// CLUSTER SLOTS: [[start, end, [host, port, id, ...], replica...], ...], one entry
// per slot range; ranges whose master has the same id (or address) form one shard.
bool parse_cluster_slots(const redisReply* reply, std::string_view answered_host, slot_map& out,
                         std::string& error);

// CONFIG GET cluster-node-timeout: ["cluster-node-timeout", "<ms>"] (milliseconds,
// 1..2^40). Nothing for another shape (a refusal: managed services often rename or
// forbid CONFIG) or a value out of range.
std::optional<std::uint64_t> parse_node_timeout(const redisReply* reply);

}  // namespace redlock::detail
