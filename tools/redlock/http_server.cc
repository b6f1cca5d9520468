#include "http_server.h"

#include <uv.h>

#include <cstring>
#include <thread>
#include <unordered_set>

#include "http.h"

namespace redlock::cli {

namespace {

// How long a connection may linger after its response (the peer reads it, then
// closes) before it is closed anyway.
constexpr std::uint64_t linger_ms = 2'000;

}  // namespace

struct http_server::impl {
  struct conn {
    impl* owner = nullptr;
    uv_tcp_t tcp{};
    uv_timer_t timer{};
    uv_write_t write_req{};
    uv_shutdown_t shutdown_req{};
    std::string received;
    std::string response;
    bool responded = false;
    bool closing = false;
    int open_handles = 2;
  };

  settings cfg;
  std::function<std::string()> body;
  uv_loop_t loop{};
  uv_tcp_t listener{};
  uv_async_t wakeup{};
  std::thread thread;
  std::unordered_set<conn*> conns;
  std::string address;
  // A connection is waiting in the listener, not accepted: at max_connections,
  // libuv stops watching the listener until uv_accept takes it.
  bool waiting = false;
  bool stopping = false;
  bool loop_ready = false;
  bool running = false;

  static void on_handle_closed(uv_handle_t* h) {
    auto* c = static_cast<conn*>(h->data);
    if (--c->open_handles == 0) delete c;
  }

  void close_conn(conn* c) {
    if (c->closing) return;
    c->closing = true;
    conns.erase(c);
    uv_timer_stop(&c->timer);
    uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), on_handle_closed);
    uv_close(reinterpret_cast<uv_handle_t*>(&c->timer), on_handle_closed);
    if (waiting && !stopping) {
      waiting = false;
      accept_one();
    }
  }

  static void on_timer(uv_timer_t* t) {
    auto* c = static_cast<conn*>(t->data);
    c->owner->close_conn(c);  // no full head in time, or the linger after the response ran out
  }

  static void on_alloc(uv_handle_t*, std::size_t suggested, uv_buf_t* buf) {
    buf->base = new char[suggested];
    buf->len = suggested;
  }

  static void on_shutdown(uv_shutdown_t* req, int) {
    (void)req;  // the read side sees the peer's EOF, or the linger timer closes
  }

  static void on_written(uv_write_t* req, int status) {
    auto* c = static_cast<conn*>(req->data);
    if (c->closing) return;
    if (status < 0 || uv_shutdown(&c->shutdown_req, reinterpret_cast<uv_stream_t*>(&c->tcp), on_shutdown) != 0) {
      c->owner->close_conn(c);
      return;
    }
    uv_timer_start(&c->timer, on_timer, linger_ms, 0);
  }

  void respond(conn* c, std::string text) {
    c->responded = true;
    // The write is bounded too: a peer that never reads a response larger than the
    // socket buffers would otherwise hold the connection (and its copy) forever.
    const auto write_limit = static_cast<std::uint64_t>(cfg.head_timeout.count()) + linger_ms;
    uv_timer_start(&c->timer, on_timer, write_limit, 0);
    c->response = std::move(text);
    c->received.clear();
    c->received.shrink_to_fit();
    uv_buf_t b = uv_buf_init(c->response.data(), static_cast<unsigned>(c->response.size()));
    c->write_req.data = c;
    if (uv_write(&c->write_req, reinterpret_cast<uv_stream_t*>(&c->tcp), &b, 1, on_written) != 0) close_conn(c);
  }

  static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
    auto* c = static_cast<conn*>(s->data);
    impl* self = c->owner;
    if (n < 0) {
      delete[] buf->base;
      self->close_conn(c);
      return;
    }
    if (!c->responded && !c->closing) {
      // Only what fits under the cap is kept: a head is judged within it.
      const std::size_t room = max_http_head + 1 > c->received.size() ? max_http_head + 1 - c->received.size() : 0;
      c->received.append(buf->base, std::min<std::size_t>(room, static_cast<std::size_t>(n)));
      const http_head h = parse_http_head(c->received);
      if (h.st != http_head::state::incomplete) {
        self->respond(c, http_route(h, self->cfg.path, self->cfg.content_type, [self] { return self->body(); }));
      }
    }
    // After the response, the rest of the request is read and dropped until EOF.
    delete[] buf->base;
  }

  // Accepts the connection waiting in the listener.
  void accept_one() {
    auto* c = new conn;
    c->owner = this;
    uv_tcp_init(&loop, &c->tcp);
    uv_timer_init(&loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    if (uv_accept(reinterpret_cast<uv_stream_t*>(&listener), reinterpret_cast<uv_stream_t*>(&c->tcp)) != 0) {
      c->closing = true;
      uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), on_handle_closed);
      uv_close(reinterpret_cast<uv_handle_t*>(&c->timer), on_handle_closed);
      return;
    }
    conns.insert(c);
    uv_timer_start(&c->timer, on_timer, static_cast<std::uint64_t>(cfg.head_timeout.count()), 0);
    uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), on_alloc, on_read);
  }

  static void on_connection(uv_stream_t* server, int status) {
    impl* self = static_cast<impl*>(server->data);
    if (status < 0) return;
    if (self->conns.size() >= self->cfg.max_connections) {
      // Left in the listener: libuv stops reading it (the rest stay in the kernel's
      // backlog) until close_conn frees a slot and accepts this one.
      self->waiting = true;
      return;
    }
    self->accept_one();
  }

  static void on_wakeup(uv_async_t* a) {
    impl* self = static_cast<impl*>(a->data);
    self->stopping = true;
    const std::unordered_set<conn*> all = self->conns;
    for (conn* c : all) self->close_conn(c);
    uv_close(reinterpret_cast<uv_handle_t*>(&self->listener), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&self->wakeup), nullptr);
  }
};

