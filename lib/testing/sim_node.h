// A simulated Redis 7.0 server, for deterministic tests of the library's real
// client code: the client's RESP bytes go in, Redis' RESP2 reply bytes come out,
// at a time the caller chooses (virtual time). No sockets, no threads, no clock.
//
// What it serves, byte for byte as Debian 12's redis-server 7.0 does (pinned by
// tests/sim/sim_node_diff_test.cc against a real server):
//   - the commands the library sends: AUTH [user] pass, SELECT, PING, INFO server
//     (run_id, uptime_in_seconds), INFO memory (maxmemory, maxmemory_policy), TIME, SET key token NX PX ttl GET, EVAL/EVALSHA
//     of every script in lib/scripts.h and include/redlock/fencing.h;
//   - for tests: GET, SET (NX XX GET KEEPTTL EX PX EXAT PXAT), DEL, EXISTS, TYPE,
//     PTTL, PEXPIRE (NX XX GT LT), INCR, KEYS, DBSIZE, FLUSHALL, FLUSHDB, ECHO,
//     SCRIPT LOAD/EXISTS/FLUSH/KILL, LPUSH, RPUSH, LLEN, LRANGE (lists exist so
//     that a test can make a key of the wrong type), INFO keyspace;
//   - the protocol: multibulk and inline requests, pipelining, requests split
//     anywhere across feed() calls, Redis' protocol errors (with its limits for
//     unauthenticated connections), its unknown-command and arity errors, NOAUTH
//     and WRONGPASS, WRONGTYPE, 16 databases.
// Scripts are not interpreted: each known script body (recognised by its SHA-1,
// pinned in sim_node.cc) has a native twin that reproduces its Lua semantics,
// including the error replies of the redis.call()s it makes, Lua's type errors,
// and the writes made before an error (scripts do not roll back). Any other
// script gets an error reply that says the simulator does not support it.
//
// Deliberate differences from a real server:
//   - expiry is lazy only (a key is removed when a command touches it, or by
//     expire_all()): DBSIZE and INFO keyspace count expired keys not touched yet,
//     as a real server does between two active-expiry cycles;
//   - KEYS returns keys in byte order, a real server in hash order;
//   - INFO has the server, memory and keyspace sections only; the memory section
//     has maxmemory (always 0) and maxmemory_policy (node_config) alone, and the
//     node never evicts; the server section's values other than run_id,
//     uptime_in_seconds, uptime_in_days, server_time_usec, tcp_port and lru_clock
//     are plausible constants;
//   - a command Redis has but the simulator lacks (SCRIPT HELP, HELLO, ...) is an
//     unknown command; there is no MULTI, no QUIT, no RESP3;
//   - at most one ACL user besides the default one (node_config), with every
//     permission.
//
// Cluster mode and replication (issue 23's simulator item), driven by the world:
//   - set_cluster() makes the node a Redis Cluster member that knows the map (the
//     shards, their slot ranges, each shard's master and replicas): CLUSTER SHARDS
//     (Redis 7.0's reply shape), CLUSTER MYID, ASKING (+OK; there is no slot
//     migration, so it changes nothing), and -MOVED <slot> <host>:<port> to a keyed
//     command (EVAL/EVALSHA by their KEYS) whose slot is not its own as a master
//     (a replica redirects every keyed command: no client sends READONLY),
//     -CROSSSLOT when the keys span slots, -CLUSTERDOWN for a slot no master serves.
//     The redirect comes after the NOAUTH and injected-error checks (Redis' ACL
//     check), before READONLY and LOADING, as in Redis' processCommand.
//   - Replication: a master with attached replicas (attach_replica) records, after
//     each write command, the new state of every key it changed (a changed key's
//     whole entry, or its removal: Redis 7 replicates a script's effects, not the
//     script; one record per key, offsets count records, not bytes); take_writes()
//     hands them to the world, which delivers them to the replicas (apply()) and
//     their acknowledgements back (ack()). INFO replication has role,
//     connected_slaves, slaveK:ip=,port=,state=online,offset=,lag=0 and
//     master_repl_offset on a master; role:slave, master_host, master_port on a
//     replica. WAIT numreplicas timeout answers at once when enough replicas have
//     acknowledged the session's last offset; else the session blocks (its later
//     requests wait behind it) until unblock() finds enough acknowledgements or the
//     timeout passed (timeout 0: for ever), then answers the count, as Redis does.
//   - A replica (follow()) refuses a write command with -READONLY You can't write
//     against a read only replica. (a script's write: that error raised by its
//     redis.call()).
//
// Time: every call takes the node's own wall clock, `now_us` (microseconds since
// the epoch: what TIME reports). The node never reads a clock: a clock jump is a
// jumped `now_us`. Keys expire as in Redis: a key with expiry time `when` (ms) is
// gone once now_ms > when, where now_ms = now_us / 1000.
//
// Thread safety: none. A node and its sessions belong to one thread (the
// simulated world's). A session must not outlive its node.
#pragma once

