#include "io/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

namespace redlock::detail {
namespace {

constexpr std::size_t kPlainChunk = 16 * 1024;  // one TLS record's worth of plaintext

// The reason of the most recent OpenSSL error on this thread ("" if none), and
// clears the queue.
std::string openssl_reason() {
  unsigned long last = 0;
  while (const unsigned long e = ERR_get_error()) last = e;
  if (last == 0) return {};
  if (ERR_GET_LIB(last) == ERR_LIB_SYS) return std::strerror(ERR_GET_REASON(last));
  const char* r = ERR_reason_error_string(last);
  return r != nullptr ? r : "OpenSSL error " + std::to_string(last);
}

bool is_ip_literal(const std::string& name) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// "" when `path` is a file this process can read, else why not.
std::string unreadable_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (S_ISDIR(st.st_mode)) return "is a directory";
  if (::access(path.c_str(), R_OK) != 0) return std::strerror(errno);
  return {};
}

const char* const kClientCertRequired =
    "the server requires a client certificate (mutual TLS) but none is configured";
const char* const kClientCertRejected =
    "the server rejected the client certificate (it ended the session before any reply); give one "
    "signed by a CA the server trusts";

}  // namespace

struct tls_context::impl {
  SSL_CTX* ctx = nullptr;
  tls_options options;
  bool has_cert = false;
  // Per node (host:port): how many attempts in a row ended the way a refused client
  // certificate ends when the server's alert is lost (see tls_link::refusal_seen).
  // Loop thread only; shared with the links, which may outlive a lookup.
  std::unordered_map<std::string, std::shared_ptr<int>> silent_refusals;
  ~impl() { SSL_CTX_free(ctx); }
};

namespace {

// One TLS session over an inner link (see tls.h). The connection above owns it;
// it owns the inner link. Upper events may destroy it: after each, `life_` tells.
class tls_link final : public link, public link_events {
 public:
  tls_link(SSL* ssl, link_events& up, std::string name, bool has_cert, bool verify,
           std::shared_ptr<int> silent_refusals)
      : ssl_(ssl),
        up_(up),
        name_(std::move(name)),
        has_cert_(has_cert),
        verify_(verify),
        silent_refusals_(std::move(silent_refusals)) {
    SSL_set_msg_callback(ssl_, on_message);
    SSL_set_msg_callback_arg(ssl_, this);
  }
  ~tls_link() override {
    inner_.reset();  // first: no more events from it
    SSL_free(ssl_);  // frees both memory BIOs
  }

  void attach(std::unique_ptr<link> inner) { inner_ = std::move(inner); }

  std::string write(std::string& bytes) override {
    if (!established_ || done_) {
      bytes.clear();
      return "write: TLS session not established";
    }
    ERR_clear_error();
    std::size_t off = 0;
    while (off < bytes.size()) {
      std::size_t n = 0;
      if (SSL_write_ex(ssl_, bytes.data() + off, bytes.size() - off, &n) != 1) {
        bytes.clear();
        return "write: TLS: " + openssl_reason();
      }
      off += n;
    }
    bytes.clear();
    std::string records = drain();
    std::string error = inner_->write(records);
    if (!error.empty() && client_cert_refused()) {
      // The server refused our (missing or untrusted) client certificate and reset
      // the stream as our first request arrived. Reported as that refusal: the
      // read side's end of stream (or reset) follows, and on_link_down says why.
      return {};
    }
    return error;
  }

  std::string stalled_on() const override {
    if (!tcp_up_ || established_) return {};
    // A plain-text Redis node reads the ClientHello as the start of an inline
    // command and waits for the rest of it: nothing ever comes back.
    if (!heard_) {
      return "no reply to the TLS ClientHello (is the node serving TLS? a plain node never answers one: it "
             "needs redis://)";
    }
    return "the TLS handshake did not complete";
  }

  // --- events of the inner (TCP) link ---
  void on_link_up() override {
    tcp_up_ = true;
    step_handshake();
  }