http_server::http_server() : impl_(std::make_unique<impl>()) {}

http_server::~http_server() { stop(); }

bool http_server::start(const settings& s, std::function<std::string()> body, std::string& error) {
  impl& m = *impl_;
  m.cfg = s;
  if (m.cfg.max_connections == 0) m.cfg.max_connections = 1;
  m.body = std::move(body);
  sockaddr_storage addr{};
  const bool v6 = s.host.find(':') != std::string::npos;
  int rc = v6 ? uv_ip6_addr(s.host.c_str(), s.port, reinterpret_cast<sockaddr_in6*>(&addr))
              : uv_ip4_addr(s.host.c_str(), s.port, reinterpret_cast<sockaddr_in*>(&addr));
  if (rc != 0) {
    error = "bad address " + s.host + ": " + uv_strerror(rc);
    return false;
  }
  if ((rc = uv_loop_init(&m.loop)) != 0) {
    error = std::string("cannot start the HTTP loop: ") + uv_strerror(rc);
    return false;
  }
  m.loop_ready = true;
  uv_tcp_init(&m.loop, &m.listener);
  m.listener.data = &m;
  uv_async_init(&m.loop, &m.wakeup, impl::on_wakeup);
  m.wakeup.data = &m;
  const std::string shown = v6 ? "[" + s.host + "]:" + std::to_string(s.port) : s.host + ":" + std::to_string(s.port);
  rc = uv_tcp_bind(&m.listener, reinterpret_cast<const sockaddr*>(&addr), 0);
  if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&m.listener), 64, impl::on_connection);
  if (rc != 0) {
    error = "cannot listen on " + shown + ": " + uv_strerror(rc);
    uv_close(reinterpret_cast<uv_handle_t*>(&m.listener), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&m.wakeup), nullptr);
    uv_run(&m.loop, UV_RUN_DEFAULT);
    uv_loop_close(&m.loop);
    m.loop_ready = false;
    return false;
  }
  sockaddr_storage bound{};
  int len = sizeof bound;
  uv_tcp_getsockname(&m.listener, reinterpret_cast<sockaddr*>(&bound), &len);
  const int port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                               : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  m.address = v6 ? "[" + s.host + "]:" + std::to_string(port) : s.host + ":" + std::to_string(port);
  m.running = true;
  m.thread = std::thread([&m] { uv_run(&m.loop, UV_RUN_DEFAULT); });
  return true;
}

std::string http_server::bound_address() const { return impl_->address; }

void http_server::stop() {
  impl& m = *impl_;
  if (!m.running) return;
  m.running = false;
  uv_async_send(&m.wakeup);
  m.thread.join();
  uv_loop_close(&m.loop);
  m.loop_ready = false;
}

}  // namespace redlock::cli
