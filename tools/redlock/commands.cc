// acquire, release, extend and status: one library call each.
#include "commands.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common.h"
#include "json.h"
#include "monitor_view.h"
#include "warnings.h"

namespace redlock::cli {
namespace {

redlock::lease lease_of(const invocation& inv) {
  return redlock::lease{inv.resource, inv.token, std::nullopt, std::nullopt, std::nullopt};
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

int acquire_command(const invocation& inv) {
  event_pipe events;
  // Caught for the whole acquire, so that none ends it half done (docs/cli.md, Signals).
  signal_capture signals(events, guarded_signals());
  std::string error;
  auto warnings = std::make_shared<warning_collector>();
  auto client = make_client(inv, error, {warnings});
  if (!client) {
    print_error(error);
    return exit_code::config;
  }
  interruptible_acquire waited = acquire_until_signal(*client, inv, lock_options(inv), events);
  if (waited.stuck) {
    print_error("internal error: acquire of " + quote(inv.resource) + " did not complete");
    std::_Exit(exit_code::software);  // the keys, if any, expire by their TTL
  }
  acquire_result& r = *waited.result;
  if (waited.signal != 0) {
    // A lock taken just before the cancel is released when `r` goes out of scope.
    print_error("interrupted by " + signal_name(waited.signal) + " while acquiring " + quote(inv.resource));
    return 128 + waited.signal;
  }
  print_acquire_warnings(inv, *warnings, r.report, client->quorum());
  if (!r) {
    print_acquire_failure(inv, quote(inv.resource), r.report);
    return acquire_exit_status(inv, r.report.error);
  }

  const redlock::lease l = r.lock.info();
  std::string out;
  if (inv.json) {
    json_writer j;
    j.begin_object().key("resource").string(l.resource).key("token").string(l.token);
    j.key("validity_ms").number(static_cast<std::int64_t>(r.report.validity.count()));
    j.key("fence");
    if (l.fence) {
      j.number(static_cast<std::uint64_t>(*l.fence));
    } else {
      j.null();
    }
    out = j.end_object().str() + "\n";
  } else if (!inv.quiet) {
    out = l.token + "\n";
  }
  if (!write_stdout(out)) {
    // Nobody could learn the token: give the lock back rather than strand it.
    const std::string why = std::strerror(errno);
    (void)r.lock.release();
    print_error("cannot write the token to stdout (" + why + "); the lock was released");
    return exit_code::software;
  }
  (void)r.lock.detach();  // stays held until its TTL runs out or `redlock release`
  return exit_code::ok;
}

int release_command(const invocation& inv) {
  std::string error;
  auto client = make_client(inv, error);
  if (!client) {
    print_error(error);
    return exit_code::config;
  }
  const redlock::report rep = client->release(lease_of(inv));
  if (!rep) {
    print_error("cannot release " + quote(inv.resource) + ": " + rep.message());
    return exit_status_for(rep.error);
  }
  if (inv.json) {
    json_writer j;
    j.begin_object().key("resource").string(inv.resource).key("released").boolean(true).end_object();
    write_stdout(j.str() + "\n");
  } else if (!inv.quiet) {
    write_stdout("released " + printable(inv.resource) + "\n");
  }
  return exit_code::ok;
}

int extend_command(const invocation& inv) {
  std::string error;
  auto client = make_client(inv, error);
  if (!client) {
    print_error(error);
    return exit_code::config;
  }
  const redlock::report rep = client->extend(lease_of(inv), inv.ttl);
  if (!rep) {
    print_error("cannot extend " + quote(inv.resource) + ": " + rep.message());
    return exit_status_for(rep.error);
  }
  const auto validity = static_cast<std::int64_t>(rep.validity.count());
  if (inv.json) {
    json_writer j;
    j.begin_object().key("resource").string(inv.resource).key("validity_ms").number(validity).end_object();
    write_stdout(j.str() + "\n");
  } else if (!inv.quiet) {
    write_stdout("extended " + printable(inv.resource) + ": valid for " + std::to_string(validity) + "ms\n");
  }
  return exit_code::ok;
}

int status_command(const invocation& inv) {
  std::string error;
  auto client = make_client(inv, error);
  if (!client) {
    print_error(error);
    return exit_code::config;
  }
  const redlock::inspect_result ir = client->inspect(inv.resource);
  const std::vector<std::string> names = client->node_names();

  struct row {
    std::string node;
    bool reachable = false;
    std::optional<std::string> token;
    std::optional<std::int64_t> pttl_ms;  // absent key: none; no expiry: -1
    std::string error;                    // why it is unreachable
    std::string maxmemory_policy;         // "" = unknown
    std::vector<std::string> warnings;    // node_view::warnings' messages
    // A cluster or Sentinel node (issue 23): its servers as the probe saw them.
    std::vector<monitor_member> members;
    std::optional<std::int64_t> master_changed_ms_ago;
  };
  // A node that is a whole deployment also shows its shard masters or its master and
  // sentinels: one probe more (a PING per node), only when there is such a node.
  const bool deployments = std::any_of(names.begin(), names.end(), [](const std::string& n) {
    return n.find("+cluster://") != std::string::npos || n.find("+sentinel://") != std::string::npos;
  });
  std::optional<redlock::probe_result> health;
  if (deployments) health = client->probe();
  const auto probed = std::chrono::steady_clock::now();
  std::vector<row> rows;
  for (std::size_t i = 0; i < names.size(); ++i) {
    row rw;
    rw.node = names[i];
    const redlock::node_result* nr = i < ir.report.nodes.size() ? &ir.report.nodes[i] : nullptr;
    rw.reachable = nr != nullptr && nr->status == node_status::ok;
    if (i < ir.nodes.size()) {
      rw.maxmemory_policy = ir.nodes[i].maxmemory_policy;
      for (const redlock::warning& w : ir.nodes[i].warnings) rw.warnings.push_back(w.message);
    }
    if (rw.reachable && i < ir.nodes.size()) {
      rw.token = ir.nodes[i].token;
      const auto pttl = ir.nodes[i].pttl.count();
      if (pttl != -2) rw.pttl_ms = static_cast<std::int64_t>(pttl);
    } else if (nr != nullptr) {
      rw.error = to_string(nr->status);
      if (!nr->detail.empty()) rw.error += ": " + nr->detail;
    } else {
      rw.error = "no answer";
    }
    if (health && i < health->nodes.size()) {
      rw.members = members_of(health->nodes[i]);
      rw.master_changed_ms_ago = master_changed_ms_ago(health->nodes[i], probed);
    }
    rows.push_back(std::move(rw));
  }

  std::string out;
  if (inv.json) {
    json_writer j;
    j.begin_object().key("resource").string(inv.resource);
    j.key("holder").string_or_null(ir.holder).key("quorum").boolean(ir.holder.has_value());
    j.key("nodes").begin_array();
    for (const row& rw : rows) {
      j.begin_object().key("node").string(rw.node).key("reachable").boolean(rw.reachable);
      j.key("token").string_or_null(rw.token).key("pttl_ms");
      if (rw.pttl_ms) {
        j.number(*rw.pttl_ms);
      } else {
        j.null();
      }
      j.key("error");
      if (rw.reachable) {
        j.null();
      } else {
        j.string(rw.error);
      }
      j.key("maxmemory_policy");
      if (rw.maxmemory_policy.empty()) {
        j.null();
      } else {
        j.string(rw.maxmemory_policy);
      }
      j.key("warnings").begin_array();
      for (const std::string& w : rw.warnings) j.string(w);
      j.end_array();
      if (!rw.members.empty()) write_members_json(j, rw.members, rw.master_changed_ms_ago);
      j.end_object();
    }
    out = j.end_array().end_object().str() + "\n";
  } else if (!inv.quiet) {
    const auto agree = std::count_if(rows.begin(), rows.end(),
                                     [&](const row& rw) { return rw.token && rw.token == ir.holder; });
    const bool any_token =
        std::any_of(rows.begin(), rows.end(), [](const row& rw) { return rw.token.has_value(); });
    out += "resource  " + printable(inv.resource) + "\n";
    if (ir.holder) {
      out += "holder    " + *ir.holder + " (" + std::to_string(agree) + " of " + counted(rows.size(), "node") +
             ", quorum " + std::to_string(client->quorum()) + ")\n";
    } else {
      out +=
          std::string("holder    none (") + (any_token ? "no quorum agrees on one holder" : "free") + ")\n";
    }
    std::size_t width = 4;
    for (const row& rw : rows) width = std::max(width, rw.node.size());
    out += pad("NODE", width + 2) + "REACHABLE  " + pad("TOKEN", 34) + "TTL\n";
    for (const row& rw : rows) {
      std::string ttl = "-";
      if (rw.pttl_ms) ttl = *rw.pttl_ms < 0 ? std::string("no expiry") : std::to_string(*rw.pttl_ms) + "ms";
      out += pad(rw.node, width + 2) + pad(rw.reachable ? "yes" : "no", 11) +
             pad(rw.token.value_or("-"), 34) + (rw.reachable ? ttl : "-  (" + rw.error + ")") + "\n";
      out += members_text(rw.members, rw.master_changed_ms_ago, width + 2);
    }
    for (const row& rw : rows) {
      for (const std::string& w : rw.warnings) out += "warning   " + printable(w) + "\n";
    }
  }
  write_stdout(out);
  if (ir.report.error) {
    print_error("status of " + quote(inv.resource) + ": " + ir.report.message());
    return exit_status_for(ir.report.error);
  }
  return exit_code::ok;
}

}  // namespace redlock::cli
