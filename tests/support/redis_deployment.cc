#include "redis_deployment.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace redlock::test {
namespace {

using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One line of CLUSTER NODES: "<id> <ip:port@cport[,host]> <flags> <master|-> ... <slot>..."
struct nodes_line {
  std::string id;
  int port = 0;
  bool master = false;
  std::string master_id;
  std::vector<std::pair<int, int>> slots;
};

std::vector<nodes_line> cluster_nodes(int port, const std::string& password) {
  const owned_reply r = raw_command(port, {"CLUSTER", "NODES"}, password);
  if (r->type != REDIS_REPLY_STRING) throw std::runtime_error("CLUSTER NODES: not a string");
  std::vector<nodes_line> out;
  std::istringstream lines(std::string(r->str, r->len));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::vector<std::string> t;
    for (std::string w; f >> w;) t.push_back(w);
    if (t.size() < 8) continue;
    nodes_line n;
    n.id = t[0];
    const std::size_t colon = t[1].rfind(':', t[1].find('@'));
    n.port = std::stoi(t[1].substr(colon + 1));
    n.master = t[2].find("master") != std::string::npos && t[2].find("fail") == std::string::npos;
    n.master_id = t[3];
    for (std::size_t i = 8; i < t.size(); ++i) {
      if (t[i].front() == '[') continue;  // a slot in migration
      const std::size_t dash = t[i].find('-');
      const int lo = std::stoi(t[i].substr(0, dash));
      const int hi = dash == std::string::npos ? lo : std::stoi(t[i].substr(dash + 1));
      n.slots.emplace_back(lo, hi);
    }
    out.push_back(std::move(n));
  }
  return out;
}

}  // namespace

owned_reply raw_command(int port, const std::vector<std::string>& argv, const std::string& password) {
  const timeval tv{2, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c == nullptr || c->err != 0) {
    const std::string why = c != nullptr ? c->errstr : "out of memory";
    if (c != nullptr) redisFree(c);
    throw std::runtime_error("connect 127.0.0.1:" + std::to_string(port) + ": " + why);
  }
  redisSetTimeout(c, tv);
  const auto run = [&](const std::vector<std::string>& a) {
    std::vector<const char*> p;
    std::vector<std::size_t> l;
    for (const std::string& s : a) {
      p.push_back(s.data());
      l.push_back(s.size());
    }
    return static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(a.size()), p.data(), l.data()));
  };
  if (!password.empty()) {
    if (redisReply* a = run({"AUTH", password})) freeReplyObject(a);
  }
  redisReply* r = run(argv);
  const std::string why = c->errstr;
  redisFree(c);
  if (r == nullptr) throw std::runtime_error("command on 127.0.0.1:" + std::to_string(port) + ": " + why);
  return owned_reply(r);
}

