#include "process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <utility>

namespace redlock::cli {
namespace {

// The write end of the pipe the signal handler posts to; -1 when none.
std::atomic<int> g_signal_fd{-1};
// Whether SIGPIPE was ignored before ignore_sigpipe().
std::atomic<bool> g_sigpipe_inherited_ignored{false};

// The actions before signal_capture of the synchronous fault signals, for a fault
// of our own (written before the handler is installed, read only by it).
struct sigaction g_fault_action[NSIG];

bool is_fault_signal(int signo) noexcept {
  return signo == SIGABRT || signo == SIGBUS || signo == SIGFPE || signo == SIGILL || signo == SIGSEGV ||
         signo == SIGSYS || signo == SIGTRAP;
}

void on_signal(int signo, siginfo_t* info, void*) {
  const int saved_errno = errno;
  if (is_fault_signal(signo) && info != nullptr && info->si_code > 0) {
    // Raised by the kernel for a fault of ours (si_code > 0; kill, sigqueue and
    // tgkill give <= 0): back to the previous action, which the faulting
    // instruction, run again, meets.
    ::sigaction(signo, &g_fault_action[signo], nullptr);
    errno = saved_errno;
    return;
  }
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

const std::vector<int>& forwarded_signals() {
  static const std::vector<int> s = {SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};
  return s;
}

bool is_terminating(int signo) noexcept {
  return signo == SIGHUP || signo == SIGINT || signo == SIGTERM || signo == SIGQUIT;
}

const std::vector<int>& absorbed_signals() {
  static const std::vector<int> s = [] {
    std::vector<int> v = {SIGALRM, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO,  SIGABRT,
                          SIGBUS,  SIGFPE,  SIGILL,  SIGSEGV,   SIGSYS,  SIGTRAP};
#ifdef SIGPWR
    v.push_back(SIGPWR);
#endif
#ifdef SIGSTKFLT
    v.push_back(SIGSTKFLT);
#endif
    for (int rt = SIGRTMIN; rt <= SIGRTMAX; ++rt) v.push_back(rt);
    return v;
  }();
  return s;
}

std::vector<int> guarded_signals(std::initializer_list<int> extra) {
  std::vector<int> v = forwarded_signals();
  v.insert(v.end(), absorbed_signals().begin(), absorbed_signals().end());
  v.insert(v.end(), extra.begin(), extra.end());
  return v;
}

signal_capture::signal_capture(const event_pipe& pipe, const std::vector<int>& signals) {
  g_signal_fd.store(pipe.write_fd());
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;  // SIGCHLD also for a stopped child (run on a terminal)
  sigemptyset(&sa.sa_mask);
  for (int s : signals) {
    struct sigaction old {};
    if (::sigaction(s, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    if (is_fault_signal(s)) g_fault_action[s] = old;  // before the handler can run
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
                   const std::vector<std::string>& env, const std::vector<int>& reset_signals,
                   const spawn_options& options) {
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
    if (options.own_group) {
      ::setpgid(0, 0);
      if (options.foreground_tty >= 0) set_foreground(options.foreground_tty, ::getpid());
    }
    if (options.notify_fd >= 0) {
      // The child tells the watcher itself, in its group already: if the tool dies
      // right after fork() the watcher still learns whom to stop.
      const guard_message m{guard_message::group, ::getpid()};
      [[maybe_unused]] const ssize_t w = ::write(options.notify_fd, &m, sizeof m);
    }
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::raise(SIGTERM);  // the tool died before prctl
    ::execve(path.c_str(), cargv.data(), cenv.data());
    const int error = errno;
    [[maybe_unused]] const ssize_t n = ::write(report[1], &error, sizeof error);
    ::_exit(127);
  }
  ::close(report[1]);
  if (options.own_group) {
    ::setpgid(pid, pid);  // as the child does: whichever runs first (fails once it exec'd)
    if (options.foreground_tty >= 0) set_foreground(options.foreground_tty, pid);
  }
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
    if (options.own_group && options.foreground_tty >= 0) set_foreground(options.foreground_tty, ::getpgrp());
    r.error = child_errno;
    r.exec_failed = true;
    return r;
  }
  r.pid = pid;
  return r;
}

namespace {

// Reads exactly `size` bytes unless EOF or an error comes first; returns how many.
// Async-signal-safe.
std::size_t read_full(int fd, void* buf, std::size_t size) noexcept {
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, static_cast<char*>(buf) + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  return got;
}

long long monotonic_ms() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// The watcher, in a child forked from a threaded process: async-signal-safe calls
// only (no allocation, no stdio).
[[noreturn]] void watcher_main(int fd, long long grace_ms, long long silence_ms) noexcept {
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  for (int s : {SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU}) ::sigaction(s, &ign, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  pid_t pgid = 0;
  long long valid_until = -1;  // the lock's validity's end (CLOCK_MONOTONIC ms), once told
  long long heard = monotonic_ms();  // when the tool last wrote
  guard_message m{};
  while (true) {
    // Told the group and a validity: wake when the validity has ended and the tool
    // has been silent for `silence`, a tool that is stopped while CMD's group runs.
    int timeout = -1;
    if (pgid > 1 && valid_until >= 0) {
      const long long left = std::max(valid_until, heard + silence_ms) - monotonic_ms();
      if (left <= 0) break;
      timeout = static_cast<int>(std::min(left, 60'000LL));
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, timeout);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    if (read_full(fd, &m, sizeof m) != sizeof m) break;  // EOF: the tool is gone
    heard = monotonic_ms();
    if (m.kind == guard_message::done) ::_exit(0);  // disarmed
    if (m.kind == guard_message::group && pgid == 0) pgid = static_cast<pid_t>(m.value);
    if (m.kind == guard_message::validity) valid_until = m.value;
  }
  if (pgid <= 1) ::_exit(0);  // CMD never started (or the message is garbage)
  // The tool is gone (or stopped past the validity) while the command's group may
  // still run. SIGKILL `grace` later, but no later than the lock's validity ends:
  // past it another holder may hold the lock (the watchdog's extensions may have
  // been failing for a while).
  ::kill(-pgid, SIGTERM);
  ::kill(-pgid, SIGCONT);
  long long deadline = monotonic_ms() + grace_ms;
  if (valid_until >= 0) deadline = std::min(deadline, valid_until);
  while (true) {
    if (::kill(-pgid, 0) != 0 && errno == ESRCH) ::_exit(0);
    const long long left = deadline - monotonic_ms();
    if (left <= 0) break;
    ::poll(nullptr, 0, static_cast<int>(std::min(left, 10LL)));
  }
  ::kill(-pgid, SIGKILL);
  ::_exit(0);
}

}  // namespace

command_guard::command_guard(std::chrono::milliseconds grace, std::chrono::milliseconds silence) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe2");
  const std::vector<int> inherited = open_fds();  // allocated before fork
  const pid_t first = ::fork();
  if (first < 0) {
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::system_error(error, std::generic_category(), "fork");
  }
  if (first == 0) {
    // Out of our group and session (a kill of our group, a terminal's ^C or hangup
    // miss the watcher) before we go on: the middle process, which we wait for,
    // leads a new session. Then fork again and let the middle process exit, so that
    // the watcher is not our child (not counted, not reaped by us) and outlives us;
    // not a session leader, it can never acquire a controlling terminal.
    ::setsid();
    if (::fork() != 0) ::_exit(0);
    for (int fd : inherited) {
      if (fd != fds[0]) ::close(fd);
    }
    watcher_main(fds[0], grace.count(), silence.count());
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(first, &status, 0) < 0 && errno == EINTR) {
  }
  write_fd_ = fds[1];
  // After the watcher left our tree: from now on orphans below us are ours.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
}

command_guard::~command_guard() { disarm(); }

void command_guard::valid_until(std::chrono::steady_clock::time_point until) noexcept {
  if (write_fd_ < 0) return;
  // steady_clock is CLOCK_MONOTONIC, the watcher's clock.
  const long long ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(until.time_since_epoch()).count();
  const guard_message m{guard_message::validity, std::max(0LL, ms)};
  [[maybe_unused]] const ssize_t n = ::write(write_fd_, &m, sizeof m);
}

void command_guard::alive() noexcept {
  if (write_fd_ < 0) return;
  const guard_message m{guard_message::alive, 0};
  [[maybe_unused]] const ssize_t n = ::write(write_fd_, &m, sizeof m);
}

void command_guard::disarm() noexcept {
  if (write_fd_ < 0) return;
  const guard_message m{guard_message::done, 0};
  [[maybe_unused]] const ssize_t n = ::write(write_fd_, &m, sizeof m);
  ::close(write_fd_);
  write_fd_ = -1;
}

namespace {

struct proc_stat {
  pid_t ppid = 0;
  pid_t pgrp = 0;
};

std::optional<proc_stat> read_proc_stat(const char* pid) {
  const std::string path = std::string("/proc/") + pid + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  // "pid (comm) state ppid pgrp ...": comm may hold anything, so parse after the last ')'.
  const char* close_paren = std::strrchr(buf, ')');
  char state = 0;
  int ppid = 0, pgrp = 0;
  if (close_paren == nullptr || std::sscanf(close_paren + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) {
    return std::nullopt;
  }
  if (state == 'Z' || state == 'X') return std::nullopt;  // dead, waiting to be reaped
  return proc_stat{static_cast<pid_t>(ppid), static_cast<pid_t>(pgrp)};
}

// Whether every other live process of our process group is an ancestor of ours
// (a shell waiting for us), not a sibling such as the pager of a pipeline.
bool alone_in_group() {
  const pid_t self = ::getpid();
  const pid_t group = ::getpgrp();
  std::vector<pid_t> ancestors;
  for (pid_t p = ::getppid(); p > 1 && ancestors.size() < 4096;) {
    ancestors.push_back(p);
    const std::optional<proc_stat> st = read_proc_stat(std::to_string(p).c_str());
    if (!st) break;
    p = st->ppid;
  }
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return false;
  bool alone = true;
  while (const dirent* d = ::readdir(dir)) {
    if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
    const pid_t pid = static_cast<pid_t>(std::atoi(d->d_name));
    if (pid == self) continue;
    const std::optional<proc_stat> st = read_proc_stat(d->d_name);
    if (st && st->pgrp == group && std::find(ancestors.begin(), ancestors.end(), pid) == ancestors.end()) {
      alone = false;
      break;
    }
  }
  ::closedir(dir);
  return alone;
}

}  // namespace

std::vector<pid_t> descendants_of(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid) of live processes
  if (DIR* dir = ::opendir("/proc")) {
    while (const dirent* d = ::readdir(dir)) {
      if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
      if (const std::optional<proc_stat> st = read_proc_stat(d->d_name)) {
        parent_of.emplace_back(static_cast<pid_t>(std::atoi(d->d_name)), st->ppid);
      }
    }
    ::closedir(dir);
  }
  std::vector<pid_t> out;
  std::vector<pid_t> frontier{root};
  while (!frontier.empty()) {
    const pid_t p = frontier.back();
    frontier.pop_back();
    for (const auto& [pid, ppid] : parent_of) {
      if (ppid == p && std::find(out.begin(), out.end(), pid) == out.end()) {
        out.push_back(pid);
        frontier.push_back(pid);
      }
    }
  }
  return out;
}

void signal_tree(pid_t pgid, int signo) {
  ::kill(-pgid, signo);
  const pid_t self = ::getpid();
  for (pid_t p : descendants_of(self)) {
    if (::getpgid(p) != pgid) ::kill(p, signo);
  }
}

int foreground_terminal() {
  for (int fd : {0, 1, 2}) {
    if (::isatty(fd) && ::tcgetpgrp(fd) == ::getpgrp()) return alone_in_group() ? fd : -1;
  }
  return -1;
}

void set_foreground(int fd, pid_t pgrp) noexcept {
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  ::pthread_sigmask(SIG_BLOCK, &ttou, &old);
  ::tcsetpgrp(fd, pgrp);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
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
