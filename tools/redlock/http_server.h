// A small HTTP/1.1 server on its own libuv loop and thread, serving one path:
// GET `path` answers 200 with whatever body() returns (called on the server's
// thread). One response per connection; a request head is capped at
// max_http_head bytes (431, then close); a client that has not sent a full head
// within head_timeout is closed, while the others are served; one that has not
// taken its whole response within head_timeout + 2 s is closed too. At most
// max_connections are open at once: a connection beyond them waits in the
// listen backlog (not accepted, no descriptor of this process) until one closes,
// so a crowd of slow clients cannot take the descriptors the rest of the process
// needs; each waits at most head_timeout + 2 s for its slot to free.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace redlock::cli {

class http_server {
 public:
  struct settings {
    std::string host;  // numeric IPv4 or IPv6 address
    int port = 0;      // 0: any free port
    std::string path = "/metrics";
    std::string content_type = "text/plain; version=0.0.4; charset=utf-8";
    std::chrono::milliseconds head_timeout{5'000};
    std::size_t max_connections = 64;  // open at once (>= 1)
  };

  http_server();
  ~http_server();  // stop()
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  // Binds, listens and starts the thread. False with `error` set on failure.
  bool start(const settings& s, std::function<std::string()> body, std::string& error);
  // "127.0.0.1:9464" or "[::1]:9464": the bound address (after start()).
  std::string bound_address() const;
  // Closes every connection and joins the thread. Idempotent.
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace redlock::cli
