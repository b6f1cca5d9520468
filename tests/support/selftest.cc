// Self-test of the test harness: real redis-server processes, no redlock library.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <memory>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fake_listener.h"
#include "redis_node.h"

namespace redlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

struct ctx_free {
  void operator()(redisContext* c) const noexcept {
    if (c != nullptr) redisFree(c);
  }
};
struct reply_free {
  void operator()(redisReply* r) const noexcept {
    if (r != nullptr) freeReplyObject(r);
  }
};
using ctx_ptr = std::unique_ptr<redisContext, ctx_free>;
using reply_ptr = std::unique_ptr<redisReply, reply_free>;

timeval ms(int v) {
  timeval tv{};
  tv.tv_sec = v / 1000;
  tv.tv_usec = static_cast<suseconds_t>((v % 1000) * 1000);
  return tv;
}

// A raw hiredis connection with the same connect and read timeout.
ctx_ptr raw_connect(int port, int timeout_ms) {
  ctx_ptr c(redisConnectWithTimeout("127.0.0.1", port, ms(timeout_ms)));
  if (c && c->err == 0) redisSetTimeout(c.get(), ms(timeout_ms));
  return c;
}

reply_ptr raw_command(redisContext* c, const char* cmd) {
  return reply_ptr(static_cast<redisReply*>(redisCommand(c, cmd)));
}

bool process_gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

TEST(FreePort, ReturnsUsablePort) {
  int p = free_port();
  EXPECT_GT(p, 0);
  EXPECT_LT(p, 65536);
}

// Below the kernel's ephemeral range: no outgoing connection can hold a server's port
// while the server restarts on it.
TEST(FreePort, ReturnsPortsOutsideTheEphemeralRange) {
  int lo = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  ASSERT_TRUE(range >> lo);
  std::set<int> seen;
  for (int i = 0; i < 20; ++i) {
    const int p = free_port();
    EXPECT_GE(p, 20000);
    EXPECT_LT(p, lo) << "free_port() gave " << p << ", in the ephemeral range from " << lo;
    seen.insert(p);
  }
  EXPECT_GT(seen.size(), 1u) << "twenty calls gave one port";
}

TEST(RedisCluster, ThreeNodesStartOnDistinctPortsAndAnswer) {
  redis_cluster c(3);
  ASSERT_EQ(c.size(), 3u);
  std::set<int> ports;
  std::set<pid_t> pids;
  for (std::size_t i = 0; i < c.size(); ++i) {
    EXPECT_TRUE(c[i].running());
    EXPECT_FALSE(c[i].paused());
    ports.insert(c[i].port());
    pids.insert(c[i].pid());
    EXPECT_EQ(c[i].command({"PING"}), "PONG");
    EXPECT_EQ(c[i].uri(), "redis://127.0.0.1:" + std::to_string(c[i].port()));
    EXPECT_EQ(c[i].unix_path(), "");
    // Each answering server is the node's own child.
    EXPECT_NE(c[i].command({"INFO", "server"}).find("process_id:" + std::to_string(c[i].pid())),
              std::string::npos);
  }
  EXPECT_EQ(ports.size(), 3u);
  EXPECT_EQ(pids.size(), 3u);
  std::vector<std::string> uris = c.uris();
  ASSERT_EQ(uris.size(), 3u);
  EXPECT_EQ(uris[1], c[1].uri());
}

