#include "redis_node.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace redlock::test {
namespace {

namespace fs = std::filesystem;
using steady = std::chrono::steady_clock;

// Only a bound on how long a start that never succeeds takes to fail (a start that
// fails outright is seen at once): generous, since a loaded machine can be slow.
constexpr std::chrono::milliseconds kStartTimeout{20000};
constexpr std::chrono::milliseconds kPollInterval{10};
constexpr int kProbeTimeoutMs = 200;
constexpr int kHelperTimeoutMs = 2000;
constexpr int kFirstStartAttempts = 5;

std::string errno_text(const std::string& what, int err) { return what + ": " + std::strerror(err); }

timeval ms_to_tv(int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

// Blocks SIGPIPE in the calling thread for the scope and discards a SIGPIPE raised
// meanwhile (hiredis writes with write(), not send(MSG_NOSIGNAL)). The test
// process's own SIGPIPE disposition is left alone.
class sigpipe_guard {
 public:
  sigpipe_guard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~sigpipe_guard() {
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        timespec zero{0, 0};
        while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

// /tmp/redlock-test-<pid>-XXXXXX, created on first use, removed (if empty) at exit.
class base_dir {
 public:
  static const std::string& path() {
    static base_dir instance;
    return instance.path_;
  }
  ~base_dir() {
    if (!path_.empty()) ::rmdir(path_.c_str());
  }

 private:
  base_dir() {
    remove_stale();
    std::string tmpl = "/tmp/redlock-test-" + std::to_string(::getpid()) + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error(errno_text("mkdtemp " + tmpl, errno));
    path_ = tmpl;
  }
  // Directories left behind by test processes that crashed (their pid is gone).
  static void remove_stale() noexcept {
    const std::string prefix = "redlock-test-";
    std::error_code ec;
    for (fs::directory_iterator it("/tmp", ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.rfind(prefix, 0) != 0) continue;
      char* stop = nullptr;
      long pid = std::strtol(name.c_str() + prefix.size(), &stop, 10);
      if (pid <= 0 || stop == nullptr || *stop != '-') continue;
      if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
      std::error_code rm_ec;
      fs::remove_all(it->path(), rm_ec);
    }
  }

  std::string path_;
};

std::string make_dir_under_base(const std::string& name) {
  std::string tmpl = base_dir::path() + "/" + name + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error(errno_text("mkdtemp " + tmpl, errno));
  return tmpl;
}

std::string make_node_dir() { return make_dir_under_base("node"); }

// An executable named `name` in PATH (and the usual system directories), or "".
std::string find_in_path(const std::string& name) {
  const char* env_path = std::getenv("PATH");
  std::string dirs = env_path != nullptr ? env_path : "/usr/local/bin:/usr/bin:/bin";
  dirs += ":/usr/local/bin:/usr/bin:/usr/sbin";
  std::stringstream ss(dirs);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::string();
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

// Everything the forked child needs, prepared before fork (the child only makes
// async-signal-safe calls).
struct spawn_request {
  const char* path = nullptr;
  char* const* argv = nullptr;
  int out_fd = -1;    // becomes stdout and stderr
  int null_fd = -1;   // becomes stdin
  pid_t parent = -1;  // the test process
  pid_t pid = -1;     // result
  int error = 0;      // fork's errno
  bool done = false;
};

[[noreturn]] void exec_child(const spawn_request& r) noexcept {
  // Die with the spawning thread (which lives as long as the process).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != r.parent) ::_exit(127);  // the parent is already gone
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);  // undo SIG_IGN
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::dup2(r.null_fd, 0);
  ::dup2(r.out_fd, 1);
  ::dup2(r.out_fd, 2);
  // No inherited descriptor (client sockets, listeners of other tests) may stay
  // open in the server.
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
    for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  }
  ::execv(r.path, r.argv);
  ::_exit(127);
}

void do_fork(spawn_request& r) noexcept {
  pid_t pid = ::fork();
  if (pid == 0) exec_child(r);
  if (pid < 0) r.error = errno;
  r.pid = pid;
}

// PR_SET_PDEATHSIG fires when the *thread* that forked exits, so children are forked
// by one long-lived thread: a node may then be (re)started from a short-lived test
// thread without being killed when that thread ends. The object is leaked on purpose
// (the thread waits on it until the process exits).
class spawner {
 public:
  static spawner& instance() {
    static spawner* s = new spawner();
    return *s;
  }

  void spawn(spawn_request& r) {
    if (::getpid() != owner_) {  // a fork()ed child (e.g. a death test): no thread here
      do_fork(r);
      return;
    }
    std::unique_lock<std::mutex> lk(mu_);
    queue_.push_back(&r);
    cv_.notify_all();
    cv_.wait(lk, [&] { return r.done; });
  }

 private:
  spawner() : owner_(::getpid()) {
    std::thread([this] { loop(); }).detach();
  }

  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return !queue_.empty(); });
      spawn_request* r = queue_.front();
      queue_.pop_front();
      lk.unlock();
      do_fork(*r);
      lk.lock();
      r->done = true;
      cv_.notify_all();
    }
  }

  const pid_t owner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<spawn_request*> queue_;
};

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) out.push_back(tok);
  return out;
}

