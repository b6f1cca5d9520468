// The per-node transport against real redis-server processes and fake nodes: the
// timer queue, the stall detector, the reply size cap, the address walk and what
// server text may reach a report.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "io/resolve.h"
#include "fake_listener.h"
#include "redlock/uv.h"
#include "test_util.h"

namespace redlock::test {
namespace {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

// A node with only the handshake this file's fake nodes speak: PING (no INFO, no TIME).
client_options plain_options(const std::vector<std::string>& uris) {
  client_options o = options_for(uris);
  o.restart_quarantine = 0ms;
  o.clock_jump_threshold = 0ms;
  return o;
}

bool printable_ascii(const std::string& s) {
  for (char ch : s) {
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e) return false;
  }
  return true;
}

// A fake Redis node on 127.0.0.1, one connection at a time: answers the first PING
// of each connection (the client's handshake) with +PONG, or with `handshake_error`
// if set; every later command gets the mode's answer.
class fake_node {
 public:
  enum class mode {
    // A bulk string of `payload` bytes, written in 64 KiB chunks as fast as the
    // client reads them.
    huge,
    // A bulk string header promising 100000 bytes, then one byte every 20 ms:
    // never a complete reply.
    trickle,
    // +PONG.
    pong,
  };
  explicit fake_node(mode m, std::size_t payload = 0, std::string handshake_error = {})
      : mode_(m), payload_(payload), handshake_error_(std::move(handshake_error)) {
    listen_fd_ = listen_on_loopback("fake_node", port_);
    thread_ = std::thread([this] { run(); });
  }
  ~fake_node() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  fake_node(const fake_node&) = delete;
  fake_node& operator=(const fake_node&) = delete;

  std::string uri() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_.load(); }
  // Connections the client closed (or reset) while this node still served them.
  int closed_by_client() const { return closed_by_client_.load(); }
  // Payload bytes handed to the kernel in huge mode, over all connections.
  std::size_t payload_sent() const { return payload_sent_.load(); }
  bool payload_complete() const { return payload_complete_.load(); }

 private:
  void run() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      ++accepted_;
      timeval tv{0, 100 * 1000};
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      serve(fd);
      ::close(fd);
    }
  }

  // Writes all of `s` (retrying on the send timeout until stop); false when the
  // client closed the connection.
  bool send_all(int fd, const char* s, std::size_t n, std::size_t* counted = nullptr) {
    while (n > 0) {
      if (stop_) return false;
      const ssize_t w = ::send(fd, s, n, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
        ++closed_by_client_;
        return false;
      }
      s += w;
      n -= static_cast<std::size_t>(w);
      if (counted != nullptr) *counted += static_cast<std::size_t>(w);
    }
    return true;
  }

  // False when the connection is over.
  bool answer(int fd, bool first) {
    if (first) {
      const std::string a = handshake_error_.empty() ? "+PONG\r\n" : "-" + handshake_error_ + "\r\n";
      return send_all(fd, a.data(), a.size());
    }
    switch (mode_) {
      case mode::pong: return send_all(fd, "+PONG\r\n", 7);
      case mode::huge: {
        const std::string head = "$" + std::to_string(payload_) + "\r\n";
        if (!send_all(fd, head.data(), head.size())) return false;
        const std::string chunk(64 * 1024, 'x');
        for (std::size_t left = payload_; left > 0;) {
          const std::size_t n = std::min(left, chunk.size());
          std::size_t sent = 0;
          const bool ok = send_all(fd, chunk.data(), n, &sent);
          payload_sent_ += sent;
          if (!ok) return false;
          left -= n;
        }
        payload_complete_ = true;
        return send_all(fd, "\r\n", 2);
      }
      case mode::trickle: {
        if (!send_all(fd, "$100000\r\n", 9)) return false;
        for (int i = 0; i < 100000 && !stop_; ++i) {
          if (!send_all(fd, "x", 1)) return false;
          // A closed connection shows up as readable (EOF) before a send fails.
          pollfd p{fd, POLLIN, 0};
          if (::poll(&p, 1, 20) > 0) {
            char buf[256];
            if (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) == 0) {
              ++closed_by_client_;
              return false;
            }
          }
        }
        return false;
      }
    }
    return false;
  }

  void serve(int fd) {
    redisReader* rd = redisReaderCreate();
    bool first = true;
    bool open = true;
    while (open && !stop_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      redisReaderFeed(rd, buf, static_cast<std::size_t>(n));
      void* req = nullptr;
      while (open && redisReaderGetReply(rd, &req) == REDIS_OK && req != nullptr) {
        freeReplyObject(req);
        open = answer(fd, first);
        first = false;
      }
    }
    redisReaderFree(rd);
  }

  const mode mode_;
  const std::size_t payload_;
  const std::string handshake_error_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0}, closed_by_client_{0};
  std::atomic<std::size_t> payload_sent_{0};
  std::atomic<bool> payload_complete_{false};
  std::thread thread_;
};

