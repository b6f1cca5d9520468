#include "fake_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

namespace redlock::test {
namespace {

constexpr std::size_t kGarbageBytes = 256;
constexpr int kPollMs = 100;

std::runtime_error sys_error(const std::string& what) {
  return std::runtime_error("fake_listener: " + what + ": " + std::strerror(errno));
}

void close_fd(int& fd) noexcept {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

int listen_on_loopback(const char* who, int& port) {
  auto fail = [who](const char* step) {
    return std::runtime_error(std::string(who) + ": " + step + ": " + std::strerror(errno));
  };
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw fail("socket");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const char* step = nullptr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    step = "bind";
  } else if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    step = "getsockname";
  } else if (::listen(fd, 128) != 0) {
    step = "listen";
  }
  if (step != nullptr) {
    auto e = fail(step);
    ::close(fd);
    throw e;
  }
  port = ntohs(addr.sin_port);
  return fd;
}

fake_listener::fake_listener(mode m) : mode_(m) {
  try {
    listen_fd_ = listen_on_loopback("fake_listener", port_);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw sys_error("pipe2");
    wake_rd_ = fds[0];
    wake_wr_ = fds[1];
    thread_ = std::thread([this] { loop(); });
  } catch (...) {
    close_fd(listen_fd_);
    close_fd(wake_rd_);
    close_fd(wake_wr_);
    throw;
  }
}

fake_listener::~fake_listener() {
  if (thread_.joinable()) {
    char c = 'x';
    while (::write(wake_wr_, &c, 1) == -1 && errno == EINTR) {
    }
    thread_.join();
  }
  close_fd(listen_fd_);
  close_fd(wake_rd_);
  close_fd(wake_wr_);
}

std::string fake_listener::uri() const { return "redis://127.0.0.1:" + std::to_string(port_); }

void fake_listener::loop() {
  std::vector<int> clients;
  std::mt19937 rng(static_cast<std::mt19937::result_type>(port_));
  bool stop = false;
  while (!stop) {
    std::vector<pollfd> pfds;
    pfds.push_back({wake_rd_, POLLIN, 0});
    pfds.push_back({listen_fd_, POLLIN, 0});
    for (int fd : clients) pfds.push_back({fd, POLLIN, 0});
    int n = ::poll(pfds.data(), pfds.size(), kPollMs);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pfds[0].revents != 0) stop = true;
    // Read and discard client input; drop clients that hung up.
    std::vector<int> keep;
    for (std::size_t i = 2; i < pfds.size(); ++i) {
      int fd = pfds[i].fd;
      bool alive = true;
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) alive = false;
      }
      if (alive) {
        keep.push_back(fd);
      } else {
        ::close(fd);
      }
    }
    clients.swap(keep);
    if (stop) break;
    if (pfds[1].revents & POLLIN) {
      for (;;) {  // the listening socket is non-blocking
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        accepted_.fetch_add(1);
        switch (mode_) {
          case mode::close:
            ::close(fd);
            continue;
          case mode::garbage: {
            std::string out = banner;
            for (std::size_t i = 0; i < kGarbageBytes; ++i) out.push_back(static_cast<char>(rng() & 0xff));
            // Fits in an empty socket buffer; a short write is acceptable anyway.
            (void)::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            break;
          }
          case mode::silent:
            break;
        }
        clients.push_back(fd);
      }
    }
  }
  for (int fd : clients) ::close(fd);
}

}  // namespace redlock::test
