// The commands of a lease: one key (lock_command), or a set of keys taken as one
// lock (the rest of this file).
//
// Several resources at once: one lock over a set of keys, taken with the Redlock
// rounds of a single key. Per node, one script grants every key of the set or
// none (kAcquireMany), so an attempt never holds part of a set while it waits for
// the rest: no hold-and-wait, hence no deadlock between overlapping sets, and a
// failed attempt rolls back everything it got (kReleaseManyQuiet on every node
// asked). The acquire is acquire_op's (operations.cc) with the set's commands: the
// quorum, validity, guards, retries, rollback and waiting of a single key;
// extension, release and the watchdog go through extend_round / release_round
// with the commands below. Loop thread only.
#include <algorithm>
#include <utility>

#include "engine/core.h"
#include "ops/support.h"
#include "protocol/reply.h"
#include "ops/round.h"
#include "pure/token.h"

namespace redlock::detail {

using std::chrono::milliseconds;

command lock_command(script_id s, const std::string& key, const std::string& token, std::string arg2) {
  command c;
  c.script = s;
  c.key = key;
  c.arg1 = token;
  c.arg2 = std::move(arg2);
  return c;
}

std::vector<std::string> keys_of(const core& c, const std::vector<std::string>& resources) {
  std::vector<std::string> keys;
  keys.reserve(resources.size());
  for (const std::string& r : resources) keys.push_back(c.key_for(r));
  return keys;
}

command set_command(script_id s, std::vector<std::string> keys, const std::string& token, std::string arg2) {
  command cmd;
  cmd.script = s;
  cmd.keys = std::move(keys);
  cmd.arg1 = token;
  cmd.arg2 = std::move(arg2);
  return cmd;
}

std::string joined_names(const std::vector<std::string>& resources) {
  std::string out;
  for (const std::string& r : resources) {
    if (!out.empty()) out += ',';
    out += r;
  }
  return out;
}

std::string check_resource_set(const std::vector<std::string>& resources) {
  if (resources.empty()) return "the set of resources must not be empty";
  if (resources.size() > kMaxSetSize) {
    return "a set holds at most " + std::to_string(kMaxSetSize) + " resources (" +
           std::to_string(resources.size()) + " given)";
  }
  std::vector<std::string> sorted = resources;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i].empty()) return "resource name must not be empty";
    if (i > 0 && sorted[i] == sorted[i - 1]) return "resource '" + sorted[i] + "' is given twice in the set";
  }
  return "";
}

command extend_command(const core& c, const lease& l, milliseconds ttl) {
  if (l.resources.empty()) {
    command cmd;
    cmd.script = script_id::extend;
    cmd.key = c.key_for(l.resource);
    cmd.arg1 = l.token;
    cmd.arg2 = std::to_string(ttl.count());
    return cmd;
  }
  return set_command(script_id::extend_many, keys_of(c, l.resources), l.token, std::to_string(ttl.count()));
}

command release_command(const core& c, const lease& l) {
  if (l.resources.empty()) {
    command cmd;
    cmd.script = script_id::release;
    cmd.key = c.key_for(l.resource);
    cmd.arg1 = l.token;
    return cmd;
  }
  return set_command(script_id::release_many, keys_of(c, l.resources), l.token);
}

}  // namespace redlock::detail
