#include "process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace redlock::cli {
namespace {

// The write end of the pipe the signal handler posts to; -1 when none.
std::atomic<int> g_signal_fd{-1};
// Whether SIGPIPE was ignored before ignore_sigpipe().
std::atomic<bool> g_sigpipe_inherited_ignored{false};

void on_signal(int signo, siginfo_t* info, void*) {
  const int saved_errno = errno;
  const int fd = g_signal_fd.load();
  if (fd >= 0) {
    const event e{signo, info != nullptr ? info->si_code : 0};
    [[maybe_unused]] const ssize_t n = ::write(fd, &e, sizeof e);
  }
  errno = saved_errno;
}

[[noreturn]] void throw_errno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

bool is_executable_file(const std::string& path, int& error) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    error = errno == ENOTDIR ? ENOENT : errno;
    return false;
  }
  if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) {
    error = EACCES;
    return false;
  }
  return true;
}

}  // namespace

event_pipe::event_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw_errno("pipe2");
  read_fd_ = fds[0];
  write_fd_ = fds[1];
}

event_pipe::~event_pipe() {
  ::close(read_fd_);
  ::close(write_fd_);
}

void event_pipe::post(event e) const noexcept {
  // Writes of at most PIPE_BUF bytes are atomic, so events never interleave.
  [[maybe_unused]] const ssize_t n = ::write(write_fd_, &e, sizeof e);
}

std::optional<event> event_pipe::wait(std::chrono::milliseconds timeout) const {
  using clock = std::chrono::steady_clock;
  const bool forever = timeout.count() < 0;
  const auto deadline = clock::now() + (forever ? std::chrono::milliseconds(0) : timeout);
  while (true) {
    event e;
    const ssize_t n = ::read(read_fd_, &e, sizeof e);
    if (n == static_cast<ssize_t>(sizeof e)) return e;
    if (n < 0 && errno != EAGAIN && errno != EINTR) throw_errno("read");
    int wait_ms = -1;
    if (!forever) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now()).count();
      if (left <= 0) return std::nullopt;
      wait_ms = static_cast<int>(std::min<long long>(left, 60'000));
    }
    pollfd p{read_fd_, POLLIN, 0};
    if (::poll(&p, 1, wait_ms) < 0 && errno != EINTR) throw_errno("poll");
  }
}

signal_capture::signal_capture(const event_pipe& pipe, const std::vector<int>& signals) {
  g_signal_fd.store(pipe.write_fd());
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&sa.sa_mask);
  for (int s : signals) {
    struct sigaction old {};
    if (::sigaction(s, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    if (::sigaction(s, &sa, &old) != 0) continue;
    signals_.push_back(s);
    old_.push_back(old);
  }
}

signal_capture::~signal_capture() {
  for (std::size_t i = 0; i < signals_.size(); ++i) ::sigaction(signals_[i], &old_[i], nullptr);
  g_signal_fd.store(-1);
}

void ignore_sigpipe() noexcept {
  struct sigaction ign {
  }, old{};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  if (::sigaction(SIGPIPE, &ign, &old) == 0) g_sigpipe_inherited_ignored.store(old.sa_handler == SIG_IGN);
}

resolved_command resolve_command(const std::string& name, const char* path_env) {
  resolved_command r;
  if (name.find('/') != std::string::npos) {
    r.path = name;
    is_executable_file(name, r.error);
    return r;
  }
  const std::string dirs = path_env != nullptr ? path_env : "/bin:/usr/bin";
  std::string denied;
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    const std::size_t colon = std::min(dirs.find(':', begin), dirs.size());
    std::string dir = dirs.substr(begin, colon - begin);
    begin = colon + 1;
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    int error = 0;
    if (is_executable_file(candidate, error)) {
      r.path = candidate;
      return r;
    }
    if (error == EACCES && denied.empty()) denied = candidate;
  }
  r.path = denied.empty() ? name : denied;
  r.error = denied.empty() ? ENOENT : EACCES;
  return r;
}

std::vector<std::string> lock_environment(char** environ, const std::string& resource,
                                          const std::string& token, std::optional<std::uint64_t> fence,
                                          const std::string& nodes, std::optional<std::size_t> permit) {
  static constexpr const char* ours[] = {"REDLOCK_RESOURCE=", "REDLOCK_TOKEN=", "REDLOCK_FENCE=",
                                         "REDLOCK_PERMIT=", "REDLOCK_NODES=", "REDLOCK_PASSWORD="};
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const bool replaced = std::any_of(std::begin(ours), std::end(ours), [&](const char* p) {
      return std::strncmp(*e, p, std::strlen(p)) == 0;
    });
    if (!replaced) env.emplace_back(*e);
  }
  if (!nodes.empty()) env.push_back("REDLOCK_NODES=" + nodes);
  env.push_back("REDLOCK_RESOURCE=" + resource);
  env.push_back("REDLOCK_TOKEN=" + token);
  if (fence) env.push_back("REDLOCK_FENCE=" + std::to_string(*fence));
  if (permit) env.push_back("REDLOCK_PERMIT=" + std::to_string(*permit));
  return env;
}

spawn_result spawn(const std::string& path, const std::vector<std::string>& argv,
                   const std::vector<std::string>& env, const std::vector<int>& reset_signals) {
  spawn_result r;
  // Everything the child needs is prepared here: after fork() in a threaded process
  // the child may only make async-signal-safe calls.
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  std::vector<int> defaults = reset_signals;
  if (!g_sigpipe_inherited_ignored.load()) defaults.push_back(SIGPIPE);
  const pid_t parent = ::getpid();

  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    r.error = errno;
    return r;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    r.error = errno;
    ::close(report[0]);
    ::close(report[1]);
    return r;
  }
  if (pid == 0) {
    ::close(report[0]);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int s : defaults) ::sigaction(s, &dfl, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::raise(SIGTERM);  // the tool died before prctl
    ::execve(path.c_str(), cargv.data(), cenv.data());
    const int error = errno;
    [[maybe_unused]] const ssize_t n = ::write(report[1], &error, sizeof error);
    ::_exit(127);
  }
  ::close(report[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.error = child_errno;
    r.exec_failed = true;
    return r;
  }
  r.pid = pid;
  return r;
}

int shell_status(int wait_status) noexcept {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 128;
}

std::vector<int> open_fds() {
  std::vector<int> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  const int own = ::dirfd(dir);
  while (const dirent* d = ::readdir(dir)) {
    if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
    const int fd = std::atoi(d->d_name);
    if (fd != own) fds.push_back(fd);
  }
  ::closedir(dir);
  return fds;
}

void set_cloexec_except(const std::vector<int>& keep) {
  for (int fd : open_fds()) {
    if (fd <= 2 || std::find(keep.begin(), keep.end(), fd) != keep.end()) continue;
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

}  // namespace redlock::cli
