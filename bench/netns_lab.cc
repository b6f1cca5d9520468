#include "netns_lab.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace redlock::bench {

namespace {

// Runs argv, its output discarded; the exit status (-1 if it could not run).
int run(const std::vector<std::string>& argv) {
  try {
    child_process c(argv, child_process::options{});
    return c.wait_exit(std::chrono::seconds(10));  // `ip` and `sh -c echo` take milliseconds
  } catch (const std::exception&) {
    return -1;
  }
}

void must(const std::vector<std::string>& argv) {
  if (run(argv) != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    throw std::runtime_error("netns_lab: failed: " + cmd);
  }
}

std::string capture(const char* cmd) {
  std::string out;
  if (std::FILE* p = ::popen(cmd, "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    ::pclose(p);
  }
  return out;
}

bool pings(const std::string& host, int port) {
  const timeval tv{0, 200000};
  redisContext* c = redisConnectWithTimeout(host.c_str(), port, tv);
  bool ok = false;
  if (c != nullptr && c->err == 0) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
    ok = r != nullptr && r->type == REDIS_REPLY_STATUS && std::strcmp(r->str, "PONG") == 0;
    if (r != nullptr) freeReplyObject(r);
  }
  if (c != nullptr) redisFree(c);
  return ok;
}

// The namespaces' mount points (/run/netns/NAME), for the signal handler: on
// SIGINT, SIGTERM or SIGHUP it detaches and unlinks them (what `ip netns delete`
// does, with async-signal-safe calls only), then dies of the signal; the servers
// die with the process (PR_SET_PDEATHSIG), and with the last of them the
// namespaces and their veths go. One lab at a time per process.
constexpr std::size_t kMaxNs = 9;
char g_ns_paths[kMaxNs][64];
volatile sig_atomic_t g_ns_count = 0;
struct sigaction g_previous[3];
constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void on_fatal_signal(int sig) {
  for (sig_atomic_t i = 0; i < g_ns_count; ++i) {
    ::umount2(g_ns_paths[i], MNT_DETACH);
    ::unlink(g_ns_paths[i]);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

bool gone(long pid) { return pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH); }

// Namespaces named rlb<pid>n<k>, and directories /tmp/redlock-bench-netns-<pid>-*,
// whose benchmark process is gone.
void remove_stale() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/tmp", ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "redlock-bench-netns-";
    if (name.rfind(prefix, 0) != 0) continue;
    if (gone(std::strtol(name.c_str() + prefix.size(), nullptr, 10))) {
      std::error_code ignored;
      std::filesystem::remove_all(entry.path(), ignored);
    }
  }
  const std::string list = capture("ip netns list 2>/dev/null");
  std::size_t at = 0;
  while (at < list.size()) {
    std::size_t end = list.find('\n', at);
    if (end == std::string::npos) end = list.size();
    std::string name = list.substr(at, end - at);
    at = end + 1;
    name = name.substr(0, name.find(' '));
    if (name.rfind("rlb", 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + 3, nullptr, 10);
    if (gone(pid)) run({"ip", "netns", "delete", name});
  }
}

}  // namespace

std::string netns_lab::unavailable() {
  if (::geteuid() != 0) return "needs root and ip netns (not root)";
  if (run({"ip", "-V"}) != 0) return "needs root and ip netns (no `ip` in PATH)";
  if (run({"ip", "netns", "list"}) != 0) return "needs root and ip netns (`ip netns list` failed)";
  return "";
}

