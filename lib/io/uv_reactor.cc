#include "io/uv_reactor.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/resolve.h"
#include "io/tls.h"

namespace redlock::detail {
namespace {

constexpr std::size_t kReadBuf = 64 * 1024;

std::optional<sockaddr_storage> numeric_address(const std::string& host, int port) {
  sockaddr_storage ss{};
  if (uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&ss)) == 0 ||
      uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&ss)) == 0) {
    return ss;
  }
  return std::nullopt;
}

class uv_link;

// The libuv stream of one connect attempt (one address). Freed in its close
// callback; `owner` is cleared when the link abandons it.
struct stream_holder {
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } h;
  uv_connect_t connect_req;
  uv_link* owner = nullptr;
  bool is_tcp = true;
  bool handle_inited = false;
  bool closing = false;

  uv_stream_t* stream() { return is_tcp ? reinterpret_cast<uv_stream_t*>(&h.tcp) : reinterpret_cast<uv_stream_t*>(&h.pipe); }
  uv_handle_t* handle() { return reinterpret_cast<uv_handle_t*>(stream()); }

  // Closes the handle (if any) and frees this holder when libuv is done with it.
  void release() {
    owner = nullptr;
    if (closing) return;
    closing = true;
    if (handle_inited) {
      handle()->data = this;
      uv_close(handle(), [](uv_handle_t* hd) { delete static_cast<stream_holder*>(hd->data); });
    } else {
      delete this;
    }
  }
};

// A pending getaddrinfo; frees itself in its callback.
struct resolve_req {
  uv_getaddrinfo_t gai;
  uv_link* owner = nullptr;
};

struct write_req {
  uv_write_t req;
  std::string data;
  stream_holder* holder;
};

class uv_link final : public link {
 public:
  uv_link(uv_loop_t* loop, const node_address& a, std::uint64_t deadline_ms, link_events& ev)
      : loop_(loop), address_(a), deadline_ms_(deadline_ms), events_(ev) {}
  ~uv_link() override {
    if (stream_ != nullptr) stream_->release();
    if (resolving_ != nullptr) resolving_->owner = nullptr;
  }