std::string tail_of_file(const std::string& path, std::size_t max_lines) {
  std::ifstream in(path);
  if (!in) return "";
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (lines.size() > max_lines) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

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
using raw_ctx = std::unique_ptr<redisContext, ctx_free>;
using raw_reply = std::unique_ptr<redisReply, reply_free>;

raw_reply command_argv(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  return raw_reply(
      static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), ptrs.data(), lens.data())));
}

enum class probe_result { ready, not_ready, other_process, wrong_server };

// The value of `field` ("server_name") in an INFO reply, or "" when it has none.
std::string info_field(const std::string& info, const std::string& field) {
  const std::string key = "\n" + field + ":";
  std::string text = "\n" + info;
  auto at = text.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  return text.substr(at, text.find_first_of("\r\n", at) - at);
}

// One readiness probe: connect, AUTH, PING == PONG, and check that the answering
// server is our child (a racing process may have taken the port) and the server
// asked for: Valkey says server_name:valkey, Redis 7.0 has no server_name (and a
// later Redis says server_name:redis).
probe_result probe(redisContext* connected, const std::string& password, pid_t expected, server_kind kind) {
  sigpipe_guard guard;
  raw_ctx c(connected);
  if (!c || c->err != 0) return probe_result::not_ready;
  redisSetTimeout(c.get(), ms_to_tv(kProbeTimeoutMs));
  if (!password.empty()) {
    raw_reply r = command_argv(c.get(), {"AUTH", password});
    if (!r || r->type != REDIS_REPLY_STATUS) return probe_result::not_ready;
  }
  raw_reply pong = command_argv(c.get(), {"PING"});
  if (!pong || pong->type != REDIS_REPLY_STATUS || std::string(pong->str, pong->len) != "PONG") {
    return probe_result::not_ready;
  }
  raw_reply info = command_argv(c.get(), {"INFO", "server"});
  if (!info || info->type != REDIS_REPLY_STRING) return probe_result::not_ready;
  std::string text(info->str, info->len);
  auto at = text.find("process_id:");
  if (at == std::string::npos) return probe_result::not_ready;
  long pid = std::strtol(text.c_str() + at + std::strlen("process_id:"), nullptr, 10);
  if (pid != expected) return probe_result::other_process;
  const bool valkey = info_field(text, "server_name") == "valkey";
  return valkey == (kind == server_kind::valkey) ? probe_result::ready : probe_result::wrong_server;
}

