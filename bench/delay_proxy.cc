#include "delay_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <vector>

namespace redlock::bench {

namespace {

using proxy_clock = std::chrono::steady_clock;

sockaddr_in address(const std::string& host, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1)
    throw std::runtime_error("delay_proxy: not an IPv4 address: " + host);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  return a;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Connects to `a` (blocking), then makes the socket non-blocking; -1 on failure.
int connect_upstream(sockaddr_in a) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  set_nodelay(fd);
  return fd;
}

struct chunk {
  proxy_clock::time_point due;
  std::string data;
  std::size_t sent = 0;
};

// One proxied connection.
struct link {
  int client = -1;
  int server = -1;
  std::deque<chunk> up;    // client -> server, delayed
  std::deque<chunk> down;  // server -> client, delayed with both_directions (else due at once)
  bool dead = false;
  ~link() {
    if (client >= 0) ::close(client);
    if (server >= 0) ::close(server);
  }
};

// Reads what is available; false on EOF or a hard error.
bool read_some(int fd, std::string& into) {
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<std::size_t>(n));
      if (static_cast<std::size_t>(n) < sizeof buf) return true;
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

// Writes data[*off..]; false on a hard error.
bool write_some(int fd, const std::string& data, std::size_t& off) {
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  }
  return true;
}

}  // namespace

delay_proxy::delay_proxy(int upstream_port, std::chrono::microseconds delay)
    : delay_proxy("127.0.0.1", 0, "127.0.0.1", upstream_port, delay, false) {}

delay_proxy::delay_proxy(const std::string& listen_host, int listen_port, const std::string& upstream_host,
                         int upstream_port, std::chrono::microseconds delay, bool both_directions)
    : listen_host_(listen_host),
      upstream_host_(upstream_host),
      upstream_port_(upstream_port),
      both_directions_(both_directions),
      delay_us_(delay.count()) {
  sockaddr_in a = address(listen_host, listen_port);
  (void)address(upstream_host, upstream_port);  // throws now rather than per connection
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) throw std::runtime_error(std::string("delay_proxy: socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = sizeof a;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      ::pipe2(wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(listen_fd_);
    throw std::runtime_error(std::string("delay_proxy: listen: ") + std::strerror(err));
  }
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { run(); });
}

delay_proxy::~delay_proxy() {
  stop_.store(true);
  const char b = 1;
  (void)!::write(wake_fds_[1], &b, 1);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_fds_[0]);
  ::close(wake_fds_[1]);
}

std::string delay_proxy::uri() const { return "redis://" + listen_host_ + ":" + std::to_string(port_); }

void delay_proxy::run() noexcept {
  const sockaddr_in upstream = address(upstream_host_, upstream_port_);
  std::vector<std::unique_ptr<link>> links;
  std::vector<pollfd> fds;
  auto due_now = [](const std::deque<chunk>& q, proxy_clock::time_point now) {
    return !q.empty() && q.front().due <= now;
  };
  // Writes the due chunks of `q` to `fd`; false on a hard error.
  auto flush_due = [](int fd, std::deque<chunk>& q, proxy_clock::time_point now) {
    while (!q.empty() && q.front().due <= now) {
      chunk& front = q.front();
      if (!write_some(fd, front.data, front.sent)) return false;
      if (front.sent < front.data.size()) break;
      q.pop_front();
    }
    return true;
  };
  while (!stop_.load()) {
    const auto now = proxy_clock::now();
    // Next due chunk: the poll timeout.
    proxy_clock::time_point next = now + std::chrono::seconds(1);
    fds.clear();
    fds.push_back(pollfd{wake_fds_[0], POLLIN, 0});
    fds.push_back(pollfd{listen_fd_, POLLIN, 0});
    for (const auto& l : links) {
      const bool up_due = due_now(l->up, now), down_due = due_now(l->down, now);
      if (!l->up.empty() && !up_due && l->up.front().due < next) next = l->up.front().due;
      if (!l->down.empty() && !down_due && l->down.front().due < next) next = l->down.front().due;
      fds.push_back(pollfd{l->client, static_cast<short>(POLLIN | (down_due ? POLLOUT : 0)), 0});
      fds.push_back(pollfd{l->server, static_cast<short>(POLLIN | (up_due ? POLLOUT : 0)), 0});
    }
    const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(next - now);
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(wait.count() / 1000000000);
    ts.tv_nsec = static_cast<long>(wait.count() % 1000000000);
    if (::ppoll(fds.data(), fds.size(), &ts, nullptr) < 0 && errno != EINTR) break;

    if ((fds[1].revents & POLLIN) != 0) {
      for (;;) {
        int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) break;
        set_nodelay(c);
        auto l = std::make_unique<link>();
        l->client = c;
        l->server = connect_upstream(upstream);
        if (l->server < 0) continue;  // the link's destructor closes the client
        links.push_back(std::move(l));
      }
    }
    const auto t = proxy_clock::now();
    const auto delay = std::chrono::microseconds(delay_us_.load());
    const auto down_delay = both_directions_ ? delay : std::chrono::microseconds(0);
    for (std::size_t i = 0; i < links.size(); ++i) {
      link& l = *links[i];
      // Links accepted in this turn have no pollfd yet.
      const std::size_t at = 2 + 2 * i;
      const short crev = at < fds.size() ? fds[at].revents : 0;
      const short srev = at + 1 < fds.size() ? fds[at + 1].revents : 0;
      if ((crev & (POLLIN | POLLHUP | POLLERR)) != 0) {
        std::string got;
        if (!read_some(l.client, got)) l.dead = true;
        if (!got.empty()) l.up.push_back(chunk{t + delay, std::move(got), 0});
      }
      if ((srev & (POLLIN | POLLHUP | POLLERR)) != 0) {
        std::string got;
        if (!read_some(l.server, got)) l.dead = true;
        if (!got.empty()) l.down.push_back(chunk{t + down_delay, std::move(got), 0});
      }
      if (!l.dead && !flush_due(l.server, l.up, t)) l.dead = true;
      if (!l.dead && !flush_due(l.client, l.down, t)) l.dead = true;
    }
    for (std::size_t i = 0; i < links.size();) {
      if (links[i]->dead) {
        links.erase(links.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    char drain[64];
    while (::read(wake_fds_[0], drain, sizeof drain) > 0) {
    }
  }
}

}  // namespace redlock::bench