  void on_link_data(const char* data, std::size_t n) override {
    if (done_) return;
    heard_ = true;
    if (BIO_write(SSL_get_rbio(ssl_), data, static_cast<int>(n)) != static_cast<int>(n)) {
      fail(node_status::connection_error, "TLS: out of memory buffering a record");
      return;
    }
    if (!established_) {
      step_handshake();
    } else {
      read_records();
    }
  }

  void on_link_down(node_status status, std::string detail) override {
    if (done_) return;
    if (client_cert_refused()) return fail_refused();
    if (!established_) return fail(status, "during the TLS handshake: " + detail);
    fail(status, std::move(detail));
  }

 private:
  // Handshake messages from the server: a CertificateRequest, and a TLS 1.3
  // NewSessionTicket (sent only once the server has checked our certificate and
  // Finished, so: it accepted them).
  static void on_message(int write_p, int, int content_type, const void* buf, std::size_t len, SSL*,
                         void* arg) {
    if (write_p != 0 || content_type != SSL3_RT_HANDSHAKE || len == 0 || arg == nullptr) return;
    auto* self = static_cast<tls_link*>(arg);
    const int type = static_cast<const unsigned char*>(buf)[0];
    if (type == SSL3_MT_CERTIFICATE_REQUEST) self->cert_requested_ = true;
    if (type == SSL3_MT_NEWSESSION_TICKET) {
      self->ticket_ = true;
      *self->silent_refusals_ = 0;  // the server accepted this session
    }
  }

  // Whether a failure now is the server refusing our client certificate (none
  // configured, or one it does not trust): it asked for one and has not shown
  // that it accepted the session — no reply yet, no TLS 1.2 Finished, no TLS 1.3
  // session ticket. Under TLS 1.3 the client's side of the handshake is done
  // before the server has looked at the certificate: its alert comes after our
  // first request and may be lost to a reset, so the refusal is reported as such
  // whatever the socket said.
  bool client_cert_refused() const {
    if (!cert_requested_ || got_data_ || ticket_) return false;
    return !established_ || SSL_version(ssl_) >= TLS1_3_VERSION;
  }
  const char* refusal() const { return has_cert_ ? kClientCertRejected : kClientCertRequired; }

  // A session that ended as a refused client certificate ends when the server's
  // alert is lost (client_cert_refused()) — which is also how a network reset
  // right after the server's CertificateRequest looks. One such attempt cannot
  // tell the two apart, and tls_error is permanent (not retried): only the second
  // in a row to this node is the refusal; the first is a connection error, retried.
  std::pair<node_status, std::string> refused_outcome() {
    if (++*silent_refusals_ >= 2) return {node_status::tls_error, refusal()};
    return {node_status::connection_error,
            "connection lost during the TLS handshake after the server asked for a client certificate "
            "(if this repeats, the server is refusing " +
                std::string(has_cert_ ? "the client certificate" : "a client without a certificate") + ")"};
  }
  void fail_refused() {
    auto [status, detail] = refused_outcome();
    fail(status, std::move(detail));
  }

  // What the session wrote for the peer (handshake messages, records, alerts).
  std::string drain() {
    BIO* w = SSL_get_wbio(ssl_);
    std::string out(BIO_ctrl_pending(w), '\0');
    if (!out.empty()) {
      const int n = BIO_read(w, out.data(), static_cast<int>(out.size()));
      out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    }
    return out;
  }

  // Sends what the session has for the peer; false after failing the link.
  bool send_pending() {
    std::string out = drain();
    if (out.empty()) return true;
    if (std::string error = inner_->write(out); !error.empty()) {
      fail(node_status::connection_error, established_ ? error : "during the TLS handshake: " + error);
      return false;
    }
    return true;
  }

