// Interoperability with node-redlock (npm redlock 5.0.0-beta.2 on ioredis 5, pinned in
// tests/interop/package-lock.json and installed by the ctest fixture interop.npm_ci):
// on the same three real redis-server nodes, node-redlock and this library (its C++ API
// and the `redlock` CLI) exclude each other on the same resources, with and without a
// key prefix, and a waiter of ours acquires only after node-redlock's release, whatever
// is published on the release channel meanwhile (docs/protocol.md, "Interoperating with
// other Redlock clients"). node and npm are required: without them these tests fail.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "redis_node.h"
#include "redlock/redlock.h"
#include "test_util.h"
#include "wait_util.h"

namespace redlock::test {
namespace {

using namespace wait_util;
using std::chrono::milliseconds;

// `name` found in PATH, or "".
std::string in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  std::size_t at = 0;
  while (at <= dirs.size()) {
    std::size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = dirs.substr(at, end - at) + "/" + name;
    if (end > at && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return "";
}

// A child process with stdout and stderr on one pipe, read line by line. The
// destructor SIGKILLs and reaps it if it still runs.
class child {
 public:
  explicit child(std::vector<std::string> argv) {
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int null = ::open("/dev/null", O_RDONLY);
      ::dup2(null, 0);
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    fd_ = fds[0];
  }
  ~child() {
    if (status_ < 0) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
    if (fd_ >= 0) ::close(fd_);
  }
  child(const child&) = delete;
  child& operator=(const child&) = delete;

  // The next line starting with one of `prefixes` (other lines are kept in
  // output()), or nullopt after `limit` or at end of output.
  std::optional<std::string> line(const std::vector<std::string>& prefixes, milliseconds limit = 15000ms) {
    const auto end = clock_type::now() + limit;
    while (true) {
      for (std::size_t nl; (nl = buf_.find('\n')) != std::string::npos;) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        output_ += l + "\n";
        for (const auto& p : prefixes) {
          if (l.rfind(p, 0) == 0) return l;
        }
      }
      const auto left = std::chrono::duration_cast<milliseconds>(end - clock_type::now()).count();
      if (left <= 0 || fd_ < 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 100))) <= 0) continue;
      char b[4096];
      const ssize_t n = ::read(fd_, b, sizeof b);
      if (n <= 0) {
        ::close(fd_);
        fd_ = -1;
      } else {
        buf_.append(b, static_cast<std::size_t>(n));
      }
    }
  }
  void signal(int signo) const { ::kill(pid_, signo); }
  bool running() {
    if (status_ >= 0) return false;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) != pid_) return true;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  // The exit status (128 + signal), or -1 if it did not exit within `limit`.
  int wait(milliseconds limit = 15000ms) {
    const auto end = clock_type::now() + limit;
    while (running()) {
      if (clock_type::now() > end) return -1;
      line({"\x01"}, 20ms);  // keeps the pipe drained
    }
    line({"\x01"}, 200ms);
    return status_;
  }
  // Every line read so far, for failure messages.
  const std::string& output() const { return output_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  int status_ = -1;
  std::string buf_, output_;
};

redis_cluster& nodes() {
  static redis_cluster* cl = new redis_cluster(3);
  return *cl;
}

std::vector<std::string> ports() {
  std::vector<std::string> p;
  for (std::size_t i = 0; i < nodes().size(); ++i) p.push_back(std::to_string(nodes()[i].port()));
  return p;
}

// The key holds `value` on all three nodes, within 3 s: a client answers at a quorum
// of grants, and the last node's grant lands a moment later.
bool on_every_node(const std::string& key, const std::string& value) {
  return eventually([&] { return nodes().count_value(key, value) == 3; });
}

