// Process plumbing for the tool: a self-pipe that signal handlers and library
// callbacks post events to, PATH lookup, and spawning a child whose exec failure is
// reported back. POSIX only; no network.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace redlock::cli {

// One thing the main thread should react to.
struct event {
  int type = 0;    // > 0: that signal arrived; < 0: an application-defined event
  int detail = 0;  // signals: the si_code (SI_USER, SI_KERNEL, ...)
};

// A non-blocking, close-on-exec pipe. post() may be called from any thread and
// from signal handlers; wait() from one thread at a time.
class event_pipe {
 public:
  event_pipe();  // throws std::system_error
  ~event_pipe();
  event_pipe(const event_pipe&) = delete;
  event_pipe& operator=(const event_pipe&) = delete;

  // Async-signal-safe; never blocks. An event is dropped only if thousands are
  // already pending.
  void post(event e) const noexcept;
  // The next event, waiting up to `timeout` (negative: no limit). nullopt on
  // timeout.
  std::optional<event> wait(std::chrono::milliseconds timeout) const;

  int write_fd() const noexcept { return write_fd_; }

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
};

// While alive, each listed signal posts {signo, si_code} to `pipe` instead of
// taking its previous action (which is restored on destruction). A signal that is
// ignored on construction stays ignored, as a shell leaves a background job's or
// nohup's ignored signals alone. At most one instance at a time. The handler may
// run on any thread.
class signal_capture {
 public:
  signal_capture(const event_pipe& pipe, const std::vector<int>& signals);
  ~signal_capture();
  signal_capture(const signal_capture&) = delete;
  signal_capture& operator=(const signal_capture&) = delete;

  // The signals actually captured (the listed ones that were not ignored).
  const std::vector<int>& captured() const noexcept { return signals_; }

 private:
  std::vector<int> signals_;
  std::vector<struct sigaction> old_;
};

// Signals and what the lock-holding commands (acquire, run, elect) do with them
// (docs/cli.md, "Signals"). None but SIGKILL may end the tool while it may hold a
// lock (or part of one) by its default action, stranding the lock for its TTL.
//
// Forwarded to CMD's process group while it runs (run, elect): SIGHUP, SIGINT,
// SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH.
const std::vector<int>& forwarded_signals();
// Of those, the ones that end a wait for the lock (128 + N), and after which the
// group also gets SIGCONT (as a shell's `kill` does, so that a stopped CMD acts on
// them): SIGHUP, SIGINT, SIGTERM, SIGQUIT. The others are ignored while waiting.
bool is_terminating(int signo) noexcept;
// Every other signal whose default action ends a process: caught and ignored
// (SIGALRM, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSTKFLT, the
// real-time signals, and SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGSEGV, SIGSYS, SIGTRAP
// when another process sent them: a fault of this process's own still ends it).
// SIGPIPE is not here: main() ignores it (ignore_sigpipe).
const std::vector<int>& absorbed_signals();
// forwarded_signals() and absorbed_signals(), plus `extra` (SIGCHLD), for one
// signal_capture.
std::vector<int> guarded_signals(std::initializer_list<int> extra = {});

// The result of looking a command up as execvp would.
struct resolved_command {
  std::string path;  // what to pass to execve
  int error = 0;     // 0, ENOENT (not found) or EACCES (found, not executable)
};

// A name containing '/' is taken as a path; otherwise each directory of `path_env`
// (":"-separated, an empty entry meaning "."; unset means "/bin:/usr/bin") is
// tried in order. A match that exists but is not an executable file is remembered
// and reported as EACCES if nothing better follows.
resolved_command resolve_command(const std::string& name, const char* path_env);

// `environ` without any REDLOCK_RESOURCE, REDLOCK_TOKEN, REDLOCK_FENCE, REDLOCK_PERMIT,
// REDLOCK_NODES or REDLOCK_PASSWORD, plus REDLOCK_NODES=`nodes` (unless empty; the
// caller passes URIs without passwords), the first three for the given lock
// (REDLOCK_FENCE only when `fence` is set) and REDLOCK_PERMIT when `permit` is set
// (run -n K). No password reaches the command through it.
std::vector<std::string> lock_environment(char** environ, const std::string& resource,
                                          const std::string& token, std::optional<std::uint64_t> fence,
                                          const std::string& nodes,
                                          std::optional<std::size_t> permit = std::nullopt);

// Ignores SIGPIPE in this process (a peer closing a socket must not kill the tool),
// remembering whether it was ignored already for spawn().
void ignore_sigpipe() noexcept;

struct spawn_result {
  pid_t pid = -1;            // the running child, when error == 0
  int error = 0;             // errno of fork or exec; the child is already reaped then
  bool exec_failed = false;  // error came from execve (else from fork or pipe)
};

