// What the operations share across their files in lib/ops/: the extension and
// release rounds and a handle's extend and release (extend.cc, release.cc), the
// rollback and delete delivery (rollback.cc), the reports (reports.cc), and the
// commands of a lease, one key or a set of keys (commands.cc). Loop thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "node/endpoint.h"
#include "redlock/report.h"

namespace redlock::detail {

class core;
class round;
struct held;

// Rolls back a failed attempt whose acquire round is `r`: the ownership-checked
// delete `release` goes to every node that may hold the attempt's keys, and is
// delivered again until each confirms or the keys cannot exist any more (`ttl`
// plus drift). See rollback.cc (rollback, cleanup).
void rollback(core& c, command release, const round& r, std::chrono::milliseconds ttl);
// Delivers `release` to nodes[i] with the rollback's guarantee (for a grant that
// arrives after its attempt failed). `prompt`: retried at least every
// command_timeout instead of on a backoff doubling up to reconnect_max_backoff, so
// that the delete lands within 2 x command_timeout of the node's connection being
// back (an election's deletes: what observers see follows what candidates believe).
void deliver_release(core& c, command release, const std::vector<bool>& nodes, std::chrono::milliseconds ttl,
                     bool prompt = false);

// One ownership-checked extension round of lease `l` to `ttl` (ops/extend.cc):
// done(report, valid_until (on success), jumped (a node ran it on a clock seen to
// jump)). `until_validity_ends`: the requests wait until the validity runs out.
void extend_round(core& c, const lease& l, std::chrono::milliseconds ttl,
                  std::function<void(report, std::chrono::steady_clock::time_point, bool)> done,
                  bool until_validity_ends = false);
// One ownership-checked release round of lease `l` (ops/release.cc); the nodes
// that did not confirm get the delete again. `report_released`: on_lock_released
// on success; `of_handle`: the lease is a handle's; `redeliver_failed` > 0: a
// release short of a quorum is delivered again too, for at least that long.
void release_round(core& c, const lease& l, std::function<void(report)> done, bool report_released = true,
                   bool of_handle = true, std::chrono::milliseconds redeliver_failed = std::chrono::milliseconds(0));

// A lock handle's extension and release (ops/extend.cc, ops/release.cc): through
// the handle's bookkeeping (its validity, its watchdog, its loss). `retry`: a
// release not confirmed (other than not_owner) leaves the handle able to release
// again (release_failed, tracked again for client::release); false for the
// destructor's, which nobody retries.
void extend_held(core& c, const std::shared_ptr<held>& h, std::chrono::milliseconds ttl,
                 std::function<void(report)> done);
void release_held(core& c, const std::shared_ptr<held>& h, std::function<void(report)> done, bool retry = true);

// The report of round `r`: per-node results named, attempts, elapsed since call_start.
report round_report(const core& c, const round& r, std::error_code ec,
                    std::chrono::steady_clock::time_point call_start,
                    std::chrono::steady_clock::time_point now, int attempts);
// A report without a round: every node pending, `detail` on each.
report empty_report(const core& c, std::error_code ec, const char* detail = "");
// A steady-clock time point in nanoseconds since the clock's epoch (held::valid_until_ns).
inline std::int64_t to_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
// A one-key command of a lease: script `s` on `key` with the owner token and one argument.
command lock_command(script_id s, const std::string& key, const std::string& token, std::string arg2 = {});

// The ownership-checked commands of lease `l`: kExtend / kRelease on its key, or
// kExtendMany / kReleaseMany on every key of a set (l.resources not empty). commands.cc.
command extend_command(const core& c, const lease& l, std::chrono::milliseconds ttl);
command release_command(const core& c, const lease& l);

// A set's lock keys (key_prefix + name, in order), a command over them, and the
// set's name in reports, events and leases ("a,b"). commands.cc.
std::vector<std::string> keys_of(const core& c, const std::vector<std::string>& resources);
command set_command(script_id s, std::vector<std::string> keys, const std::string& token, std::string arg2 = {});
std::string joined_names(const std::vector<std::string>& resources);

// "" if `resources` may be acquired as one set, else the problem: empty, more than
// kMaxSetSize, an empty name, or a name given twice. Pure. commands.cc.
std::string check_resource_set(const std::vector<std::string>& resources);

}  // namespace redlock::detail