TEST(RedisNode, SetGetPttlHelpers) {
  redis_cluster c(3);
  redis_node& n = c[0];
  EXPECT_EQ(n.command({"SET", "k", "v1", "PX", "10000"}), "OK");
  EXPECT_EQ(n.get("k"), std::optional<std::string>("v1"));
  long long ttl = n.pttl("k");
  EXPECT_GT(ttl, 8000);
  EXPECT_LE(ttl, 10000);
  EXPECT_TRUE(n.exists("k"));
  EXPECT_EQ(n.dbsize(), 1);
  EXPECT_EQ(n.get("missing"), std::nullopt);
  EXPECT_EQ(n.pttl("missing"), -2);
  EXPECT_FALSE(n.exists("missing"));
  EXPECT_EQ(n.command({"SET", "persist", "x"}), "OK");
  EXPECT_EQ(n.pttl("persist"), -1);

  // Binary-safe values.
  std::string bin("a\0b\r\n", 5);
  EXPECT_EQ(n.command({"SET", "bin", bin}), "OK");
  EXPECT_EQ(n.get("bin"), std::optional<std::string>(bin));

  EXPECT_EQ(c.count_key("k"), 1);
  EXPECT_EQ(c[1].command({"SET", "k", "v1"}), "OK");
  EXPECT_EQ(c[2].command({"SET", "k", "other"}), "OK");
  EXPECT_EQ(c.count_key("k"), 3);
  EXPECT_EQ(c.count_value("k", "v1"), 2);
  EXPECT_EQ(c.count_value("k", "nope"), 0);

  // Helpers on a list key: get() throws (WRONGTYPE), command() renders.
  EXPECT_EQ(n.command({"RPUSH", "list", "a", "b"}), "2");
  EXPECT_THROW(n.get("list"), std::runtime_error);
  EXPECT_EQ(c.count_value("list", "a"), 0);
}

TEST(RedisNode, CommandRendering) {
  redis_node n;
  EXPECT_EQ(n.command({"PING"}), "PONG");
  EXPECT_EQ(n.command({"ECHO", "hello world"}), "hello world");
  EXPECT_EQ(n.command({"INCR", "counter"}), "1");
  EXPECT_EQ(n.command({"GET", "nothing"}), "(nil)");
  EXPECT_EQ(n.command({"RPUSH", "l", "a", "b"}), "2");
  EXPECT_EQ(n.command({"LRANGE", "l", "0", "-1"}), "[a, b]");
  EXPECT_EQ(n.command({"LRANGE", "empty", "0", "-1"}), "[]");
  EXPECT_EQ(n.command({"MGET", "l", "nothing", "counter"}), "[(nil), (nil), 1]");
  std::string err = n.command({"NOSUCHCOMMAND"});
  EXPECT_EQ(err.rfind("(error) ERR ", 0), 0u) << err;
  EXPECT_NE(n.command({"GET", "l"}).find("(error) WRONGTYPE"), std::string::npos);
  EXPECT_EQ(n.command({"EVAL", "return {1, {'x', 'y'}}", "0"}), "[1, [x, y]]");
  EXPECT_THROW(n.command({}), std::invalid_argument);
}

TEST(RedisNode, PauseMakesPingTimeOutAndResumeRestoresIt) {
  redis_cluster c(2);
  redis_node& n = c[0];
  ASSERT_EQ(n.command({"SET", "k", "v"}), "OK");
  ASSERT_EQ(c[1].command({"SET", "k", "v"}), "OK");

  n.pause();
  EXPECT_TRUE(n.paused());
  EXPECT_TRUE(n.running());
  {
    auto t0 = steady::now();
    ctx_ptr raw = raw_connect(n.port(), 200);
    ASSERT_TRUE(raw);
    // The kernel completes the handshake (listen backlog); only the reply is missing.
    if (raw->err == 0) {
      reply_ptr r = raw_command(raw.get(), "PING");
      EXPECT_FALSE(r) << "a paused server answered PING";
      EXPECT_EQ(raw->err, REDIS_ERR_IO) << raw->errstr;
    }
    auto elapsed = steady::now() - t0;
    EXPECT_GE(elapsed, 150ms);
    EXPECT_LT(elapsed, 1500ms);
  }
  // Paused nodes are not counted.
  EXPECT_EQ(c.count_key("k"), 1);

  n.resume();
  EXPECT_FALSE(n.paused());
  ctx_ptr raw = raw_connect(n.port(), 200);
  ASSERT_TRUE(raw);
  ASSERT_EQ(raw->err, 0) << raw->errstr;
  reply_ptr r = raw_command(raw.get(), "PING");
  ASSERT_TRUE(r) << raw->errstr;
  EXPECT_EQ(std::string(r->str, r->len), "PONG");
  EXPECT_EQ(n.get("k"), std::optional<std::string>("v"));
  EXPECT_EQ(c.count_key("k"), 2);
}