std::string render(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      return std::string(r->str, r->len);
    case REDIS_REPLY_ERROR:
      return "(error) " + std::string(r->str, r->len);
    case REDIS_REPLY_INTEGER:
      return std::to_string(r->integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ARRAY: {
      std::string out = "[";
      for (size_t i = 0; i < r->elements; ++i) {
        if (i > 0) out += ", ";
        out += render(r->element[i]);
      }
      return out + "]";
    }
    default:
      return "(unknown reply type " + std::to_string(r->type) + ")";
  }
}

}  // namespace

const char* to_string(server_kind k) { return k == server_kind::valkey ? "valkey" : "redis"; }

server_mix default_server_mix() {
  const std::string v = env_or_empty("REDLOCK_TEST_SERVER");
  if (v.empty() || v == "redis") return server_mix::redis;
  if (v == "valkey") return server_mix::valkey;
  if (v == "mixed") return server_mix::mixed;
  throw std::runtime_error("REDLOCK_TEST_SERVER=" + v + ": expected redis, valkey or mixed");
}

server_kind default_server_kind(std::size_t index) {
  switch (default_server_mix()) {
    case server_mix::valkey:
      return server_kind::valkey;
    case server_mix::mixed:
      return index % 2 == 1 ? server_kind::valkey : server_kind::redis;
    case server_mix::redis:
      break;
  }
  return server_kind::redis;
}

const std::string& server_path(server_kind k) {
  static const std::string redis = [] {
    const std::string env = env_or_empty("REDLOCK_TEST_REDIS_SERVER");
    return env.empty() ? find_in_path("redis-server") : env;
  }();
  static const std::string valkey = [] {
    const std::string env = env_or_empty("REDLOCK_TEST_VALKEY_SERVER");
    if (!env.empty()) return env;
#ifdef REDLOCK_TEST_VALKEY_SERVER_PATH
    return std::string(REDLOCK_TEST_VALKEY_SERVER_PATH);
#else
    return std::string();
#endif
  }();
  if (k == server_kind::redis) {
    if (redis.empty()) throw std::runtime_error("redis-server not found in PATH (set REDLOCK_TEST_REDIS_SERVER)");
    return redis;
  }
  if (valkey.empty() || ::access(valkey.c_str(), X_OK) != 0) {
    throw std::runtime_error("valkey-server not found" + (valkey.empty() ? std::string() : " at " + valkey) +
                             ": build it with tools/valkey.sh and reconfigure (REDLOCK_VALKEY_SERVER), or set "
                             "REDLOCK_TEST_VALKEY_SERVER");
  }
  return valkey;
}

std::string make_test_dir(const std::string& name) { return make_dir_under_base(name); }

std::string file_tail(const std::string& path, std::size_t max_lines) {
  return tail_of_file(path, max_lines);
}

pid_t spawn_child(const std::string& path, std::vector<std::string> argv, const std::string& out_path) {
  std::vector<char*> args;
  for (auto& s : argv) args.push_back(s.data());
  args.push_back(nullptr);
  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (out_fd < 0) throw std::runtime_error(errno_text("open " + out_path, errno));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    const int err = errno;
    ::close(out_fd);
    throw std::runtime_error(errno_text("open /dev/null", err));
  }
  spawn_request req;
  req.path = path.c_str();
  req.argv = args.data();
  req.out_fd = out_fd;
  req.null_fd = null_fd;
  req.parent = ::getpid();
  spawner::instance().spawn(req);
  ::close(out_fd);
  ::close(null_fd);
  if (req.pid < 0) throw std::runtime_error(errno_text("fork", req.error));
  return req.pid;
}

bool child_running(pid_t pid) noexcept {
  if (pid <= 0) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid, &status, WNOHANG);
  return r == 0 || (r == -1 && errno == EINTR);
}

void stop_child(pid_t pid, std::chrono::milliseconds grace) noexcept {
  if (pid <= 0) return;
  if (!child_running(pid)) return;
  ::kill(pid, SIGCONT);
  ::kill(pid, SIGTERM);
  const auto deadline = steady::now() + grace;
  while (steady::now() < deadline) {
    if (!child_running(pid)) return;
    std::this_thread::sleep_for(kPollInterval);
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) == -1 && errno == EINTR) {
  }
}

