/* An LD_PRELOAD shim that shifts a process's wall clock by an offset the test can
 * change while the process runs: the tests' own stand-in for libfaketime, which
 * crashes Debian's redis-server (jemalloc recursion at start).
 *
 * Overrides clock_gettime (CLOCK_REALTIME and CLOCK_REALTIME_COARSE only; every
 * other clock passes through untouched), gettimeofday and time(). The offset is a
 * decimal number of milliseconds (may be negative) read from a file:
 * $REDLOCK_CLOCK_SHIM_FILE if set, else "clock_offset_ms" relative to the process's
 * current directory (redis-server chdir()s to its --dir, so each node reads
 * <node dir>/clock_offset_ms). A missing or unreadable file means offset 0. The file
 * is re-read at most once per millisecond of CLOCK_MONOTONIC.
 *
 * A file holding '@' and a decimal number of microseconds since the epoch instead
 * freezes the wall clock at that instant: every read returns exactly it until the
 * file changes (the simulator's differential test steps a server's clock this way,
 * so that its expiry and TIME replies are exact).
 *
 * Everything goes straight to the kernel: syscall(SYS_clock_gettime), open, read,
 * close. No malloc, no stdio, no dlsym, so the shim cannot recurse into an
 * allocator that itself asks for the time. Thread-safe: the cache is two atomics;
 * two threads re-reading the file at once is harmless. errno is preserved. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define SHIM_EXPORT __attribute__((visibility("default")))

/* The cached setting, one word so a reader never sees half of an update: an
 * offset in ms as 2*offset, or a frozen instant in us as 2*instant+1. */
static long long shim_setting = 0;
static long long shim_checked_ns = 0; /* CLOCK_MONOTONIC of the last read; 0 = never */

static int raw_clock_gettime(clockid_t id, struct timespec* ts) {
  return (int)syscall(SYS_clock_gettime, id, ts);
}

static long long monotonic_ns(void) {
  struct timespec ts;
  if (raw_clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Parses [spaces][-]digits (an offset) or [spaces]@digits (a frozen instant) into
 * the encoding of shim_setting; anything else (or an empty file) is offset 0. */
static long long parse_setting(const char* s, ssize_t n) {
  ssize_t i = 0;
  int negative = 0;
  int frozen = 0;
  long long v = 0;
  while (i < n && (s[i] == ' ' || s[i] == '\t')) ++i;
  if (i < n && s[i] == '@') {
    frozen = 1;
    ++i;
  } else if (i < n && (s[i] == '-' || s[i] == '+')) {
    negative = s[i] == '-';
    ++i;
  }
  for (; i < n && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (v > 1000000000000000000LL / 10 - 10) return 0; /* absurd: ignore */
    v = v * 10 + (s[i] - '0');
  }
  if (frozen) return v * 2 + 1;
  if (v > 1000000000000000LL) return 0; /* absurd offset: ignore */
  return (negative ? -v : v) * 2;
}

static long long read_setting_file(void) {
  const char* path = getenv("REDLOCK_CLOCK_SHIM_FILE");
  if (path == NULL || *path == '\0') path = "clock_offset_ms";
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[32];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  if (n <= 0) return 0;
  return parse_setting(buf, n);
}

static long long current_setting(void) {
  const long long now = monotonic_ns();
  const long long checked = __atomic_load_n(&shim_checked_ns, __ATOMIC_ACQUIRE);
  if (checked != 0 && now - checked < 1000000LL) return __atomic_load_n(&shim_setting, __ATOMIC_RELAXED);
  const int saved = errno;
  const long long setting = read_setting_file();
  errno = saved;
  __atomic_store_n(&shim_setting, setting, __ATOMIC_RELAXED);
  __atomic_store_n(&shim_checked_ns, now == 0 ? 1 : now, __ATOMIC_RELEASE);
  return setting;
}

static void shift(struct timespec* ts, long long offset_ms) {
  long long ns = (long long)ts->tv_nsec + (offset_ms % 1000) * 1000000LL;
  long long sec = (long long)ts->tv_sec + offset_ms / 1000;
  while (ns < 0) {
    ns += 1000000000LL;
    --sec;
  }
  while (ns >= 1000000000LL) {
    ns -= 1000000000LL;
    ++sec;
  }
  ts->tv_sec = (time_t)sec;
  ts->tv_nsec = (long)ns;
}

/* The shimmed CLOCK_REALTIME: the kernel's plus the offset, or the frozen instant. */
static int shimmed_realtime(struct timespec* ts) {
  const long long setting = current_setting();
  if (setting & 1) {
    const long long us = setting / 2;
    ts->tv_sec = (time_t)(us / 1000000);
    ts->tv_nsec = (long)(us % 1000000) * 1000L;
    return 0;
  }
  if (raw_clock_gettime(CLOCK_REALTIME, ts) != 0) return -1;
  shift(ts, setting / 2);
  return 0;
}

SHIM_EXPORT int clock_gettime(clockid_t id, struct timespec* ts) {
  if (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE) return shimmed_realtime(ts);
  return raw_clock_gettime(id, ts);
}

SHIM_EXPORT int gettimeofday(struct timeval* restrict tv_arg, void* restrict tz) {
  /* glibc declares tv nonnull, but callers pass NULL with a timezone; the volatile
   * copy keeps the compiler from deleting the checks. */
  struct timeval* volatile tv_copy = tv_arg;
  struct timeval* tv = tv_copy;
  if (tz != NULL) {
    /* The obsolete timezone argument: only the kernel knows it. */
    struct timeval ignored;
    if (syscall(SYS_gettimeofday, tv != NULL ? tv : &ignored, tz) != 0) return -1;
  }
  if (tv == NULL) return 0;
  struct timespec ts;
  if (shimmed_realtime(&ts) != 0) return -1;
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
  return 0;
}

SHIM_EXPORT time_t time(time_t* out) {
  struct timespec ts;
  if (shimmed_realtime(&ts) != 0) return (time_t)-1;
  if (out != NULL) *out = ts.tv_sec;
  return ts.tv_sec;
}