#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "redlock/version.h"

namespace redlock::sim {

enum class persistence {
  none,        // a restart loses every key
  aof_always,  // appendonly yes, appendfsync always: every acknowledged write survives
};

struct node_config {
  persistence persist = persistence::none;
  // The password ("" = none). Without a username: the default user's (requirepass).
  std::string password;
  // An ACL user with every permission and `password` (any password if empty); the
  // default user is then off ("user default off"). "" (or "default") = no such user.
  std::string username;
  // What INFO reports as tcp_port.
  int tcp_port = 6379;
  // What INFO memory reports as maxmemory_policy (the node never evicts: it only
  // reports the policy, which the client's eviction check reads).
  std::string maxmemory_policy = "noeviction";
  // With aof_always: after each restart the node is loading its AOF for this long
  // (microseconds of the node's own clock, from the restart's now_us): every
  // command without Redis' "loading" flag (all but AUTH, SELECT, INFO, TIME and
  // ECHO) gets "-LOADING Redis is loading the dataset in memory", after the
  // unknown-command, arity, NOAUTH and injected-error checks, as Redis 7.0's
  // processCommand does (pinned against a real server loading its data by
  // sim_node_diff_test.cc). 0 (the default): no loading phase.
  std::int64_t loading_us = 0;
};

// One member of a cluster map (set_cluster).
struct cluster_member {
  std::string id;    // 40 characters, as Redis' node ids
  std::string host;  // what CLUSTER SHARDS reports as ip and endpoint, and MOVED names
  int port = 6379;
  bool master = false;
  bool failed = false;  // health "failed" instead of "online"
};
struct cluster_shard {
  std::vector<std::pair<int, int>> slots;  // inclusive ranges
  std::vector<cluster_member> members;     // the master (if any) first
};

// One simulated server process.
class REDLOCK_EXPORT node {
 public:
  enum class kind : std::uint8_t { string, list };
  struct entry {
    kind type = kind::string;
    std::int64_t expire_ms = -1;  // absolute ms since the epoch; -1 = none
    std::string str;
    std::vector<std::string> list;  // front = head
  };
  // One replicated change: a key's new entry (or its removal), or a flush.
  struct replicated_write {
    std::uint64_t offset = 0;  // the master's offset once this record is in
    int db = 0;
    enum class what : std::uint8_t { put, remove, flush_db, flush_all } op = what::put;
    std::string key;
    entry value;  // put
  };

  // One client connection's server-side state: authentication, selected db, and
  // the bytes of a request not complete yet. Dies when the node restarts.
  class session {
   public:
    // False after the node restarted or after a protocol error (the world closes
    // the connection).
    bool alive() const noexcept { return !closed_ && !life_.expired(); }
    int db() const noexcept { return db_; }
    bool authenticated() const noexcept { return authenticated_; }

