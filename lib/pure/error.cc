#include "redlock/error.h"

#include "pure/decision.h"
#include "redlock/client.h"
#include "redlock/report.h"

namespace redlock {
namespace {

class category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "redlock"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::contended: return "lock is held by another owner";
      case errc::unavailable: return "too few nodes answered for a quorum";
      case errc::validity_exhausted: return "quorum reached too late: validity exhausted";
      case errc::lock_lost: return "lock lost: its validity ran out";
      case errc::not_owner: return "token does not own the lock on a quorum of nodes";
      case errc::invalid_argument: return "invalid argument or configuration";
      case errc::auth_failed: return "authentication refused";
      case errc::wrong_type: return "lock key holds a non-string value (WRONGTYPE)";
      case errc::cancelled: return "operation cancelled";
      case errc::would_deadlock: return "synchronous call on the client's loop thread";
      case errc::extension_limit: return "extension cap reached (max_extensions or max_hold)";
      case errc::permission_denied:
        return "the nodes deny the lock a command or its key (an ACL's NOPERM, or scripts renamed or disabled)";
      case errc::tls_failed: return "TLS verification failed";
    }
    return ev == 0 ? "success" : "unknown redlock error";
  }
};

}  // namespace

const std::error_category& category() noexcept {
  static const category_impl instance;
  return instance;
}

std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }

const char* to_string(errc e) noexcept {
  switch (e) {
    case errc::contended: return "contended";
    case errc::unavailable: return "unavailable";
    case errc::validity_exhausted: return "validity_exhausted";
    case errc::lock_lost: return "lock_lost";
    case errc::not_owner: return "not_owner";
    case errc::invalid_argument: return "invalid_argument";
    case errc::auth_failed: return "auth_failed";
    case errc::wrong_type: return "wrong_type";
    case errc::cancelled: return "cancelled";
    case errc::would_deadlock: return "would_deadlock";
    case errc::extension_limit: return "extension_limit";
    case errc::permission_denied: return "permission_denied";
    case errc::tls_failed: return "tls_failed";
  }
  return "unknown";
}

bool is_permanent(std::error_code ec) noexcept {
  return ec == errc::invalid_argument || ec == errc::auth_failed || ec == errc::wrong_type ||
         ec == errc::cancelled || ec == errc::would_deadlock || ec == errc::extension_limit ||
         ec == errc::permission_denied || ec == errc::tls_failed;
}

const char* to_string(node_status s) noexcept {
  switch (s) {
    case node_status::pending: return "pending";
    case node_status::ok: return "ok";
    case node_status::held: return "held";
    case node_status::not_owner: return "not owner";
    case node_status::timeout: return "timeout";
    case node_status::connection_error: return "connection error";
    case node_status::auth_error: return "authentication refused";
    case node_status::server_error: return "server error";
    case node_status::protocol_error: return "protocol error";
    case node_status::cancelled: return "cancelled";
    case node_status::excluded: return "excluded";
    case node_status::tls_error: return "TLS error";
  }
  return "unknown";
}

int report::count(node_status s) const noexcept {
  int c = 0;
  for (const node_result& n : nodes) c += n.status == s ? 1 : 0;
  return c;
}

std::string report::message() const { return detail::describe(*this); }

config_error::config_error(const std::string& what)
    : std::system_error(errc::invalid_argument, what), message_(what) {}

}  // namespace redlock