// What command_guard's pipe carries to its watcher (16 bytes: each write atomic).
struct guard_message {
  enum : std::int64_t { group = 1, validity = 2, done = 3, alive = 4 };
  std::int64_t kind = 0;
  std::int64_t value = 0;  // group: CMD's pid (= its pgid); validity: CLOCK_MONOTONIC ms; alive: 0
};

// How spawn() places the child.
struct spawn_options {
  // The child leads a process group of its own (pgid == its pid), so that it and its
  // descendants can be signalled as a group.
  bool own_group = false;
  // With own_group: a terminal (an fd of it) whose foreground group the child's group
  // becomes, as a shell does for a foreground job; -1 for none.
  int foreground_tty = -1;
  // >= 0: the child writes its pid there (a guard_message) right after fork() and its
  // setpgid(), so also when this process dies at once (command_guard::fd()).
  int notify_fd = -1;
};

// Forks and execs `path` with `argv` and `env`. In the child, `reset_signals` go
// back to their default action and SIGPIPE to what it was before
// ignore_sigpipe(); and the child gets SIGTERM if this
// process dies (PR_SET_PDEATHSIG). An exec failure is reported through a
// close-on-exec pipe before this returns.
spawn_result spawn(const std::string& path, const std::vector<std::string>& argv,
                   const std::vector<std::string>& env, const std::vector<int>& reset_signals,
                   const spawn_options& options = {});

// Keeps a command's processes from outliving the lock (run, elect).
//
// Construction makes this process a child subreaper (PR_SET_CHILD_SUBREAPER: an
// orphaned descendant of the command is re-parented to us, not to init, so every
// descendant stays in our tree and is reaped by us) and starts a watcher: a small
// process of its own session (in it before the constructor returns), not our child,
// holding the read end of a pipe whose
// write end only we hold. Pass fd() as spawn_options::notify_fd: the watcher then
// learns the command's process group. If this process dies in any way (SIGKILL, a
// crash) before disarm(), the pipe reads EOF and the watcher sends SIGTERM (and
// SIGCONT) to that group, and SIGKILL `grace` later (or when the lock's validity
// last told, valid_until(), ends, if sooner) if any member is left.
// The same happens, SIGKILL included, when the validity last told has ended and
// nothing (valid_until(), alive()) came from this process for `silence`: this
// process is stopped (SIGSTOP, or SIGTSTP, SIGTTIN, SIGTTOU off a terminal) while
// the command's group runs on, and another holder may take the lock.
// A descendant that left the group (setsid, setpgid) is beyond the watcher's reach.
class command_guard {
 public:
  // Throws std::system_error.
  command_guard(std::chrono::milliseconds grace, std::chrono::milliseconds silence);
  ~command_guard();  // disarm()
  command_guard(const command_guard&) = delete;
  command_guard& operator=(const command_guard&) = delete;

  int fd() const noexcept { return write_fd_; }
  // The lock is valid until `until` (the lease's valid_until): if this process dies,
  // the watcher SIGKILLs the group then at the latest, even before `grace` is over.
  // Call again after each extension; a stale (earlier) time only kills sooner.
  // Each call also tells the watcher that this process runs: call it (or alive())
  // more often than `silence`.
  void valid_until(std::chrono::steady_clock::time_point until) noexcept;
  // This process runs (for when no validity is known).
  void alive() noexcept;
  // The command's processes are gone: the watcher exits without signalling.
  void disarm() noexcept;

 private:
  int write_fd_ = -1;
};

// The pids of every live process below `root` (from /proc; a snapshot).
std::vector<pid_t> descendants_of(pid_t root);
// Sends `signo` to process group `pgid` and to every descendant of this process
// that is not in it (one that called setsid or setpgid). Never to this process.
void signal_tree(pid_t pgid, int signo);

// The first of fds 0, 1, 2 that is a terminal whose foreground process group is
// ours (we run as a foreground job), provided that no other process of our group
// but our ancestors (the shells waiting for us) is alive: else -1. A pipeline's
// other members (a pager) keep the terminal.
int foreground_terminal();
// tcsetpgrp(fd, pgrp) with SIGTTOU blocked (as a background process may).
void set_foreground(int fd, pid_t pgrp) noexcept;

// The shell's view of a wait status: the exit code, or 128 + the signal number.
int shell_status(int wait_status) noexcept;

// The file descriptors open now (from /proc/self/fd).
std::vector<int> open_fds();
// Sets FD_CLOEXEC on every open descriptor > 2 that is not in `keep`, so a child
// inherits only what this process inherited (not the library's sockets).
void set_cloexec_except(const std::vector<int>& keep);

}  // namespace redlock::cli