int run_program(const std::vector<std::string>& argv, const std::string& log, std::chrono::milliseconds timeout) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  std::vector<std::string> copy = argv;
  for (std::string& s : copy) args.push_back(s.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("spawn " + argv[0] + ": " + std::strerror(rc));
  const auto deadline = steady::now() + timeout;
  int status = 0;
  while (true) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) throw std::runtime_error("waitpid: " + std::string(std::strerror(errno)));
    if (steady::now() >= deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

redis_cluster_deployment::redis_cluster_deployment(int masters, int replicas_per_master, node_config cfg,
                                                   std::chrono::milliseconds node_timeout)
    : cfg_(std::move(cfg)) {
  const int n = masters * (1 + replicas_per_master);
  for (int i = 0; i < n; ++i) {
    // The bus port is chosen here, before the node picks its own: a collision
    // (another process took it meanwhile) fails the start, and a new pair is tried.
    for (int attempt = 1;; ++attempt) {
      node_config c = cfg_;
      c.extra_args.insert(c.extra_args.end(),
                          {"--cluster-enabled", "yes", "--cluster-port", std::to_string(free_port()),
                           "--cluster-node-timeout", std::to_string(node_timeout.count()),
                           "--cluster-require-full-coverage", "no", "--cluster-allow-replica-migration", "no"});
      try {
        nodes_.push_back(std::make_unique<redis_node>(c));
        break;
      } catch (const std::runtime_error&) {
        if (attempt == 3) throw;
      }
    }
  }
  std::vector<std::string> argv = {"redis-cli", "--cluster", "create"};
  for (const auto& node : nodes_) argv.push_back("127.0.0.1:" + std::to_string(node->port()));
  argv.insert(argv.end(), {"--cluster-replicas", std::to_string(replicas_per_master), "--cluster-yes"});
  if (!cfg_.password.empty()) argv.insert(argv.end(), {"-a", cfg_.password, "--no-auth-warning"});
  const std::string log = nodes_[0]->dir() + "/cluster-create.log";
  const int rc = run_program(argv, log, 60s);
  if (rc != 0) throw std::runtime_error("redis-cli --cluster create exited " + std::to_string(rc) + ":\n" + read_all(log));
  // Every node must see every other and the whole slot space before the test starts.
  const auto deadline = steady::now() + 60s;
  while (true) {
    bool ready = true;
    for (const auto& node : nodes_) {
      const std::string info = node->command({"CLUSTER", "INFO"});
      if (info.find("cluster_state:ok") == std::string::npos ||
          info.find("cluster_slots_ok:16384") == std::string::npos ||
          info.find("cluster_known_nodes:" + std::to_string(n) + "\r") == std::string::npos) {
        ready = false;
        break;
      }
    }
    // And every replica has finished its first sync (a WAIT would otherwise time out).
    for (std::size_t i = 0; ready && i < nodes_.size(); ++i) {
      const std::string role = nodes_[i]->command({"INFO", "replication"});
      if (role.find("role:slave") != std::string::npos && role.find("master_link_status:up") == std::string::npos) {
        ready = false;
      }
    }
    if (ready) return;
    if (steady::now() >= deadline) {
      throw std::runtime_error("the cluster did not become ready within 60 s:\n" + read_all(log) +
                               nodes_[0]->command({"CLUSTER", "INFO"}));
    }
    std::this_thread::sleep_for(50ms);
  }
}

std::string redis_cluster_deployment::uri() const {
  const std::string plain = nodes_.at(0)->uri();  // redis[s]://[:pw@]127.0.0.1:port
  return (cfg_.tls ? "rediss+cluster://" : "redis+cluster://") + plain.substr(plain.find("://") + 3);
}

int redis_cluster_deployment::index_of_port(int port) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->port() == port) return static_cast<int>(i);
  }
  return -1;
}

int redis_cluster_deployment::master_of(int slot, std::size_t via) {
  for (const nodes_line& l : cluster_nodes(nodes_.at(via)->port(), cfg_.password)) {
    if (!l.master) continue;
    for (const auto& [lo, hi] : l.slots) {
      if (slot >= lo && slot <= hi) return index_of_port(l.port);
    }
  }
  return -1;
}

std::vector<std::size_t> redis_cluster_deployment::replicas_of(std::size_t master, std::size_t via) {
  const std::vector<nodes_line> lines = cluster_nodes(nodes_.at(via)->port(), cfg_.password);
  std::string id;
  for (const nodes_line& l : lines) {
    if (l.port == nodes_.at(master)->port()) id = l.id;
  }
  std::vector<std::size_t> out;
  for (const nodes_line& l : lines) {
    if (!id.empty() && l.master_id == id) {
      const int i = index_of_port(l.port);
      if (i >= 0) out.push_back(static_cast<std::size_t>(i));
    }
  }
  return out;
}

bool redis_cluster_deployment::wait_ok(std::chrono::milliseconds timeout) {
  const auto deadline = steady::now() + timeout;
  while (true) {
    bool ok = true;
    for (const auto& node : nodes_) {
      if (!node->running() || node->paused()) continue;
      if (node->command({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) ok = false;
    }
    if (ok) return true;
    if (steady::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
}

}  // namespace redlock::test
