#include "common.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <csignal>
#include <cstdio>
#include <future>
#include <utility>

#include "secrets.h"

namespace redlock::cli {

int exit_status_for(std::error_code ec) noexcept {
  if (!ec) return exit_code::ok;
  if (ec == errc::contended) return exit_code::temp_fail;
  if (ec == errc::unavailable || ec == errc::validity_exhausted) return exit_code::unavailable;
  if (ec == errc::auth_failed || ec == errc::permission_denied || ec == errc::tls_failed) {
    return exit_code::no_permission;
  }
  if (ec == errc::not_owner) return exit_code::refused;
  if (ec == errc::invalid_argument || ec == errc::wrong_type) return exit_code::usage;
  return exit_code::software;  // lock_lost, cancelled, would_deadlock, anything unforeseen
}

int acquire_exit_status(const invocation& inv, std::error_code ec) noexcept {
  if (ec == errc::contended) return inv.conflict_exit_code;
  return exit_status_for(ec);
}

void print_acquire_failure(const invocation& inv, const std::string& what, const redlock::report& rep) {
  if (inv.quiet && rep.error == errc::contended) return;
  print_error("cannot acquire " + what + ": " + rep.message());
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

void print_error(std::string_view message) {
  const std::string line = "redlock: " + printable(message) + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

void print_warning(const invocation& inv, std::string_view message) {
  if (!inv.quiet) print_error("warning: " + std::string(message));
}

bool write_stdout(const std::string& text) {
  const bool written = std::fwrite(text.data(), 1, text.size(), stdout) == text.size();
  return std::fflush(stdout) == 0 && written;
}

std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string signal_name(int signo) {
  switch (signo) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    default:
      return "signal " + std::to_string(signo);
  }
}

int load_secrets(invocation& inv) {
  std::string error;
  if (!inv.password_file.empty() && !read_password_file(inv.password_file, inv.password, error)) {
    print_error(error);
    return exit_code::config;
  }
  if (!inv.password.empty()) {
    for (std::string& uri : inv.nodes) {
      std::string with;
      if (!add_password(uri, inv.password, with, error)) {
        print_error(error);
        return exit_code::config;
      }
      uri = std::move(with);
    }
  }
  if (inv.token_from_stdin && !read_token(STDIN_FILENO, inv.token, error)) {
    print_error(error);
    return exit_code::usage;
  }
  return exit_code::ok;
}

std::string nodes_without_passwords(const invocation& inv) {
  std::string list;
  for (const std::string& uri : inv.nodes) list += (list.empty() ? "" : ",") + remove_password(uri);
  return list;
}

std::unique_ptr<redlock::client> make_client(const invocation& inv, std::string& error,
                                             std::vector<std::shared_ptr<redlock::observer>> observers) {
  client_options o;
  o.observers = std::move(observers);
  o.nodes = inv.nodes;
  o.connect_timeout = inv.connect_timeout;
  o.command_timeout = inv.node_timeout;
  o.clock_drift_factor = inv.drift_factor;
  o.max_ttl = inv.max_ttl;
  o.tls.ca_file = inv.tls.ca_file;
  o.tls.ca_dir = inv.tls.ca_dir;
  o.tls.cert_file = inv.tls.cert_file;
  o.tls.key_file = inv.tls.key_file;
  o.tls.server_name = inv.tls.server_name;
  o.tls.insecure_skip_verify_for_tests_only = inv.tls.insecure;
  try {
    return std::make_unique<redlock::client>(std::move(o));
  } catch (const config_error& e) {
    error = e.what();
    return nullptr;
  }
}

std::chrono::milliseconds attempt_bound(const invocation& inv) {
  return 2 * inv.connect_timeout + 8 * inv.node_timeout + std::chrono::seconds(2);
}

redlock::acquire_options lock_options(const invocation& inv) {
  acquire_options o;
  o.ttl = inv.ttl;
  o.fencing = inv.fencing;
  if (inv.wait.count() > 0 || inv.wait_forever) {
    // Retry until --wait (or the round) runs out; constant delays jittered in [d/2, d].
    o.retry.max_attempts = INT_MAX;
    o.retry.base_delay = inv.retry_delay;
    o.retry.max_delay = inv.retry_delay;
    o.retry.deadline = inv.wait_forever ? wait_forever_round : inv.wait;
  } else {
    o.retry = retry_policy::once();
  }
  return o;
}

namespace {

// Whether --wait forever starts another round after a round that ended with `ec`:
// for the failures a retry may fix, as the library's retry_policy retries them.
bool another_round(std::error_code ec) {
  return ec == errc::contended || ec == errc::unavailable || ec == errc::validity_exhausted;
}

// Waits on `events` for the acquire started by `start` (which returns its id for
// `cancel`), cancelling it on SIGHUP, SIGINT, SIGTERM or SIGQUIT; with --wait
// forever, starts it again after each round that another_round() allows.
template <class Result, class Start, class Cancel>
interruptible_acquire wait_until_signal(const invocation& inv, const event_pipe& events, Start start,
                                        Cancel cancel, std::optional<Result>& result) {
  using steady = std::chrono::steady_clock;
  interruptible_acquire out;
  // The library bounds every attempt by its timeouts; this is only a safety net so
  // the tool cannot hang if that promise were ever broken.
  const auto per_attempt = attempt_bound(inv);
  const auto budget = inv.wait_forever ? wait_forever_round : inv.wait;
  while (true) {  // one round per pass; only --wait forever makes more than one
    auto promise = std::make_shared<std::promise<Result>>();
    std::future<Result> future = promise->get_future();
    const event_pipe* pipe = &events;
    const std::uint64_t id = start([promise, pipe](Result r) {
      promise->set_value(std::move(r));
      pipe->post(event{acquire_done_event, 0});
    });
    auto deadline = steady::now() + budget + per_attempt + std::chrono::seconds(10);
    bool cancelled = false;
    std::optional<Result> round;
    while (!round) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - steady::now());
      if (left.count() <= 0) {
        if (cancelled) {
          out.stuck = true;
          return out;
        }
        cancel(id);
        cancelled = true;
        deadline = steady::now() + attempt_bound(inv);
        continue;
      }
      const std::optional<event> e = events.wait(left);
      if (!e) continue;
      if (e->type == acquire_done_event) {
        round.emplace(future.get());
      } else if (e->type > 0 && is_terminating(e->type) && out.signal == 0) {
        out.signal = e->type;
        cancel(id);
        cancelled = true;
      }
    }
    if (inv.wait_forever && out.signal == 0 && !cancelled && another_round(round->report.error)) continue;
    result = std::move(round);
    return out;
  }
}

}  // namespace