  void step_handshake() {
    if (done_) return;
    ERR_clear_error();
    const int rc = SSL_do_handshake(ssl_);
    if (rc == 1) {
      established_ = true;
      // TLS 1.2: the server's Finished came after it checked our certificate.
      if (SSL_version(ssl_) < TLS1_3_VERSION) *silent_refusals_ = 0;
      if (!send_pending()) return;
      const std::weak_ptr<int> alive = life_;
      up_.on_link_up();
      if (alive.expired() || done_) return;
      read_records();  // data that came with the end of the handshake
      return;
    }
    const int e = SSL_get_error(ssl_, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      send_pending();
      return;
    }
    auto [status, detail] = classify("TLS handshake failed: ");
    // Our alert, if any, so that the server's log says why; a failure to send it
    // changes nothing (and must not end the link twice).
    if (std::string alert = drain(); !alert.empty()) (void)inner_->write(alert);
    fail(status, std::move(detail));
  }

  void read_records() {
    const std::weak_ptr<int> alive = life_;
    for (;;) {
      ERR_clear_error();
      std::size_t n = 0;
      if (SSL_read_ex(ssl_, plain_.get(), kPlainChunk, &n) == 1) {
        if (!got_data_) *silent_refusals_ = 0;  // the server accepted this session
        got_data_ = true;
        up_.on_link_data(plain_.get(), n);
        if (alive.expired() || done_) return;
        continue;
      }
      const int e = SSL_get_error(ssl_, 0);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        send_pending();  // a post-handshake answer (key update), if any
        return;
      }
      if (e == SSL_ERROR_ZERO_RETURN) {
        if (client_cert_refused()) return fail_refused();
        return fail(node_status::connection_error, "connection closed by server (TLS close_notify)");
      }
      auto [status, detail] = classify("TLS: ");
      return fail(status, std::move(detail));
    }
  }

  // Why the session failed: a verification failure, the server's refusal of our
  // (missing or rejected) client certificate — tls_error — or anything else
  // (connection_error: not a TLS server, a protocol error).
  std::pair<node_status, std::string> classify(const char* prefix) {
    const int reason = ERR_GET_REASON(ERR_peek_last_error());
    const std::string text = openssl_reason();
    const long verify = SSL_get_verify_result(ssl_);
    if (verify_ && verify != X509_V_OK) return {node_status::tls_error, verify_failure(verify)};
    if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED)
      return {node_status::tls_error, kClientCertRequired};
    if (has_cert_ &&
        (reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA || reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
         reason == SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED || reason == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN ||
         reason == SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE ||
         reason == SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED || reason == SSL_R_TLSV1_ALERT_ACCESS_DENIED)) {
      return {node_status::tls_error, "the server rejected the client certificate (" + text + ")"};
    }
    // The server's alert arrived (a reason past SSL_AD_REASON_OFFSET is a received
    // alert): a refusal for certain, not a lost connection.
    if (client_cert_refused() && reason > SSL_AD_REASON_OFFSET) {
      return {node_status::tls_error, std::string(refusal()) + " (" + text + ")"};
    }
    if (client_cert_refused()) return refused_outcome();
    std::string detail = prefix + (text.empty() ? std::string("protocol error") : text);
    if (!established_ && (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
                          reason == SSL_R_RECORD_LENGTH_MISMATCH || reason == SSL_R_HTTP_REQUEST)) {
      detail += " (is the node serving TLS? a plain node needs redis://)";
    }
    return {node_status::connection_error, std::move(detail)};
  }

  std::string verify_failure(long code) const {
    const std::string why = X509_verify_cert_error_string(code);
    switch (code) {
      case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
      case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
      case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      case X509_V_ERR_CERT_UNTRUSTED:
        return "the node's certificate is not trusted: self-signed or signed by an unknown CA (" + why +
               "); give the CA that signed it";
      case X509_V_ERR_HOSTNAME_MISMATCH:
      case X509_V_ERR_IP_ADDRESS_MISMATCH:
        if (!leaf_has_san()) {
          return "the node's certificate does not match the name '" + name_ +
                 "': it has no subject alternative name (SAN), and the subject's common name (CN) is "
                 "never used (" +
                 why + "); give the node a certificate with that name as a DNS or IP SAN";
        }
        return "the node's certificate does not match the name '" + name_ + "' (" + why +
               "); connect by a name the certificate has, or give that name as the server name";
      case X509_V_ERR_CERT_HAS_EXPIRED:
        return "the node's certificate has expired (" + why + ")";
      case X509_V_ERR_CERT_NOT_YET_VALID:
        return "the node's certificate is not yet valid (" + why + "); check the clocks";
      default:
        return "the node's certificate failed verification (" + why + ")";
    }
  }

  // Whether the node's certificate (the first of the chain it sent) has a
  // subjectAltName extension; true when unknown.
  bool leaf_has_san() const {
    X509* leaf = SSL_get0_peer_certificate(ssl_);
    if (leaf == nullptr) {
      STACK_OF(X509)* chain = SSL_get_peer_cert_chain(ssl_);
      if (chain == nullptr || sk_X509_num(chain) == 0) return true;
      leaf = sk_X509_value(chain, 0);
    }
    return X509_get_ext_by_NID(leaf, NID_subject_alt_name, -1) >= 0;
  }

  // Final: one on_link_down, which may destroy this.
  void fail(node_status status, std::string detail) {
    if (done_) return;
    done_ = true;
    up_.on_link_down(status, std::move(detail));
  }

  SSL* ssl_;
  link_events& up_;
  std::string name_;  // the name verified (the host, or tls_options::server_name)
  bool has_cert_;
  bool verify_;
  std::unique_ptr<link> inner_;
  bool tcp_up_ = false;  // the inner link is up: the handshake is under way
  bool heard_ = false;   // the server sent something back
  bool established_ = false;
  bool done_ = false;
  bool got_data_ = false;
  bool cert_requested_ = false;
  bool ticket_ = false;
  std::shared_ptr<int> silent_refusals_;  // this node's, in tls_context::impl
  std::unique_ptr<char[]> plain_{new char[kPlainChunk]};
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace

