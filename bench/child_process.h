// Child processes of the benchmark: a program started with fork/exec that dies with
// the thread that started it (PR_SET_PDEATHSIG SIGKILL), so a benchmark that
// crashes leaves none behind; and, on top of it, the delay proxy process
// (bench_delay_proxy, see delay_proxy_main.cc).
//
// Thread-safety: one object is used by one thread at a time. Start children from a
// thread that outlives them (the benchmark's main thread): the kernel sends the
// death signal when the starting thread ends.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <chrono>
#include <string>
#include <vector>

namespace redlock::bench {

class child_process {
 public:
  struct options {
    bool pipe_stdin = false;   // write_line() feeds the child's stdin
    bool pipe_stdout = false;  // read_line() reads the child's stdout
    std::string log_path;      // the child's stderr (and stdout unless piped); "" = /dev/null
    int stop_signal = SIGTERM;  // sent by the destructor, then SIGKILL after 2 s
  };
  // Starts argv (argv[0] looked up in PATH). Throws std::runtime_error if it cannot
  // fork or exec (an exec failure shows as the child exiting with status 127).
  child_process(const std::vector<std::string>& argv, const options& o);
  // Stops the child (stop_signal, SIGKILL after 2 s) and reaps it. Never throws.
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const noexcept { return pid_; }
  // True while the child has not exited (reaps it if it has).
  bool alive();
  // Waits up to `limit` for the child to exit and reaps it: its exit status, or -1
  // if it was killed by a signal or is still running after `limit`.
  int wait_exit(std::chrono::milliseconds limit);
  // One line of the child's stdout, without the newline. Throws std::runtime_error
  // on end of file or when nothing comes within `limit`.
  std::string read_line(std::chrono::milliseconds limit);
  // Writes `line` and a newline to the child's stdin. Throws std::runtime_error.
  void write_line(const std::string& line);

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  int stop_signal_;
  std::string buffered_;
};

// bench_delay_proxy as a child: forwards 127.0.0.1:port() to to_host:to_port with
// `delay` added to each request (and to each reply with both_directions).
// The executable is $REDLOCK_BENCH_DELAY_PROXY, else bench_delay_proxy beside this
// program. Throws std::runtime_error if it cannot start or listen.
class proxy_process {
 public:
  // nice_value: the proxy's scheduling priority (-20..19; below 0 needs root, and is
  // only tried then).
  proxy_process(const std::string& to_host, int to_port, std::chrono::microseconds delay, bool both_directions,
                int nice_value = 0, std::chrono::seconds max_lifetime = std::chrono::seconds(3600));
  int port() const noexcept { return port_; }
  pid_t pid() const noexcept { return child_.pid(); }
  std::string uri() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  // Sets the delay (each direction with both_directions) and waits for the proxy
  // to confirm: bytes it reads from then on get it. Throws std::runtime_error.
  void set_delay(std::chrono::microseconds delay);

  // The executable run (for error messages and for checking it exists).
  static std::string executable();

 private:
  child_process child_;
  int port_ = 0;
};

}  // namespace redlock::bench
