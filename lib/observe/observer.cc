#include "redlock/observer.h"

namespace redlock {

observer::~observer() = default;

const char* to_string(operation_kind k) noexcept {
  switch (k) {
    case operation_kind::acquire: return "acquire";
    case operation_kind::extend: return "extend";
    case operation_kind::release: return "release";
    case operation_kind::inspect: return "inspect";
  }
  return "unknown";
}

const char* to_string(quarantine_reason r) noexcept {
  switch (r) {
    case quarantine_reason::restart: return "restart";
    case quarantine_reason::first_sight: return "first_sight";
    case quarantine_reason::clock_jump: return "clock_jump";
  }
  return "unknown";
}

}  // namespace redlock