namespace {

// Binds 127.0.0.1:port (0: any) without SO_REUSEADDR, so a port any socket holds,
// also in TIME_WAIT, fails; returns the port bound, or -1 with errno set.
int try_bind(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(errno_text("free_port: socket", errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

// Below Linux's default ephemeral range (32768-60999): the kernel never gives one of
// these ports to an outgoing connection, so a server restarted on its own port (the
// restart guard's tests, a failover) cannot find it taken by some test's client
// socket, which happened with ports from bind(0) (a restart failing "Failed listening
// on port"). Chosen at random, so two test processes rarely try the same one, and
// bound once to see that nothing holds it. With no free one there (or a machine whose
// ephemeral range starts below 21000), bind(0).
int free_port() {
  constexpr int kLow = 20000;
  static const int high = [] {
    int lo = 32768;
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    if (!(range >> lo)) lo = 32768;
    return std::min(lo, 65536) - 1;
  }();
  static std::mutex mu;
  static std::mt19937 gen{std::random_device{}()};
  for (int i = 0; high > kLow + 1000 && i < 200; ++i) {
    int port;
    {
      std::lock_guard<std::mutex> lk(mu);
      port = std::uniform_int_distribution<int>(kLow, high)(gen);
    }
    if (try_bind(port) == port) return port;
  }
  const int port = try_bind(0);
  if (port < 0) throw std::runtime_error(errno_text("free_port: bind 127.0.0.1:0", errno));
  return port;
}

// ---------------------------------------------------------------------------------
// redis_node

void redis_node::context_deleter::operator()(redisContext* c) const noexcept {
  if (c != nullptr) redisFree(c);
}
void redis_node::reply_deleter::operator()(redisReply* r) const noexcept {
  if (r != nullptr) freeReplyObject(r);
}

redis_node::redis_node(node_config cfg)
    : cfg_(std::move(cfg)), server_(cfg_.server.value_or(default_server_kind())) {
  dir_ = make_node_dir();
  try {
    port_ = free_port();
    std::lock_guard<std::mutex> lk(state_mu_);
    start_locked(/*first=*/true);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    throw;
  }
}

redis_node::~redis_node() {
  try {
    {
      std::lock_guard<std::mutex> lk(state_mu_);
      kill_locked();
    }
    drop_connection();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  } catch (...) {
  }
}

int redis_node::port() const { return port_; }

pid_t redis_node::pid() const {
  std::lock_guard<std::mutex> lk(state_mu_);
  reap_locked();
  return pid_;
}

bool redis_node::running() const {
  std::lock_guard<std::mutex> lk(state_mu_);
  return reap_locked();
}

bool redis_node::paused() const {
  std::lock_guard<std::mutex> lk(state_mu_);
  return reap_locked() && paused_;
}

std::string redis_node::uri() const {
  std::string auth = cfg_.password.empty() ? "" : ":" + cfg_.password + "@";
  return (cfg_.tls ? "rediss://" : "redis://") + auth + "127.0.0.1:" + std::to_string(port_);
}

std::string redis_node::unix_path() const { return has_unix() ? dir_ + "/redis.sock" : ""; }

std::string redis_node::unix_uri() const { return has_unix() ? "unix://" + unix_path() : ""; }

redisContext* redis_node::connect_control(int timeout_ms) const {
  if (cfg_.tls) return redisConnectUnixWithTimeout(unix_path().c_str(), ms_to_tv(timeout_ms));
  return redisConnectWithTimeout("127.0.0.1", port_, ms_to_tv(timeout_ms));
}

std::string redis_node::dir() const { return dir_; }

std::string redis_node::log_tail(std::size_t max_lines) const {
  std::string out = "--- " + dir_ + "/redis.log (tail) ---\n" + tail_of_file(dir_ + "/redis.log", max_lines);
  std::string err = tail_of_file(dir_ + "/redis.stderr", max_lines);
  if (!err.empty()) out += "--- stdout/stderr (tail) ---\n" + err;
  return out;
}

std::vector<std::string> redis_node::server_args() const {
  std::vector<std::string> a = {server_ == server_kind::valkey ? "valkey-server" : "redis-server",
                                "--port",
                                cfg_.tls ? "0" : std::to_string(port_),
                                "--bind",
                                "127.0.0.1",
                                "--save",
                                "",
                                "--appendonly",
                                cfg_.aof ? "yes" : "no"};
  if (cfg_.aof) a.insert(a.end(), {"--appendfsync", "always"});
  a.insert(a.end(), {"--dir", dir_, "--daemonize", "no", "--logfile", dir_ + "/redis.log", "--protected-mode",
                     "no", "--enable-debug-command", "local"});
  if (has_unix()) a.insert(a.end(), {"--unixsocket", unix_path(), "--unixsocketperm", "700"});
  if (cfg_.tls) {
    a.insert(a.end(), {"--tls-port", std::to_string(port_), "--tls-cert-file", cfg_.tls_cert_file, "--tls-key-file",
                       cfg_.tls_key_file, "--tls-ca-cert-file", cfg_.tls_ca_file, "--tls-auth-clients",
                       cfg_.tls_auth_clients});
    if (!cfg_.tls_protocols.empty()) a.insert(a.end(), {"--tls-protocols", cfg_.tls_protocols});
  }
  if (!cfg_.password.empty()) a.insert(a.end(), {"--requirepass", cfg_.password});
  for (const auto& line : cfg_.acl_users) {
    std::vector<std::string> toks = split_ws(line);
    if (!toks.empty() && toks.front() == "user") toks.erase(toks.begin());
    if (toks.empty()) continue;
    a.push_back("--user");
    a.insert(a.end(), toks.begin(), toks.end());
  }
  for (const auto& arg : cfg_.extra_args) {
    if (arg.rfind("--", 0) == 0 && arg.find_first_of(" \t") != std::string::npos) {
      std::vector<std::string> toks = split_ws(arg);
      a.insert(a.end(), toks.begin(), toks.end());
    } else {
      a.push_back(arg);
    }
  }
  return a;
}

bool redis_node::reap_locked() const noexcept {
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  if (r == -1 && errno == EINTR) return true;
  // Exited (r == pid_) or no longer our child (ECHILD).
  pid_ = -1;
  return false;
}

void redis_node::start_locked(bool first) {
  if (reap_locked()) return;
  const std::string& path = server_path(server_);
  const int attempts = first ? kFirstStartAttempts : 1;
  std::string failure;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt > 0) port_ = free_port();
    pid_ = spawn_child(path, server_args(), dir_ + "/redis.stderr");
    paused_ = false;

    const auto deadline = steady::now() + kStartTimeout;
    bool exited = false;
    for (;;) {
      if (!reap_locked()) {
        exited = true;
        break;
      }
      const probe_result p = probe(connect_control(kProbeTimeoutMs), cfg_.password, pid_, server_);
      if (p == probe_result::ready) return;
      if (p == probe_result::wrong_server) {
        kill_locked();
        throw std::runtime_error(path + " on 127.0.0.1:" + std::to_string(port_) + " is not " + to_string(server_) +
                                 (server_ == server_kind::valkey ? " (INFO server lacks server_name:valkey)"
                                                                 : " (INFO server says server_name:valkey)"));
      }
      if (steady::now() >= deadline) break;
      std::this_thread::sleep_for(kPollInterval);
    }
    if (exited) {
      failure = std::string(to_string(server_)) + "-server on 127.0.0.1:" + std::to_string(port_) +
                " exited during startup";
      // Lost the race for the port (free_port() closes it before redis binds it):
      // try again on a new one. Any other failure (bad config) is final.
      const std::string marker = "Failed listening on port " + std::to_string(port_);
      if (attempt + 1 < attempts && log_tail(10).find(marker) != std::string::npos) continue;
    } else {
      failure = std::string(to_string(server_)) + "-server on 127.0.0.1:" + std::to_string(port_) +
                " did not answer PING within " +
                std::to_string(kStartTimeout.count()) + " ms";
      kill_locked();
    }
    break;
  }
  throw std::runtime_error(failure + "\n" + log_tail());
}

void redis_node::kill_locked() noexcept {
  if (pid_ > 0) {
    if (paused_) ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) == -1 && errno == EINTR) {
    }
  }
  pid_ = -1;
  paused_ = false;
}