TEST(RedisNode, KillAndRestartWithoutDataLosesKeys) {
  redis_node n;
  const int port = n.port();
  const pid_t old_pid = n.pid();
  ASSERT_EQ(n.command({"SET", "k", "v"}), "OK");
  ASSERT_EQ(n.command({"SAVE"}), "OK");  // even an RDB snapshot is wiped
  ASSERT_TRUE(std::filesystem::exists(n.dir() + "/dump.rdb"));

  n.kill();
  EXPECT_FALSE(n.running());
  EXPECT_EQ(n.pid(), -1);
  EXPECT_TRUE(process_gone(old_pid));
  EXPECT_THROW(n.get("k"), std::runtime_error);  // connection refused

  n.restart(/*keep_data=*/false);
  EXPECT_TRUE(n.running());
  EXPECT_EQ(n.port(), port);
  EXPECT_NE(n.pid(), old_pid);
  EXPECT_EQ(n.get("k"), std::nullopt);
  EXPECT_EQ(n.dbsize(), 0);
  EXPECT_TRUE(std::filesystem::exists(n.dir() + "/redis.log"));

  // kill() then start() also works, on the same port; keys are gone without AOF.
  ASSERT_EQ(n.command({"SET", "k2", "v"}), "OK");
  n.kill();
  n.start();
  EXPECT_EQ(n.port(), port);
  EXPECT_EQ(n.dbsize(), 0);
  n.start();  // no-op when running
  EXPECT_TRUE(n.running());
}

TEST(RedisNode, AofKeepsDataAcrossRestart) {
  node_config cfg;
  cfg.aof = true;
  redis_node n(cfg);
  ASSERT_EQ(n.command({"CONFIG", "GET", "appendonly"}), "[appendonly, yes]");
  ASSERT_EQ(n.command({"CONFIG", "GET", "appendfsync"}), "[appendfsync, always]");
  ASSERT_EQ(n.command({"SET", "k", "v", "PX", "60000"}), "OK");

  n.restart(/*keep_data=*/true);  // SIGKILL: only the fsynced AOF can keep the key
  EXPECT_EQ(n.get("k"), std::optional<std::string>("v"));
  long long ttl = n.pttl("k");
  EXPECT_GT(ttl, 50000);
  EXPECT_LE(ttl, 60000);

  n.restart(/*keep_data=*/false);
  EXPECT_EQ(n.get("k"), std::nullopt);
  EXPECT_EQ(n.dbsize(), 0);
}

TEST(RedisNode, PasswordAndAclUsers) {
  node_config cfg;
  cfg.password = "s3cret";
  cfg.acl_users = {"user alice on >wonderland ~* +@all", "bob on >builder ~* -@all +get +ping"};
  redis_node n(cfg);
  EXPECT_EQ(n.uri(), "redis://:s3cret@127.0.0.1:" + std::to_string(n.port()));

  // The helpers authenticate.
  EXPECT_EQ(n.command({"SET", "k", "v"}), "OK");
  EXPECT_EQ(n.get("k"), std::optional<std::string>("v"));
  EXPECT_EQ(n.dbsize(), 1);

  ctx_ptr raw = raw_connect(n.port(), 1000);
  ASSERT_TRUE(raw);
  ASSERT_EQ(raw->err, 0) << raw->errstr;
  reply_ptr r = raw_command(raw.get(), "GET k");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->type, REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(r->str, r->len).rfind("NOAUTH", 0), 0u) << r->str;

  r = raw_command(raw.get(), "AUTH wrong");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->type, REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(r->str, r->len).rfind("WRONGPASS", 0), 0u) << r->str;

  r = raw_command(raw.get(), "AUTH alice wonderland");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->type, REDIS_REPLY_STATUS) << r->str;
  r = raw_command(raw.get(), "SET k2 v2");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->type, REDIS_REPLY_STATUS) << r->str;

  r = raw_command(raw.get(), "AUTH bob builder");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->type, REDIS_REPLY_STATUS) << r->str;
  r = raw_command(raw.get(), "GET k");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->type, REDIS_REPLY_STRING);
  r = raw_command(raw.get(), "SET k v3");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->type, REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(r->str, r->len).rfind("NOPERM", 0), 0u) << r->str;

  // Restart keeps the password.
  n.restart(false);
  EXPECT_EQ(n.dbsize(), 0);
  EXPECT_EQ(n.command({"PING"}), "PONG");
}

