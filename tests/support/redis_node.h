// Test harness: real redis-server (or valkey-server) processes on 127.0.0.1, one per
// node.
//
// Every node is a child process of the test binary, started with fork/exec on a
// free port, in its own temporary directory under /tmp/redlock-test-<pid>-XXXXXX/
// (removed by the destructor; directories of crashed test processes are removed by
// the next test process that starts a node).
// Children are started from one long-lived internal thread with
// prctl(PR_SET_PDEATHSIG, SIGKILL), so a crashing test never leaves servers behind,
// and nodes may be (re)started from short-lived threads.
//
// Thread safety: the assertion helpers (get, pttl, exists, dbsize, command,
// count_key, count_value) may be called from several threads at once. The
// lifecycle calls (start, kill, restart, pause, resume) are serialised by an
// internal mutex, so they are safe too, but concurrent lifecycle calls on one node
// are rarely meaningful.
//
// The redis-server binary is looked up in PATH, unless REDLOCK_TEST_REDIS_SERVER
// names one. The valkey-server binary is REDLOCK_TEST_VALKEY_SERVER, else the one
// the build configured (REDLOCK_VALKEY_SERVER, built by tools/valkey.sh); a Valkey
// node fails to start (throws) when there is none: never a skip.
//
// Which server a node runs (node_config::server) defaults to the process's choice,
// REDLOCK_TEST_SERVER: "redis" (or unset), "valkey", or "mixed" (redis_cluster nodes
// alternate Redis, Valkey, Redis, ...; a lone redis_node is Redis). ctest runs chosen
// scenarios a second and third time with it set (tests/CMakeLists.txt: VALKEY_TESTS),
// so one test body covers both servers. Each start checks that INFO server names the
// server asked for (Valkey reports server_name:valkey, Redis 7.0 no server_name).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

struct redisContext;
struct redisReply;

namespace redlock::test {

// The server implementations the harness starts. Both take the same command line
// (Valkey 8 is a fork of Redis 7.2.4 and keeps its flags and config names).
enum class server_kind { redis, valkey };

// "redis" or "valkey".
const char* to_string(server_kind k);

// What REDLOCK_TEST_SERVER asks for (see the top of this file).
enum class server_mix { redis, valkey, mixed };
// Throws std::runtime_error on a value other than redis, valkey, mixed or empty.
server_mix default_server_mix();
// The kind of a node that does not choose: node `index` of a cluster (a lone node
// is index 0) under default_server_mix().
server_kind default_server_kind(std::size_t index = 0);
// The binary that runs `k`. Throws std::runtime_error naming how to provide it.
const std::string& server_path(server_kind k);

struct node_config {
  // The server to run; unset = default_server_kind() (of its index in a cluster).
  std::optional<server_kind> server;
  // appendonly yes + appendfsync always: acknowledged writes survive a SIGKILL and
  // restart(true).
  bool aof = false;
  // requirepass (empty = none). The helpers AUTH with it.
  std::string password;
  // Extra ACL users, one per entry, in config-file syntax, e.g.
  // "user alice on >secret ~* +@all" (the leading "user" is optional).
  std::vector<std::string> acl_users;
  // Also listen on a unix socket (dir/redis.sock, perm 700).
  bool unix_socket = false;
  // TLS: the server listens with TLS only (--port 0 --tls-port <port>) and on the
  // unix socket (implied), where the harness's own connection goes (hiredis 0.14
  // has no TLS). uri() is then rediss://127.0.0.1:<port>. Certificate, key and
  // CA files are PEM paths (see tls_certs.h); all three are required.
  bool tls = false;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  // --tls-auth-clients: "no" (default), "yes" (a client certificate is required)
  // or "optional".
  std::string tls_auth_clients = "no";
  // --tls-protocols, e.g. "TLSv1.2"; "" = the server's default (TLSv1.2 TLSv1.3).
  std::string tls_protocols;
  // Extra redis-server arguments, appended after the harness's own. Each entry is
  // one argv token ({"--maxmemory", "10mb"}); an entry that starts with "--" and
  // contains spaces ("--maxmemory 10mb") is split on whitespace.
  std::vector<std::string> extra_args;
};

// A free TCP port on 127.0.0.1 (bind to port 0, read it back, close). Racy by
// nature: redis_node retries its first start on a new port when the port was taken.
// Throws std::runtime_error.
int free_port();

// A new, empty directory for test files, under this process's base directory
// (/tmp/redlock-test-<pid>-XXXXXX/, see redis_node). The caller removes it.
std::string make_test_dir(const std::string& name);

// The last `max_lines` lines of a text file ("" when it cannot be read).
std::string file_tail(const std::string& path, std::size_t max_lines);

// Starts the executable `path` with `argv` (argv[0] included) as a child of the test
// process, the way redis_node starts its servers: forked by one long-lived thread
// with PR_SET_PDEATHSIG (a crashing test leaves no child behind), stdin /dev/null,
// stdout and stderr appended to `out_path`, no other descriptor inherited. Returns
// its pid; throws std::runtime_error when it cannot fork or open the files.
pid_t spawn_child(const std::string& path, std::vector<std::string> argv, const std::string& out_path);
// True while the child `pid` has not exited (reaps it once it has). False for pid <= 0.
bool child_running(pid_t pid) noexcept;
// Stops the child `pid`: SIGCONT and SIGTERM, up to `grace` for it to exit, then
// SIGKILL; reaps it. No-op when it is not running. Never throws.
void stop_child(pid_t pid, std::chrono::milliseconds grace) noexcept;

class redis_node {
 public:
  // Creates the node's directory and starts the server on a free port (up to 5
  // attempts with fresh ports if the server fails to listen because the port was
  // taken meanwhile; only on this first start).
  // Throws std::runtime_error (with the tail of the server log) on failure.
  explicit redis_node(node_config cfg = {});
  // SIGCONT if paused, SIGKILL, waitpid, remove the directory. Never throws.
  ~redis_node();