void redis_node::start() {
  std::lock_guard<std::mutex> lk(state_mu_);
  start_locked(/*first=*/false);
}

void redis_node::kill() {
  {
    std::lock_guard<std::mutex> lk(state_mu_);
    kill_locked();
  }
  drop_connection();
}

void redis_node::restart(bool keep_data) {
  std::lock_guard<std::mutex> lk(state_mu_);
  kill_locked();
  drop_connection();
  if (!keep_data) {
    // The files this configuration can persist, by name: listing the directory
    // would open a descriptor on this thread that TSan (which does not model
    // opendir) confuses with a socket the client's loop thread just closed.
    for (const char* name : {"dump.rdb", "appendonly.aof", "appendonlydir"}) {
      std::error_code rm_ec;
      fs::remove_all(dir_ + "/" + name, rm_ec);
    }
  }
  start_locked(/*first=*/false);
}

void redis_node::pause() {
  std::lock_guard<std::mutex> lk(state_mu_);
  if (!reap_locked())
    throw std::runtime_error("pause: redis-server on port " + std::to_string(port_) + " is not running");
  if (paused_) return;
  if (::kill(pid_, SIGSTOP) != 0) throw std::runtime_error(errno_text("pause: kill(SIGSTOP)", errno));
  // Wait until it is really stopped (SIGSTOP cannot be caught, so this is bounded).
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &status, WUNTRACED)) == -1 && errno == EINTR) {
  }
  if (r == pid_ && WIFSTOPPED(status)) {
    paused_ = true;
    return;
  }
  pid_ = -1;
  throw std::runtime_error("pause: redis-server on port " + std::to_string(port_) + " exited");
}