  // Starts the attempt; false (and `status`/`error` set) on an immediate failure.
  bool begin(node_status& status, std::string& error) {
    if (address_.type == node_address::kind::unix_socket) {
      auto* s = new_stream(false);
      uv_pipe_init(loop_, &s->h.pipe, 0);
      s->handle_inited = true;
      uv_pipe_connect(&s->connect_req, &s->h.pipe, address_.path.c_str(), [](uv_connect_t* req, int st) {
        auto* holder = static_cast<stream_holder*>(req->data);
        if (holder->owner != nullptr) holder->owner->on_connected(st);
      });
      return true;
    }
    // Numeric addresses skip the resolver's thread pool.
    if (const auto ss = numeric_address(address_.host, address_.port)) {
      addrs_ = {*ss};
      return first_address(status, error);
    }
    if (const resolver_override fn = current_resolver_override()) {
      for (const std::string& a : fn(address_.host)) {
        if (const auto ss = numeric_address(a, address_.port)) addrs_.push_back(*ss);
      }
      if (addrs_.empty()) {
        status = node_status::connection_error;
        error = "cannot resolve host: no address";
        return false;
      }
      return first_address(status, error);
    }
    auto* r = new resolve_req();
    r->owner = this;
    r->gai.data = r;
    struct addrinfo hints {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    const std::string port = std::to_string(address_.port);
    const int rc = uv_getaddrinfo(
        loop_, &r->gai,
        [](uv_getaddrinfo_t* req, int st, struct addrinfo* res) {
          auto* rr = static_cast<resolve_req*>(req->data);
          if (rr->owner != nullptr) {
            rr->owner->resolving_ = nullptr;
            rr->owner->on_resolved(st, st == 0 ? res : nullptr);
          }
          uv_freeaddrinfo(res);
          delete rr;
        },
        address_.host.c_str(), port.c_str(), &hints);
    if (rc != 0) {
      delete r;
      status = node_status::connection_error;
      error = std::string("cannot resolve host: ") + uv_strerror(rc);
      return false;
    }
    resolving_ = r;
    return true;
  }

  std::string write(std::string& bytes) override {
    if (stream_ == nullptr || !connected_) return "write: not connected";
    uv_buf_t buf = uv_buf_init(bytes.data(), static_cast<unsigned>(bytes.size()));
    const int n = uv_try_write(stream_->stream(), &buf, 1);
    if (n == static_cast<int>(bytes.size())) {
      bytes.clear();
      return {};
    }
    if (n < 0 && n != UV_EAGAIN) {
      bytes.clear();
      return std::string("write: ") + uv_strerror(n);
    }
    auto* w = new write_req();
    w->data = bytes.substr(n > 0 ? static_cast<std::size_t>(n) : 0);
    bytes.clear();
    w->holder = stream_;
    w->req.data = w;
    uv_buf_t rest = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
    const int rc = uv_write(&w->req, stream_->stream(), &rest, 1, [](uv_write_t* req, int status) {
      auto* wr = static_cast<write_req*>(req->data);
      uv_link* owner = wr->holder->owner;
      delete wr;
      if (status < 0 && owner != nullptr && status != UV_ECANCELED) {
        owner->down(node_status::connection_error, std::string("write: ") + uv_strerror(status));
      }
    });
    if (rc != 0) {
      delete w;
      return std::string("write: ") + uv_strerror(rc);
    }
    return {};
  }

 private:
  stream_holder* new_stream(bool tcp) {
    auto* s = new stream_holder();
    s->owner = this;
    s->is_tcp = tcp;
    s->connect_req.data = s;
    stream_ = s;
    return s;
  }

  void down(node_status status, std::string detail) {
    if (done_) return;
    done_ = true;
    if (stream_ != nullptr) stream_->release();
    stream_ = nullptr;
    events_.on_link_down(status, std::move(detail));  // may destroy this
  }

  void on_resolved(int status, const struct addrinfo* list) {
    addrs_ = status == 0 ? connect_order(list) : std::vector<sockaddr_storage>{};
    if (addrs_.empty()) {
      down(node_status::connection_error,
           std::string("cannot resolve host: ") + (status != 0 ? uv_strerror(status) : "no address"));
      return;
    }
    node_status st = node_status::connection_error;
    std::string error;
    if (!first_address(st, error)) down(st, std::move(error));
  }

  bool first_address(node_status& status, std::string& error) {
    const int rc = connect_next_address();
    if (rc == 0) return true;
    // Synchronous refusal of the first address: try the rest from here.
    if (const auto e = next_after_failure(rc)) {
      status = node_status::connection_error;
      error = *e;
      return false;
    }
    return true;
  }

  int connect_next_address() {
    const sockaddr_storage& addr = addrs_[next_addr_++];
    auto* s = new_stream(true);
    uv_tcp_init(loop_, &s->h.tcp);
    s->handle_inited = true;
    uv_tcp_nodelay(&s->h.tcp, 1);
    return uv_tcp_connect(&s->connect_req, &s->h.tcp, reinterpret_cast<const sockaddr*>(&addr),
                          [](uv_connect_t* req, int st) {
                            auto* holder = static_cast<stream_holder*>(req->data);
                            if (holder->owner != nullptr) holder->owner->on_connected(st);
                          });
  }

  // After a failed address: the next one, in resolver order, within what is left
  // of the attempt's connect deadline. Returns the final error when none is left.
  std::optional<std::string> next_after_failure(int status) {
    for (;;) {
      if (stream_ == nullptr || !stream_->is_tcp || addrs_.size() <= 1) {
        return std::string("connect: ") + uv_strerror(status);
      }
      errors_ += (errors_.empty() ? "" : "; ") + address_text(addrs_[next_addr_ - 1]) + ": " + uv_strerror(status);
      if (next_addr_ >= addrs_.size() || uv_now(loop_) >= deadline_ms_) return "connect: " + errors_;
      stream_->release();
      stream_ = nullptr;
      status = connect_next_address();
      if (status == 0) return std::nullopt;
    }
  }

  void on_connected(int status) {
    if (status != 0) {
      if (const auto e = next_after_failure(status)) down(node_status::connection_error, *e);
      return;
    }
    connected_ = true;
    stream_holder* s = stream_;
    s->handle()->data = s;
    uv_read_start(
        s->stream(),
        [](uv_handle_t* h, size_t, uv_buf_t* buf) {
          auto* holder = static_cast<stream_holder*>(h->data);
          if (holder->owner == nullptr) {
            *buf = uv_buf_init(nullptr, 0);
            return;
          }
          *buf = uv_buf_init(holder->owner->read_buf_.get(), kReadBuf);
        },
        [](uv_stream_t* st, ssize_t nread, const uv_buf_t* buf) {
          auto* holder = static_cast<stream_holder*>(st->data);
          uv_link* self = holder->owner;
          if (self == nullptr) return;
          if (nread > 0) {
            self->events_.on_link_data(buf->base, static_cast<std::size_t>(nread));
          } else if (nread < 0) {
            self->down(node_status::connection_error,
                       nread == UV_EOF ? "connection closed by server"
                                       : std::string("read: ") + uv_strerror(static_cast<int>(nread)));
          }
        });
    events_.on_link_up();
  }

  uv_loop_t* loop_;
  node_address address_;
  std::uint64_t deadline_ms_;
  link_events& events_;
  stream_holder* stream_ = nullptr;
  resolve_req* resolving_ = nullptr;
  std::vector<sockaddr_storage> addrs_;
  std::size_t next_addr_ = 0;
  std::string errors_;
  bool connected_ = false;
  bool done_ = false;
  std::unique_ptr<char[]> read_buf_{new char[kReadBuf]};
};

}  // namespace

