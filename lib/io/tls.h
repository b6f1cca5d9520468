// TLS for rediss:// nodes: a link decorator that runs OpenSSL over memory BIOs on
// top of another link (the libuv TCP stream). The connection above it sees a
// plain byte stream: on_link_up only once the handshake (and the certificate
// check) is done, then one on_link_data per decrypted chunk; every failure ends
// in one on_link_down, TLS verification failures with node_status::tls_error.
//
// Loop thread only (the client's SSL_CTX is used by its own loop thread alone).
#pragma once

#include <memory>
#include <string>

#include "io/reactor.h"
#include "redlock/options.h"
#include "pure/uri.h"

namespace redlock::detail {

// One client's TLS configuration: an SSL_CTX built from tls_options (trusted CAs,
// client certificate and key, TLS 1.2 minimum, verification on unless the
// insecure test switch is set), shared by every rediss:// link of the client.
class tls_context {
 public:
  // Builds the context. On a bad option (a CA file or directory, certificate or
  // key that cannot be read, a key that does not match the certificate, only one
  // of cert_file and key_file) returns null and sets `error` to a message naming
  // the option and the file.
  static std::shared_ptr<tls_context> make(const tls_options& options, std::string& error);
  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  // Wraps a link to `address` (opened by `open_inner` with the returned link as
  // its events) in TLS. Null, with `status` and `error` set, when `open_inner`
  // fails at once or OpenSSL cannot create the session.
  template <typename OpenInner>
  std::unique_ptr<link> wrap(const node_address& address, link_events& events, OpenInner&& open_inner,
                             node_status& status, std::string& error);

 private:
  struct impl;
  explicit tls_context(std::unique_ptr<impl> p);
  // The two halves of wrap(): a TLS link not yet over a stream, and attaching it.
  std::unique_ptr<link> begin(const node_address& address, link_events& events, link_events*& inner_events,
                              std::string& error);
  static void attach(link& tls, std::unique_ptr<link> inner);
  std::unique_ptr<impl> impl_;
};

template <typename OpenInner>
std::unique_ptr<link> tls_context::wrap(const node_address& address, link_events& events,
                                        OpenInner&& open_inner, node_status& status, std::string& error) {
  link_events* inner_events = nullptr;
  std::unique_ptr<link> tls = begin(address, events, inner_events, error);
  if (!tls) {
    status = node_status::tls_error;
    return nullptr;
  }
  std::unique_ptr<link> inner = open_inner(*inner_events, status, error);
  if (!inner) return nullptr;
  attach(*tls, std::move(inner));
  return tls;
}

}  // namespace redlock::detail