tls_context::tls_context(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
tls_context::~tls_context() = default;

std::shared_ptr<tls_context> tls_context::make(const tls_options& o, std::string& error) {
  ERR_clear_error();
  auto p = std::make_unique<impl>();
  p->options = o;
  p->ctx = SSL_CTX_new(TLS_client_method());
  if (p->ctx == nullptr) {
    error = "TLS: cannot create an SSL context: " + openssl_reason();
    return nullptr;
  }
  SSL_CTX* ctx = p->ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Never prompt on a terminal for a key's passphrase (a loop thread must not block).
  SSL_CTX_set_default_passwd_cb(ctx, [](char*, int, int, void*) { return 0; });
  SSL_CTX_set_verify(ctx, o.insecure_skip_verify_for_tests_only ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, nullptr);

  if (!o.ca_file.empty()) {
    if (std::string why = unreadable_file(o.ca_file); !why.empty()) {
      error = "tls ca_file '" + o.ca_file + "': cannot read: " + why;
      return nullptr;
    }
    if (SSL_CTX_load_verify_file(ctx, o.ca_file.c_str()) != 1) {
      error = "tls ca_file '" + o.ca_file + "': no CA certificate could be loaded (" + openssl_reason() + ")";
      return nullptr;
    }
  }
  if (!o.ca_dir.empty()) {
    struct stat st {};
    if (::stat(o.ca_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        ::access(o.ca_dir.c_str(), R_OK | X_OK) != 0) {
      error = "tls ca_dir '" + o.ca_dir + "': not a readable directory";
      return nullptr;
    }
    if (SSL_CTX_load_verify_dir(ctx, o.ca_dir.c_str()) != 1) {
      error = "tls ca_dir '" + o.ca_dir + "': cannot use it (" + openssl_reason() + ")";
      return nullptr;
    }
  }
  if (o.ca_file.empty() && o.ca_dir.empty() && SSL_CTX_set_default_verify_paths(ctx) != 1) {
    error = "TLS: cannot load the system's default CA store (" + openssl_reason() + ")";
    return nullptr;
  }

  if (o.cert_file.empty() != o.key_file.empty()) {
    error = "tls cert_file and key_file must be given together (mutual TLS needs both)";
    return nullptr;
  }
  if (!o.cert_file.empty()) {
    if (std::string why = unreadable_file(o.cert_file); !why.empty()) {
      error = "tls cert_file '" + o.cert_file + "': cannot read: " + why;
      return nullptr;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, o.cert_file.c_str()) != 1) {
      error =
          "tls cert_file '" + o.cert_file + "': no certificate could be loaded (" + openssl_reason() + ")";
      return nullptr;
    }
    if (std::string why = unreadable_file(o.key_file); !why.empty()) {
      error = "tls key_file '" + o.key_file + "': cannot read: " + why;
      return nullptr;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      const int reason = ERR_GET_REASON(ERR_peek_last_error());
      const std::string why = openssl_reason();
      error = reason == X509_R_KEY_VALUES_MISMATCH
                  ? "tls key_file '" + o.key_file + "' does not match cert_file '" + o.cert_file + "'"
                  : "tls key_file '" + o.key_file + "': no private key could be loaded (" + why +
                        "; encrypted keys are not supported)";
      return nullptr;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      ERR_clear_error();
      error = "tls key_file '" + o.key_file + "' does not match cert_file '" + o.cert_file + "'";
      return nullptr;
    }
    p->has_cert = true;
  }
  return std::shared_ptr<tls_context>(new tls_context(std::move(p)));
}

std::unique_ptr<link> tls_context::begin(const node_address& address, link_events& events,
                                         link_events*& inner_events, std::string& error) {
  ERR_clear_error();
  SSL* ssl = SSL_new(impl_->ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  if (ssl == nullptr || in == nullptr || out == nullptr) {
    SSL_free(ssl);
    BIO_free(in);
    BIO_free(out);
    error = "TLS: cannot create a session: " + openssl_reason();
    return nullptr;
  }
  // An empty buffer means "wait for more", never end of stream (which the inner
  // link reports itself).
  BIO_set_mem_eof_return(in, -1);
  BIO_set_mem_eof_return(out, -1);
  SSL_set_bio(ssl, in, out);
  SSL_set_connect_state(ssl);

  const tls_options& o = impl_->options;
  const std::string name = o.server_name.empty() ? address.host : o.server_name;
  const bool ip = is_ip_literal(name);
  const bool verify = !o.insecure_skip_verify_for_tests_only;
  bool ok = true;
  if (verify) {
    if (ip) {
      ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) == 1;
    } else {
      // SANs only: a certificate's subject CN is never taken for its DNS name (RFC
      // 6125, as browsers do); a certificate without SANs matches no name.
      SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
      ok = SSL_set1_host(ssl, name.c_str()) == 1;
    }
  }
  // SNI: a DNS name only (RFC 6066 forbids IP literals).
  if (ok && !ip) ok = SSL_set_tlsext_host_name(ssl, name.c_str()) == 1;
  if (!ok) {
    SSL_free(ssl);
    error = "TLS: cannot use the name '" + name + "' for verification: " + openssl_reason();
    return nullptr;
  }
  std::shared_ptr<int>& refusals = impl_->silent_refusals[address.host + ":" + std::to_string(address.port)];
  if (!refusals) refusals = std::make_shared<int>(0);
  auto l = std::make_unique<tls_link>(ssl, events, name, impl_->has_cert, verify, refusals);
  inner_events = l.get();
  return l;
}

void tls_context::attach(link& tls, std::unique_ptr<link> inner) {
  static_cast<tls_link&>(tls).attach(std::move(inner));
}

}  // namespace redlock::detail
