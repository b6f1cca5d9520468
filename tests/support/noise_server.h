// A lying Redis server on 127.0.0.1, for testing how the library survives a node
// that answers with nonsense.
//
// It parses each request (RESP, with hiredis's reader) and answers the handshake
// like a real server (AUTH/SELECT -> +OK, PING -> +PONG, INFO -> a plausible
// server section, TIME -> the current time), so the library's connection becomes
// ready; every other command (the lock scripts) gets a reply chosen at random from
// a seeded generator: a random RESP value of any type (including nested arrays,
// nil, huge or negative integers, and error replies that start like the real ones:
// NOSCRIPT, NOAUTH, NOPERM, WRONGTYPE, MOVED, READONLY, OOM, BUSY, LOADING), two
// replies, no reply, a truncated reply, or raw random bytes that are not RESP.
// With handshake = false, everything (including the handshake) gets random bytes.
//
// The second mode, noise_server(pre_7_0{port}), is no liar: it imitates a Redis
// server older than 7.0 in front of a real one. It answers the handshake as above
// and forwards every other command to the real server at `port` (one blocking
// connection per client connection), except `SET ... GET` together with NX, which
// it refuses with "ERR syntax error" as servers before 7.0 do.
//
// Thread safety: the public members may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace redlock::test {

class noise_server {
 public:
  struct pre_7_0 {
    int upstream_port;
  };
  // Binds 127.0.0.1 on a free port and starts the thread. Throws std::runtime_error.
  explicit noise_server(std::uint32_t seed, bool handshake = true);
  explicit noise_server(pre_7_0 mode);
  // Stops the thread (bounded) and closes every socket.
  ~noise_server();
  noise_server(const noise_server&) = delete;
  noise_server& operator=(const noise_server&) = delete;

  int port() const { return port_; }
  std::string uri() const;
  std::uint64_t connections() const { return connections_.load(); }
  std::uint64_t commands() const { return commands_.load(); }    // requests parsed
  std::uint64_t noise_replies() const { return noise_.load(); }  // random answers sent
  std::uint64_t refused_set_get() const { return refused_.load(); }  // pre_7_0 mode

 private:
  void start();
  void loop();

  const std::uint32_t seed_;
  const bool handshake_;
  const int upstream_port_ = 0;  // pre_7_0 mode when > 0
  int listen_fd_ = -1;
  int wake_rd_ = -1;
  int wake_wr_ = -1;
  int port_ = 0;
  std::atomic<std::uint64_t> connections_{0}, commands_{0}, noise_{0}, refused_{0};
  std::thread thread_;
};

}  // namespace redlock::test
