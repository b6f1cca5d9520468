#include "redis_deployment.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace redlock::test {
namespace {

// The key a group's readiness check writes (and deletes) on its master.
constexpr const char* kProbeKey = "redlock-harness-replication-probe";

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

// Through the node's own connection (a TLS node's is its unix socket).
std::vector<nodes_line> cluster_nodes(redis_node& node) {
  const std::string text = node.command({"CLUSTER", "NODES"});
  if (text.rfind("(error)", 0) == 0) throw std::runtime_error("CLUSTER NODES: " + text);
  std::vector<nodes_line> out;
  std::istringstream lines(text);
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

std::string text_of(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      return std::string(r->str, r->len);
    case REDIS_REPLY_INTEGER:
      return std::to_string(r->integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    default:
      return "(reply type " + std::to_string(r->type) + ")";
  }
}

// SENTINEL REPLICAS / SENTINELS: an array of flat [field, value, ...] arrays.
std::vector<std::map<std::string, std::string>> sentinel_entries(const redisReply* r) {
  std::vector<std::map<std::string, std::string>> out;
  if (r->type != REDIS_REPLY_ARRAY) return out;
  for (std::size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    if (e->type != REDIS_REPLY_ARRAY) continue;
    std::map<std::string, std::string> fields;
    for (std::size_t k = 0; k + 1 < e->elements; k += 2)
      fields[text_of(e->element[k])] = text_of(e->element[k + 1]);
    out.push_back(std::move(fields));
  }
  return out;
}

// The ports of the entries of SENTINEL <what> NAME whose flags are exactly `flags`
// (no s_down, o_down, disconnected) and, for replicas, whose master link is ok.
std::set<int> healthy_ports(int sentinel_port, const std::string& what, const std::string& name,
                            const std::string& flags) {
  std::set<int> out;
  const owned_reply r = raw_command(sentinel_port, {"SENTINEL", what, name});
  for (auto& e : sentinel_entries(r.get())) {
    if (e["flags"] != flags) continue;
    if (what == "REPLICAS" && e["master-link-status"] != "ok") continue;
    out.insert(std::atoi(e["port"].c_str()));
  }
  return out;
}

std::string ports_text(const std::set<int>& ports) {
  std::string out;
  for (int p : ports) out += (out.empty() ? "" : " ") + std::to_string(p);
  return "{" + out + "}";
}

// `s` as one double-quoted argument of a Redis config line (any byte survives).
std::string config_quoted(const std::string& s) {
  static const char hex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

bool says_master(redis_node& n) {
  if (!n.running() || n.paused()) return false;
  try {
    return n.command({"INFO", "replication"}).find("role:master\r") != std::string::npos;
  } catch (const std::runtime_error&) {
    return false;
  }
}

}  // namespace

std::string value_on(redis_node& n, const std::string& key) { return value_at(n.port(), key, n.config().password); }

std::string value_at(int port, const std::string& key, const std::string& password) {
  try {
    const owned_reply r = raw_command(port, {"GET", key}, password);
    if (r->type == REDIS_REPLY_STRING) return std::string(r->str, r->len);
    if (r->type == REDIS_REPLY_NIL) return "<nil>";
    return "<" + std::string(r->str != nullptr ? r->str : "not a string") + ">";
  } catch (const std::exception& e) {
    return std::string("<unreachable: ") + e.what() + ">";
  }
}

std::string value_on_replica(int port, const std::string& key) {
  const timeval tv{2, 0};
  redisContext* ctx = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (ctx == nullptr || ctx->err != 0) {
    if (ctx != nullptr) redisFree(ctx);
    return "<cannot connect>";
  }
  redisSetTimeout(ctx, tv);
  std::string out = "<no reply>";
  if (auto* ro = static_cast<redisReply*>(redisCommand(ctx, "READONLY"))) freeReplyObject(ro);
  if (auto* r = static_cast<redisReply*>(redisCommand(ctx, "GET %b", key.data(), key.size()))) {
    out = r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : r->type == REDIS_REPLY_NIL ? "<nil>" : "<other>";
    freeReplyObject(r);
  }
  redisFree(ctx);
  return out;
}

bool is_master_at(int port) {
  try {
    const owned_reply role = raw_command(port, {"ROLE"});
    return role->type == REDIS_REPLY_ARRAY && role->elements > 0 && role->element[0]->type == REDIS_REPLY_STRING &&
           std::string(role->element[0]->str, role->element[0]->len) == "master";
  } catch (const std::runtime_error&) {
    return false;
  }
}

std::string replication_info(int port) {
  try {
    const owned_reply r = raw_command(port, {"INFO", "replication"});
    if (r->type != REDIS_REPLY_STRING) return "<not a string>";
    std::string out;
    for (std::size_t i = 0; i < r->len; ++i) {
      const char ch = r->str[i];
      if (ch == '\r') continue;
      out += ch == '\n' ? std::string(" | ") : std::string(1, ch);
    }
    return out;
  } catch (const std::exception& e) {
    return e.what();
  }
}

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
      // TLS only: the bus and replication too (a TLS node has no plain port).
      if (c.tls) c.extra_args.insert(c.extra_args.end(), {"--tls-cluster", "yes", "--tls-replication", "yes"});
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
  if (cfg_.tls) argv.insert(argv.end(), {"--tls", "--cacert", cfg_.tls_ca_file});
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
  for (const nodes_line& l : cluster_nodes(*nodes_.at(via))) {
    if (!l.master) continue;
    for (const auto& [lo, hi] : l.slots) {
      if (slot >= lo && slot <= hi) return index_of_port(l.port);
    }
  }
  return -1;
}

std::vector<std::size_t> redis_cluster_deployment::replicas_of(std::size_t master, std::size_t via) {
  const std::vector<nodes_line> lines = cluster_nodes(*nodes_.at(via));
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

// ---------------------------------------------------------------------------------
// sentinel_node

sentinel_node::sentinel_node(const std::string& server, const std::vector<std::string>& config_lines)
    : dir_(make_test_dir("sentinel")) {
  constexpr int kAttempts = 5;
  try {
    for (int attempt = 1;; ++attempt) {
      port_ = free_port();
      {
        std::ofstream conf(dir_ + "/sentinel.conf", std::ios::trunc);
        conf << "port " << port_ << "\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir " << dir_
             << "\nlogfile " << dir_ << "/sentinel.log\n";
        for (const std::string& line : config_lines) conf << line << "\n";
        if (!conf.flush()) throw std::runtime_error("cannot write " + dir_ + "/sentinel.conf");
      }
      pid_ = spawn_child(server, {"redis-server", dir_ + "/sentinel.conf", "--sentinel"},
                         dir_ + "/sentinel.stdout");
      const std::string where = "sentinel on 127.0.0.1:" + std::to_string(port_);
      const auto deadline = steady::now() + 20s;
      while (true) {
        if (!child_running(pid_)) {
          pid_ = -1;
          // Lost the race for the port (free_port() closes it before Sentinel binds it).
          const bool lost_port =
              log_tail(10).find("Failed listening on port " + std::to_string(port_)) != std::string::npos;
          if (lost_port && attempt < kAttempts) break;
          throw std::runtime_error(where + " exited during startup\n" + log_tail());
        }
        try {
          const owned_reply r = raw_command(port_, {"INFO", "server"});
          const std::string info = r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
          const auto at = info.find("process_id:");
          if (at != std::string::npos) {
            if (std::atol(info.c_str() + at + 11) == static_cast<long>(pid_)) return;
            stop();  // another process answers on this port
            if (attempt < kAttempts) break;
            throw std::runtime_error(where + ": another process listens there");
          }
        } catch (const std::runtime_error&) {
          // not listening yet
        }
        if (steady::now() >= deadline)
          throw std::runtime_error(where + " did not answer within 20 s\n" + log_tail());
        std::this_thread::sleep_for(20ms);
      }
    }
  } catch (...) {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

sentinel_node::~sentinel_node() {
  stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

pid_t sentinel_node::pid() const {
  if (!child_running(pid_)) pid_ = -1;
  return pid_;
}

bool sentinel_node::running() const { return pid() > 0; }

void sentinel_node::stop() noexcept {
  stop_child(pid_, 5s);
  pid_ = -1;
}

std::string sentinel_node::log_tail(std::size_t max_lines) const {
  std::string out =
      "--- " + dir_ + "/sentinel.log (tail) ---\n" + file_tail(dir_ + "/sentinel.log", max_lines);
  const std::string early = file_tail(dir_ + "/sentinel.stdout", max_lines);
  if (!early.empty()) out += "--- stdout/stderr (tail) ---\n" + early;
  return out;
}

// ---------------------------------------------------------------------------------
// redis_sentinel_deployment

redis_sentinel_deployment::redis_sentinel_deployment(std::string master_name, int replicas, int sentinels,
                                                     node_config cfg, std::chrono::milliseconds down_after)
    : name_(std::move(master_name)), cfg_(std::move(cfg)) {
  const bool name_ok = !name_.empty() && std::all_of(name_.begin(), name_.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
  if (!name_ok) throw std::invalid_argument("redis_sentinel_deployment: master name must be [A-Za-z0-9._-]+");
  if (replicas < 0 || sentinels < 1) {
    throw std::invalid_argument("redis_sentinel_deployment: needs replicas >= 0 and sentinels >= 1");
  }
  if (cfg_.tls) throw std::invalid_argument("redis_sentinel_deployment: TLS is not supported");
  const auto deadline = steady::now() + 30s;

  node_config server_cfg = cfg_;
  // A replica's full sync starts at once (the default waits 5 s for more replicas).
  server_cfg.extra_args.insert(server_cfg.extra_args.end(), {"--repl-diskless-sync-delay", "0"});
  if (!cfg_.password.empty())
    server_cfg.extra_args.insert(server_cfg.extra_args.end(), {"--masterauth", cfg_.password});
  servers_.push_back(std::make_unique<redis_node>(server_cfg));
  const std::string master_port = std::to_string(servers_[0]->port());
  node_config replica_cfg = server_cfg;
  replica_cfg.extra_args.insert(replica_cfg.extra_args.end(), {"--replicaof", "127.0.0.1", master_port});
  for (int i = 0; i < replicas; ++i) servers_.push_back(std::make_unique<redis_node>(replica_cfg));

  std::vector<std::string> lines = {
      "sentinel monitor " + name_ + " 127.0.0.1 " + master_port + " " + std::to_string(sentinels / 2 + 1),
      "sentinel down-after-milliseconds " + name_ + " " + std::to_string(down_after.count()),
      "sentinel failover-timeout " + name_ + " 5000", "sentinel parallel-syncs " + name_ + " 1"};
  if (!cfg_.password.empty()) lines.push_back("sentinel auth-pass " + name_ + " " + config_quoted(cfg_.password));
  const std::string& binary = server_path(servers_[0]->server());
  for (int i = 0; i < sentinels; ++i) {
    sentinels_.push_back(std::make_unique<sentinel_node>(binary, lines));
    const owned_reply r = raw_command(
        sentinels_.back()->port(),
        {"SENTINEL", "DEBUG", "info-period", "500", "publish-period", "250", "tilt-trigger", "5000"});
    if (r->type != REDIS_REPLY_STATUS) {
      throw std::runtime_error("SENTINEL DEBUG on 127.0.0.1:" + std::to_string(sentinels_.back()->port()) +
                               ": " + text_of(r.get()));
    }
  }

  // What is still missing before the group is ready, "" when nothing is.
  const auto missing = [&]() -> std::string {
    for (std::size_t i = 1; i < servers_.size(); ++i) {
      const std::string info = servers_[i]->command({"INFO", "replication"});
      if (info.find("master_link_status:up") == std::string::npos) {
        return "replica 127.0.0.1:" + std::to_string(servers_[i]->port()) + " has no master link up";
      }
    }
    std::set<int> replica_ports;
    for (std::size_t i = 1; i < servers_.size(); ++i) replica_ports.insert(servers_[i]->port());
    for (std::size_t s = 0; s < sentinels_.size(); ++s) {
      const std::string who = "sentinel 127.0.0.1:" + std::to_string(sentinels_[s]->port());
      const int named = named_master_port(s);
      if (named != servers_[0]->port()) return who + " names master port " + std::to_string(named);
      const std::set<int> seen = healthy_ports(sentinels_[s]->port(), "REPLICAS", name_, "slave");
      if (seen != replica_ports)
        return who + " sees healthy replicas " + ports_text(seen) + ", not " + ports_text(replica_ports);
      std::set<int> others;
      for (std::size_t o = 0; o < sentinels_.size(); ++o) {
        if (o != s) others.insert(sentinels_[o]->port());
      }
      const std::set<int> peers = healthy_ports(sentinels_[s]->port(), "SENTINELS", name_, "sentinel");
      if (peers != others)
        return who + " knows sentinels " + ports_text(peers) + ", not " + ports_text(others);
    }
    // Online is not yet streaming: after a diskless sync the master sends a replica
    // commands only once its first ACK came (up to a second later), and until then
    // no write is confirmed (WAIT). Ready when one is; the probe key goes after.
    if (servers_.size() > 1) {
      const std::string n = std::to_string(servers_.size() - 1);
      servers_[0]->command({"SET", kProbeKey, "1"});
      const std::string acked = servers_[0]->command({"WAIT", n, "200"});
      if (acked != n) return "a write on the master reaches " + acked + " of its " + n + " replicas (WAIT)";
    }
    return "";
  };
  while (true) {
    std::string why;
    try {
      why = missing();
    } catch (const std::runtime_error& e) {
      why = e.what();
    }
    if (why.empty()) {
      if (servers_.size() > 1) servers_[0]->command({"DEL", kProbeKey});
      return;
    }
    if (steady::now() >= deadline) {
      throw std::runtime_error("the Sentinel group did not become ready within 30 s: " + why + "\n" +
                               sentinel_logs());
    }
    std::this_thread::sleep_for(50ms);
  }
}

std::string redis_sentinel_deployment::uri() const {
  std::string out = "redis+sentinel://" + (cfg_.password.empty() ? "" : ":" + cfg_.password + "@") +
                    "127.0.0.1:" + std::to_string(sentinels_.at(0)->port()) + "/" + name_;
  for (std::size_t i = 1; i < sentinels_.size(); ++i) {
    out += (i == 1 ? "?seed=127.0.0.1:" : "&seed=127.0.0.1:") + std::to_string(sentinels_[i]->port());
  }
  return out;
}

int redis_sentinel_deployment::index_of_port(int port) const {
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    if (servers_[i]->port() == port) return static_cast<int>(i);
  }
  return -1;
}

int redis_sentinel_deployment::master_index() {
  int found = -1;
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    if (!says_master(*servers_[i])) continue;
    if (found >= 0) return -1;
    found = static_cast<int>(i);
  }
  return found;
}

int redis_sentinel_deployment::named_master_port(std::size_t i) {
  try {
    const owned_reply r =
        raw_command(sentinels_.at(i)->port(), {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name_});
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[1]->type != REDIS_REPLY_STRING)
      return 0;
    return std::atoi(r->element[1]->str);
  } catch (const std::runtime_error&) {
    return 0;
  }
}

void redis_sentinel_deployment::failover(std::size_t via) {
  const int port = sentinels_.at(via)->port();
  const auto deadline = steady::now() + 10s;
  while (true) {
    const owned_reply r = raw_command(port, {"SENTINEL", "FAILOVER", name_});
    const std::string text = text_of(r.get());
    if (r->type == REDIS_REPLY_STATUS && text == "OK") return;
    const bool transient =
        r->type == REDIS_REPLY_ERROR && (text.rfind("NOGOODSLAVE", 0) == 0 || text.rfind("INPROG", 0) == 0);
    if (!transient || steady::now() >= deadline) {
      throw std::runtime_error("SENTINEL FAILOVER " + name_ + " on 127.0.0.1:" + std::to_string(port) + ": " +
                               text);
    }
    std::this_thread::sleep_for(100ms);
  }
}

std::size_t redis_sentinel_deployment::wait_master_change(int old_index, std::chrono::milliseconds timeout) {
  const auto deadline = steady::now() + timeout;
  while (true) {
    std::set<int> named;
    for (std::size_t s = 0; s < sentinels_.size(); ++s) named.insert(named_master_port(s));
    const int index = named.size() == 1 ? index_of_port(*named.begin()) : -1;
    if (index >= 0 && index != old_index && says_master(*servers_[static_cast<std::size_t>(index)])) {
      return static_cast<std::size_t>(index);
    }
    if (steady::now() >= deadline) {
      throw std::runtime_error("no new master within " + std::to_string(timeout.count()) +
                               " ms: the sentinels name master ports " + ports_text(named) + " (old: " +
                               (old_index >= 0
                                    ? std::to_string(servers_.at(static_cast<std::size_t>(old_index))->port())
                                    : "none") +
                               ")\n" + sentinel_logs());
    }
    std::this_thread::sleep_for(50ms);
  }
}

std::string redis_sentinel_deployment::sentinel_logs() const {
  std::string out;
  for (const auto& s : sentinels_) out += s->log_tail(15);
  return out;
}

}  // namespace redlock::test
