// Configuration structs. Every field has a unit, a default and a comment.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "redlock/version.h"

namespace redlock {

struct lease;
struct report;
class observer;

// The monotonic clock the client measures validity with. Inject one to control
// time in tests; the default is std::chrono::steady_clock. Called on the loop thread
// and on callers' threads: now() must be thread-safe and never go backwards.
class REDLOCK_EXPORT clock {
 public:
  virtual ~clock() = default;
  virtual std::chrono::steady_clock::time_point now() const noexcept = 0;
};

// Bounded, jittered retry of a failed acquire. Attempt k (k >= 2) waits a random
// delay in [d/2, d] where d = min(max_delay, base_delay * 2^(k-2)). Only failures
// that another attempt may fix are retried (contended, unavailable,
// validity_exhausted); never invalid_argument, auth_failed, permission_denied,
// wrong_type, tls_failed, cancelled. (One node refusing the password among
// healthy ones fails an attempt as unavailable: retried.)
struct retry_policy {
  // Total attempts, including the first. >= 1.
  int max_attempts = 3;
  // Delay before the second attempt (upper bound of its jitter range).
  std::chrono::milliseconds base_delay{100};
  // Upper bound for any one delay.
  std::chrono::milliseconds max_delay{1000};
  // Total budget for all attempts and delays, measured from the call; 0 = bounded
  // by max_attempts alone. An attempt is not started if its delay would end past
  // the deadline.
  std::chrono::milliseconds deadline{0};