interruptible_acquire acquire_until_signal(redlock::client& c, const invocation& inv,
                                           redlock::acquire_options options, const event_pipe& events) {
  std::optional<acquire_result> result;
  interruptible_acquire out = wait_until_signal<acquire_result>(
      inv, events,
      [&](std::function<void(acquire_result)> done) {
        return c.acquire_async(inv.resource, std::move(options), std::move(done));
      },
      [&](std::uint64_t id) { c.cancel(id); }, result);
  out.result = std::move(result);
  return out;
}

interruptible_acquire acquire_permit_until_signal(redlock::semaphore& sem, const invocation& inv,
                                                  redlock::acquire_options options,
                                                  const event_pipe& events) {
  std::optional<semaphore_result> result;
  interruptible_acquire out = wait_until_signal<semaphore_result>(
      inv, events,
      [&](std::function<void(semaphore_result)> done) {
        return sem.acquire_async(std::move(options), std::move(done));
      },
      [&](std::uint64_t id) { sem.cancel(id); }, result);
  if (result) {
    out.permit = result->permit;
    out.result.emplace();
    out.result->report = std::move(result->report);
    out.result->lock = std::move(result->lock);
  }
  return out;
}

std::vector<monitor_member> members_of(const redlock::node_health& h) {
  std::vector<monitor_member> out;
  for (const redlock::deployment_member& m : h.members) {
    out.push_back(monitor_member{m.role, m.address, m.connected, m.replicas, m.slots});
  }
  return out;
}

std::optional<std::int64_t> master_changed_ms_ago(const redlock::node_health& h,
                                                  std::chrono::steady_clock::time_point at) {
  if (!h.master_changed_at) return std::nullopt;
  return std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(at - *h.master_changed_at).count());
}

}  // namespace redlock::cli
