// Clang's thread-safety analysis (-Wthread-safety, on in every clang build): a
// mutex type it can reason about, a scoped lock, and the annotations that say
// what a mutex guards and which functions need it held. A field marked
// GUARDED_BY(m) read or written without m held, or a REQUIRES(m) function called
// without it, is a compile error in CI's clang builds. g++ sees empty macros.
#pragma once

#include <mutex>

#if defined(__clang__)
#define REDLOCK_TSA(x) __attribute__((x))
#else
#define REDLOCK_TSA(x)
#endif

#define REDLOCK_CAPABILITY(name) REDLOCK_TSA(capability(name))
#define REDLOCK_SCOPED_CAPABILITY REDLOCK_TSA(scoped_lockable)
#define REDLOCK_GUARDED_BY(m) REDLOCK_TSA(guarded_by(m))
#define REDLOCK_PT_GUARDED_BY(m) REDLOCK_TSA(pt_guarded_by(m))
#define REDLOCK_REQUIRES(...) REDLOCK_TSA(requires_capability(__VA_ARGS__))
#define REDLOCK_EXCLUDES(...) REDLOCK_TSA(locks_excluded(__VA_ARGS__))
#define REDLOCK_ACQUIRE(...) REDLOCK_TSA(acquire_capability(__VA_ARGS__))
#define REDLOCK_RELEASE(...) REDLOCK_TSA(release_capability(__VA_ARGS__))
#define REDLOCK_NO_THREAD_SAFETY_ANALYSIS REDLOCK_TSA(no_thread_safety_analysis)

namespace redlock::detail {

// std::mutex, as a capability the analysis tracks.
class REDLOCK_CAPABILITY("mutex") mutex {
 public:
  void lock() REDLOCK_ACQUIRE() { m_.lock(); }
  void unlock() REDLOCK_RELEASE() { m_.unlock(); }
  // For std::condition_variable and friends; the analysis does not see through it.
  std::mutex& native() noexcept { return m_; }

 private:
  std::mutex m_;
};

// std::lock_guard for detail::mutex.
class REDLOCK_SCOPED_CAPABILITY lock_guard {
 public:
  explicit lock_guard(mutex& m) REDLOCK_ACQUIRE(m) : m_(m) { m_.lock(); }
  ~lock_guard() REDLOCK_RELEASE() { m_.unlock(); }
  lock_guard(const lock_guard&) = delete;
  lock_guard& operator=(const lock_guard&) = delete;

 private:
  mutex& m_;
};

}  // namespace redlock::detail