  // One attempt, no retry.
  static retry_policy once() noexcept {
    retry_policy p;
    p.max_attempts = 1;
    return p;
  }
};

// Per-acquire options.
struct acquire_options {
  // Time to live of the lock keys. Must exceed the drift (ttl * drift + 2 ms) and
  // must not exceed client_options::max_ttl.
  std::chrono::milliseconds ttl{30000};
  // What to do when an attempt fails.
  retry_policy retry{};
  // Ask for a quorum fencing token (one extra round trip); see docs/fencing.md.
  bool fencing = false;
  // Keep the lock alive by extending it at least every `extend_interval` until it
  // is released or lost (the watchdog). No thread, and one loop timer for all the
  // client's locks. While other locks of the client are watched too, the first
  // extension comes at a random point of the first interval and each later one
  // up to 1/16 of the interval (+ 15 ms) early, so that locks taken together do
  // not extend together; never later than the interval.
  bool auto_extend = false;
  // Interval between watchdog extensions; 0 means ttl / 3. Each tick must leave
  // time for one extension round before the validity runs out: the interval (also
  // the default one) must be at most ttl - drift - client_options::command_timeout,
  // or the acquire fails with errc::invalid_argument.
  std::chrono::milliseconds extend_interval{0};
  // Called once, on the loop thread, when the watchdog can no longer guarantee the
  // lock: validity ran out before a quorum extension, the keys are gone
  // (errc::lock_lost), the extension cap was reached (errc::extension_limit), or
  // the client shut down while the lock was held (errc::cancelled, "client shut
  // down": the keys stay until their TTL, nothing extends them). The lease it gets
  // has valid_until at the loss at the latest. Must not block.
  std::function<void(const lease&, const report&)> on_lost;
  // Extension cap, so a stuck holder cannot keep a lock forever: at most this many
  // extensions (watchdog and extend() together); 0 = no cap.
  int max_extensions = 0;
  // ... and no validity past acquisition + max_hold (extensions are shortened to
  // fit; a max_hold shorter than the ttl caps the acquire's validity too, at
  // max_hold - drift from the acquire round's start, while the keys keep the ttl);
  // 0 = no cap. Past the cap, extend() returns errc::extension_limit and the
  // watchdog lets the lock run out, then reports it lost with that code. A
  // negative max_hold, or one within the drift allowance (max_hold * drift_factor
  // + 2 ms), is errc::invalid_argument.
  std::chrono::milliseconds max_hold{0};
};

// TLS for rediss:// nodes (plain redis:// and unix:// nodes ignore it). One set
// for every rediss:// node of the client. Verification is on by default: the
// node's certificate must chain to a trusted CA and match the name by a
// subjectAltName (DNS name or IP SAN; a wildcard only as a whole left-most label):
// the subject's common name (CN) is never used, so a certificate without SANs
// matches no name and fails as tls_error; TLS 1.2 is the minimum. The TLS handshake counts against connect_timeout.
// A file that cannot be read or used (and a key that does not match the
// certificate) is a config_error naming it, from the client's constructor, when
// at least one node is rediss://. Verification failures at run time make the node
// node_status::tls_error and, when they rule out a quorum, the call errc::tls_failed.
struct tls_options {
  // Trusted CAs: a PEM file and/or a directory of hashed certificates (c_rehash).
  // Both empty = the system's default store (Debian: /etc/ssl/certs).
  std::string ca_file;
  std::string ca_dir;
  // Client certificate chain and private key (PEM) for mutual TLS; both or neither.
  // The key must not be encrypted. A server that requires a client certificate
  // when none is given is reported as such (tls_error).
  std::string cert_file;
  std::string key_file;
  // The name sent as SNI and verified against the certificate; "" = the URI's
  // host (an IP literal host is verified against the IP SANs and sends no SNI).
  std::string server_name;
  // FOR TESTS ONLY. Accepts any certificate from anyone: no CA or name check, so
  // an attacker on the path can read and change every lock. Never in production.
  bool insecure_skip_verify_for_tests_only = false;
};

// What a credentials provider returns for one node's connect attempt.
struct credentials {
  std::string username;  // "" = the default user (AUTH password)
  std::string password;  // "" = no AUTH
};

// Something an operator should know that is not an error of any one call: a
// node's configuration that weakens the lock, for instance. See on_warning.
enum class warning_code : std::uint8_t {
  // The node's maxmemory-policy is not `noeviction`: when memory runs out it may
  // evict keys. volatile-* evicts keys that have a TTL: every lock key (so a second
  // client can acquire a lock that is still held), never a fence counter (it has
  // no TTL). allkeys-* (and any policy this client does not know) evicts any key:
  // lock keys and fence counters (fencing tokens can go backwards). Lock nodes
  // need `noeviction` (docs/operations.md). Read from the INFO memory that every
  // connect's handshake sends; a node whose user may not run INFO is never warned
  // about.
  eviction_policy,
  // An even number of nodes: a quorum of N/2+1 tolerates no more failures than
  // N-1 nodes would (4 nodes survive 1 failure, like 3).
  even_node_count,
  // One node: no fault tolerance at all; the lock is as safe as that one server.
  single_node,
};

struct warning {
  warning_code code{};
  std::string node;     // the node's URI, password redacted
  std::string message;  // one line, naming the node and the problem; no secrets
};

// Client-wide options.
struct client_options {
  // Node URIs: redis://[user[:password]@]host[:port][/db], the same with
  // rediss:// for TLS (see tls_options; plain and TLS nodes may be mixed), or
  // unix:///path/to.sock[?db=N] (never TLS). At least one; the quorum is size/2 + 1. Each node
  // must be an independent master: one server listed twice (the same host:port or
  // socket path, whatever the db) is a config_error naming both URIs. Spellings of
  // one address are compared without DNS: IP literals in canonical form (IPv4-
  // mapped IPv6 as IPv4), "localhost" as both 127.0.0.1 and ::1, socket paths
  // lexically normalised, IPv4 shorthands ("127.1") as their dotted form. Two
  // different host names (or a name and an address, or a socket and TCP) for one
  // server are not detected here; at run time, the handshake's INFO gives every
  // node's run_id, and a node reporting the run_id of an earlier-listed node gets no
  // acquire vote (`excluded`, "same server as <node> ..."), so one server never
  // counts twice. That check needs INFO: it runs only with the restart guard on
  // (restart_quarantine != 0) and INFO permitted to the user.
  std::vector<std::string> nodes;
  // Prepended to every resource name to form the key ("" = the resource as given).
  std::string key_prefix;
  // Bound on TCP/unix connect plus the handshake (AUTH, SELECT, PING, and the
  // guards' INFO server, INFO memory and TIME, pipelined), per attempt.
  std::chrono::milliseconds connect_timeout{200};
  // Bound on each command's round trip. A paused or black-holed node costs at most
  // this much per operation. Keep it far below the TTL.
  std::chrono::milliseconds command_timeout{50};
  // Background reconnect backoff: starts at min, doubles per failure, capped at max.
  std::chrono::milliseconds reconnect_min_backoff{10};
  std::chrono::milliseconds reconnect_max_backoff{1000};
  // Waiting without polling (docs/coordination.md): an acquire that may wait
  // (retry.deadline > 0) and finds the lock held subscribes to the key's release
  // channel on every node (one subscriber connection per node, shared by all
  // waiters, made on first need) and tries again as soon as a release is
  // published; its retry schedule stays the fallback. false = poll by the retry
  // schedule alone.
  bool wait_notifications = true;
  // A subscriber connection with no waiter for this long is closed (its channels
  // unsubscribed first). > 0.
  std::chrono::milliseconds notify_idle_close{10000};
  // Clock drift allowance: drift = ttl * clock_drift_factor + 2 ms. In [0, 0.5).
  double clock_drift_factor = 0.01;
  // Reported when a release that nobody waits for (a lock handle's destructor)
  // fails. Runs on the loop thread; must not block. Unset = counted only
  // (see client::stats()).
  std::function<void(const lease&, const report&)> on_release_failure;
  // Monotonic time source; null = std::chrono::steady_clock.
  std::shared_ptr<redlock::clock> clock;