TEST(RedisNode, UnixSocket) {
  node_config cfg;
  cfg.unix_socket = true;
  redis_node n(cfg);
  const std::string path = n.unix_path();
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(path, n.dir() + "/redis.sock");
  EXPECT_EQ(n.unix_uri(), "unix://" + path);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));

  ASSERT_EQ(n.command({"SET", "k", "over-tcp"}), "OK");
  ctx_ptr raw(redisConnectUnixWithTimeout(path.c_str(), ms(1000)));
  ASSERT_TRUE(raw);
  ASSERT_EQ(raw->err, 0) << raw->errstr;
  reply_ptr r = raw_command(raw.get(), "GET k");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(r->str, r->len), "over-tcp");
  raw.reset();

  // Same path after a restart.
  n.restart(false);
  raw.reset(redisConnectUnixWithTimeout(path.c_str(), ms(1000)));
  ASSERT_TRUE(raw);
  ASSERT_EQ(raw->err, 0) << raw->errstr;
  r = raw_command(raw.get(), "PING");
  ASSERT_TRUE(r);
  EXPECT_EQ(std::string(r->str, r->len), "PONG");
}

TEST(RedisNode, ExtraArgs) {
  node_config cfg;
  cfg.extra_args = {"--maxmemory", "10mb", "--maxmemory-policy allkeys-lru"};
  redis_node n(cfg);
  EXPECT_EQ(n.command({"CONFIG", "GET", "maxmemory"}), "[maxmemory, 10485760]");
  EXPECT_EQ(n.command({"CONFIG", "GET", "maxmemory-policy"}), "[maxmemory-policy, allkeys-lru]");
}

TEST(RedisNode, BadConfigFailsFastWithLogTail) {
  node_config cfg;
  cfg.extra_args = {"--no-such-directive", "1"};
  auto t0 = steady::now();
  try {
    redis_node n(cfg);
    FAIL() << "started with a bad directive";
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("exited during startup"), std::string::npos) << what;
    EXPECT_NE(what.find("no-such-directive"), std::string::npos) << what;
  }
  EXPECT_LT(steady::now() - t0, 3s);
}

TEST(RedisNode, HelpersRecoverAfterServerSideClose) {
  redis_node n;
  ASSERT_EQ(n.command({"SET", "k", "v"}), "OK");
  // Kill every client connection, including the helpers' cached one.
  EXPECT_EQ(n.command({"CLIENT", "KILL", "TYPE", "normal"}).empty(), false);
  EXPECT_EQ(n.get("k"), std::optional<std::string>("v"));
  EXPECT_EQ(n.get("k"), std::optional<std::string>("v"));
}

TEST(RedisNode, HelpersAreThreadSafe) {
  redis_cluster c(2);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::string key = "t" + std::to_string(t) + ":" + std::to_string(i);
        redis_node& n = c[static_cast<std::size_t>(i % 2)];
        if (n.command({"SET", key, key}) != "OK") ++failures;
        if (n.get(key) != key) ++failures;
        if (c.count_key(key) != 1) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(c[0].dbsize() + c[1].dbsize(), 800);
}

TEST(RedisNode, RestartFromShortLivedThreadSurvivesThatThread) {
  redis_node n;
  std::thread([&] { n.restart(false); }).join();
  std::this_thread::sleep_for(200ms);  // PDEATHSIG would have fired by now
  EXPECT_TRUE(n.running());
  EXPECT_EQ(n.command({"PING"}), "PONG");
}

TEST(RedisNode, SeveralClustersAtOnce) {
  redis_cluster a(3);
  redis_cluster b(2);
  std::set<int> ports;
  for (std::size_t i = 0; i < a.size(); ++i) ports.insert(a[i].port());
  for (std::size_t i = 0; i < b.size(); ++i) ports.insert(b[i].port());
  EXPECT_EQ(ports.size(), 5u);
  ASSERT_EQ(a[0].command({"SET", "k", "a"}), "OK");
  EXPECT_EQ(a.count_key("k"), 1);
  EXPECT_EQ(b.count_key("k"), 0);
}

