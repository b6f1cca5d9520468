// A TCP proxy that delays one node: every byte the client sends towards the server
// is held for `delay` before it is forwarded, so each round trip through the proxy
// takes `delay` longer. Replies are forwarded at once, or held for `delay` too with
// both_directions (then each round trip takes 2 * delay longer: a one-way delay of
// `delay` each way). Used to make one Redis node "slow" or "far" without touching
// the server. The benchmark runs it in its own process (bench_delay_proxy, see
// delay_proxy_main.cc), so its CPU is not the client's.
//
// One internal thread (poll-based) serves every connection. Thread-safety: port(),
// uri() and set_delay() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

namespace redlock::bench {

class delay_proxy {
 public:
  // Listens on 127.0.0.1 on a free port and forwards each accepted connection to
  // 127.0.0.1:upstream_port. Throws std::runtime_error if it cannot listen.
  delay_proxy(int upstream_port, std::chrono::microseconds delay);
  // Listens on listen_host:listen_port (0 = a free port) and forwards each accepted
  // connection to upstream_host:upstream_port (IPv4 dotted quads). Throws
  // std::runtime_error if it cannot listen.
  delay_proxy(const std::string& listen_host, int listen_port, const std::string& upstream_host,
              int upstream_port, std::chrono::microseconds delay, bool both_directions);
  // Stops the thread and closes every connection. Never throws.
  ~delay_proxy();
  delay_proxy(const delay_proxy&) = delete;
  delay_proxy& operator=(const delay_proxy&) = delete;

  int port() const noexcept { return port_; }
  // "redis://<listen host>:<port>"
  std::string uri() const;
  // Applies to bytes read from now on; bytes already held keep their due time.
  void set_delay(std::chrono::microseconds delay) noexcept { delay_us_.store(delay.count()); }

 private:
  void run() noexcept;

  std::string listen_host_;
  std::string upstream_host_;
  int upstream_port_;
  bool both_directions_ = false;
  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<std::int64_t> delay_us_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace redlock::bench
