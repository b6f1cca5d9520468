#include "noise_server.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "fake_listener.h"

namespace redlock::test {
namespace {

constexpr int kPollMs = 50;

std::runtime_error sys_error(const std::string& what) {
  return std::runtime_error("noise_server: " + what + ": " + std::strerror(errno));
}

struct reader_free {
  void operator()(redisReader* r) const noexcept {
    if (r != nullptr) redisReaderFree(r);
  }
};

struct context_free {
  void operator()(redisContext* c) const noexcept {
    if (c != nullptr) redisFree(c);
  }
};

struct peer {
  int fd = -1;
  std::unique_ptr<redisReader, reader_free> reader;
  std::unique_ptr<redisContext, context_free> upstream;  // pre_7_0 mode
  std::string out;
};

// A reply as the server sent it (RESP2).
std::string to_resp(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_STRING:
      return "$" + std::to_string(r->len) + "\r\n" + std::string(r->str, r->len) + "\r\n";
    case REDIS_REPLY_STATUS:
      return "+" + std::string(r->str, r->len) + "\r\n";
    case REDIS_REPLY_ERROR:
      return "-" + std::string(r->str, r->len) + "\r\n";
    case REDIS_REPLY_INTEGER:
      return ":" + std::to_string(r->integer) + "\r\n";
    case REDIS_REPLY_ARRAY: {
      std::string s = "*" + std::to_string(r->elements) + "\r\n";
      for (std::size_t i = 0; i < r->elements; ++i) s += to_resp(r->element[i]);
      return s;
    }
    default:
      return "$-1\r\n";
  }
}

std::string random_text(std::mt19937& rng, std::size_t max_len) {
  std::string s;
  const std::size_t n = rng() % (max_len + 1);
  for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(' ' + rng() % 95));
  return s;
}

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(rng() & 0xff));
  return s;
}

std::string random_int(std::mt19937& rng) {
  switch (rng() % 8) {
    case 0:
      return "0";
    case 1:
      return "1";
    case 2:
      return "-1";
    case 3:
      return std::to_string(std::numeric_limits<long long>::max());
    case 4:
      return std::to_string(std::numeric_limits<long long>::min());
    case 5:
      return "99999999999999999999999";  // overflows
    case 6:
      return random_text(rng, 5);  // not a number
    default:
      return std::to_string(static_cast<long long>(rng()) - (1LL << 31));
  }
}

std::string random_error(std::mt19937& rng) {
  static const char* const prefixes[] = {"ERR",
                                         "NOSCRIPT",
                                         "NOAUTH",
                                         "NOPERM",
                                         "WRONGPASS",
                                         "WRONGTYPE",
                                         "MOVED 1 127.0.0.1:1",
                                         "ASK 2 127.0.0.1:2",
                                         "READONLY",
                                         "OOM",
                                         "BUSY",
                                         "LOADING",
                                         "CLUSTERDOWN",
                                         "TRYAGAIN",
                                         ""};
  return std::string(prefixes[rng() % (sizeof prefixes / sizeof prefixes[0])]) + " " + random_text(rng, 30);
}

std::string random_resp(std::mt19937& rng, int depth) {
  switch (rng() % 10) {
    case 0:
      return "+" + random_text(rng, 20) + "\r\n";
    case 1:
      return "-" + random_error(rng) + "\r\n";
    case 2:
      return ":" + random_int(rng) + "\r\n";
    case 3: {
      const std::size_t n = rng() % 40;
      return "$" + std::to_string(n) + "\r\n" + random_bytes(rng, n) + "\r\n";
    }
    case 4:
      return "$-1\r\n";
    case 5:
    case 6: {
      if (depth >= 3) return ":1\r\n";
      const std::size_t n = rng() % 5;
      std::string s = "*" + std::to_string(n) + "\r\n";
      for (std::size_t i = 0; i < n; ++i) s += random_resp(rng, depth + 1);
      return s;
    }
    case 7:
      return "*-1\r\n";
    default: {
      // Shapes close to what the scripts return.
      static const char* const plausible[] = {
          ":1\r\n",
          ":0\r\n",
          ":2\r\n",
          "*2\r\n:1\r\n$1\r\n7\r\n",
          "*2\r\n:0\r\n$1\r\n0\r\n",
          "*2\r\n:1\r\n$3\r\nabc\r\n",
          "*2\r\n$-1\r\n:-2\r\n",
          "*2\r\n$5\r\ntoken\r\n:1000\r\n",
          "*3\r\n:1\r\n$1\r\n0\r\n*2\r\n$10\r\n1700000000\r\n$6\r\n000000\r\n",
          "*3\r\n:0\r\n$1\r\n0\r\n*2\r\n$1\r\nx\r\n$1\r\ny\r\n",
          "*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n"};
      return plausible[rng() % (sizeof plausible / sizeof plausible[0])];
    }
  }
}