  // Upper bound on the TTL of ANY lock on these nodes, taken or extended by ANY
  // client (this one, other processes, the CLI). > 0.
  //
  // IT MUST HOLD FOR EVERY CLIENT OF THE NODES, NOT JUST THIS ONE. The restart guard
  // and the clock-jump guard keep a node that may have lost its keys out of
  // acquires for max_ttl (see restart_quarantine): long enough for every lock it
  // could have forgotten to expire. If any client of the same nodes uses a longer
  // TTL than this client's max_ttl, this client may count a restarted node's vote
  // while that lock is still valid elsewhere, and two clients hold the lock.
  // Give every client the same bound.
  //
  // Acquires and extends (including lock::extend) with a longer ttl fail with
  // errc::invalid_argument naming the bound. The cost of a long bound: a restarted
  // node gets no acquire vote for that long (a one-day bound keeps it out for a
  // day). The `redlock` CLI defaults to 10 minutes (--max-ttl).
  std::chrono::milliseconds max_ttl{60000};

  // Restart guard (the spec's "delayed restart", enforced by the client). A node
  // whose run_id changed since this client last saw it gets no acquire vote for
  // `restart_quarantine` counted from when this client saw the new run_id (not from
  // the server's start: a long-running server may take over the address, by a
  // failover or a re-pointed name or socket path); its outcome is `excluded`. Negative
  // (default) = max_ttl, the bound on every client's TTLs (never this client's own
  // TTLs: another client may hold a longer lock); 0 = guard off (for nodes that
  // keep their data across restarts, e.g. appendfsync always); a positive value
  // must be at least max_ttl (config_error otherwise). Needs INFO permission
  // (without it the guard cannot see restarts).
  std::chrono::milliseconds restart_quarantine{-1};
  // Also quarantine nodes seen for the first time whose uptime is below the
  // quarantine (stricter: this client cannot know what such a node lost before),
  // until they have been up for the quarantine.
  bool restart_guard_first_sight = false;
  // Server clock-jump guard. Acquires sample the node's TIME (a TIME pipelined
  // right behind the SET, on the same connection), and so does every connect's
  // handshake; if a node's clock stepped in either direction against the local
  // monotonic clock between two samples by more than the allowance, the node's keys
  // may expire early (a forward step at once; a step back once it is corrected
  // forward, a correction two later samples may straddle unseen): it gets no
  // acquire vote for the quarantine period (as above, and at least max_ttl even
  // with the restart guard off), the very reply that shows the step included.
  // The allowance is this threshold plus clock_drift_factor times the time between
  // the two samples, that drift part capped at the threshold: never more than
  // 2 x threshold, however long ago the last sample was (so after an hour without
  // a sample, a jump of 2 s is still seen at the default; a node whose clock
  // drifts more than that in an hour is quarantined once, a cost in availability
  // only), plus the samples' dating uncertainty: each sample is dated at the middle
  // of its round trip, so the allowance grows by half of each of the two round
  // trips (a node paused 3 s is not taken for a jump; a step larger than the
  // widened allowance is still seen). Keep 2 x threshold well below the smallest
  // TTL in use.
  // Samples outlive reconnects: a jump while the connection was down is seen at
  // the reconnect. They are dropped only when INFO shows the node restarted (a
  // new run_id; the restart guard then applies). A new client process has no
  // sample until it connects: a jump before that is invisible to it (see
  // docs/long-work.md). 0 = guard off.
  std::chrono::milliseconds clock_jump_threshold{1000};
  // How often the guard samples each node's TIME. 0 (default) = on every acquire,
  // and the sample is read before that acquire's grant counts, so a jumped node
  // never counts. > 0 saves the TIME (a few microseconds of server CPU per
  // acquire and node) on acquires within this interval of a node's last sample,
  // and a node whose clock jumped since its last sample can vote on them.
  std::chrono::milliseconds clock_sample_interval{0};
  // Upper bound, in bytes, on one reply from a node while it is being received
  // (counted from the end of the previous complete reply, so a huge array counts
  // too). A node that sends more fails its connection (node_status::protocol_error,
  // detail naming this limit) and is reconnected: a misbehaving or hostile server
  // cannot make the client buffer without bound. The library's own replies are a
  // few hundred bytes (the handshake's INFO a few KiB). > 0; default 1 MiB.
  std::size_t max_reply_bytes = std::size_t{1} << 20;