netns_lab::netns_lab(std::size_t nodes) : tag_(static_cast<int>(::getpid())), octet_(10 + tag_ % 200) {
  if (nodes == 0 || nodes > 9) throw std::runtime_error("netns_lab: 1..9 nodes");
  remove_stale();
  std::string tmpl = "/tmp/redlock-bench-netns-" + std::to_string(tag_) + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("netns_lab: mkdtemp failed");
  dir_ = tmpl;
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &g_previous[i]);
  const char* env = std::getenv("REDLOCK_TEST_REDIS_SERVER");
  const std::string server = env != nullptr && *env != '\0' ? env : "redis-server";
  try {
    for (std::size_t k = 0; k < nodes; ++k) {
      const std::string ns = ns_name(k), tag = "rlb" + std::to_string(tag_);
      const std::string outer = tag + "r" + std::to_string(k), inner = tag + "v" + std::to_string(k);
      const std::string net = "127." + std::to_string(octet_) + "." + std::to_string(k) + ".";
      std::snprintf(g_ns_paths[k], sizeof g_ns_paths[k], "/run/netns/%s", ns.c_str());
      g_ns_count = static_cast<sig_atomic_t>(k + 1);
      must({"ip", "netns", "add", ns});
      ++made_;
      must({"ip", "link", "add", outer, "type", "veth", "peer", "name", inner});
      must({"ip", "link", "set", inner, "netns", ns});
      // 127/8 is routed over an interface only with route_localnet on it.
      must({"sh", "-c", "echo 1 > /proc/sys/net/ipv4/conf/" + outer + "/route_localnet"});
      must({"ip", "addr", "add", net + "1/30", "dev", outer});
      must({"ip", "link", "set", outer, "up"});
      must({"ip", "netns", "exec", ns, "sh", "-c",
            "echo 1 > /proc/sys/net/ipv4/conf/all/route_localnet && echo 1 > /proc/sys/net/ipv4/conf/" + inner +
                "/route_localnet"});
      must({"ip", "netns", "exec", ns, "ip", "addr", "add", net + "2/30", "dev", inner});
      must({"ip", "netns", "exec", ns, "ip", "link", "set", inner, "up"});
      must({"ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"});
      const std::string node_dir = dir_ + "/node" + std::to_string(k);
      std::filesystem::create_directories(node_dir);
      child_process::options o;
      o.log_path = node_dir + "/redis.log";
      o.stop_signal = SIGKILL;
      servers_.push_back(std::make_unique<child_process>(
          std::vector<std::string>{"ip", "netns", "exec", ns, server, "--port", "6379", "--bind", net + "2",
                                   "--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", node_dir,
                                   "--daemonize", "no"},
          o));
    }
    for (std::size_t k = 0; k < nodes; ++k) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!pings(node_host(k), node_port(k))) {
        if (!servers_[k]->alive() || std::chrono::steady_clock::now() > deadline) {
          std::ifstream log(dir_ + "/node" + std::to_string(k) + "/redis.log");
          std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
          if (text.size() > 600) text = text.substr(text.size() - 600);
          throw std::runtime_error("netns_lab: node " + std::to_string(k) + " at " + node_host(k) +
                                   " does not answer through its veth: " + text);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  } catch (...) {
    cleanup();
    throw;
  }
}

netns_lab::~netns_lab() { cleanup(); }

void netns_lab::cleanup() noexcept {
  servers_.clear();  // SIGKILL + reap each server
  for (std::size_t k = 0; k < made_; ++k) {
    // Deleting the namespace destroys the veth inside it and so its peer here.
    run({"ip", "netns", "delete", ns_name(k)});
    run({"ip", "link", "delete", "rlb" + std::to_string(tag_) + "r" + std::to_string(k)});
  }
  made_ = 0;
  g_ns_count = 0;
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }
}

std::string netns_lab::ns_name(std::size_t k) const {
  return "rlb" + std::to_string(tag_) + "n" + std::to_string(k);
}

std::string netns_lab::node_host(std::size_t i) const {
  return "127." + std::to_string(octet_) + "." + std::to_string(i) + ".2";
}

std::vector<int> netns_lab::server_pids() const {
  std::vector<int> v;
  for (const auto& s : servers_) v.push_back(static_cast<int>(s->pid()));
  return v;
}

}  // namespace redlock::bench