std::string upper(const char* s, std::size_t n) {
  std::string out(s, n);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }

// The name of a request, upper case ("" if it is not an array of strings).
std::string command_name(const redisReply* req) {
  if (req->type == REDIS_REPLY_ARRAY && req->elements > 0 && req->element[0]->type == REDIS_REPLY_STRING) {
    return upper(req->element[0]->str, req->element[0]->len);
  }
  return {};
}

// The low 32 bits of v as 8 lower-case hex digits.
std::string hex8(std::uint64_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(v & 0xffffffffu));
  return buf;
}

// What a real server answers to the handshake commands; "" for anything else.
// `id` makes the run_id distinct per server: the client treats two nodes with one
// run_id as one server configured twice.
std::string handshake_answer(const redisReply* req, std::uint64_t id) {
  const std::string name = command_name(req);
  if (name == "AUTH" || name == "SELECT") return "+OK\r\n";
  if (name == "PING") return "+PONG\r\n";
  if (name == "INFO") {
    return bulk(
        "# Server\r\nredis_version:7.0.15\r\nrun_id:0123456789abcdef0123456789abcdef" + hex8(id) +
        "\r\nuptime_in_seconds:100000\r\n");
  }
  if (name == "TIME") {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
    return "*2\r\n" + bulk(std::to_string(us / 1000000)) + bulk(std::to_string(us % 1000000));
  }
  return {};
}

// The liar's answer to one request.
std::string answer(const redisReply* req, std::mt19937& rng, std::atomic<std::uint64_t>& noise) {
  if (std::string a = handshake_answer(req, reinterpret_cast<std::uintptr_t>(&noise)); !a.empty()) return a;
  noise.fetch_add(1);
  switch (rng() % 10) {
    case 6:
      return random_resp(rng, 0) + random_resp(rng, 0);  // one reply too many
    case 7:
      return "";  // none
    case 8: {     // truncated
      std::string r = random_resp(rng, 0);
      return r.substr(0, rng() % (r.size() + 1));
    }
    case 9:
      return random_bytes(rng, 10 + rng() % 40);  // not RESP
    default:
      return random_resp(rng, 0);
  }
}