// The key holds `value` on at least a quorum (2 of 3), within 3 s, and `before` (the
// previous holder's token) on at most one node: what a waiter that took over after a
// release holds. node-redlock's release answers at a quorum of deletes and the script
// then quits its connections: the third node's delete may land later, or never (a
// NOSCRIPT retry queued behind the QUIT), and that node then keeps `before` until it
// expires; a waiter's attempt may also reach it first. Either way the waiter holds a
// quorum only where `before` is gone.
bool on_a_quorum_after(const std::string& key, const std::string& value, const std::string& before) {
  const bool ok = eventually(
      [&] { return nodes().count_value(key, value) >= 2 && nodes().count_value(key, before) <= 1; });
  if (!ok) {
    for (std::size_t i = 0; i < nodes().size(); ++i) {
      ADD_FAILURE() << "node " << i << ": " << key << " = " << nodes()[i].get(key).value_or("(none)")
                    << " (ours " << value << ", before " << before << ")";
    }
  }
  return ok;
}

// The first line of `out` that is a token (the CLI's acquire prints one), or "".
std::string token_in(const std::string& out) {
  std::size_t at = 0;
  while (at < out.size()) {
    std::size_t nl = out.find('\n', at);
    if (nl == std::string::npos) nl = out.size();
    const std::string l = out.substr(at, nl - at);
    if (l.size() == 32 && l.find_first_not_of("0123456789abcdef") == std::string::npos) return l;
    at = nl + 1;
  }
  return "";
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

class Interop : public ::testing::Test {
 protected:
  void SetUp() override {
    node_ = in_path("node");
    ASSERT_FALSE(node_.empty())
        << "node (Node.js) is not in PATH: tools/deps.sh installs it (Debian packages "
           "nodejs, npm); this test does not skip";
    ASSERT_EQ(::access(REDLOCK_INTEROP_DIR "/node_modules/redlock/package.json", R_OK), 0)
        << "node-redlock is not installed in " REDLOCK_INTEROP_DIR
           " (the ctest fixture interop.npm_ci runs npm ci)";
  }

  // node_redlock.js MODE RESOURCE TTL on every node.
  std::unique_ptr<child> node_redlock(const std::string& mode, const std::string& resource, int ttl_ms) {
    std::vector<std::string> argv = {node_, REDLOCK_INTEROP_DIR "/node_redlock.js", mode, resource,
                                     std::to_string(ttl_ms)};
    for (const auto& p : ports()) argv.push_back(p);
    return std::make_unique<child>(argv);
  }

  // Starts node-redlock holding `resource`; returns its token ("" and a failure if not).
  std::string node_holds(std::unique_ptr<child>& holder, const std::string& resource, int ttl_ms = 30000) {
    holder = node_redlock("hold", resource, ttl_ms);
    const auto l = holder->line({"held ", "contended ", "node_redlock.js: "});
    if (!l || l->rfind("held ", 0) != 0) {
      ADD_FAILURE() << "node-redlock did not take " << resource << ": " << holder->output();
      return "";
    }
    const std::string token = l->substr(5);
    // node-redlock answers at a quorum of grants; the last node's follows.
    EXPECT_TRUE(on_every_node(resource, token))
        << "node-redlock's key is the bare resource name, its value the token";
    return token;
  }

  // node-redlock tries `resource` once: "acquired" or "contended" (or what it printed).
  std::string node_tries(const std::string& resource) {
    auto c = node_redlock("try", resource, 10000);
    const auto l = c->line({"acquired ", "contended ", "node_redlock.js: "});
    EXPECT_EQ(c->wait(), 0) << c->output();
    if (!l) return "no answer: " + c->output();
    return l->substr(0, l->find(' '));
  }

  // Ends a holder started by node_holds: its release must reach a quorum.
  void node_releases(child& holder) {
    holder.signal(SIGTERM);
    const auto l = holder.line({"released", "release failed"});
    EXPECT_EQ(l.value_or("(nothing)"), "released") << holder.output();
    EXPECT_EQ(holder.wait(), 0) << holder.output();
  }

  std::string node_;
};

// (a) node-redlock holds R: neither the C++ API nor the CLI can take it.
TEST_F(Interop, a_node_redlock_holder_excludes_the_library_and_the_cli) {
  const std::string res = unique("interop-a");
  std::unique_ptr<child> holder;
  const std::string token = node_holds(holder, res);
  ASSERT_FALSE(token.empty());
  EXPECT_EQ(token.size(), 32u) << "node-redlock's token has our token's shape";

  client c(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(c));
  auto r = c.acquire(res, once());
  EXPECT_FALSE(r.lock);
  EXPECT_EQ(r.report.error, errc::contended) << r.report.message();

  child cli({REDLOCK_CLI_PATH, "acquire", res, "--ttl", "5s", "--nodes", joined(nodes().uris())});
  EXPECT_EQ(cli.wait(), 75) << "75 = held elsewhere; output: " << cli.output();
  EXPECT_TRUE(on_every_node(res, token)) << "node-redlock's key is untouched";

  node_releases(*holder);
  auto after = c.acquire(res, once());
  EXPECT_TRUE(after.lock) << after.report.message();
}

// (b) The library (C++ API, then the CLI) holds R: node-redlock cannot take it.
TEST_F(Interop, a_library_holder_excludes_node_redlock) {
  const std::string res = unique("interop-b");
  client c(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(c));
  auto held = c.acquire(res, once(20000ms));
  ASSERT_TRUE(held.lock) << held.report.message();
  EXPECT_EQ(node_tries(res), "contended");
  EXPECT_TRUE(on_every_node(res, held.lock.info().token));
  EXPECT_FALSE(held.lock.release().error);
  EXPECT_EQ(node_tries(res), "acquired");

  const std::string res2 = unique("interop-b-cli");
  child cli({REDLOCK_CLI_PATH, "acquire", res2, "--ttl", "20s", "--nodes", joined(nodes().uris())});
  ASSERT_EQ(cli.wait(), 0) << cli.output();
  const std::string token = token_in(cli.output());
  ASSERT_FALSE(token.empty()) << cli.output();
  EXPECT_TRUE(on_every_node(res2, token)) << cli.output();
  EXPECT_EQ(node_tries(res2), "contended");
  child rel({REDLOCK_CLI_PATH, "release", res2, token, "--nodes", joined(nodes().uris())});
  EXPECT_EQ(rel.wait(), 0) << rel.output();
  EXPECT_EQ(node_tries(res2), "acquired");
}

// A library client with key_prefix "app:" and node-redlock given "app:" + R lock the
// same key; node-redlock given R alone locks another one.
TEST_F(Interop, a_key_prefix_is_node_redlocks_resource_name_with_the_prefix) {
  const std::string res = unique("interop-prefix");
  client_options o = opts(nodes().uris());
  o.key_prefix = "app:";
  client c(o);
  ASSERT_TRUE(wait_connected(c));
  auto held = c.acquire(res, once(20000ms));
  ASSERT_TRUE(held.lock) << held.report.message();
  EXPECT_TRUE(on_every_node("app:" + res, held.lock.info().token));
  EXPECT_EQ(node_tries("app:" + res), "contended");
  EXPECT_EQ(node_tries(res), "acquired") << "without the prefix it is another key";
  EXPECT_FALSE(held.lock.release().error);

  std::unique_ptr<child> holder;
  ASSERT_FALSE(node_holds(holder, "app:" + res).empty());
  auto r = c.acquire(res, once());
  EXPECT_EQ(r.report.error, errc::contended) << r.report.message();
  node_releases(*holder);
}

long long set_calls() {
  long long t = 0;
  for (std::size_t i = 0; i < nodes().size(); ++i) t += nodes()[i].calls("set");
  return t;
}

void publish_everywhere(const std::string& channel, const std::string& payload) {
  for (std::size_t i = 0; i < nodes().size(); ++i) nodes()[i].command({"PUBLISH", channel, payload});
}

// (c) Our waiter (notifications on) while node-redlock holds R: messages on R's
// release channel — not a token, a random token, node-redlock's own token — wake it
// at most for an attempt that fails; node-redlock's release (which publishes nothing)
// finds its key still there on a quorum; the waiter then acquires by its fallback timer.
TEST_F(Interop, our_waiter_acquires_only_after_node_redlocks_release_whatever_the_channel_says) {
  const std::string res = unique("interop-c");
  std::unique_ptr<child> holder;
  const std::string token = node_holds(holder, res);
  ASSERT_FALSE(token.empty());

  client w(opts(nodes().uris()));
  ASSERT_TRUE(wait_connected(w));
  std::promise<acquire_result> done;
  auto fut = done.get_future();
  // A 3 s fallback: attempts inside the checks below come from the messages.
  w.acquire_async(res, waiting(3000ms, 20000ms), [&done](acquire_result r) { done.set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), res); }, 5000ms));
  ASSERT_TRUE(settles(set_calls, 0, 300ms, 5000ms));

  // Not a token: dropped unread, no attempt.
  const auto dropped = w.stats().notifications_dropped;
  publish_everywhere(res + ":released", "node-redlock released " + res);
  EXPECT_TRUE(eventually([&] { return w.stats().notifications_dropped >= dropped + 3; }, 3000ms));
  EXPECT_EQ(fut.wait_for(0ms), std::future_status::timeout);

  // Token-shaped: a random one, then the holder's own — as if it had released.
  for (const std::string& forged : {std::string("0123456789abcdef0123456789abcdef"), token}) {
    SCOPED_TRACE("forged payload " + forged);
    const long long before = set_calls();
    publish_everywhere(res + ":released", forged);
    EXPECT_TRUE(settles(set_calls, before + 1, 300ms, 3000ms))
        << "the message woke the waiter for an attempt";
    EXPECT_EQ(fut.wait_for(0ms), std::future_status::timeout) << "a message is no grant";
    EXPECT_TRUE(on_every_node(res, token)) << "node-redlock still holds the key everywhere";
  }

  // node-redlock's release: it finds its own key on a quorum (so nobody took it).
  ASSERT_EQ(fut.wait_for(0ms), std::future_status::timeout);
  node_releases(*holder);
  ASSERT_EQ(fut.wait_for(10000ms), std::future_status::ready)
      << "the fallback timer (3 s) finds the free lock";
  auto got = fut.get();
  ASSERT_TRUE(got.lock) << got.report.message();
  EXPECT_NE(got.lock.info().token, token);
  EXPECT_TRUE(on_a_quorum_after(res, got.lock.info().token, token));
  EXPECT_EQ(node_tries(res), "contended") << "and now node-redlock is excluded in turn";
}

