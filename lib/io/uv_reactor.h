// The production reactor: a libuv loop (the client's own, run by its thread, or
// the application's) and TCP / unix-socket streams. See reactor.h.
#pragma once

#include <uv.h>

#include <memory>

#include "io/reactor.h"

namespace redlock::detail {

class tls_context;

class uv_reactor final : public reactor {
 public:
  // `external` null: the reactor owns a loop, which run() runs.
  explicit uv_reactor(uv_loop_t* external);
  ~uv_reactor() override;

  void start(driver& d) override;
  std::uint64_t now_ms() const override { return uv_now(loop_); }
  void refresh() override { uv_update_time(loop_); }
  void arm_timer(std::uint64_t delay_ms) override;
  void stop_timer() override;
  void idle(bool on) override;
  void wake() override;
  void close(std::function<void()> closed) override;
  std::unique_ptr<link> open(const node_address& address, std::uint64_t deadline_ms, link_events& events,
                             node_status& status, std::string& error) override;
  // Builds the client's SSL_CTX (tls.h); rediss:// links are then TLS over TCP.
  std::string use_tls(const tls_options& options) override;

  // Own loop only, on the thread that runs it: runs until every handle is closed.
  void run() override;
  // Own loop only, on the thread that ran it, after the core's final drain: closes
  // the loop (its epoll descriptor, signal pipe and eventfd) now, not when the core
  // is destroyed, which a lock handle of the client may delay for as long as it
  // lives. The destructor closes a loop that was never run (a bad configuration).
  void close_loop() override;
  uv_loop_t* loop() const noexcept { return loop_; }

 private:
  uv_loop_t own_loop_{};
  uv_loop_t* loop_;
  bool owns_loop_;
  bool loop_open_ = false;  // own loop: initialised and not closed yet
  driver* driver_ = nullptr;
  uv_async_t async_{};
  uv_idle_t idle_{};
  uv_timer_t timer_{};
  int handles_open_ = 0;
  bool closing_ = false;
  std::function<void()> closed_;
  std::shared_ptr<tls_context> tls_;  // null until use_tls()
};

}  // namespace redlock::detail
