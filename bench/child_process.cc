#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace redlock::bench {

child_process::child_process(const std::vector<std::string>& argv, const options& o) : stop_signal_(o.stop_signal) {
  if (argv.empty()) throw std::runtime_error("child_process: empty argv");
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  if ((o.pipe_stdin && ::pipe2(in, O_CLOEXEC) != 0) || (o.pipe_stdout && ::pipe2(out, O_CLOEXEC) != 0)) {
    const int err = errno;
    for (int fd : {in[0], in[1], out[0], out[1]}) {
      if (fd >= 0) ::close(fd);
    }
    throw std::runtime_error(std::string("child_process: pipe: ") + std::strerror(err));
  }
  const int log = ::open(o.log_path.empty() ? "/dev/null" : o.log_path.c_str(),
                         O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    // Only async-signal-safe calls from here to exec: the parent has threads.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(o.pipe_stdin ? in[0] : devnull, STDIN_FILENO);
    if (log >= 0) {
      ::dup2(o.pipe_stdout ? out[1] : log, STDOUT_FILENO);
      ::dup2(log, STDERR_FILENO);
    } else if (o.pipe_stdout) {
      ::dup2(out[1], STDOUT_FILENO);
    }
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  if (log >= 0) ::close(log);
  if (o.pipe_stdin) ::close(in[0]);
  if (o.pipe_stdout) ::close(out[1]);
  in_ = in[1];
  out_ = out[0];
  if (pid_ < 0) {
    if (in_ >= 0) ::close(in_);
    if (out_ >= 0) ::close(out_);
    throw std::runtime_error(std::string("child_process: fork: ") + std::strerror(fork_errno));
  }
}

child_process::~child_process() {
  if (in_ >= 0) ::close(in_);
  if (out_ >= 0) ::close(out_);
  if (pid_ <= 0) return;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
  ::kill(pid_, stop_signal_);
  for (int i = 0; i < 200; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
}

bool child_process::alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

int child_process::wait_exit(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (pid_ > 0) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return -1;
}

std::string child_process::read_line(std::chrono::milliseconds limit) {
  if (out_ < 0) throw std::runtime_error("child_process: stdout is not piped");
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const std::size_t nl = buffered_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("child_process: no line from the child in time");
    pollfd p{out_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[256];
    const ssize_t got = ::read(out_, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw std::runtime_error("child_process: the child closed its stdout");
    buffered_.append(buf, static_cast<std::size_t>(got));
  }
}

void child_process::write_line(const std::string& line) {
  if (in_ < 0) throw std::runtime_error("child_process: stdin is not piped");
  const std::string data = line + "\n";
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(in_, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(std::string("child_process: write: ") + std::strerror(errno));
    off += static_cast<std::size_t>(n);
  }
}

// ------------------------------------------------------------------ proxy_process

namespace {
child_process::options proxy_options() {
  child_process::options o;
  o.pipe_stdin = true;
  o.pipe_stdout = true;
  return o;
}
}  // namespace

std::string proxy_process::executable() {
  if (const char* env = std::getenv("REDLOCK_BENCH_DELAY_PROXY"); env != nullptr && *env != '\0') return env;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "bench_delay_proxy";
  std::string path(self, static_cast<std::size_t>(n));
  const std::size_t slash = path.rfind('/');
  return (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/bench_delay_proxy";
}

proxy_process::proxy_process(const std::string& to_host, int to_port, std::chrono::microseconds delay,
                             bool both_directions, int nice_value, std::chrono::seconds max_lifetime)
    : child_(
          [&] {
            std::vector<std::string> argv = {executable(),
                                             "--listen",
                                             "127.0.0.1:0",
                                             "--to",
                                             to_host + ":" + std::to_string(to_port),
                                             "--delay-us",
                                             std::to_string(delay.count()),
                                             "--max-seconds",
                                             std::to_string(max_lifetime.count()),
                                             "--control-stdin"};
            if (both_directions) argv.emplace_back("--both-directions");
            if (nice_value > 0 || (nice_value < 0 && ::geteuid() == 0)) {
              argv.emplace_back("--nice");
              argv.emplace_back(std::to_string(nice_value));
            }
            return argv;
          }(),
          proxy_options()) {
  std::string line;
  try {
    line = child_.read_line(std::chrono::milliseconds(5000));
  } catch (const std::exception& ex) {
    throw std::runtime_error("bench_delay_proxy (" + executable() + ") did not start: " + ex.what());
  }
  if (line.rfind("port ", 0) != 0) throw std::runtime_error("bench_delay_proxy: unexpected output: " + line);
  port_ = std::atoi(line.c_str() + 5);
}

void proxy_process::set_delay(std::chrono::microseconds delay) {
  child_.write_line("delay " + std::to_string(delay.count()));
  const std::string answer = child_.read_line(std::chrono::milliseconds(5000));
  if (answer != "ok") throw std::runtime_error("bench_delay_proxy: " + answer);
}

}  // namespace redlock::bench
