// A TCP listener on 127.0.0.1 that is not Redis, for testing how the library
// reports a node that speaks the wrong protocol, never answers, or hangs up.
#pragma once

#include <atomic>
#include <string>
#include <thread>

namespace redlock::test {

// A non-blocking listening socket on 127.0.0.1 on a free port (stored in `port`),
// for the harness's fake servers. Throws std::runtime_error("<who>: <step>: ...").
int listen_on_loopback(const char* who, int& port);

class fake_listener {
 public:
  enum class mode {
    // Writes "SSH-2.0-OpenSSH_9.2\r\n" then 256 pseudo-random bytes, keeps the
    // connection open and discards what the client sends.
    garbage,
    // Accepts, reads and discards, never writes.
    silent,
    // Accepts and closes at once (the client sees EOF).
    close,
  };

  // The banner garbage mode starts with.
  static constexpr const char* banner = "SSH-2.0-OpenSSH_9.2\r\n";

  // Binds 127.0.0.1 on a free port and starts the background thread.
  // Throws std::runtime_error.
  explicit fake_listener(mode m);
  // Stops the thread (woken through a pipe, so bounded) and closes every socket.
  ~fake_listener();

  fake_listener(const fake_listener&) = delete;
  fake_listener& operator=(const fake_listener&) = delete;

  int port() const { return port_; }
  // "redis://127.0.0.1:PORT"
  std::string uri() const;
  // Connections accepted so far.
  int accepted() const { return accepted_.load(); }

 private:
  void loop();

  const mode mode_;
  int listen_fd_ = -1;
  int wake_rd_ = -1;
  int wake_wr_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace redlock::test
