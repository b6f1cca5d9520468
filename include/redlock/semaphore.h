// A counting semaphore over a quorum: at most `permits` holders at any instant.
//
// Safety comes from the mutex, not from a counter: permit i of semaphore NAME is
// the Redlock resource permit_resource(NAME, i) = NAME + ":permit:" + i (i in
// decimal, from 0). An acquire takes any one free permit; a permit has at most one
// holder (the Redlock guarantee), so k permits have at most k holders. A per-node
// holder counter would not be safe: see docs/coordination.md, "Semaphore".
//
// The key format is injective: the part after the last ":permit:" is digits, so
// two different (name, index) pairs never share a resource, and no permit's key
// ends in ":fence" (fence counters). A plain lock named like a permit
// ("jobs:permit:0") does collide with it: keep the namespaces apart.
//
// Thread-safety: every semaphore member function may be called from any thread at
// once. The client must outlive the semaphore; the semaphore may be destroyed with
// acquires in flight (they complete; their callbacks still run).
//
// Callbacks: as client::acquire_async (client.h): exactly once, on the client's
// loop thread, never inside the call that started it, errc::cancelled at shutdown.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "redlock/client.h"

namespace redlock {

struct semaphore_options {
  // Permits: the most holders at any instant. In [1, 1024].
  std::size_t permits = 1;
  // Permits tried at once in one round: their SETs go out together (pipelined per
  // node). More saves round trips under contention, at the cost of extra SETs and
  // of releasing the extra permits won. In [1, permits]; 0 = min(permits, 4).
  std::size_t batch = 0;
  // The first round of each attempt tries a single permit (then rounds of
  // `batch`): an uncontended semaphore costs one SET per node and no extras, and
  // batching only starts once a permit was found taken. False: every round is
  // `batch` permits, fewest round trips when most permits are taken.
  bool probe_first = true;
};

struct semaphore_result {
  // Success: the winning permit's acquire report (attempts = whole attempts made).
  // Failure: contended when every permit was held by others on a quorum in the
  // last attempt; unavailable (or validity_exhausted) when some permit could not
  // be decided for lack of nodes, so do not read it as "full"; invalid_argument,
  // auth_failed, permission_denied, wrong_type, tls_failed, cancelled as acquire.
  redlock::report report;
  // Holds the permit on success: the same handle as a lock (watchdog, on_lost,
  // fence per permit, RAII release). lock.info().resource is the permit's resource.
  redlock::lock lock;
  std::size_t permit = 0;  // the permit's index, on success
  explicit operator bool() const noexcept { return static_cast<bool>(report); }
};

class REDLOCK_EXPORT semaphore {
 public:
  // Throws config_error for an empty name, permits outside [1, 1024] or a batch
  // above permits.
  semaphore(client& c, std::string name, semaphore_options options);
  ~semaphore();
  semaphore(const semaphore&) = delete;
  semaphore& operator=(const semaphore&) = delete;

  // The resource of permit `index`: name + ":permit:" + decimal index.
  static std::string permit_resource(std::string_view name, std::size_t index);

  // One attempt walks all permits in a random order (spreading contenders), in
  // rounds of `batch` permits acquired at once (the first round one permit, with
  // probe_first), each with `options` (ttl, fencing,
  // auto_extend, on_lost, ...) and no retry of its own. The first permit won is
  // kept; further permits won in the same round are released at once and never
  // held. A failed attempt is retried per options.retry, exactly like
  // client::acquire (jittered backoff, max_attempts, deadline); only contended,
  // unavailable and validity_exhausted are retried. Blocks; errc::would_deadlock on
  // the loop thread.
  [[nodiscard]] semaphore_result acquire(const acquire_options& options = {});
  // One attempt (options.retry ignored).
  [[nodiscard]] semaphore_result try_acquire(const acquire_options& options = {});
  // As acquire(), without blocking. Returns an id for cancel().
  std::uint64_t acquire_async(acquire_options options, std::function<void(semaphore_result)> done);
  // Cancels a pending acquire_async: its callback gets errc::cancelled and any
  // permit it won is released. No effect on completed operations or unknown ids.
  void cancel(std::uint64_t id);

  const std::string& name() const noexcept { return name_; }
  std::size_t permits() const noexcept { return permits_; }
  std::size_t batch() const noexcept { return batch_; }
  bool probe_first() const noexcept { return probe_first_; }

  struct state;  // implementation

 private:
  client& client_;
  std::string name_;
  std::size_t permits_;
  std::size_t batch_;
  bool probe_first_;
  std::shared_ptr<state> state_;
};

}  // namespace redlock