void redis_node::resume() {
  std::lock_guard<std::mutex> lk(state_mu_);
  if (pid_ > 0 && paused_) ::kill(pid_, SIGCONT);
  paused_ = false;
}

void redis_node::drop_connection() noexcept {
  std::lock_guard<std::mutex> lk(conn_mu_);
  conn_.reset();
}

redis_node::reply_ptr redis_node::run(const std::vector<std::string>& argv) {
  const std::string where = "redis node 127.0.0.1:" + std::to_string(port_);
  std::lock_guard<std::mutex> lk(conn_mu_);
  sigpipe_guard guard;
  for (int attempt = 0;; ++attempt) {
    const bool reused = static_cast<bool>(conn_);
    if (!conn_) {
      context_ptr c(connect_control(kHelperTimeoutMs));
      if (!c) throw std::runtime_error(where + ": cannot connect: out of memory");
      if (c->err != 0) throw std::runtime_error(where + ": cannot connect: " + c->errstr);
      redisSetTimeout(c.get(), ms_to_tv(kHelperTimeoutMs));
      if (!cfg_.password.empty()) {
        raw_reply r = command_argv(c.get(), {"AUTH", cfg_.password});
        if (!r) throw std::runtime_error(where + ": AUTH failed: " + c->errstr);
        if (r->type == REDIS_REPLY_ERROR) {
          throw std::runtime_error(where + ": AUTH failed: " + std::string(r->str, r->len));
        }
      }
      conn_ = std::move(c);
    }
    raw_reply r = command_argv(conn_.get(), argv);
    if (r) return reply_ptr(r.release());
    const int err = conn_->err;
    const std::string errstr = conn_->errstr;
    conn_.reset();
    // A cached connection the server closed meanwhile (restart, CLIENT KILL,
    // timeout): nothing was executed, so one retry on a fresh connection is safe.
    const bool stale =
        err == REDIS_ERR_EOF || (err == REDIS_ERR_IO && (errstr.find("reset") != std::string::npos ||
                                                         errstr.find("Broken pipe") != std::string::npos));
    if (reused && stale && attempt == 0) continue;
    std::string cmd = argv.empty() ? "" : argv.front();
    throw std::runtime_error(where + ": " + cmd + " failed: " + errstr);
  }
}