  redis_node(const redis_node&) = delete;
  redis_node& operator=(const redis_node&) = delete;

  // The TCP port; fixed for the node's lifetime (restarts reuse it).
  int port() const;
  // The server's pid, or -1 when it is not running.
  pid_t pid() const;
  // True while the server process exists (also when paused). Reaps it if it died.
  bool running() const;
  // True between pause() and resume()/kill().
  bool paused() const;
  // "redis://127.0.0.1:PORT", or "redis://:PASSWORD@127.0.0.1:PORT" with a password
  // (the password is not percent-encoded: use URL-safe passwords); rediss:// with
  // cfg.tls.
  std::string uri() const;
  // The unix socket path ("" unless cfg.unix_socket or cfg.tls).
  std::string unix_path() const;
  // "unix:///path/redis.sock" ("" unless cfg.unix_socket or cfg.tls). A password is not
  // included (the library's unix URIs carry none).
  std::string unix_uri() const;
  // The node's temporary directory (data, redis.log, redis.stderr).
  std::string dir() const;
  const node_config& config() const { return cfg_; }
  // The server it runs (cfg.server, or the process default when that was unset).
  server_kind server() const { return server_; }
  // The last lines of redis.log and of the server's stderr, for diagnostics.
  std::string log_tail(std::size_t max_lines = 30) const;

  // Starts the server on the same port and directory and waits (<= 20 s) until it
  // answers PING with PONG (after AUTH). No-op if it is already running. Throws
  // std::runtime_error with the log tail on failure (the process is killed then).
  void start();
  // SIGKILL + waitpid. No-op if not running.
  void kill();
  // kill(); if !keep_data, delete the data files (dump.rdb, appendonly.aof,
  // appendonlydir); start().
  void restart(bool keep_data);
  // SIGSTOP, and wait until the process is stopped. Connections to a paused node
  // are accepted by the kernel but never answered.
  void pause();
  // SIGCONT. No-op if not paused.
  void resume();

  // Synchronous helpers for assertions. One cached connection per node (guarded by
  // a mutex, re-opened when stale), 2 s connect/command timeouts, AUTH with the
  // password if set. Throw std::runtime_error if the node cannot be reached, and
  // (except command()) on an error reply.
  std::optional<std::string> get(const std::string& key);
  long long pttl(const std::string& key);
  bool exists(const std::string& key);
  long long dbsize();
  // Any command; a readable rendering of the reply: status and string replies as
  // their text, integers in decimal, nil as "(nil)", errors as "(error) ERR ...",
  // arrays as "[a, b]" (nested arrays nest, the empty array is "[]").
  std::string command(const std::vector<std::string>& argv);
  // How many times the server executed `cmd` (lower case, e.g. "evalsha"): its
  // calls= in INFO commandstats; 0 if it never ran. Commands a script calls count
  // too; commands refused before running (ACL, syntax) do not.
  long long calls(const std::string& cmd);

 private:
  struct context_deleter {
    void operator()(redisContext* c) const noexcept;
  };
  struct reply_deleter {
    void operator()(redisReply* r) const noexcept;
  };
  using context_ptr = std::unique_ptr<redisContext, context_deleter>;
  using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

  void start_locked(bool first);
  void kill_locked() noexcept;
  bool reap_locked() const noexcept;
  std::vector<std::string> server_args() const;
  bool has_unix() const { return cfg_.unix_socket || cfg_.tls; }
  // A hiredis connection for the harness: TCP, or the unix socket with TLS.
  redisContext* connect_control(int timeout_ms) const;
  void drop_connection() noexcept;
  // Runs argv on the cached connection (opened on demand, re-opened once if it was
  // stale); never returns null, throws std::runtime_error on a connection failure.
  reply_ptr run(const std::vector<std::string>& argv);

  const node_config cfg_;
  const server_kind server_;
  std::string dir_;
  int port_ = 0;

  mutable std::mutex state_mu_;  // guards pid_, paused_
  mutable pid_t pid_ = -1;
  bool paused_ = false;

  std::mutex conn_mu_;  // guards conn_
  context_ptr conn_;
};

// N independent masters (not a Redis Cluster), each a redis_node with the same
// config (different ports and directories). Node i runs cfg.server if set, else
// default_server_kind(i).
class redis_cluster {
 public:
  explicit redis_cluster(int n, node_config cfg = {});
  // One node per entry, running that server (cfg.server is ignored).
  explicit redis_cluster(const std::vector<server_kind>& kinds, node_config cfg = {});

  std::size_t size() const { return nodes_.size(); }
  redis_node& operator[](std::size_t i) { return *nodes_.at(i); }
  const redis_node& operator[](std::size_t i) const { return *nodes_.at(i); }
  // uri() of every node, in order.
  std::vector<std::string> uris() const;
  // On how many running, non-paused nodes the key exists. A node that cannot be
  // queried (e.g. killed concurrently) counts as not having it.
  int count_key(const std::string& key);
  // On how many running, non-paused nodes the key holds exactly `value`.
  int count_value(const std::string& key, const std::string& value);

 private:
  std::vector<std::unique_ptr<redis_node>> nodes_;
};

}  // namespace redlock::test