TEST(RedisNode, DestructorLeavesNoProcessOrDirectory) {
  pid_t running_pid = -1;
  pid_t paused_pid = -1;
  std::string dir;
  {
    redis_cluster c(2);
    running_pid = c[0].pid();
    paused_pid = c[1].pid();
    dir = c[0].dir();
    ASSERT_GT(running_pid, 0);
    ASSERT_GT(paused_pid, 0);
    c[1].pause();
    EXPECT_FALSE(process_gone(running_pid));
    EXPECT_TRUE(std::filesystem::exists(dir));
  }
  EXPECT_TRUE(process_gone(running_pid));
  EXPECT_TRUE(process_gone(paused_pid));
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(FakeListener, GarbageModeSendsNonRespBytes) {
  fake_listener l(fake_listener::mode::garbage);
  EXPECT_GT(l.port(), 0);
  EXPECT_EQ(l.uri(), "redis://127.0.0.1:" + std::to_string(l.port()));

  // Raw bytes: the banner, then more.
  ctx_ptr raw = raw_connect(l.port(), 1000);
  ASSERT_TRUE(raw);
  ASSERT_EQ(raw->err, 0) << raw->errstr;
  std::string got;
  auto deadline = steady::now() + 2s;
  while (got.size() < 64 && steady::now() < deadline) {
    char buf[512];
    ssize_t r = ::recv(raw->fd, buf, sizeof buf, 0);
    if (r <= 0) break;
    got.append(buf, static_cast<std::size_t>(r));
  }
  ASSERT_GE(got.size(), 64u);
  EXPECT_EQ(got.rfind(fake_listener::banner, 0), 0u);
  // Not a RESP reply: the first byte is none of + - : $ *.
  EXPECT_EQ(std::string("+-:$*").find(got[0]), std::string::npos);
  raw.reset();

  // hiredis reports a protocol error.
  raw = raw_connect(l.port(), 1000);
  ASSERT_TRUE(raw);
  ASSERT_EQ(raw->err, 0) << raw->errstr;
  reply_ptr r = raw_command(raw.get(), "PING");
  EXPECT_FALSE(r);
  EXPECT_EQ(raw->err, REDIS_ERR_PROTOCOL) << raw->errstr;
  EXPECT_GE(l.accepted(), 2);
}

TEST(FakeListener, SilentModeNeverAnswers) {
  fake_listener l(fake_listener::mode::silent);
  auto t0 = steady::now();
  ctx_ptr raw = raw_connect(l.port(), 200);
  ASSERT_TRUE(raw);
  ASSERT_EQ(raw->err, 0) << raw->errstr;
  reply_ptr r = raw_command(raw.get(), "PING");
  EXPECT_FALSE(r);
  EXPECT_EQ(raw->err, REDIS_ERR_IO) << raw->errstr;
  auto elapsed = steady::now() - t0;
  EXPECT_GE(elapsed, 150ms);
  EXPECT_LT(elapsed, 1500ms);
}

TEST(FakeListener, CloseModeHangsUp) {
  fake_listener l(fake_listener::mode::close);
  ctx_ptr raw = raw_connect(l.port(), 1000);
  ASSERT_TRUE(raw);
  ASSERT_EQ(raw->err, 0) << raw->errstr;
  reply_ptr r = raw_command(raw.get(), "PING");
  EXPECT_FALSE(r);
  // EOF, or a reset if the close raced with our write.
  EXPECT_TRUE(raw->err == REDIS_ERR_EOF || raw->err == REDIS_ERR_IO) << raw->errstr;
}

TEST(FakeListener, DestructorIsBoundedWithOpenClients) {
  auto t0 = steady::now();
  std::vector<ctx_ptr> clients;
  {
    fake_listener l(fake_listener::mode::silent);
    for (int i = 0; i < 3; ++i) clients.push_back(raw_connect(l.port(), 200));
  }
  EXPECT_LT(steady::now() - t0, 2s);
}

}  // namespace
}  // namespace redlock::test