  // TLS settings for every rediss:// node.
  tls_options tls;
  // Called on the loop thread before every connect attempt's AUTH (the first and
  // every reconnect) with the node's redacted URI; what it returns replaces the
  // URI's user and password for that attempt (an empty password: no AUTH). Called
  // once per attempt that reached the server (an attempt whose TCP or TLS connect
  // failed does not call it). For rotating secrets (short-lived tokens, a secret
  // store): return the current value from a cache the application refreshes; it
  // must not block (it runs inside connect_timeout and delays every node of the
  // client). A refused password is node_status::auth_error as with URI
  // credentials. If it throws, the attempt fails (node_status::connection_error,
  // "credentials_provider threw ...", the exception's text not shown) and is
  // retried with the reconnect backoff; nothing propagates through the loop.
  // Unset = the URI's credentials.
  std::function<credentials(const std::string& node)> credentials_provider;
  // Warnings about the nodes (see warning_code): even_node_count and single_node
  // once, when the client starts (on the loop thread, `node` empty); the others
  // once per connection on which it is seen (at the handshake: a reconnect reports it again
  // if it still holds, and a policy changed by CONFIG SET is seen at the next
  // reconnect). Runs on the loop thread; must not block; an exception it throws is
  // swallowed. Unset = not reported. The warnings that hold now are also in
  // client::inspect's node_view::warnings (what `redlock status` prints).
  std::function<void(const warning&)> on_warning;
  // Fenced acquires (acquire_options::fencing) refuse a node whose
  // maxmemory-policy may evict the fence counter: allkeys-* (and any policy other
  // than noeviction and volatile-*). Evicted, the counter restarts from 0 on that
  // node and tokens can go backwards. The node gets no vote (node_status::excluded,
  // the detail naming the policy). volatile-* nodes are counted: they evict only
  // keys with a TTL, and the counter has none (their lock keys can still be
  // evicted: warning_code::eviction_policy says so, and the fence is what protects
  // the resource then). A node whose policy is unknown (INFO not permitted) is
  // counted. True = count allkeys-* nodes too.
  bool allow_fencing_on_evicting_nodes = false;
  // Receive the client's events (redlock/observer.h): operations, locks, nodes,
  // guards, warnings. Called on the loop thread, in list order; must not block.
  // Empty = no events (one branch per event site).
  std::vector<std::shared_ptr<observer>> observers;
  // A node's reply slower than this is an observer::on_node_slow event. 0 = never.
  std::chrono::milliseconds slow_node_threshold{0};
};

}  // namespace redlock
