#include "redlock/mutex.h"

#include <thread>

#include "pure/retry.h"
#include "engine/core.h"
#include "pure/token.h"

namespace redlock {

mutex::mutex(client& c, std::string resource, acquire_options options)
    : client_(c), resource_(std::move(resource)), options_(std::move(options)) {}

mutex::~mutex() { unlock(); }

bool mutex::attempt(const acquire_options& o) {
  acquire_result r = client_.acquire(resource_, o);
  {
    std::lock_guard<std::mutex> g(report_mu_);
    last_ = r.report;
  }
  if (!r) return false;
  held_ = std::move(r.lock);
  return true;
}

void mutex::lock() {
  detail::jitter_rng rng(client_.core_->io().seed());
  for (int round = 1;; ++round) {
    if (attempt(options_)) return;
    report r = last_report();
    if (r.error != errc::contended) throw std::system_error(r.error, r.message());
    // Contended: wait a jittered delay (bounded growth) and try again.
    retry_policy p = options_.retry;
    client_.core_->wait_for(detail::retry_delay(p, std::min(round + 1, 8), rng.next()));
  }
}

bool mutex::try_lock() {
  acquire_options o = options_;
  o.retry = retry_policy::once();
  return attempt(o);
}

bool mutex::try_lock_for_ms(std::chrono::milliseconds d) {
  if (d.count() <= 0) return try_lock();
  acquire_options o = options_;
  o.retry.deadline = std::max(d, std::chrono::milliseconds(0));
  o.retry.max_attempts = 1 << 20;
  return attempt(o);
}

void mutex::unlock() noexcept {
  try {
    // Whatever the handle's state (held, lost, or expired: owns_lock() is false once
    // validity ran out), keys this owner may still have on the nodes are released.
    if (held_.info().token.empty()) return;  // never locked, or unlocked already
    report r = held_.release();
    held_ = redlock::lock();
    std::lock_guard<std::mutex> g(report_mu_);
    last_ = std::move(r);
  } catch (...) {
    // Allocation failure while recording the report: the release itself ran.
  }
}

report mutex::last_report() const {
  std::lock_guard<std::mutex> g(report_mu_);
  return last_;
}

}  // namespace redlock