// Runs `loop` (without blocking in it) until `pred` or `limit`.
bool run_until(uv_loop_t& loop, const std::function<bool()>& pred, milliseconds limit) {
  const auto end = steady::now() + limit;
  while (!pred() && steady::now() < end) {
    uv_run(&loop, UV_RUN_NOWAIT);
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

// ------------------------------------------------------------------ timer queue

// A loop blocked past both a connection's stall time and a watchdog extension's
// deadline runs both in one timer batch: the stall fails the connection, the
// extension round decides and is freed, and its deadline (cancelled by the
// round's destructor) must not run on freed memory. ASan reports it if it does.
TEST(TimerQueue, a_loop_blocked_past_a_stall_and_a_watchdog_deadline_runs_no_callback_of_a_freed_round) {
  redis_node node;
  uv_loop_t loop;
  uv_loop_init(&loop);
  bool lost = false;
  bool done = false;
  acquire_result got;
  steady::time_point acquired_at;
  auto c = make_client_on_loop(options_for({node.uri()}), &loop);
  acquire_options ao = once(3000ms);
  ao.auto_extend = true;
  ao.extend_interval = 1000ms;
  ao.on_lost = [&](const lease&, const report&) { lost = true; };
  c->acquire_async("timer-batch", ao, [&](acquire_result r) {
    acquired_at = steady::now();
    got = std::move(r);
    done = true;
  });
  ASSERT_TRUE(run_until(loop, [&] { return done; }, 5000ms));
  ASSERT_TRUE(got) << got.report.message();
  node.pause();
  // The watchdog's first tick (interval after the grant) sends its extension to
  // the paused node; the loop writes it in the same iteration.
  run_until(loop, [&] { return steady::now() >= acquired_at + 1040ms; }, 5000ms);
  // The embedding service blocks its loop: the connection's stall time and the
  // extension's deadline (the lock's remaining validity) both pass.
  std::this_thread::sleep_for(2500ms);
  EXPECT_TRUE(run_until(loop, [&] { return lost; }, 5000ms)) << "the watchdog never reported the loss";
  node.resume();
  got.lock = lock();
  c.reset();
  for (int i = 0; i < 500 && uv_run(&loop, UV_RUN_NOWAIT) != 0; ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// ------------------------------------------------------------------ stall detector

// Pauses `node` for `length` on another thread, starting now (returns once the
// node is stopped).
std::thread pause_for(redis_node& node, milliseconds length) {
  node.pause();
  return std::thread([&node, length] {
    std::this_thread::sleep_for(length);
    node.resume();
  });
}

TEST(StallDetector, an_idle_connection_meeting_a_short_pause_is_not_reset) {
  redis_node node;
  client c(options_for({node.uri()}));  // command_timeout 150 ms; stall after 1000 ms
  ASSERT_TRUE(wait_connected(c));
  const auto before = c.stats().reconnects;
  std::this_thread::sleep_for(1300ms);  // idle: nothing received for longer than the stall time
  std::thread resumer = pause_for(node, 300ms);
  const report p = c.ping();  // its reply is late (> command_timeout): a timeout, not a stall
  EXPECT_EQ(p.nodes.at(0).status, node_status::timeout) << p.message();
  resumer.join();
  std::this_thread::sleep_for(500ms);  // a reconnect would have happened by now
  const report again = c.ping();
  EXPECT_TRUE(again) << again.message();
  EXPECT_EQ(c.stats().reconnects, before) << "a 300 ms pause after an idle second reset the connection";
}

TEST(StallDetector, a_short_pause_at_a_watchdog_tick_keeps_the_connection_and_the_lock) {
  redis_node node;
  client c(options_for({node.uri()}));
  ASSERT_TRUE(wait_connected(c));
  const auto before = c.stats().reconnects;
  acquire_options ao = once(6000ms);
  ao.auto_extend = true;
  ao.extend_interval = 1500ms;
  std::atomic<bool> lost{false};
  ao.on_lost = [&](const lease&, const report&) { lost = true; };
  auto r = c.acquire("pause-at-tick", ao);
  ASSERT_TRUE(r) << r.report.message();
  const auto t0 = steady::now();
  std::this_thread::sleep_until(t0 + 1300ms);
  // The first tick (t0 + 1500 ms) meets a paused node; it answers at t0 + ~1900 ms,
  // far inside the lock's validity and under the stall time counted from the send.
  std::thread resumer = pause_for(node, 600ms);
  resumer.join();
  EXPECT_TRUE(eventually([&] { return c.stats().extends >= 1; }, 3000ms)) << "the extension never completed";
  std::this_thread::sleep_for(500ms);  // a reconnect after a reset would have happened by now
  EXPECT_EQ(c.stats().extends, 1u) << "the extension at the paused tick failed and was retried";
  EXPECT_FALSE(lost.load());
  EXPECT_TRUE(r.lock.owns_lock());
  EXPECT_GT(r.lock.remaining_validity(), 4000ms) << "the extension at the paused tick did not count";
  EXPECT_EQ(c.stats().reconnects, before) << "a 600 ms pause at a watchdog tick reset the connection";
  EXPECT_TRUE(r.lock.release());
}

// ------------------------------------------------------------------ reply size cap

TEST(ReplyCap, a_huge_reply_fails_the_connection_before_it_is_buffered) {
  constexpr std::size_t kPayload = 64u << 20;
  fake_node fake(fake_node::mode::huge, kPayload);
  client_options o = plain_options({fake.uri()});
  o.command_timeout = 3000ms;  // the cap, not the timeout, must stop this reply
  client c(o);
  const report p = c.ping();
  ASSERT_EQ(p.nodes.size(), 1u);
  EXPECT_EQ(p.nodes[0].status, node_status::protocol_error) << p.message();
  EXPECT_NE(p.nodes[0].detail.find("max_reply_bytes"), std::string::npos) << p.message();
  EXPECT_NE(p.nodes[0].detail.find("1048576"), std::string::npos) << p.message();
  EXPECT_FALSE(fake.payload_complete()) << "the client read the whole 64 MiB reply";
  EXPECT_TRUE(eventually([&] { return fake.closed_by_client() >= 1; }, 5000ms));
  // What reached the kernel's socket buffers, not what the client kept.
  EXPECT_LT(fake.payload_sent(), kPayload / 4);
}

TEST(ReplyCap, a_lower_cap_applies_and_a_zero_cap_is_refused) {
  fake_node fake(fake_node::mode::huge, 300 * 1024);
  client_options o = plain_options({fake.uri()});
  o.command_timeout = 3000ms;
  o.max_reply_bytes = 64 * 1024;
  client c(o);
  const report p = c.ping();
  EXPECT_EQ(p.nodes.at(0).status, node_status::protocol_error) << p.message();
  EXPECT_NE(p.nodes[0].detail.find("65536"), std::string::npos) << p.message();
  client_options bad = plain_options({fake.uri()});
  bad.max_reply_bytes = 0;
  EXPECT_THROW(client{bad}, config_error);
}

TEST(ReplyCap, a_trickle_to_a_timed_out_request_does_not_keep_the_connection_alive) {
  fake_node fake(fake_node::mode::trickle);
  client c(plain_options({fake.uri()}));  // command_timeout 150 ms; stall after 1000 ms
  const report p = c.ping();
  EXPECT_EQ(p.nodes.at(0).status, node_status::timeout) << p.message();
  // A byte every 20 ms, never a whole reply: the stall detector must still close it.
  EXPECT_TRUE(eventually([&] { return fake.closed_by_client() >= 1; }, 5000ms))
      << "a trickle of bytes kept a connection alive whose request had timed out";
  EXPECT_TRUE(eventually([&] { return fake.accepted() >= 2; }, 3000ms)) << "no reconnect after the stall";
}

// ------------------------------------------------------------------ address walk

// "multi.redlock.test" resolves (through the library's test seam: this machine's
// localhost has one address, and /etc/hosts is not ours to edit) to ::1 first,
// where nothing listens, then 127.0.0.1, where the node does.
std::vector<std::string> loopback_v6_then_v4(const std::string& host) {
  if (host == "multi.redlock.test") return {"::1", "127.0.0.1"};
  if (host == "refusing.redlock.test") return {"::1", "127.0.0.2"};
  return {};
}

struct resolver_scope {
  resolver_scope() { detail::set_resolver_override(&loopback_v6_then_v4); }
  ~resolver_scope() { detail::set_resolver_override(nullptr); }
};

TEST(AddressWalk, a_name_whose_first_address_refuses_connects_through_the_next) {
  redis_node node;  // listens on 127.0.0.1 only
  resolver_scope seam;
  client c(options_for({"redis://multi.redlock.test:" + std::to_string(node.port())}));
  ASSERT_TRUE(wait_connected(c)) << c.ping().message();
  auto r = c.acquire("walk", once(5000ms));
  EXPECT_TRUE(r) << r.report.message();
  EXPECT_EQ(node.get("walk"), r.lock.info().token);
}

TEST(AddressWalk, when_every_address_refuses_the_detail_names_each) {
  redis_node node;
  resolver_scope seam;
  client c(options_for({"redis://refusing.redlock.test:" + std::to_string(node.port())}));
  const std::string port = std::to_string(node.port());
  report p;
  ASSERT_TRUE(eventually([&] {
    p = c.ping();
    return p.nodes.at(0).status == node_status::connection_error &&
           p.nodes[0].detail.find("127.0.0.2") != std::string::npos;
  })) << p.message();
  EXPECT_NE(p.nodes[0].detail.find("[::1]:" + port), std::string::npos) << p.message();
  EXPECT_NE(p.nodes[0].detail.find("127.0.0.2:" + port), std::string::npos) << p.message();
}

// ------------------------------------------------------------------ messages

TEST(Messages, control_characters_in_server_text_never_reach_a_report) {
  fake_node fake(fake_node::mode::pong, 0, "ERR \x1b[2J\x1b[31mred\x07 bell\x01\x7f\xc3\xa9 end");
  client c(plain_options({fake.uri()}));
  report p;
  ASSERT_TRUE(eventually([&] {
    p = c.ping();
    return p.nodes.at(0).status == node_status::server_error;
  }));
  EXPECT_NE(p.nodes[0].detail.find("end"), std::string::npos) << p.message();
  EXPECT_TRUE(printable_ascii(p.nodes[0].detail)) << p.nodes[0].detail;
  EXPECT_TRUE(printable_ascii(p.message())) << p.message();
}

TEST(Messages, an_authentication_refusal_names_its_status_once) {
  node_config cfg;
  cfg.password = "right";
  redis_node node(cfg);
  client c(options_for({"redis://:wrong@127.0.0.1:" + std::to_string(node.port())}));
  report p;
  ASSERT_TRUE(eventually([&] {
    p = c.ping();
    return p.nodes.at(0).status == node_status::auth_error;
  }));
  const std::string m = p.message();
  EXPECT_EQ(m.find("authentication refused (authentication refused"), std::string::npos) << m;
  EXPECT_NE(m.find("WRONGPASS"), std::string::npos) << m;
}

}  // namespace
}  // namespace redlock::test