namespace {
[[noreturn]] void unexpected(const std::string& what, const redisReply* r) {
  throw std::runtime_error(what + ": unexpected reply " + render(r));
}
}  // namespace

std::optional<std::string> redis_node::get(const std::string& key) {
  reply_ptr r = run({"GET", key});
  if (r->type == REDIS_REPLY_NIL) return std::nullopt;
  if (r->type == REDIS_REPLY_STRING) return std::string(r->str, r->len);
  unexpected("GET " + key, r.get());
}

long long redis_node::pttl(const std::string& key) {
  reply_ptr r = run({"PTTL", key});
  if (r->type != REDIS_REPLY_INTEGER) unexpected("PTTL " + key, r.get());
  return r->integer;
}

bool redis_node::exists(const std::string& key) {
  reply_ptr r = run({"EXISTS", key});
  if (r->type != REDIS_REPLY_INTEGER) unexpected("EXISTS " + key, r.get());
  return r->integer > 0;
}

long long redis_node::dbsize() {
  reply_ptr r = run({"DBSIZE"});
  if (r->type != REDIS_REPLY_INTEGER) unexpected("DBSIZE", r.get());
  return r->integer;
}

long long redis_node::calls(const std::string& cmd) {
  const std::string info = command({"INFO", "commandstats"});
  const std::string field = "cmdstat_" + cmd + ":calls=";
  const auto at = info.find(field);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + field.size()));
}

std::string redis_node::command(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("redis_node::command: empty argv");
  reply_ptr r = run(argv);
  return render(r.get());
}

// ---------------------------------------------------------------------------------
// redis_cluster

redis_cluster::redis_cluster(int n, node_config cfg) {
  if (n < 1) throw std::invalid_argument("redis_cluster: n must be >= 1");
  nodes_.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    node_config c = cfg;
    if (!c.server) c.server = default_server_kind(static_cast<std::size_t>(i));
    nodes_.push_back(std::make_unique<redis_node>(std::move(c)));
  }
}

redis_cluster::redis_cluster(const std::vector<server_kind>& kinds, node_config cfg) {
  if (kinds.empty()) throw std::invalid_argument("redis_cluster: kinds must not be empty");
  nodes_.reserve(kinds.size());
  for (server_kind k : kinds) {
    node_config c = cfg;
    c.server = k;
    nodes_.push_back(std::make_unique<redis_node>(std::move(c)));
  }
}

std::vector<std::string> redis_cluster::uris() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) out.push_back(n->uri());
  return out;
}

int redis_cluster::count_key(const std::string& key) {
  int count = 0;
  for (auto& n : nodes_) {
    if (!n->running() || n->paused()) continue;
    try {
      if (n->exists(key)) ++count;
    } catch (const std::runtime_error&) {
    }
  }
  return count;
}

int redis_cluster::count_value(const std::string& key, const std::string& value) {
  int count = 0;
  for (auto& n : nodes_) {
    if (!n->running() || n->paused()) continue;
    try {
      if (n->get(key) == value) ++count;
    } catch (const std::runtime_error&) {
    }
  }
  return count;
}

}  // namespace redlock::test
