#include "fault_proxy.h"

#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace redlock::test {

namespace {

constexpr std::size_t kReadBuf = 64 * 1024;
constexpr std::chrono::seconds kApplyTimeout{5};

std::runtime_error uv_error(const std::string& what, int rc) {
  return std::runtime_error("fault_proxy: " + what + ": " + uv_strerror(rc));
}

}  // namespace

// The proxy's clock for delivery times: uv_hrtime(), in nanoseconds, read fresh at
// each use. Never uv_now(): the loop's cached clock is in whole milliseconds
// (truncated) and is read from a coarse clock at the start of the loop iteration, so
// it lags real time by up to a few ms; a delay scheduled from it is undershot by
// that lag (a 40 ms latency measured 39.7 ms).
std::uint64_t now_ns() { return uv_hrtime(); }

// One direction of a connection pair: chunks read from the source wait here until
// their delivery time, then are written to the destination in order.
struct proxy_direction {
  uv_timer_t timer{};
  std::deque<std::pair<std::uint64_t, std::string>> queue;  // (due, on now_ns(); bytes)
  std::uint64_t last_due = 0;
  bool eof = false;       // the source sent EOF: shut the destination down once drained
  bool shutting = false;  // uv_shutdown issued
  uv_shutdown_t shutdown_req{};
};

// A client connection and its upstream connection to the server.
struct proxy_pair {
  fault_proxy::impl* px = nullptr;
  uv_tcp_t client{};
  uv_tcp_t server{};
  uv_connect_t connect_req{};
  proxy_direction up;    // client -> server
  proxy_direction down;  // server -> client
  bool connected = false;
  bool closing = false;
  bool tainted = false;  // lost bytes in drop_replies or drop_reply_then_black_hole
  bool tripped = false;  // the connection that tripped drop_reply_then_black_hole
  std::string tail;      // the last trigger.size() - 1 client bytes (the trigger may span chunks)
  int handles = 0;       // initialised handles not yet closed
  char client_buf[kReadBuf];
  char server_buf[kReadBuf];
};

struct fault_proxy::impl {
  uv_loop_t loop{};
  uv_tcp_t listener{};
  uv_async_t async{};
  std::thread thread;
  int port = 0;
  int target = 0;

  // Requests from other threads, guarded by mu.
  std::mutex mu;
  std::condition_variable cv;
  mode desired = mode::pass;
  std::chrono::milliseconds desired_delay{0};
  std::string desired_trigger;
  std::uint64_t requested = 0;
  std::uint64_t applied = 0;
  bool stop = false;

  // Loop thread only.
  mode m = mode::pass;
  std::uint64_t delay_ms = 0;
  std::string trigger;   // drop_reply_then_black_hole
  bool tripped = false;  // ... and it has tripped: everything is held
  std::set<proxy_pair*> pairs;

  std::atomic<mode> current{mode::pass};
  std::atomic<std::uint64_t> accepted{0}, refused{0}, resets{0}, bytes_up{0}, bytes_down{0}, dropped{0},
      open{0}, changes{0}, trips{0};
  std::atomic<std::int64_t> queued{0};  // chunks waiting in a direction's queue
  std::atomic<bool> has_tripped{false};  // the armed drop_reply_then_black_hole tripped

  // ---- loop thread ----

  void on_async() {
    bool stopping = false;
    mode want = mode::pass;
    std::chrono::milliseconds d{0};
    std::string t;
    std::uint64_t gen = 0;
    {
      std::lock_guard<std::mutex> lk(mu);
      stopping = stop;
      want = desired;
      d = desired_delay;
      t = desired_trigger;
      gen = requested;
    }
    if (stopping) {
      shutdown_all();
      return;
    }
    if (gen != applied) apply(want, d, std::move(t));
    {
      std::lock_guard<std::mutex> lk(mu);
      applied = gen;
    }
    cv.notify_all();
  }

  // Nothing may be read or delivered: black_hole, or a tripped
  // drop_reply_then_black_hole (whose tripped connection still reads and discards
  // the server's bytes).
  bool holding() const { return m == mode::black_hole || (m == mode::drop_reply_then_black_hole && tripped); }

