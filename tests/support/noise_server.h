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
// Thread safety: the public members may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace redlock::test {

class noise_server {
 public:
  // Binds 127.0.0.1 on a free port and starts the thread. Throws std::runtime_error.
  explicit noise_server(std::uint32_t seed, bool handshake = true);
  // Stops the thread (bounded) and closes every socket.
  ~noise_server();
  noise_server(const noise_server&) = delete;
  noise_server& operator=(const noise_server&) = delete;

  int port() const { return port_; }
  std::string uri() const;
  std::uint64_t connections() const { return connections_.load(); }
  std::uint64_t commands() const { return commands_.load(); }    // requests parsed
  std::uint64_t noise_replies() const { return noise_.load(); }  // random answers sent

 private:
  void loop();

  const std::uint32_t seed_;
  const bool handshake_;
  int listen_fd_ = -1;
  int wake_rd_ = -1;
  int wake_wr_ = -1;
  int port_ = 0;
  std::atomic<std::uint64_t> connections_{0}, commands_{0}, noise_{0};
  std::thread thread_;
};

}  // namespace redlock::test
