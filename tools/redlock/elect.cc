// `redlock elect`: wait to lead a role, run a command while leading (like `run`,
// on the election's leadership lock), and `redlock leader`: who leads a role.
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>

#include "commands.h"
#include "common.h"
#include "json.h"
#include "redlock/election.h"

extern char** environ;

namespace redlock::cli {
namespace {

inline constexpr int campaign_done_event = -3;

// The environment of the leader's command: run's, plus the role, term and identity.
std::vector<std::string> leader_environment(const invocation& inv, const leadership& l) {
  const lease held = l.info();
  std::vector<std::string> env =
      lock_environment(environ, held.resource, held.token, held.fence, nodes_without_passwords(inv));
  static constexpr const char* ours[] = {"REDLOCK_ROLE=", "REDLOCK_TERM=", "REDLOCK_LEADER_ID="};
  std::vector<std::string> out;
  for (auto& e : env) {
    bool replaced = false;
    for (const char* p : ours) replaced = replaced || e.rfind(p, 0) == 0;
    if (!replaced) out.push_back(std::move(e));
  }
  out.push_back("REDLOCK_ROLE=" + inv.resource);
  out.push_back("REDLOCK_TERM=" + std::to_string(l.term()));
  out.push_back("REDLOCK_LEADER_ID=" + inv.identity);
  return out;
}

}  // namespace

int elect_command(const invocation& inv) {
  const resolved_command cmd = resolve_command(inv.argv[0], std::getenv("PATH"));
  if (cmd.error != 0) {
    print_error("cannot run " + quote(inv.argv[0]) + ": " + std::strerror(cmd.error));
    return cmd.error == ENOENT ? exit_code::not_found : exit_code::cannot_execute;
  }
  const std::vector<int> inherited_fds = open_fds();
  lock_loss loss;
  event_pipe events;
  std::signal(SIGCHLD, SIG_DFL);
  signal_capture signals(events, guarded_signals({SIGCHLD}));  // as run's
  std::string error;
  auto client = make_client(inv, error);
  if (!client) {
    print_error(error);
    return exit_code::config;
  }
  election e(*client);
  campaign_options o;
  o.ttl = inv.ttl;
  o.retry_delay = inv.retry_delay;
  o.on_demoted = [&loss, &events](const report& rep) {
    loss.set(rep.message());
    events.post(event{lock_lost_event, 0});
  };

  // Campaign until elected or interrupted by SIGHUP/SIGINT/SIGTERM/SIGQUIT.
  auto promise = std::make_shared<std::promise<campaign_result>>();
  auto future = promise->get_future();
  const event_pipe* pipe = &events;
  const std::uint64_t id = e.campaign_async(inv.resource, inv.identity, o, [promise, pipe](campaign_result r) {
    promise->set_value(std::move(r));
    pipe->post(event{campaign_done_event, 0});
  });
  int interrupted = 0;
  std::optional<campaign_result> won;
  while (!won) {
    // After a cancel, the attempt in flight still ends by its timeouts (and rolls
    // back): wait for it, or a won leadership would stay on the nodes for its TTL.
    const std::optional<event> ev = events.wait(interrupted != 0 ? attempt_bound(inv) : std::chrono::milliseconds(-1));
    if (!ev) {
      print_error("internal error: campaign for " + quote(inv.resource) + " did not end after a cancel");
      std::_Exit(exit_code::software);
    }
    if (ev->type == campaign_done_event) {
      won.emplace(future.get());
    } else if (ev->type > 0 && is_terminating(ev->type) && interrupted == 0) {
      interrupted = ev->type;
      e.cancel(id);
    }
  }
  campaign_result& r = *won;
  if (interrupted != 0) {
    print_error("interrupted by " + signal_name(interrupted) + " while campaigning for " + quote(inv.resource) +
                "; " + inv.argv[0] + " was not started");
    return 128 + interrupted;  // a leadership won meanwhile resigns with `r`
  }
  if (!r) {
    print_error("cannot campaign for " + quote(inv.resource) + ": " + r.report.message());
    return exit_status_for(r.report.error);
  }

  set_cloexec_except(inherited_fds);
  guarded_child guarded = spawn_guarded(cmd.path, inv, leader_environment(inv, r.leadership), signals.captured());
  const spawn_result& child = guarded.child;
  if (child.error != 0) {
    (void)r.leadership.resign();
    print_error("cannot run " + quote(inv.argv[0]) + ": " + (child.exec_failed ? "" : "fork: ") +
                std::strerror(child.error));
    return child.exec_failed && (child.error == ENOENT || child.error == ENOTDIR) ? exit_code::not_found
                                                                                  : exit_code::cannot_execute;
  }
  // As run: the leadership is resigned only once CMD and all it started are gone.
  const supervision sup =
      supervise_child(child.pid, guarded.tty, events, inv.kill_after, *guarded.guard,
                      [&r] { return r.leadership.info().valid_until; }, poll_validity_every(inv.ttl));
  guarded.guard->disarm();
  const int status = sup.status;
  const bool terminating = sup.terminating;
  if (const std::optional<std::string> ended = loss.why(sup)) {
    const std::string& why = *ended;
    (void)r.leadership.resign();
    print_error("leadership of " + quote(inv.resource) + " (term " + std::to_string(r.leadership.term()) +
                ") was lost while " + inv.argv[0] + " ran (" + why + "); " + inv.argv[0] +
                (terminating ? " was stopped" : " exited") + " (status " + std::to_string(status) + ")");
    return exit_code::software;
  }
  if (sup.strays) {
    print_warning(inv, inv.argv[0] + " exited leaving processes running; they were stopped before the resign");
  }
  const report rep = r.leadership.resign();
  if (!rep) {
    print_warning(inv, "resign of " + quote(inv.resource) + " failed (" + rep.message() +
                           "); the leadership expires by its TTL");
  }
  return status;
}

int leader_command(const invocation& inv) {
  std::string error;
  auto client = make_client(inv, error);
  if (!client) {
    print_error(error);
    return exit_code::config;
  }
  election e(*client);
  const leader_info li = e.observe(inv.resource);
  if (!li.report) {
    print_error("cannot read the leader of " + quote(inv.resource) + ": " + li.report.message());
    return exit_status_for(li.report.error);
  }
  std::string out;
  if (inv.json) {
    json_writer j;
    j.begin_object().key("role").string(inv.resource).key("leader").string_or_null(li.identity).key("term");
    if (li.term) {
      j.number(*li.term);
    } else {
      j.null();
    }
    j.key("ttl_ms").number(static_cast<std::int64_t>(li.ttl.count())).end_object();
    out = j.str() + "\n";
  } else if (!inv.quiet) {
    if (li.identity) {
      out = printable(inv.resource) + ": " + printable(*li.identity) + " leads, term " + std::to_string(*li.term) +
            ", lock valid for " + std::to_string(li.ttl.count()) + "ms\n";
    } else {
      out = printable(inv.resource) + ": no leader\n";
    }
  }
  if (!out.empty() && !write_stdout(out)) return exit_code::software;
  return exit_code::ok;
}

}  // namespace redlock::cli