   private:
    friend class node;
    session(std::weak_ptr<const int> life, bool authenticated)
        : life_(std::move(life)), authenticated_(authenticated) {}
    std::weak_ptr<const int> life_;  // expires when the node restarts
    bool authenticated_;
    bool closed_ = false;
    int db_ = 0;
    std::string in_;  // unconsumed request bytes
    std::uint64_t woff_ = 0;  // the master's offset after this session's last command
    // A WAIT blocked: its count, its target offset and deadline (node time; -1 none).
    bool blocked_ = false;
    long long wait_replicas_ = 0;
    std::uint64_t wait_offset_ = 0;
    std::int64_t wait_deadline_us_ = -1;
  };

  // `run_id_seed` makes the run_ids (and INFO's process_id) deterministic: the same
  // seed gives the same run_id sequence across restarts. The node starts at
  // `now_us` (uptime counts from it).
  explicit node(node_config cfg, std::uint64_t run_id_seed, std::int64_t now_us = 0);
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  // A new connection: db 0, authenticated if the server needs no AUTH.
  std::unique_ptr<session> open_session() const;

  // Request bytes received on `s` at the node's time `now_us`: each complete
  // request is executed in order and its reply appended to `out`; an incomplete
  // one is kept for the next call. Returns false when the connection must be
  // closed: after a protocol error (its "-ERR Protocol error: ..." reply appended
  // after the replies to the requests before it; the bytes after it are dropped,
  // as Redis does), or when the session is dead (nothing appended).
  bool feed(session& s, const char* data, std::size_t n, std::int64_t now_us, std::string& out);
  bool feed(session& s, std::string_view data, std::int64_t now_us, std::string& out) {
    return feed(s, data.data(), data.size(), now_us, out);
  }

  // Executes one request (argv[0] is the command) on `s` as if it had arrived
  // complete at `now_us`; returns its RESP reply ("" on a dead session or for an
  // empty argv, which Redis ignores).
  std::string execute(session& s, const std::vector<std::string>& argv, std::int64_t now_us);

  // A crash and restart at `now_us`: the keys survive only with aof_always (then
  // loaded for node_config::loading_us); the script cache is emptied; a new
  // run_id; uptime restarts; every session dies.
  void restart(std::int64_t now_us);
  // SCRIPT FLUSH.
  void flush_scripts() noexcept;
  // Removes every key expired at `now_us` (what Redis' active expiry eventually
  // does).
  void expire_all(std::int64_t now_us);

  // Inspection and interference, in database `db` (0..15), outside any session:
  // no AUTH, no error injection, nothing counted, nothing removed by expiry.
  // get(): nullopt if absent, expired or not a string.
  std::optional<std::string> get(const std::string& key, std::int64_t now_us, int db = 0) const;
  // -2 absent or expired, -1 no expiry, else the ms left (PTTL).
  std::int64_t pttl(const std::string& key, std::int64_t now_us, int db = 0) const;
  // SET key value [PX px_ms]: replaces a key of any type; with px_ms the key
  // expires once now_ms > now_us / 1000 + px_ms.
  void set(const std::string& key, std::string value, std::optional<std::int64_t> px_ms, std::int64_t now_us,
           int db = 0);
  // True if a key (expired or not) was removed.
  bool del(const std::string& key, int db = 0);
  // The keys alive at `now_us`, in byte order.
  std::vector<std::string> keys(std::int64_t now_us, int db = 0) const;

  // Error injection: from now on every request for `command` (upper case, e.g.
  // "EVALSHA"; "" = every command) gets `error_line` as its error reply instead of
  // running, once it has passed the unknown-command, arity and NOAUTH checks. E.g.
  // "READONLY You can't write against a read only replica.", "OOM command not
  // allowed when used memory > 'maxmemory'.", "NOPERM ...". A leading '-' is
  // optional. An empty error_line clears that command's injection. A
  // command-specific injection wins over the "" one. The commands a script calls
  // are not affected.
  void inject_error(std::string command, std::string error_line);

  // --- cluster mode ---
  // Makes the node a cluster member with id `my_id` (one of the map's members) and
  // this map (replacing any earlier one: a failover updates every member's).
  void set_cluster(std::string my_id, std::vector<cluster_shard> shards);
  bool cluster_enabled() const noexcept { return !my_id_.empty(); }