uv_reactor::uv_reactor(uv_loop_t* external)
    : loop_(external != nullptr ? external : &own_loop_), owns_loop_(external == nullptr) {
  if (owns_loop_) loop_open_ = uv_loop_init(&own_loop_) == 0;
}

uv_reactor::~uv_reactor() { close_loop(); }

void uv_reactor::close_loop() {
  if (!loop_open_) return;
  loop_open_ = false;
  uv_loop_close(&own_loop_);
}

void uv_reactor::start(driver& d) {
  driver_ = &d;
  uv_async_init(loop_, &async_, [](uv_async_t* a) { static_cast<uv_reactor*>(a->data)->driver_->on_wake(); });
  async_.data = this;
  uv_idle_init(loop_, &idle_);
  idle_.data = this;
  uv_timer_init(loop_, &timer_);
  timer_.data = this;
  handles_open_ = 3;
}

void uv_reactor::arm_timer(std::uint64_t delay_ms) {
  if (closing_) return;
  uv_timer_start(
      &timer_, [](uv_timer_t* t) { static_cast<uv_reactor*>(t->data)->driver_->on_timer(); }, delay_ms, 0);
}

void uv_reactor::stop_timer() {
  if (!closing_) uv_timer_stop(&timer_);
}

void uv_reactor::idle(bool on) {
  if (closing_) return;
  if (on) {
    uv_idle_start(&idle_, [](uv_idle_t* h) { static_cast<uv_reactor*>(h->data)->driver_->on_idle(); });
  } else {
    uv_idle_stop(&idle_);
  }
}

void uv_reactor::wake() { uv_async_send(&async_); }

void uv_reactor::close(std::function<void()> closed) {
  closing_ = true;
  closed_ = std::move(closed);
  auto on_closed = [](uv_handle_t* h) {
    auto* self = static_cast<uv_reactor*>(h->data);
    if (--self->handles_open_ == 0 && self->closed_) {
      // May destroy this reactor (and its owner).
      std::function<void()> fn = std::move(self->closed_);
      fn();
    }
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&async_), on_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&idle_), on_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), on_closed);
}

void uv_reactor::run() {
  uv_run(loop_, UV_RUN_DEFAULT);
  // Every handle is closed here; run once more for stray close callbacks.
  uv_run(loop_, UV_RUN_NOWAIT);
}

std::string uv_reactor::use_tls(const tls_options& options) {
  std::string error;
  tls_ = tls_context::make(options, error);
  return error;
}

std::unique_ptr<link> uv_reactor::open(const node_address& address, std::uint64_t deadline_ms,
                                       link_events& events, node_status& status, std::string& error) {
  auto open_tcp = [&](link_events& ev, node_status& st, std::string& err) -> std::unique_ptr<link> {
    auto l = std::make_unique<uv_link>(loop_, address, deadline_ms, ev);
    if (!l->begin(st, err)) return nullptr;
    return l;
  };
  if (address.tls && address.type == node_address::kind::tcp) {
    if (!tls_) {
      status = node_status::tls_error;
      error = "TLS is not configured for this client";
      return nullptr;
    }
    // The handshake runs inside the attempt: the link is up (on_link_up) only once
    // it is done, so the connection's connect deadline bounds it.
    return tls_->wrap(address, events, open_tcp, status, error);
  }
  return open_tcp(events, status, error);
}

}  // namespace redlock::detail