// pre_7_0 mode: the handshake locally, SET ... NX ... GET refused, the rest
// forwarded to the real server and its reply passed back.
std::string forward(peer& p, int upstream_port, const redisReply* req, std::atomic<std::uint64_t>& refused) {
  if (std::string a = handshake_answer(req, static_cast<std::uint64_t>(upstream_port)); !a.empty()) return a;
  const std::string name = command_name(req);
  if (name.empty()) return "-ERR Protocol error\r\n";
  if (name == "SET") {
    bool nx = false, get = false;
    for (std::size_t i = 3; i < req->elements; ++i) {
      const std::string opt = upper(req->element[i]->str, req->element[i]->len);
      nx = nx || opt == "NX";
      get = get || opt == "GET";
    }
    if (nx && get) {
      refused.fetch_add(1);
      return "-ERR syntax error\r\n";
    }
  }
  if (!p.upstream) {
    const timeval tv{2, 0};
    p.upstream.reset(redisConnectWithTimeout("127.0.0.1", upstream_port, tv));
    if (!p.upstream || p.upstream->err != 0) {
      p.upstream.reset();
      return "-ERR upstream unreachable\r\n";
    }
    redisSetTimeout(p.upstream.get(), tv);
  }
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (std::size_t i = 0; i < req->elements; ++i) {
    argv.push_back(req->element[i]->str);
    lens.push_back(req->element[i]->len);
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(p.upstream.get(), static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (reply == nullptr) {
    p.upstream.reset();
    return "-ERR upstream failed\r\n";
  }
  std::string out = to_resp(reply);
  freeReplyObject(reply);
  return out;
}

}  // namespace

noise_server::noise_server(std::uint32_t seed, bool handshake) : seed_(seed), handshake_(handshake) { start(); }

noise_server::noise_server(pre_7_0 mode) : seed_(0), handshake_(true), upstream_port_(mode.upstream_port) {
  start();
}

void noise_server::start() {
  try {
    listen_fd_ = listen_on_loopback("noise_server", port_);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw sys_error("pipe2");
    wake_rd_ = fds[0];
    wake_wr_ = fds[1];
    thread_ = std::thread([this] { loop(); });
  } catch (...) {
    for (int* fd : {&listen_fd_, &wake_rd_, &wake_wr_}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
    throw;
  }
}

noise_server::~noise_server() {
  if (thread_.joinable()) {
    char c = 'x';
    while (::write(wake_wr_, &c, 1) == -1 && errno == EINTR) {
    }
    thread_.join();
  }
  for (int fd : {listen_fd_, wake_rd_, wake_wr_}) {
    if (fd >= 0) ::close(fd);
  }
}

std::string noise_server::uri() const { return "redis://127.0.0.1:" + std::to_string(port_); }

void noise_server::loop() {
  std::mt19937 rng(seed_);
  std::vector<peer> peers;
  for (;;) {
    std::vector<pollfd> pfds;
    pfds.push_back({wake_rd_, POLLIN, 0});
    pfds.push_back({listen_fd_, POLLIN, 0});
    for (const peer& p : peers) {
      pfds.push_back({p.fd, static_cast<short>(POLLIN | (p.out.empty() ? 0 : POLLOUT)), 0});
    }
    int n = ::poll(pfds.data(), pfds.size(), kPollMs);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pfds[0].revents != 0) break;
    std::vector<peer> keep;
    for (std::size_t i = 2; i < pfds.size(); ++i) {
      peer& p = peers[i - 2];
      bool alive = true;
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        ssize_t r = ::recv(p.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          alive = false;
        } else if (r > 0) {
          if (!handshake_) {
            noise_.fetch_add(1);
            p.out += random_bytes(rng, 1 + rng() % 64);
          } else if (redisReaderFeed(p.reader.get(), buf, static_cast<size_t>(r)) != REDIS_OK) {
            alive = false;
          } else {
            for (;;) {
              void* req = nullptr;
              if (redisReaderGetReply(p.reader.get(), &req) != REDIS_OK) {
                alive = false;
                break;
              }
              if (req == nullptr) break;
              commands_.fetch_add(1);
              const auto* rq = static_cast<redisReply*>(req);
              p.out += upstream_port_ > 0 ? forward(p, upstream_port_, rq, refused_) : answer(rq, rng, noise_);
              freeReplyObject(req);
            }
          }
        }
      }
      if (alive && !p.out.empty()) {
        ssize_t w = ::send(p.fd, p.out.data(), p.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
          p.out.erase(0, static_cast<std::size_t>(w));
        } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          alive = false;
        }
      }
      if (alive) {
        keep.push_back(std::move(p));
      } else {
        ::close(p.fd);
      }
    }
    peers.swap(keep);
    if (pfds[1].revents & POLLIN) {
      for (;;) {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        connections_.fetch_add(1);
        peer p;
        p.fd = fd;
        p.reader.reset(redisReaderCreate());
        if (!handshake_) p.out = random_bytes(rng, 16 + rng() % 64);  // speaks first, like a banner
        peers.push_back(std::move(p));
      }
    }
  }
  for (const peer& p : peers) ::close(p.fd);
}

}  // namespace redlock::test