  // --- replication ---
  // Becomes a replica of host:port (role:slave; writes refused), or a master again.
  void follow(std::string master_host, int master_port);
  void promote();
  bool replica() const noexcept { return !master_host_.empty(); }
  // A replica attached to this master (id: any unique name) after a full sync (it
  // has acknowledged the current offset), or gone.
  void attach_replica(std::string id, std::string host, int port);
  void detach_replica(const std::string& id);
  // A replica acknowledged `offset`.
  void ack(const std::string& id, std::uint64_t offset);
  // The records written since the last call (empty without attached replicas).
  std::vector<replicated_write> take_writes();
  // On a replica: one record of its master's stream.
  void apply(const replicated_write& w);
  // A full resynchronisation: every database and the offset become `master`'s.
  void load(const node& master);
  std::uint64_t repl_offset() const noexcept { return repl_offset_; }

  // A session blocked in WAIT; its deadline (node time, -1 = none).
  bool blocked(const session& s) const noexcept { return s.blocked_; }
  std::int64_t wait_deadline(const session& s) const noexcept { return s.wait_deadline_us_; }
  // Answers a blocked WAIT when enough replicas acknowledged or its deadline passed
  // at `now_us`, then runs the requests that waited behind it (as feed()). Returns
  // what feed() does; nothing happens while it must still wait.
  bool unblock(session& s, std::int64_t now_us, std::string& out);

  // True while the node is loading its data after a restart (node_config::loading_us).
  bool loading(std::int64_t now_us) const noexcept { return now_us < loading_until_us_; }

  // 40 hex digits, new at each restart.
  const std::string& run_id() const noexcept { return run_id_; }
  // How many times `command` (any case; "script|load" for a subcommand) ran since
  // construction, as INFO commandstats' calls=: a command a script calls counts,
  // one refused by NOAUTH, arity or an injected error does not.
  std::uint64_t calls(std::string_view command) const;
  const node_config& config() const noexcept { return cfg_; }

 private:
  using database = std::unordered_map<std::string, entry>;
  struct exec;
  struct script_run;
  friend struct exec;
  friend struct script_run;

  enum class parsed { command, need_more, empty, error };
  // A live session of this node (not of an earlier run, nor closed).
  bool owns(const session& s) const noexcept;
  parsed parse(session& s, std::string_view buf, std::size_t& pos, std::string& error);
  bool consume(session& s, std::string_view buf, std::size_t& pos, std::int64_t now_us, std::string& out);
  void run(session& s, std::size_t argc, std::int64_t now_us, std::string& out);
  void new_run_id();
  // Cluster mode: the redirect (or CROSSSLOT) error for a keyed request not this
  // node's to serve, else "".
  std::string redirect_of(int command, std::size_t argc) const;
  long long acked(std::uint64_t offset) const noexcept;

  node_config cfg_;
  std::uint64_t seed_;
  std::uint64_t restarts_ = 0;
  std::shared_ptr<const int> life_;  // replaced at each restart
  std::int64_t start_us_;
  std::int64_t loading_until_us_ = 0;  // node time; loading while now_us is before it
  std::string run_id_;
  std::array<database, 16> dbs_;
  std::bitset<16> scripts_;  // which known scripts are in the script cache
  std::unordered_map<std::string, std::string> injected_;
  std::vector<std::uint64_t> calls_;
  // Cluster mode ("" my_id_: standalone).
  std::string my_id_;
  std::vector<cluster_shard> shards_;
  std::vector<std::int16_t> slot_owner_;  // per slot: the shard, -1 none
  // Replication.
  std::string master_host_;  // "" = a master
  int master_port_ = 0;
  struct replica_state {
    std::string id, host;
    int port = 0;
    std::uint64_t acked = 0;
  };
  std::vector<replica_state> replicas_;
  std::uint64_t repl_offset_ = 0;
  std::vector<replicated_write> backlog_;  // not taken yet
  // Reused buffers: no allocation per request once warm.
  std::vector<std::string_view> argv_;
  std::vector<std::string> inline_args_;
  std::string key_;
  std::string scratch_;
};

}  // namespace redlock::sim