  void apply(mode want, std::chrono::milliseconds d, std::string t) {
    const mode old = m;
    const bool was_tripped = old == mode::drop_reply_then_black_hole && tripped;
    m = want;
    trigger = std::move(t);
    tripped = false;
    has_tripped.store(false);
    delay_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(0, d.count()));
    current.store(want);
    changes.fetch_add(1);
    std::vector<proxy_pair*> all(pairs.begin(), pairs.end());
    if (want == mode::reset) {
      for (proxy_pair* p : all) {
        resets.fetch_add(1);
        close_pair(p, true);
      }
      return;
    }
    if (was_tripped) {
      // Nothing held during the outage is ever delivered: every connection open
      // since the trip is reset (the tripped one also lost bytes).
      for (proxy_pair* p : all) {
        resets.fetch_add(1);
        close_pair(p, true);
      }
    } else if (old == mode::drop_replies && want != mode::drop_replies) {
      for (proxy_pair* p : all) {
        if (!p->tainted) continue;
        resets.fetch_add(1);
        close_pair(p, true);
      }
    }
    for (proxy_pair* p : pairs) p->tail.clear();
    for (proxy_pair* p : pairs) {
      if (!p->connected) continue;
      if (want == mode::black_hole) {
        uv_read_stop(reinterpret_cast<uv_stream_t*>(&p->client));
        uv_read_stop(reinterpret_cast<uv_stream_t*>(&p->server));
        uv_timer_stop(&p->up.timer);
        uv_timer_stop(&p->down.timer);
      } else {
        start_reading(p);
        pump(p, p->up);
        pump(p, p->down);
      }
    }
  }

  void shutdown_all() {
    std::vector<proxy_pair*> all(pairs.begin(), pairs.end());
    for (proxy_pair* p : all) close_pair(p, false);
    if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(&listener)))
      uv_close(reinterpret_cast<uv_handle_t*>(&listener), nullptr);
    if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(&async)))
      uv_close(reinterpret_cast<uv_handle_t*>(&async), nullptr);
  }

  void on_connection() {
    auto* p = new proxy_pair();
    p->px = this;
    uv_tcp_init(&loop, &p->client);
    uv_tcp_init(&loop, &p->server);
    uv_timer_init(&loop, &p->up.timer);
    uv_timer_init(&loop, &p->down.timer);
    p->handles = 4;
    p->client.data = p->server.data = p->up.timer.data = p->down.timer.data = p;
    pairs.insert(p);
    open.fetch_add(1);
    if (uv_accept(reinterpret_cast<uv_stream_t*>(&listener), reinterpret_cast<uv_stream_t*>(&p->client)) !=
        0) {
      close_pair(p, false);
      return;
    }
    // refused before accepted (and stats() reads accepted first): accepted - refused
    // never counts a connection that reset mode is about to close.
    if (m == mode::reset) {
      refused.fetch_add(1);
      accepted.fetch_add(1);
      close_pair(p, true);
      return;
    }
    accepted.fetch_add(1);
    uv_tcp_nodelay(&p->client, 1);
    uv_tcp_nodelay(&p->server, 1);
    sockaddr_in addr{};
    uv_ip4_addr("127.0.0.1", target, &addr);
    p->connect_req.data = p;
    int rc = uv_tcp_connect(&p->connect_req, &p->server, reinterpret_cast<const sockaddr*>(&addr),
                            [](uv_connect_t* req, int status) {
                              auto* pp = static_cast<proxy_pair*>(req->data);
                              if (status == UV_ECANCELED || pp->closing) return;
                              pp->px->on_upstream(pp, status);
                            });
    if (rc != 0) close_pair(p, true);
  }

  void on_upstream(proxy_pair* p, int status) {
    if (status != 0) {
      // The server is down: the client sees its connection reset, as it would
      // see a refused connect without the proxy.
      close_pair(p, true);
      return;
    }
    p->connected = true;
    if (!holding()) start_reading(p);
  }

  void start_reading(proxy_pair* p) {
    auto alloc_client = [](uv_handle_t* h, size_t, uv_buf_t* buf) {
      auto* pp = static_cast<proxy_pair*>(h->data);
      *buf = uv_buf_init(pp->client_buf, sizeof pp->client_buf);
    };
    auto alloc_server = [](uv_handle_t* h, size_t, uv_buf_t* buf) {
      auto* pp = static_cast<proxy_pair*>(h->data);
      *buf = uv_buf_init(pp->server_buf, sizeof pp->server_buf);
    };
    if (!p->up.eof) {
      uv_read_start(reinterpret_cast<uv_stream_t*>(&p->client), alloc_client,
                    [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
                      auto* pp = static_cast<proxy_pair*>(s->data);
                      pp->px->on_read(pp, pp->up, s, n, buf);
                    });
    }
    if (!p->down.eof) {
      uv_read_start(reinterpret_cast<uv_stream_t*>(&p->server), alloc_server,
                    [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
                      auto* pp = static_cast<proxy_pair*>(s->data);
                      pp->px->on_read(pp, pp->down, s, n, buf);
                    });
    }
  }

  void on_read(proxy_pair* p, proxy_direction& d, uv_stream_t* source, ssize_t n, const uv_buf_t* buf) {
    if (p->closing) return;
    if (n == 0) return;
    if (n < 0) {
      if (n != UV_EOF) {
        close_pair(p, true);
        return;
      }
      d.eof = true;
      uv_read_stop(source);
      pump(p, d);
      return;
    }
    const auto len = static_cast<std::size_t>(n);
    if (&d == &p->down &&
        (m == mode::drop_replies || (m == mode::drop_reply_then_black_hole && p->tripped))) {
      dropped.fetch_add(len);
      p->tainted = true;
      return;
    }
    bool trips_now = false;
    if (&d == &p->up && m == mode::drop_reply_then_black_hole && !tripped) {
      std::string window = std::move(p->tail);
      window.append(buf->base, len);
      trips_now = window.find(trigger) != std::string::npos;
      const std::size_t keep = std::min(window.size(), trigger.size() - 1);
      p->tail = window.substr(window.size() - keep);
    }
    // Due `delay` after the proxy read the chunk (so at least `delay` after it
    // arrived), on the precise clock.
    std::uint64_t due = now_ns() + (m == mode::latency ? delay_ms * 1'000'000 : 0);
    due = std::max(due, d.last_due);
    d.last_due = due;
    d.queue.emplace_back(due, std::string(buf->base, len));
    queued.fetch_add(1);
    pump(p, d);
    if (trips_now) trip(p);
  }

  // drop_reply_then_black_hole trips on `p`, whose chunk with the trigger was just
  // written to the server: from now on only p's server side is read (and
  // discarded); every other read stops, and new connections are held.
  void trip(proxy_pair* p) {
    tripped = true;
    p->tripped = true;
    trips.fetch_add(1);
    has_tripped.store(true);
    for (proxy_pair* q : pairs) {
      if (!q->connected) continue;
      uv_read_stop(reinterpret_cast<uv_stream_t*>(&q->client));
      uv_timer_stop(&q->up.timer);
      uv_timer_stop(&q->down.timer);
      if (q != p) uv_read_stop(reinterpret_cast<uv_stream_t*>(&q->server));
    }
  }

  uv_stream_t* destination(proxy_pair* p, proxy_direction& d) {
    return &d == &p->up ? reinterpret_cast<uv_stream_t*>(&p->server)
                        : reinterpret_cast<uv_stream_t*>(&p->client);
  }

  // Delivers every due chunk of `d`, arms its timer for the next one, and shuts the
  // destination down after the source's EOF once nothing is left.
  void pump(proxy_pair* p, proxy_direction& d) {
    if (p->closing || !p->connected || holding()) return;
    const std::uint64_t now = now_ns();
    uv_stream_t* dest = destination(p, d);
    while (!d.queue.empty() && d.queue.front().first <= now) {
      std::string data = std::move(d.queue.front().second);
      d.queue.pop_front();
      queued.fetch_sub(1);
      (&d == &p->up ? bytes_up : bytes_down).fetch_add(data.size());
      if (!write(p, dest, std::move(data))) return;
    }
    if (!d.queue.empty()) {
      // libuv timers count whole milliseconds on the loop's cached clock, which
      // can fire up to a millisecond or so early by the precise clock: round the
      // wait up, and let the timer's pump() check the precise clock again (it
      // re-arms if the chunk is still not due). Never early, at most ~1 ms late.
      const std::uint64_t wait_ns = d.queue.front().first - now;
      const std::uint64_t wait_ms = std::max<std::uint64_t>(1, (wait_ns + 999'999) / 1'000'000);
      uv_update_time(&loop);
      uv_timer_start(
          &d.timer,
          [](uv_timer_t* t) {
            auto* pp = static_cast<proxy_pair*>(t->data);
            pp->px->pump(pp, t == &pp->up.timer ? pp->up : pp->down);
          },
          wait_ms, 0);
      return;
    }
    if (d.eof && !d.shutting) {
      d.shutting = true;
      d.shutdown_req.data = p;
      int rc = uv_shutdown(&d.shutdown_req, dest, [](uv_shutdown_t* req, int) {
        auto* pp = static_cast<proxy_pair*>(req->data);
        // A Redis connection has no use for half a connection: close both sides.
        pp->px->close_pair(pp, false);
      });
      if (rc != 0) close_pair(p, false);
    }
  }

  bool write(proxy_pair* p, uv_stream_t* dest, std::string data) {
    struct write_req {
      uv_write_t req;
      proxy_pair* pair;
      std::string data;
    };
    auto* w = new write_req{uv_write_t{}, p, std::move(data)};
    w->req.data = w;
    uv_buf_t b = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
    int rc = uv_write(&w->req, dest, &b, 1, [](uv_write_t* req, int status) {
      auto* wr = static_cast<write_req*>(req->data);
      proxy_pair* pp = wr->pair;
      delete wr;
      if (status < 0 && status != UV_ECANCELED) pp->px->close_pair(pp, true);
    });
    if (rc != 0) {
      delete w;
      close_pair(p, true);
      return false;
    }
    return true;
  }

  void close_pair(proxy_pair* p, bool rst) {
    if (p->closing) return;
    p->closing = true;
    pairs.erase(p);
    open.fetch_sub(1);
    queued.fetch_sub(static_cast<std::int64_t>(p->up.queue.size() + p->down.queue.size()));
    p->up.queue.clear();
    p->down.queue.clear();
    if (rst) {
      // SO_LINGER 0: close() sends RST instead of FIN.
      uv_os_fd_t fd;
      if (uv_fileno(reinterpret_cast<uv_handle_t*>(&p->client), &fd) == 0) {
        linger lg{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      }
    }
    auto closed = [](uv_handle_t* h) {
      auto* pp = static_cast<proxy_pair*>(h->data);
      if (--pp->handles == 0) delete pp;
    };
    uv_close(reinterpret_cast<uv_handle_t*>(&p->client), closed);
    uv_close(reinterpret_cast<uv_handle_t*>(&p->server), closed);
    uv_close(reinterpret_cast<uv_handle_t*>(&p->up.timer), closed);
    uv_close(reinterpret_cast<uv_handle_t*>(&p->down.timer), closed);
  }
};

fault_proxy::fault_proxy(int target_port) : impl_(std::make_unique<impl>()) {
  impl& x = *impl_;
  x.target = target_port;
  int rc = uv_loop_init(&x.loop);
  if (rc != 0) throw uv_error("uv_loop_init", rc);
  uv_tcp_init(&x.loop, &x.listener);
  x.listener.data = &x;
  sockaddr_in addr{};
  uv_ip4_addr("127.0.0.1", 0, &addr);
  rc = uv_tcp_bind(&x.listener, reinterpret_cast<const sockaddr*>(&addr), 0);
  if (rc == 0) {
    rc = uv_listen(reinterpret_cast<uv_stream_t*>(&x.listener), 256, [](uv_stream_t* s, int status) {
      if (status == 0) static_cast<impl*>(s->data)->on_connection();
    });
  }
  if (rc == 0) {
    sockaddr_storage bound{};
    int len = sizeof bound;
    rc = uv_tcp_getsockname(&x.listener, reinterpret_cast<sockaddr*>(&bound), &len);
    x.port = ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  if (rc == 0) {
    rc = uv_async_init(&x.loop, &x.async, [](uv_async_t* a) { static_cast<impl*>(a->data)->on_async(); });
    x.async.data = &x;
  }
  if (rc != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&x.listener), nullptr);
    uv_run(&x.loop, UV_RUN_DEFAULT);
    uv_loop_close(&x.loop);
    throw uv_error("listen on 127.0.0.1", rc);
  }
  x.thread = std::thread([&x] {
    // A peer that closed its socket must not kill the test process with SIGPIPE:
    // a blocked SIGPIPE raised by this thread's own write stays pending here.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    uv_run(&x.loop, UV_RUN_DEFAULT);
  });
}

fault_proxy::~fault_proxy() {
  impl& x = *impl_;
  {
    std::lock_guard<std::mutex> lk(x.mu);
    x.stop = true;
  }
  uv_async_send(&x.async);
  if (x.thread.joinable()) x.thread.join();
  uv_loop_close(&x.loop);
}

int fault_proxy::port() const { return impl_->port; }
int fault_proxy::target_port() const { return impl_->target; }
std::string fault_proxy::uri() const { return "redis://127.0.0.1:" + std::to_string(impl_->port); }

void fault_proxy::set_mode(mode m, std::chrono::milliseconds delay, std::string trigger) {
  if (m == mode::drop_reply_then_black_hole && trigger.empty()) {
    throw std::invalid_argument("fault_proxy: drop_reply_then_black_hole needs a non-empty trigger");
  }
  impl& x = *impl_;
  std::unique_lock<std::mutex> lk(x.mu);
  x.desired = m;
  x.desired_delay = delay;
  x.desired_trigger = std::move(trigger);
  const std::uint64_t gen = ++x.requested;
  uv_async_send(&x.async);
  if (!x.cv.wait_for(lk, kApplyTimeout, [&] { return x.applied >= gen; }))
    throw std::runtime_error("fault_proxy: the loop did not apply the mode within 5 s");
}

fault_proxy::mode fault_proxy::current() const { return impl_->current.load(); }

fault_proxy::counters fault_proxy::stats() const {
  const impl& x = *impl_;
  counters c;
  c.accepted = x.accepted.load();
  c.refused = x.refused.load();
  c.reset = x.resets.load();
  c.bytes_up = x.bytes_up.load();
  c.bytes_down = x.bytes_down.load();
  c.bytes_dropped = x.dropped.load();
  c.open = x.open.load();
  c.mode_changes = x.changes.load();
  c.trips = x.trips.load();
  return c;
}

bool fault_proxy::wait_tripped(std::chrono::milliseconds limit) const {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!impl_->has_tripped.load()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

bool fault_proxy::wait_idle(std::chrono::milliseconds limit) const {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (impl_->open.load() != 0) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

bool fault_proxy::wait_flushed(std::chrono::milliseconds limit) const {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (impl_->queued.load() != 0) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

const char* to_string(fault_proxy::mode m) noexcept {
  switch (m) {
    case fault_proxy::mode::pass:
      return "pass";
    case fault_proxy::mode::latency:
      return "latency";
    case fault_proxy::mode::black_hole:
      return "black_hole";
    case fault_proxy::mode::reset:
      return "reset";
    case fault_proxy::mode::drop_replies:
      return "drop_replies";
    case fault_proxy::mode::drop_reply_then_black_hole:
      return "drop_reply_then_black_hole";
  }
  return "?";
}

}  // namespace redlock::test