// (c) with the CLI: `redlock acquire --wait` behind a node-redlock holder is not
// fooled by a forged release message either, and gets the lock after the release.
TEST_F(Interop, a_cli_waiter_is_not_woken_into_a_grant_by_a_forged_release) {
  const std::string res = unique("interop-c-cli");
  std::unique_ptr<child> holder;
  const std::string token = node_holds(holder, res);
  ASSERT_FALSE(token.empty());

  const long long before = set_calls();
  child cli({REDLOCK_CLI_PATH, "acquire", res, "--ttl", "10s", "--wait", "20s", "--retry-delay", "3s",
             "--nodes", joined(nodes().uris())});
  ASSERT_TRUE(eventually([&] { return all_subscribed(nodes(), res); }, 5000ms)) << cli.output();
  ASSERT_TRUE(settles(set_calls, before + 1, 300ms, 5000ms));
  const long long woken = set_calls();
  publish_everywhere(res + ":released", token);
  EXPECT_TRUE(settles(set_calls, woken + 1, 300ms, 3000ms)) << "the forged message woke it for an attempt";
  EXPECT_TRUE(cli.running()) << "the CLI waiter took no grant from a message: " << cli.output();
  EXPECT_TRUE(on_every_node(res, token));

  node_releases(*holder);
  ASSERT_EQ(cli.wait(10000ms), 0) << cli.output();
  const std::string ours = token_in(cli.output());
  ASSERT_FALSE(ours.empty()) << cli.output();
  EXPECT_TRUE(on_a_quorum_after(res, ours, token));
  EXPECT_EQ(node_tries(res), "contended");
}

}  // namespace
}  // namespace redlock::test
